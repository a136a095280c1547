"""The PostgreSQL store: stateful bolts' states in three tables shared by every
namespace (and topology) of a database.

Layout, for ``table`` (default ``squall_state``; ``schema.name`` allowed), each row's
``namespace`` the qualified namespace ``<prefix>:<namespace>`` (see
:func:`~squall.state.providers.provider.qualified_namespace`)::

    <table>(namespace text, key bytea, value bytea)             -- committed entries
    <table>_prepared(namespace text, key bytea, value bytea NULL)
                                                    -- prepared changes; NULL: deletion
    <table>_tx(namespace text, prepared_txid bigint NULL,
               committed_txid bigint NULL)          -- one row per namespace

Keys and values are the codec's bytes. The tables are created if missing, once per
process and database (tasks creating them at once wait for each other on an advisory
lock). Each prepare, commit and rollback is one transaction.

Failures: nothing connects before the first operation. A server that cannot be reached,
or goes away, raises :class:`~squall.runtime.state_errors.StateConnectionError` naming
the server (password hidden) and the namespace; the next operation connects again. Any
other database error raises :class:`~squall.runtime.state_errors.StateError`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

import psycopg
from psycopg import sql

from squall.connectors.postgres.connection import (
    close_quietly,
    connect,
    one_line,
    redact_dsn,
    server_lost,
    table_identifier,
)
from squall.runtime.state_errors import StateConnectionError, StateError
from squall.state.base import StateStore
from squall.state.providers.provider import qualified_namespace


class PostgresStoreSettings(Protocol):
    """What a store reads of its provider (a :class:`PostgresStateProvider` of
    :mod:`squall.connectors.postgres.provider`): the provider module
    imports this one, never the other way."""

    @property
    def prefix(self) -> str: ...

    @property
    def dsn(self) -> str: ...

    @property
    def table(self) -> str: ...

    @property
    def connect_timeout(self) -> int | None: ...


_Result = TypeVar("_Result")

#: The columns each table must have.
_COLUMNS = {
    "": ("namespace", "key", "value"),
    "_prepared": ("namespace", "key", "value"),
    "_tx": ("namespace", "prepared_txid", "committed_txid"),
}
_CREATE = {
    "": "CREATE TABLE IF NOT EXISTS {} (namespace text NOT NULL, key bytea NOT NULL, "
    "value bytea NOT NULL, PRIMARY KEY (namespace, key))",
    "_prepared": "CREATE TABLE IF NOT EXISTS {} (namespace text NOT NULL, key bytea NOT NULL, "
    "value bytea, PRIMARY KEY (namespace, key))",
    "_tx": "CREATE TABLE IF NOT EXISTS {} (namespace text PRIMARY KEY, prepared_txid bigint, "
    "committed_txid bigint)",
}

#: Databases and tables this process has created or checked: (dsn, table).
_READY: set[tuple[str, str]] = set()
_READY_LOCK = threading.Lock()


def table_names(table: str) -> dict[str, str]:
    """Suffix -> the name of each of ``table``'s tables (``""``: the entries)."""
    return {suffix: table + suffix for suffix in _COLUMNS}


