"""State providers: where stateful bolts keep their state (Storm's
``StateProvider``), chosen by ``topology.state.provider``.

* ``memory`` (the default): in the task's process, lost when it ends.
* ``sqlite``: a database file per topology in a directory (``directory``);
  :mod:`squall.connectors.sqlite`.
* ``redis``: a Redis server (``url``); :mod:`squall.connectors.redis`.
* ``postgres``: a PostgreSQL database (``dsn``, ``table``); needs psycopg 3;
  :mod:`squall.connectors.postgres`.
* the dotted path of any :class:`StateProvider` class (``package.module.Class``).

``topology.state.provider.config`` holds the provider's options, ``namespace`` among
them: the prefix keeping a topology's stores apart from others' (default: the
topology's name). :func:`check_provider` checks the settings where a topology is
submitted; :func:`provider_for` makes the (picklable, not yet connected) provider,
whose ``make_state`` runs in each task.

Importing this package imports no backend: a provider's class is imported when it is
resolved, its backend's client when its first store is made.
"""

from __future__ import annotations

from squall.runtime.lazy_exports import lazy_exports
from squall.state.providers.provider import StateProvider, qualified_namespace
from squall.state.providers.registry import (
    DEFAULT_PROVIDER,
    PROVIDER_CONFIG_KEY,
    PROVIDER_KEY,
    PROVIDERS,
    MemoryStateProvider,
    check_provider,
    provider_for,
    resolve_provider,
)

# The durable providers live with their systems' other backends in squall.connectors, a
# layer above squall.state, which may not import it. They stay importable from here as
# lazy attributes (PEP 562): a connector's module is imported at first use only.
_CONNECTOR_NAMES = {
    "DEFAULT_POSTGRES_TABLE": "squall.connectors.postgres.provider",
    "PostgresStateProvider": "squall.connectors.postgres.provider",
    "DEFAULT_SQLITE_DIRECTORY": "squall.connectors.sqlite.provider",
    "SqliteStateProvider": "squall.connectors.sqlite.provider",
    "RedisStateProvider": "squall.connectors.redis.provider",
}


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
    "resolve_provider",
]

__getattr__, __dir__ = lazy_exports(__name__, _CONNECTOR_NAMES, __all__)
