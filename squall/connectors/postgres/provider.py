"""The PostgreSQL state provider (``topology.state.provider: postgres``): stateful
bolts' states in three tables shared by every namespace of a database (see
:mod:`squall.connectors.postgres.store`). Needs psycopg 3 (the ``postgres`` extra):
this package cannot be imported without it.

Options (``topology.state.provider.config``): ``dsn`` (required; a ``postgresql://``
URL or ``key=value`` pairs), ``table`` (default ``squall_state``; ``schema.name``
allowed), ``connect_timeout`` (whole seconds), ``namespace``. Checked where the
topology is submitted and where the provider is made (the connection string is parsed,
not used); nothing connects before a task makes a store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import psycopg

from squall.connectors.postgres.connection import name_problem, one_line, redact_dsn
from squall.state.base import StateStore
from squall.state.providers.options import OptionCheck, common_checks, options_problem_of
from squall.state.providers.provider import StateProvider, check_namespace, raise_if_problem

#: The PostgreSQL provider's table unless ``table`` is given.
DEFAULT_POSTGRES_TABLE = "squall_state"
#: Characters the provider appends to its table's name for its other tables
#: (``_prepared``, ``_tx``): a table's name is shorter by this much than SQL allows.
_SUFFIX_ROOM = len("_prepared")
_NAME_LIMIT = 63


def postgres_dsn_problem(value: Any) -> str | None:
    """Why ``dsn`` is not a connection string libpq reads (a ``postgresql://`` URL or
    ``key=value`` pairs), or None; its password hidden in the message."""
    if not isinstance(value, str) or not value.strip():
        return (
            "'dsn' must be a PostgreSQL connection string (postgresql://... or key=value "
            f"pairs), got {value!r}"
        )
    try:
        psycopg.conninfo.conninfo_to_dict(value)
    except psycopg.Error as error:
        return (
            f"'dsn' must be a PostgreSQL connection string, got {redact_dsn(value)!r}: "
            f"{one_line(error)}"
        )
    return None


def postgres_table_problem(value: Any) -> str | None:
    """Why ``table`` is not a usable ``[schema.]name`` (short enough for the
    ``_prepared`` and ``_tx`` tables beside it), or None."""
    problem = name_problem("'table'", value, qualified=True)
    if problem is not None:
        return problem
    last = str(value).rsplit(".", 1)[-1]
    if len(last) > _NAME_LIMIT - _SUFFIX_ROOM:
        return (
            f"'table' must be at most {_NAME_LIMIT - _SUFFIX_ROOM} "
            f"characters (the provider adds _prepared and _tx for its other tables), "
            f"got {value!r}"
        )
    return None


def postgres_timeout_problem(value: Any) -> str | None:
    """Why the PostgreSQL ``connect_timeout`` is not a whole number of seconds >= 1,
    or None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return f"'connect_timeout' must be a whole number of seconds >= 1, got {value!r}"
    return None


def _postgres_checks() -> dict[str, OptionCheck]:
    return {
        **common_checks(),
        "dsn": postgres_dsn_problem,
        "table": postgres_table_problem,
        "connect_timeout": postgres_timeout_problem,
    }


@dataclass(frozen=True, repr=False)
class PostgresStateProvider(StateProvider):
    """Stores in three tables of a PostgreSQL database shared by every namespace (see
    :mod:`squall.connectors.postgres.store`). Its repr hides the DSN's password."""

    name: ClassVar[str] = "postgres"
    durable: ClassVar[bool] = True

    prefix: str
    dsn: str
    table: str = DEFAULT_POSTGRES_TABLE
    #: Seconds to open a connection (None: the DSN's ``connect_timeout``, else 5).
    connect_timeout: int | None = field(default=None)

    def __post_init__(self) -> None:
        options: dict[str, Any] = {"namespace": self.prefix, "dsn": self.dsn, "table": self.table}
        if self.connect_timeout is not None:
            options["connect_timeout"] = self.connect_timeout
        raise_if_problem(options_problem_of(self.name, options, _postgres_checks()))

    def __repr__(self) -> str:
        return (
            f"PostgresStateProvider(prefix={self.prefix!r}, dsn={redact_dsn(self.dsn)!r}, "
            f"table={self.table!r}, connect_timeout={self.connect_timeout!r})"
        )

    @classmethod
    def options_problem(cls, options: Mapping[Any, Any]) -> str | None:
        """Why ``options`` are not this provider's options, or None."""
        return options_problem_of(cls.name, options, _postgres_checks(), required=("dsn",))

    def make_store(self, namespace: str) -> StateStore:
        """The store of ``namespace`` (it connects at first use)."""
        from squall.connectors.postgres.store import PostgresStore

        return PostgresStore(self, check_namespace(namespace))


__all__ = [
    "DEFAULT_POSTGRES_TABLE",
    "PostgresStateProvider",
    "postgres_dsn_problem",
    "postgres_table_problem",
    "postgres_timeout_problem",
]
