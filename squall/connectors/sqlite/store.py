"""The SQLite store: stateful bolts' states in a database file per topology prefix.

Layout: the file ``<directory>/<prefix>.sqlite`` (the prefix made file-name safe by
:func:`~squall.state.providers.provider.file_name_stem`) holds three tables, shared
by the prefix's namespaces; each row's ``namespace`` is the qualified namespace
``<prefix>:<namespace>`` (see
:func:`~squall.state.providers.provider.qualified_namespace`)::

    state_entries(namespace TEXT, key BLOB, value BLOB)        -- committed entries
    state_prepared(namespace TEXT, key BLOB, value BLOB NULL)  -- prepared changes;
                                                               -- NULL: a deletion
    state_transactions(namespace TEXT, prepared_txid INTEGER NULL,
                       committed_txid INTEGER NULL)            -- one row per namespace

Keys and values are the codec's bytes. Each prepare, commit and rollback is one
``BEGIN IMMEDIATE`` transaction, so a crash leaves the previous or the new state,
never a mix; ``synchronous=FULL`` makes a returned commit survive a power loss.

Several tasks, in threads and processes of one machine, may use one file: it is in WAL
mode (readers do not block the writer), writers wait for each other up to the busy
timeout, and each thread of each process has its own connection.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

from squall.runtime.coordination import close_process_connections, connect_sqlite
from squall.runtime.state_errors import StateError
from squall.state.base import StateStore
from squall.state.providers.provider import file_name_stem, qualified_namespace


class SqliteStoreSettings(Protocol):
    """What a store reads of its provider (a :class:`SqliteStateProvider` of
    :mod:`squall.connectors.sqlite.provider`): the provider module
    imports this one, never the other way."""

    @property
    def prefix(self) -> str: ...

    @property
    def directory(self) -> str: ...


#: Seconds a write waits for another writer of the file.
BUSY_TIMEOUT = 30.0
#: The file's ``synchronous`` setting: a returned commit survives a power loss.
SYNCHRONOUS = "FULL"

_CREATE_TABLES = (
    "CREATE TABLE IF NOT EXISTS state_entries (namespace TEXT NOT NULL, key BLOB NOT NULL, "
    "value BLOB NOT NULL, PRIMARY KEY (namespace, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS state_prepared (namespace TEXT NOT NULL, key BLOB NOT NULL, "
    "value BLOB, PRIMARY KEY (namespace, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS state_transactions (namespace TEXT NOT NULL PRIMARY KEY, "
    "prepared_txid INTEGER, committed_txid INTEGER) WITHOUT ROWID",
)


def database_path(directory: str, prefix: str) -> str:
    """The file of ``prefix``'s states in ``directory``."""
    return os.path.join(directory, f"{file_name_stem(prefix)}.sqlite")


