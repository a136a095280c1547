"""State providers: where stateful bolts keep their state (Storm's
``StateProvider``), chosen by ``topology.state.provider``.

* ``memory`` (the default): in the task's process, lost when it ends.
* ``sqlite``: a database file per topology in a directory (``directory``).
* ``redis``: a Redis server (``url``).
* ``postgres``: a PostgreSQL database (``dsn``, ``table``); needs psycopg 3.

``topology.state.provider.config`` holds the provider's options, ``namespace`` among
them: the prefix keeping a topology's stores apart from others' (default: the
topology's name). :func:`check_provider` checks the settings where a topology is
submitted; :func:`provider_for` makes the (picklable, not yet connected) provider,
whose ``make_state`` runs in each task.

Importing this package imports no backend: each is imported when its first store is
made.
"""

from __future__ import annotations

from squall.state.providers.provider import StateProvider, qualified_namespace
from squall.state.providers.registry import (
    DEFAULT_POSTGRES_TABLE,
    DEFAULT_PROVIDER,
    DEFAULT_SQLITE_DIRECTORY,
    PROVIDER_CONFIG_KEY,
    PROVIDER_KEY,
    PROVIDERS,
    MemoryStateProvider,
    PostgresStateProvider,
    RedisStateProvider,
    SqliteStateProvider,
    check_provider,
    provider_for,
)

__all__ = [
    "DEFAULT_POSTGRES_TABLE",
    "DEFAULT_PROVIDER",
    "DEFAULT_SQLITE_DIRECTORY",
    "PROVIDERS",
    "PROVIDER_CONFIG_KEY",
    "PROVIDER_KEY",
    "MemoryStateProvider",
    "PostgresStateProvider",
    "RedisStateProvider",
    "SqliteStateProvider",
    "StateProvider",
    "check_provider",
    "provider_for",
    "qualified_namespace",
]
