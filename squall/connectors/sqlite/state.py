"""The durable SQLite backend: one table of JSON keys and values in a database file.

Several tasks, in threads and in processes, may use one file at once: the database is in
WAL mode (readers do not block the writer), writers wait for each other up to the busy
timeout, every thread of every process has its own connection, and each ``multi_put`` is
one transaction. Values must be JSON-serialisable; see
:mod:`squall.trident.state.serialization` for the formats (tuples come back as lists).
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import weakref
from dataclasses import dataclass
from typing import Any, ClassVar

from squall.model.context import TopologyContext
from squall.runtime.coordination import close_process_connections, connect_sqlite
from squall.runtime.state_errors import StateError
from squall.trident.state.base import BackingMap, StateLocality, StateType, as_keys, current_value
from squall.trident.state.factory import MapStateFactory, check_cache_size, check_state_type
from squall.trident.state.serialization import (
    deserialize_key,
    serialize_key,
    serializer_for,
)

DEFAULT_TABLE = "trident_state"
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
#: Keys per ``SELECT ... IN (...)``, well under SQLite's limit on bound parameters.
_CHUNK = 500


def _check_table(table: Any) -> str:
    if not isinstance(table, str) or not _TABLE_NAME.match(table):
        raise ValueError(f"table must be a SQL identifier ([A-Za-z_][A-Za-z0-9_]*), got {table!r}")
    return table


def _check_synchronous(synchronous: Any) -> str:
    if not isinstance(synchronous, str) or synchronous.upper() not in _SYNCHRONOUS:
        raise ValueError(
            f"synchronous must be one of {', '.join(_SYNCHRONOUS)}, got {synchronous!r}"
        )
    return synchronous.upper()


def _check_path(path: Any) -> str:
    path = os.fspath(path)
    if not isinstance(path, str) or not path or path == ":memory:" or path.startswith("file:"):
        raise ValueError(
            f"SqliteMapState needs the path of a database file shared by its tasks, got {path!r}"
        )
    return os.path.abspath(path)


class SqliteMapState(BackingMap):
    """A backing map in table ``table`` of the SQLite file ``path``.

    Runs in the owning task; thread-safe (a connection per thread, opened on first use and
    again after a fork). ``multi_put`` is atomic and durable when it returns (with
    ``synchronous="FULL"``, the default, also across a power loss). ``multi_get`` reads
    one consistent snapshot.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        state_type: StateType = StateType.OPAQUE,
        table: str = DEFAULT_TABLE,
        timeout: float = 30.0,
        synchronous: str = "FULL",
    ) -> None:
        """Open (creating if needed) the file and the table.

        Args:
            path: the database file; its directory is created if missing.
            state_type: decides the stored format (see
                :func:`~squall.trident.state.serialization.serializer_for`).
            table: the table of this state; give each state of a file its own.
            timeout: seconds a write waits for another writer (the busy timeout).
            synchronous: SQLite's ``synchronous`` setting (``NORMAL`` is faster and
                survives a crash of the process but may lose the last writes to a power
                loss).

        Raises:
            StateError: the file cannot be opened or created.
        """
        #: The absolute path of the database file.
        self.path = _check_path(path)
        #: The table holding this state's keys and values.
        self.table = _check_table(table)
        self.timeout = float(timeout)
        self.synchronous = _check_synchronous(synchronous)
        self._serializer = serializer_for(check_state_type(state_type))
        self._local = threading.local()
        self._connections: list[tuple[int, sqlite3.Connection]] = []
        self._connections_lock = threading.Lock()
        # Connections are closed when the state is dropped, if close() was not called.
        weakref.finalize(self, close_process_connections, self._connections, self._connections_lock)
        directory = os.path.dirname(self.path)
        try:
            os.makedirs(directory, exist_ok=True)
            self._connection().execute(
                f'CREATE TABLE IF NOT EXISTS "{self.table}" '
                "(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID"
            )
        except (OSError, sqlite3.Error) as error:
            raise StateError(f"SqliteMapState cannot open {self.path}: {error}") from error

    @classmethod
    def factory(
        cls,
        path: str | os.PathLike[str],
        state_type: StateType = StateType.OPAQUE,
        table: str = DEFAULT_TABLE,
        cache_size: int = 1000,
        timeout: float = 30.0,
        synchronous: str = "FULL",
    ) -> SqliteMapStateFactory:
        """A factory of map states of ``state_type`` over table ``table`` of ``path``.

        Runs where the topology is declared; ``path`` is made absolute there. Every
        partition of the state uses the same table (each key belongs to one partition).

        Args:
            path: the database file (created on first use).
            state_type: the map state wrapped around the table.
            table: the table of this state; give each state of a file its own.
            cache_size: keys of the per-partition :class:`CachedMap` (0: none). The cache
                assumes the partition is the only writer of its keys; use 0 when other
                topologies or programs write the same table.
            timeout: seconds a write waits for another writer.
            synchronous: SQLite's ``synchronous`` setting (``FULL`` or ``NORMAL``).
        """
        return SqliteMapStateFactory(
            path=os.fspath(path),
            state_type=state_type,
            table=table,
            cache_size=cache_size,
            timeout=timeout,
            synchronous=synchronous,
        )

    @staticmethod
    def contents(factory: SqliteMapStateFactory, raw: bool = False) -> dict[tuple[Any, ...], Any]:
        """Every key and value of the factory's table, read from the file (for tests and
        debugging). With ``raw``, the stored wrappers instead of the current values."""
        state = factory.make_backing_map({}, None, 0, 1)
        try:
            connection = state._connection()
            rows = connection.execute(f'SELECT key, value FROM "{state.table}"').fetchall()
        finally:
            state.close()
        contents: dict[tuple[Any, ...], Any] = {}
        for key, text in rows:
            stored = state._serializer.deserialize(text)
            contents[deserialize_key(key)] = stored if raw else current_value(stored)
        return contents

    def _connection(self) -> sqlite3.Connection:
        pid = os.getpid()
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None or self._local.pid != pid:
            connection = connect_sqlite(self.path, self.timeout, self.synchronous)
            self._local.connection = connection
            self._local.pid = pid
            with self._connections_lock:
                self._connections.append((pid, connection))
        return connection

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any | None]:
        """The stored values, ``None`` where absent: ``SELECT``s of up to 500 keys in
        one read transaction. Runs in the owning task."""
        texts = [serialize_key(key) for key in as_keys(keys)]
        if not texts:
            return []
        distinct = list(dict.fromkeys(texts))
        connection = self._connection()
        found: dict[str, str] = {}
        connection.execute("BEGIN")
        try:
            for start in range(0, len(distinct), _CHUNK):
                chunk = distinct[start : start + _CHUNK]
                placeholders = ",".join("?" * len(chunk))
                found.update(
                    connection.execute(
                        f'SELECT key, value FROM "{self.table}" WHERE key IN ({placeholders})',
                        chunk,
                    ).fetchall()
                )
        finally:
            connection.execute("COMMIT")
        return [
            None if text not in found else self._serializer.deserialize(found[text])
            for text in texts
        ]

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        """Store the values in one transaction (all or none). Runs in the owning task
        within a commit; waits up to ``timeout`` seconds for other writers.

        Raises:
            StateError: a key or value is not JSON-serialisable (nothing is written).
        """
        keys = as_keys(keys)
        if len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        if not keys:
            return
        rows = [
            (serialize_key(key), self._serializer.serialize(value))
            for key, value in zip(keys, values, strict=True)
        ]
        connection = self._connection()
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.executemany(
                f'INSERT OR REPLACE INTO "{self.table}" (key, value) VALUES (?, ?)', rows
            )
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close this process's connections (of every thread). Call when no thread uses
        the state any more; a later use opens a new connection."""
        close_process_connections(self._connections, self._connections_lock)
        self._local = threading.local()


@dataclass(frozen=True)
class SqliteMapStateFactory(MapStateFactory):
    """Makes map states over one table of a SQLite file (see :class:`SqliteMapState`).
    Picklable; ``path`` is absolute. ``ONE_WRITER_FILE``: every process on the machine
    opens the same file, and one writes at a time."""

    locality: ClassVar[StateLocality] = StateLocality.ONE_WRITER_FILE

    path: str
    state_type: StateType = StateType.OPAQUE
    table: str = DEFAULT_TABLE
    cache_size: int = 1000
    timeout: float = 30.0
    synchronous: str = "FULL"

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", _check_path(self.path))
        check_state_type(self.state_type)
        check_cache_size(self.cache_size)
        _check_table(self.table)
        object.__setattr__(self, "synchronous", _check_synchronous(self.synchronous))

    def make_backing_map(
        self,
        conf: dict[str, Any],
        context: TopologyContext | None,
        partition_index: int,
        num_partitions: int,
    ) -> SqliteMapState:
        """Open the file and table (created if needed). Runs in the task's process.

        Raises:
            StateError: the file cannot be opened or created.
        """
        return SqliteMapState(
            self.path,
            state_type=self.state_type,
            table=self.table,
            timeout=self.timeout,
            synchronous=self.synchronous,
        )
