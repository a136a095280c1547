"""The four state providers and how a topology's configuration picks one.

``topology.state.provider`` names the provider (``memory``, the default, ``sqlite``,
``redis`` or ``postgres``); ``topology.state.provider.config`` is a dict of its options.
Every provider takes ``namespace``: the prefix that keeps this topology's stores apart
from other topologies' on a shared backend (default: the topology's name).

Where it runs: :func:`check_provider` where a topology is submitted (it connects to
nothing); :func:`provider_for` wherever the provider is needed (the providers carry
only options and connect in :meth:`~StateProvider.make_store`, in the task). Backend
modules are imported only when a store is made, so ``psycopg`` is needed only by tasks
of a topology using ``postgres``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from squall.state.base import StateStore
from squall.state.providers.options import (
    OptionCheck,
    directory_problem,
    options_problem_of,
    postgres_dsn_problem,
    postgres_table_problem,
    postgres_timeout_problem,
    psycopg_problem,
    redis_url_problem,
    seconds_problem,
    text_problem,
)
from squall.state.providers.provider import StateProvider, check_namespace

#: The configuration key naming the provider.
PROVIDER_KEY = "topology.state.provider"
#: The configuration key of the provider's options.
PROVIDER_CONFIG_KEY = "topology.state.provider.config"
#: The provider used when ``topology.state.provider`` is not set.
DEFAULT_PROVIDER = "memory"
#: The SQLite provider's directory unless ``directory`` is given.
DEFAULT_SQLITE_DIRECTORY = "squall-state"
#: The PostgreSQL provider's table unless ``table`` is given.
DEFAULT_POSTGRES_TABLE = "squall_state"
#: Seconds a Redis connection may take to open, and to wait for each reply.
DEFAULT_REDIS_CONNECT_TIMEOUT = 5.0
DEFAULT_REDIS_SOCKET_TIMEOUT = 10.0


def _common_checks() -> dict[str, OptionCheck]:
    return {"namespace": lambda value: text_problem("namespace", value)}


@dataclass(frozen=True)
class MemoryStateProvider(StateProvider):
    """In-process stores, one per :meth:`make_store` call, lost when their process ends
    (Storm's ``InMemoryKeyValueStateProvider``). A store pickles with its data: on Spark,
    where a bolt is snapshotted by pickling, its state goes with it."""

    name: ClassVar[str] = "memory"
    durable: ClassVar[bool] = False

    prefix: str

    def __post_init__(self) -> None:
        _raise_if(options_problem_of(self.name, {"namespace": self.prefix}, _common_checks()))

    @classmethod
    def options_problem(cls, options: Mapping[Any, Any]) -> str | None:
        """Why ``options`` are not this provider's options, or None."""
        return options_problem_of(cls.name, options, _common_checks())

    def make_store(self, namespace: str) -> StateStore:
        """A new, empty in-memory store (nothing is shared with other stores)."""
        from squall.state.providers.memory_store import MemoryStore

        return MemoryStore(check_namespace(namespace))


def _sqlite_checks() -> dict[str, OptionCheck]:
    return {**_common_checks(), "directory": directory_problem}


@dataclass(frozen=True)
class SqliteStateProvider(StateProvider):
    """Stores in SQLite files: ``<directory>/<prefix>.sqlite``, one file per prefix
    (see :mod:`squall.connectors.sqlite.store`). Durable across restarts of the
    process; processes on one machine share a file, one writing at a time.

    ``directory`` is made absolute when the provider is made (relative to that
    process's working directory) and created when the first store is made."""

    name: ClassVar[str] = "sqlite"
    durable: ClassVar[bool] = True

    prefix: str
    directory: str = DEFAULT_SQLITE_DIRECTORY

    def __post_init__(self) -> None:
        options = {"namespace": self.prefix, "directory": self.directory}
        _raise_if(options_problem_of(self.name, options, _sqlite_checks()))
        object.__setattr__(self, "directory", os.path.abspath(os.fspath(self.directory)))

    @classmethod
    def options_problem(cls, options: Mapping[Any, Any]) -> str | None:
        """Why ``options`` are not this provider's options, or None."""
        return options_problem_of(cls.name, options, _sqlite_checks())

    def make_store(self, namespace: str) -> StateStore:
        """The store of ``namespace`` in this prefix's file (opened at first use)."""
        from squall.connectors.sqlite.store import SqliteStore

        return SqliteStore(self, check_namespace(namespace))


def _redis_checks() -> dict[str, OptionCheck]:
    return {
        **_common_checks(),
        "url": redis_url_problem,
        "connect_timeout": lambda value: seconds_problem("connect_timeout", value),
        "socket_timeout": lambda value: seconds_problem("socket_timeout", value),
    }


@dataclass(frozen=True, repr=False)
class RedisStateProvider(StateProvider):
    """Stores in a Redis server, three keys per namespace (see
    :mod:`squall.connectors.redis.store`). Durable as far as the server's
    persistence settings make it. Its repr hides the URL's password."""

    name: ClassVar[str] = "redis"
    durable: ClassVar[bool] = True

    prefix: str
    url: str
    connect_timeout: float = DEFAULT_REDIS_CONNECT_TIMEOUT
    socket_timeout: float = DEFAULT_REDIS_SOCKET_TIMEOUT

    def __post_init__(self) -> None:
        options = {
            "namespace": self.prefix,
            "url": self.url,
            "connect_timeout": self.connect_timeout,
            "socket_timeout": self.socket_timeout,
        }
        _raise_if(options_problem_of(self.name, options, _redis_checks()))

    def __repr__(self) -> str:
        from squall.connectors.redaction import redact_url

        return (
            f"RedisStateProvider(prefix={self.prefix!r}, url={redact_url(self.url)!r}, "
            f"connect_timeout={self.connect_timeout!r}, socket_timeout={self.socket_timeout!r})"
        )

    @classmethod
    def options_problem(cls, options: Mapping[Any, Any]) -> str | None:
        """Why ``options`` are not this provider's options, or None."""
        return options_problem_of(cls.name, options, _redis_checks(), required=("url",))

    def make_store(self, namespace: str) -> StateStore:
        """The store of ``namespace`` (its client connects at first use)."""
        from squall.connectors.redis.store import RedisStore

        return RedisStore(self, check_namespace(namespace))


def _postgres_checks() -> dict[str, OptionCheck]:
    return {
        **_common_checks(),
        "dsn": postgres_dsn_problem,
        "table": postgres_table_problem,
        "connect_timeout": postgres_timeout_problem,
    }


@dataclass(frozen=True, repr=False)
class PostgresStateProvider(StateProvider):
    """Stores in three tables of a PostgreSQL database shared by every namespace (see
    :mod:`squall.connectors.postgres.store`); needs psycopg 3 (the ``postgres``
    extra) where stores are made. Its repr hides the DSN's password."""

    name: ClassVar[str] = "postgres"
    durable: ClassVar[bool] = True

    prefix: str
    dsn: str
    table: str = DEFAULT_POSTGRES_TABLE
    #: Seconds to open a connection (None: the DSN's ``connect_timeout``, else 5).
    connect_timeout: int | None = field(default=None)

    def __post_init__(self) -> None:
        _raise_if(psycopg_problem())
        options: dict[str, Any] = {"namespace": self.prefix, "dsn": self.dsn, "table": self.table}
        if self.connect_timeout is not None:
            options["connect_timeout"] = self.connect_timeout
        _raise_if(options_problem_of(self.name, options, _postgres_checks()))

    def __repr__(self) -> str:
        from squall.connectors.postgres.connection import redact_dsn

        return (
            f"PostgresStateProvider(prefix={self.prefix!r}, dsn={redact_dsn(self.dsn)!r}, "
            f"table={self.table!r}, connect_timeout={self.connect_timeout!r})"
        )

    @classmethod
    def options_problem(cls, options: Mapping[Any, Any]) -> str | None:
        """Why ``options`` are not this provider's options (or psycopg is missing), or
        None."""
        return psycopg_problem() or options_problem_of(
            cls.name, options, _postgres_checks(), required=("dsn",)
        )

    def make_store(self, namespace: str) -> StateStore:
        """The store of ``namespace`` (it connects at first use)."""
        from squall.connectors.postgres.store import PostgresStore

        return PostgresStore(self, check_namespace(namespace))


#: Provider name -> its class.
PROVIDERS: dict[str, type[StateProvider]] = {
    provider.name: provider
    for provider in (
        MemoryStateProvider,
        SqliteStateProvider,
        RedisStateProvider,
        PostgresStateProvider,
    )
}


def _raise_if(problem: str | None) -> None:
    if problem is not None:
        raise ValueError(f"{PROVIDER_CONFIG_KEY}: {problem}")


def _settings(conf: Mapping[str, Any]) -> tuple[Any, Any]:
    name = conf.get(PROVIDER_KEY)
    options = conf.get(PROVIDER_CONFIG_KEY)
    return (DEFAULT_PROVIDER if name is None else name), ({} if options is None else options)


def check_provider(conf: Mapping[str, Any], topology_name: str) -> str | None:
    """Why the state provider settings of ``conf`` are wrong, or None: an unknown
    provider, options that are not a dict, an unknown, missing or ill-typed option,
    psycopg missing for ``postgres``. The message names the setting or option.

    Runs where the topology is submitted; connects to nothing.
    """
    name, options = _settings(conf)
    if not isinstance(name, str) or name not in PROVIDERS:
        known = ", ".join(repr(known) for known in PROVIDERS)
        return f"{PROVIDER_KEY}: unknown provider {name!r} (one of {known})"
    if not isinstance(options, Mapping):
        return f"{PROVIDER_CONFIG_KEY}: must be a dict of options, got {options!r}"
    if name == "postgres":
        missing = psycopg_problem()
        if missing is not None:
            return f"{PROVIDER_KEY}: {missing}"
    problem = PROVIDERS[name].options_problem(options)
    if problem is not None:
        return f"{PROVIDER_CONFIG_KEY}: {problem}"
    if "namespace" not in options and (not isinstance(topology_name, str) or not topology_name):
        return (
            f"{PROVIDER_CONFIG_KEY}: 'namespace' defaults to the topology's name, which "
            f"must be a non-empty string, got {topology_name!r}"
        )
    return None


def provider_for(conf: Mapping[str, Any], topology_name: str) -> StateProvider:
    """The state provider ``conf`` asks for, its prefix the ``namespace`` option or
    else ``topology_name``. Connects to nothing (see :func:`check_provider` for what is
    checked).

    Raises:
        ValueError: the settings are wrong; the message is :func:`check_provider`'s.
    """
    problem = check_provider(conf, topology_name)
    if problem is not None:
        raise ValueError(problem)
    name, options = _settings(conf)
    arguments = {key: value for key, value in options.items() if key != "namespace"}
    prefix = options.get("namespace", topology_name)
    make: Callable[..., StateProvider] = PROVIDERS[name]
    return make(prefix=prefix, **arguments)


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
    "check_provider",
    "provider_for",
]