class PostgresStore(StateStore):
    """One namespace's state in a PostgreSQL database.

    Runs in the task that owns it, on one connection opened at the first operation (and
    again after the server went away). Pickles as its provider and namespace: an
    unpickled store connects again.
    """

    def __init__(self, provider: PostgresStoreSettings, namespace: str) -> None:
        self.provider = provider
        #: The store's namespace, as the provider was asked for it.
        self.namespace = namespace
        #: The namespace under the provider's prefix: the rows' ``namespace``.
        self.qualified = qualified_namespace(provider.prefix, namespace)
        names = table_names(provider.table)
        self._entries = table_identifier(names[""])
        self._prepared = table_identifier(names["_prepared"])
        self._tx = table_identifier(names["_tx"])
        self._connection: psycopg.Connection[Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"provider": self.provider, "namespace": self.namespace}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["provider"], state["namespace"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return (
            f"PostgresStore(dsn={redact_dsn(self.provider.dsn)!r}, "
            f"table={self.provider.table!r}, namespace={self.qualified!r})"
        )

    # -- connection -------------------------------------------------------------------

    def _ensure_tables(self, connection: psycopg.Connection[Any]) -> None:
        """Create the tables if missing and check their columns, once per process."""
        ready = (self.provider.dsn, self.provider.table)
        with _READY_LOCK:
            if ready in _READY:
                return
        identifiers = [table_identifier(self.provider.table + suffix) for suffix in _CREATE]
        present = connection.execute(
            "SELECT count(to_regclass(name)) FROM unnest(%s::text[]) AS name",
            ([identifier.as_string(connection) for identifier in identifiers],),
        ).fetchone()
        if present is None or present[0] != len(identifiers):  # (existing: no privilege needed)
            with connection.transaction():
                connection.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s))", (self.provider.table,)
                )
                for identifier, create in zip(identifiers, _CREATE.values(), strict=True):
                    connection.execute(sql.SQL(create).format(identifier))
        for suffix, wanted in _COLUMNS.items():
            name = self.provider.table + suffix
            query = sql.SQL("SELECT * FROM {} LIMIT 0").format(table_identifier(name))
            found = tuple(column.name for column in connection.execute(query).description or ())
            if set(found) != set(wanted):
                raise StateError(
                    f"state provider 'postgres': table {name!r} of "
                    f"{redact_dsn(self.provider.dsn)} has columns {', '.join(found)}; "
                    f"the provider needs {', '.join(wanted)} (choose another 'table')"
                )
        with _READY_LOCK:
            _READY.add(ready)

    def _call(self, work: Callable[[psycopg.Connection[Any]], _Result]) -> _Result:
        """``work(connection)`` on the open connection, made first (and the tables made
        ready) if there is none; database errors as state errors."""
        connection = self._connection
        provider = self.provider
        try:
            if connection is None or connection.closed:
                connection = None
                connection = connect(provider.dsn, provider.connect_timeout)
                self._ensure_tables(connection)
                self._connection = connection
            return work(connection)
        except psycopg.Error as error:
            lost = server_lost(error, connection)
            if lost or connection is not self._connection:
                close_quietly(connection)
                self.close()
            where = f"{redact_dsn(provider.dsn)} (namespace {self.qualified!r})"
            if lost:
                raise StateConnectionError(
                    f"state provider 'postgres' cannot reach {where}: {one_line(error)}"
                ) from error
            raise StateError(
                f"state provider 'postgres' failed on {where}: {one_line(error)}"
            ) from error
        except BaseException:
            if connection is not self._connection:
                close_quietly(connection)
            raise

    def _rows(self, query: str, *names: sql.Identifier, parameters: tuple[Any, ...]) -> Any:
        statement = sql.SQL(query).format(*names)
        return self._call(lambda connection: connection.execute(statement, parameters).fetchall())

    # -- reads ------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The committed value of ``key``, or None: one ``SELECT``."""
        rows = self._rows(
            "SELECT value FROM {} WHERE namespace = %s AND key = %s",
            self._entries,
            parameters=(self.qualified, key),
        )
        return bytes(rows[0][0]) if rows else None

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every committed ``(key, value)``: one ``SELECT``."""
        rows = self._rows(
            "SELECT key, value FROM {} WHERE namespace = %s",
            self._entries,
            parameters=(self.qualified,),
        )
        return iter([(bytes(key), bytes(value)) for key, value in rows])

    def count(self) -> int:
        """The number of committed keys: one ``SELECT count(*)``."""
        rows = self._rows(
            "SELECT count(*) FROM {} WHERE namespace = %s",
            self._entries,
            parameters=(self.qualified,),
        )
        return int(rows[0][0])

    def prepared(self) -> tuple[int, dict[bytes, bytes | None]] | None:
        """The prepared transaction, read in one statement, or None."""
        rows = self._rows(
            "SELECT tx.prepared_txid, p.key, p.value FROM {} AS tx LEFT JOIN {} AS p "
            "ON p.namespace = tx.namespace "
            "WHERE tx.namespace = %s AND tx.prepared_txid IS NOT NULL",
            self._tx,
            self._prepared,
            parameters=(self.qualified,),
        )
        if not rows:
            return None
        changes: dict[bytes, bytes | None] = {
            bytes(key): None if value is None else bytes(value)
            for _, key, value in rows
            if key is not None
        }
        return int(rows[0][0]), changes

    def committed_txid(self) -> int | None:
        """The txid of the last commit, or None before the first: one ``SELECT``."""
        rows = self._rows(
            "SELECT committed_txid FROM {} WHERE namespace = %s",
            self._tx,
            parameters=(self.qualified,),
        )
        return None if not rows or rows[0][0] is None else int(rows[0][0])

    # -- writes -----------------------------------------------------------------------

    def prepare(self, txid: int, changes: dict[bytes, bytes | None]) -> None:
        """Replace the prepared transaction with ``(txid, changes)``: one transaction
        (the namespace's row of ``<table>_tx`` locked first)."""
        namespace = self.qualified
        upsert_tx = sql.SQL(
            "INSERT INTO {} (namespace, prepared_txid) VALUES (%s, %s) ON CONFLICT "
            "(namespace) DO UPDATE SET prepared_txid = EXCLUDED.prepared_txid"
        ).format(self._tx)
        delete = sql.SQL("DELETE FROM {} WHERE namespace = %s").format(self._prepared)
        insert = sql.SQL(
            "INSERT INTO {} (namespace, key, value) SELECT %s, change.key, change.value "
            "FROM unnest(%s::bytea[], %s::bytea[]) AS change(key, value)"
        ).format(self._prepared)

        def write(connection: psycopg.Connection[Any]) -> None:
            with connection.transaction():
                connection.execute(upsert_tx, (namespace, txid))
                connection.execute(delete, (namespace,))
                if changes:
                    connection.execute(insert, (namespace, list(changes), list(changes.values())))

        self._call(write)

    def commit(self, txid: int) -> None:
        """If ``txid`` is prepared: apply its changes, record ``txid`` as committed and
        drop it, in one transaction. Otherwise nothing."""
        namespace = self.qualified
        lock = sql.SQL("SELECT prepared_txid FROM {} WHERE namespace = %s FOR UPDATE").format(
            self._tx
        )
        delete_entries = sql.SQL(
            "DELETE FROM {} AS entry USING {} AS change WHERE entry.namespace = %s "
            "AND change.namespace = %s AND change.key = entry.key AND change.value IS NULL"
        ).format(self._entries, self._prepared)
        upsert_entries = sql.SQL(
            "INSERT INTO {} (namespace, key, value) SELECT namespace, key, value FROM {} "
            "WHERE namespace = %s AND value IS NOT NULL "
            "ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value"
        ).format(self._entries, self._prepared)
        drop_prepared = sql.SQL("DELETE FROM {} WHERE namespace = %s").format(self._prepared)
        record = sql.SQL(
            "UPDATE {} SET prepared_txid = NULL, committed_txid = %s WHERE namespace = %s"
        ).format(self._tx)

        def apply(connection: psycopg.Connection[Any]) -> None:
            with connection.transaction():
                row = connection.execute(lock, (namespace,)).fetchone()
                if row is None or row[0] != txid:
                    return
                connection.execute(delete_entries, (namespace, namespace))
                connection.execute(upsert_entries, (namespace,))
                connection.execute(drop_prepared, (namespace,))
                connection.execute(record, (txid, namespace))

        self._call(apply)

    def rollback(self) -> None:
        """Drop the prepared transaction, if any: one transaction."""
        namespace = self.qualified
        drop_prepared = sql.SQL("DELETE FROM {} WHERE namespace = %s").format(self._prepared)
        clear = sql.SQL("UPDATE {} SET prepared_txid = NULL WHERE namespace = %s").format(self._tx)

        def drop(connection: psycopg.Connection[Any]) -> None:
            with connection.transaction():
                connection.execute(drop_prepared, (namespace,))
                connection.execute(clear, (namespace,))

        self._call(drop)

    def close(self) -> None:
        """Close the connection (a later use opens a new one)."""
        connection, self._connection = self._connection, None
        close_quietly(connection)


__all__ = ["PostgresStore", "table_names"]
