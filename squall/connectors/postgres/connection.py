"""Connecting to PostgreSQL: connection strings (checked, their password hidden in
messages), table and column names, opening a connection with a timeout, and telling a
lost server from an error in one statement.

Runs wherever a connector opens its connection: in the task (a local engine worker
thread, a Spark executor's Python worker); the checks also run where a topology is
declared or submitted.
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from squall.connectors.redaction import redact_url

if TYPE_CHECKING:
    from collections.abc import Sequence

#: Seconds to open a connection unless a connector says otherwise (libpq's minimum is 2).
DEFAULT_CONNECT_TIMEOUT = 5
#: ``application_name`` of squall's connections (shown in ``pg_stat_activity``).
DEFAULT_APPLICATION_NAME = "squall"

#: An unquoted SQL name: letters, digits, ``_`` and ``$``, not starting with a digit.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}\Z")
#: ``password=...`` in a ``key=value`` connection string (quoted or not).
_KEYWORD_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
#: Errors PostgreSQL sends when it shuts down or is not ready: the server, not the
#: statement, is the problem.
_SERVER_GONE = (
    psycopg.errors.AdminShutdown,
    psycopg.errors.CrashShutdown,
    psycopg.errors.CannotConnectNow,
)


def redact_dsn(dsn: str) -> str:
    """``dsn`` with its password, if any, replaced by ``***`` (for messages): in a URL
    (``postgresql://user:password@host/db``, or a ``password`` query parameter) and in a
    ``key=value`` string (``host=h password=secret``)."""
    if "://" in dsn:
        return redact_url(dsn)
    return _KEYWORD_PASSWORD.sub(r"\1***", dsn)


def dsn_problem(dsn: Any) -> str | None:
    """Why ``dsn`` is not a usable connection string, or ``None`` if it is one (a
    ``postgresql://`` URL or ``key=value`` pairs, as libpq reads them)."""
    if not isinstance(dsn, str) or not dsn.strip():
        return f"dsn must be a PostgreSQL connection string (postgresql://...), got {dsn!r}"
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error as error:
        return f"dsn {redact_dsn(dsn)!r} is not a PostgreSQL connection string: {one_line(error)}"
    return None


def name_problem(what: str, name: Any, qualified: bool = False) -> str | None:
    """Why ``name`` is not a usable SQL name (a table's when ``qualified``, which may be
    ``schema.table``), or ``None``."""
    parts = name.split(".") if isinstance(name, str) and qualified else [name]
    if len(parts) > 2 or not all(isinstance(part, str) and _NAME.match(part) for part in parts):
        form = "[schema.]name" if qualified else "name"
        return (
            f"{what} must be a SQL {form} of letters, digits, _ and $ (not starting with a "
            f"digit, at most 63 characters), got {name!r}"
        )
    return None


def table_identifier(table: str) -> sql.Identifier:
    """The quoted SQL name of ``table`` (``schema.table`` allowed). Names are used as
    given, so they are case-sensitive: ``Orders`` is not ``orders``."""
    return sql.Identifier(*table.split("."))


def column_list(columns: Sequence[str]) -> sql.Composed:
    """``"a", "b"``: the quoted names of ``columns``."""
    return sql.SQL(", ").join(sql.Identifier(column) for column in columns)


def db_value(value: Any) -> Any:
    """A tuple value as it is sent to PostgreSQL: a dict as JSONB, anything else as
    psycopg adapts it (a list becomes an array: wrap it in
    ``psycopg.types.json.Jsonb`` to send JSON)."""
    return Jsonb(value) if isinstance(value, dict) else value


def timeout_problem(connect_timeout: Any) -> str | None:
    """Why ``connect_timeout`` is neither ``None`` nor a whole number of seconds >= 1,
    or ``None``."""
    if connect_timeout is not None and (
        isinstance(connect_timeout, bool)
        or not isinstance(connect_timeout, int)
        or connect_timeout < 1
    ):
        return f"connect_timeout must be a whole number of seconds >= 1, got {connect_timeout!r}"
    return None


def effective_connect_timeout(dsn: str, given: int | None) -> int:
    """The seconds a connection to ``dsn`` may take to open: ``given``, else the DSN's
    ``connect_timeout``, else :data:`DEFAULT_CONNECT_TIMEOUT`."""
    if given is not None:
        return given
    in_dsn = psycopg.conninfo.conninfo_to_dict(dsn).get("connect_timeout")
    try:
        return max(1, int(in_dsn)) if in_dsn is not None else DEFAULT_CONNECT_TIMEOUT
    except ValueError:
        return DEFAULT_CONNECT_TIMEOUT


def connect(
    dsn: str,
    timeout: int | None = None,
    application_name: str | None = None,
) -> psycopg.Connection[Any]:
    """A new connection in autocommit mode (each statement is its own transaction
    unless a ``connection.transaction()`` block groups several).

    Runs in the task that will use the connection. Gives up after ``timeout`` seconds
    (``None``: the DSN's ``connect_timeout``, else 5; libpq waits at least 2); a refused
    connection fails at once. ``application_name`` (``None``: the DSN's, else
    ``squall``) names the connection in ``pg_stat_activity``.

    Raises:
        psycopg.OperationalError: the server cannot be reached or refused the connection.
    """
    options: dict[str, Any] = {"connect_timeout": effective_connect_timeout(dsn, timeout)}
    if application_name is not None:
        options["application_name"] = application_name
    elif "application_name" not in psycopg.conninfo.conninfo_to_dict(dsn):
        options["application_name"] = DEFAULT_APPLICATION_NAME
    return psycopg.connect(dsn, autocommit=True, **options)


def server_lost(error: BaseException, connection: psycopg.Connection[Any] | None) -> bool:
    """Whether ``error`` means the server cannot be used (not reached, gone, shutting
    down), rather than that one statement failed (a constraint, a wrong value): no
    connection was made, the connection broke or closed, or the server said it is
    shutting down."""
    if connection is None or connection.closed or connection.broken:
        return True
    return isinstance(error, _SERVER_GONE)


def one_line(error: BaseException) -> str:
    """The error's message on one line (libpq's messages span several)."""
    return " ".join(str(error).split()) or type(error).__name__


def close_quietly(connection: psycopg.Connection[Any] | None) -> None:
    """Close ``connection`` if there is one, ignoring errors (it may be broken)."""
    if connection is not None:
        with contextlib.suppress(Exception):  # a broken one may fail to close
            connection.close()