class SqliteStore(StateStore):
    """One namespace's state in its prefix's SQLite file.

    Runs in the task that owns it. Nothing is opened until the first operation, which
    creates the directory, the file and the tables if missing. A connection is opened
    per thread (and again in a forked child). Pickles as its provider and namespace: an
    unpickled store opens the same file again.
    """

    def __init__(self, provider: SqliteStoreSettings, namespace: str) -> None:
        self.provider = provider
        #: The store's namespace, as the provider was asked for it.
        self.namespace = namespace
        #: The namespace under the provider's prefix: the rows' ``namespace``.
        self.qualified = qualified_namespace(provider.prefix, namespace)
        #: The database file.
        self.path = database_path(provider.directory, provider.prefix)
        self._local = threading.local()
        self._connections: list[tuple[int, sqlite3.Connection]] = []
        self._connections_lock = threading.Lock()
        weakref.finalize(self, close_process_connections, self._connections, self._connections_lock)

    def __getstate__(self) -> dict[str, Any]:
        return {"provider": self.provider, "namespace": self.namespace}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["provider"], state["namespace"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"SqliteStore(path={self.path!r}, namespace={self.qualified!r})"

    # -- connections ------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        pid = os.getpid()
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None or self._local.pid != pid:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            connection = connect_sqlite(self.path, BUSY_TIMEOUT, SYNCHRONOUS)
            try:
                with _transaction(connection):
                    for statement in _CREATE_TABLES:
                        connection.execute(statement)
            except BaseException:
                connection.close()
                raise
            self._local.connection = connection
            self._local.pid = pid
            with self._connections_lock:
                self._connections.append((pid, connection))
        return connection

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        """Errors of the file as :class:`StateError` naming the file and namespace."""
        try:
            yield
        except (OSError, sqlite3.Error) as error:
            raise StateError(
                f"state provider 'sqlite' failed on {self.path} "
                f"(namespace {self.qualified!r}): {error}"
            ) from error

    # -- reads ------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The committed value of ``key``, or None."""
        with self._failures():
            row = (
                self._connection()
                .execute(
                    "SELECT value FROM state_entries WHERE namespace = ? AND key = ?",
                    (self.qualified, key),
                )
                .fetchone()
            )
        return None if row is None else bytes(row[0])

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every committed ``(key, value)``, read in one statement."""
        with self._failures():
            rows = (
                self._connection()
                .execute(
                    "SELECT key, value FROM state_entries WHERE namespace = ?", (self.qualified,)
                )
                .fetchall()
            )
        return iter([(bytes(key), bytes(value)) for key, value in rows])

    def count(self) -> int:
        """The number of committed keys."""
        with self._failures():
            row = (
                self._connection()
                .execute(
                    "SELECT count(*) FROM state_entries WHERE namespace = ?", (self.qualified,)
                )
                .fetchone()
            )
        return int(row[0])

    def prepared(self) -> tuple[int, dict[bytes, bytes | None]] | None:
        """The prepared transaction, read in one read transaction, or None."""
        with self._failures():
            connection = self._connection()
            with _transaction(connection, "BEGIN"):
                txid = self._transaction_row(connection)[0]
                if txid is None:
                    return None
                rows = connection.execute(
                    "SELECT key, value FROM state_prepared WHERE namespace = ?", (self.qualified,)
                ).fetchall()
        return int(txid), {
            bytes(key): None if value is None else bytes(value) for key, value in rows
        }

    def committed_txid(self) -> int | None:
        """The txid of the last commit, or None before the first."""
        with self._failures():
            txid = self._transaction_row(self._connection())[1]
        return None if txid is None else int(txid)

    def _transaction_row(self, connection: sqlite3.Connection) -> tuple[Any, Any]:
        row = connection.execute(
            "SELECT prepared_txid, committed_txid FROM state_transactions WHERE namespace = ?",
            (self.qualified,),
        ).fetchone()
        return (None, None) if row is None else (row[0], row[1])

    # -- writes -----------------------------------------------------------------------

    def prepare(self, txid: int, changes: dict[bytes, bytes | None]) -> None:
        """Replace the prepared transaction with ``(txid, changes)``: one transaction."""
        with self._failures():
            connection = self._connection()
            with _transaction(connection):
                connection.execute(
                    "DELETE FROM state_prepared WHERE namespace = ?", (self.qualified,)
                )
                connection.executemany(
                    "INSERT INTO state_prepared (namespace, key, value) VALUES (?, ?, ?)",
                    [(self.qualified, key, value) for key, value in changes.items()],
                )
                connection.execute(
                    "INSERT INTO state_transactions (namespace, prepared_txid) VALUES (?, ?) "
                    "ON CONFLICT (namespace) DO UPDATE SET prepared_txid = excluded.prepared_txid",
                    (self.qualified, txid),
                )

    def commit(self, txid: int) -> None:
        """If ``txid`` is prepared: apply its changes, record ``txid`` as committed and
        drop it, in one transaction. Otherwise nothing."""
        with self._failures():
            connection = self._connection()
            with _transaction(connection):
                if self._transaction_row(connection)[0] != txid:
                    return
                namespace = self.qualified
                connection.execute(
                    "DELETE FROM state_entries WHERE namespace = ? AND key IN (SELECT key FROM "
                    "state_prepared WHERE namespace = ? AND value IS NULL)",
                    (namespace, namespace),
                )
                connection.execute(
                    "INSERT OR REPLACE INTO state_entries (namespace, key, value) SELECT "
                    "namespace, key, value FROM state_prepared WHERE namespace = ? "
                    "AND value IS NOT NULL",
                    (namespace,),
                )
                connection.execute("DELETE FROM state_prepared WHERE namespace = ?", (namespace,))
                connection.execute(
                    "UPDATE state_transactions SET prepared_txid = NULL, committed_txid = ? "
                    "WHERE namespace = ?",
                    (txid, namespace),
                )

    def rollback(self) -> None:
        """Drop the prepared transaction, if any: one transaction."""
        with self._failures():
            connection = self._connection()
            with _transaction(connection):
                connection.execute(
                    "DELETE FROM state_prepared WHERE namespace = ?", (self.qualified,)
                )
                connection.execute(
                    "UPDATE state_transactions SET prepared_txid = NULL WHERE namespace = ?",
                    (self.qualified,),
                )

    def close(self) -> None:
        """Close this process's connections of the store (of every thread); a later
        use opens new ones."""
        close_process_connections(self._connections, self._connections_lock)
        self._local = threading.local()


@contextlib.contextmanager
def _transaction(connection: sqlite3.Connection, begin: str = "BEGIN IMMEDIATE") -> Iterator[None]:
    """One transaction: committed if the block ends normally (or returns), rolled back
    if it raises. ``BEGIN IMMEDIATE`` takes the write lock first (waiting up to the
    busy timeout), so a writing transaction never fails half-way for a lock."""
    connection.execute(begin)
    try:
        yield
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


__all__ = ["BUSY_TIMEOUT", "SYNCHRONOUS", "SqliteStore", "database_path"]
