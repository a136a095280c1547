"""``PostgresMapState``: a Trident map state in a PostgreSQL table.

Guarantee: the map state of the factory's ``state_type`` over a table that outlives
the topology. Transactional state (with a transactional spout) and opaque state (with
a transactional or opaque spout) count every batch exactly once, across replayed
batches, a server that goes away and comes back, and a killed and restarted topology
(with ``topology.transactional.state.dir`` on the local engine, the same checkpoint
directory on Spark); non-transactional state is at-least-once.

Where it runs: the factory is made where the topology is declared and carries only
options. Each task holding a partition of the state makes its backing map
(``make_state``) and opens its own connection on first use: a local engine worker
thread, or on Spark an executor's Python worker (``SHARED`` locality: every process
reaches the server, so Spark updates the state in the executors, each partition its own
keys). ``multi_get`` is one ``SELECT ... WHERE key = ANY(...)``, ``multi_put`` one
``INSERT ... SELECT FROM unnest(...) ON CONFLICT (key) DO UPDATE``: one round trip
each, and a batch's writes to a partition are one transaction.

Failures: nothing connects before the first read, so a server that is down never
fails a submit. A server that cannot be reached, or goes away, raises
:class:`~squall.trident.state.StateConnectionError` naming the state (table, component,
partition) and the server (password hidden); the batch fails and the engine replays it
after its retry back-off, reconnecting. Any other database error raises
:class:`~squall.trident.state.StateError` naming the state.

The table layout is in :mod:`squall.connectors.postgres.layout`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from squall.connectors.postgres.connection import (
    close_quietly,
    connect,
    dsn_problem,
    effective_connect_timeout,
    name_problem,
    one_line,
    redact_dsn,
    server_lost,
    table_identifier,
    timeout_problem,
)
from squall.connectors.postgres.layout import LAYOUTS, layout_of_columns
from squall.model.context import TopologyContext
from squall.runtime.state_errors import StateConnectionError, StateError
from squall.trident.state.base import BackingMap, StateType, as_keys, current_value
from squall.trident.state.factory import MapStateFactory, check_cache_size, check_state_type
from squall.trident.state.serialization import deserialize_key, serialize_key

_Result = TypeVar("_Result")

#: Tables this process has created or checked: (dsn, table, state type).
_READY: set[tuple[str, str, StateType]] = set()
_READY_LOCK = threading.Lock()


def state_label(
    table: str, context: TopologyContext | None, partition_index: int, num_partitions: int
) -> str:
    """How errors name a state: its table and, in a task, the component and partition
    holding it."""
    component = None if context is None else context.component_id
    if component is None:
        return f"table {table!r}"
    return (
        f"table {table!r}, component {component!r} partition {partition_index} of {num_partitions}"
    )


def _checked(problem: str | None, error: type[Exception] = ValueError) -> None:
    if problem is not None:
        raise error(f"PostgresMapState {problem}")


def _a(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


class PostgresMapState(BackingMap):
    """A backing map in table ``table`` of a PostgreSQL database.

    Runs in the owning task, on one connection opened at first use (and again after the
    server went away); thread-safe (psycopg serialises a connection's statements).
    ``multi_put`` is atomic and committed when it returns.
    """

    def __init__(
        self,
        dsn: str,
        table: str,
        state_type: StateType = StateType.OPAQUE,
        connect_timeout: int | None = None,
        application_name: str | None = None,
        label: str | None = None,
    ) -> None:
        """Remember where the table is; connect nowhere yet.

        Args:
            dsn: the database, ``postgresql://user[:password]@host[:port]/dbname`` or
                ``host=... dbname=...``.
            table: the state's table, ``name`` or ``schema.name`` (created if missing).
            state_type: decides the table's layout.
            connect_timeout: seconds to open a connection (default: the DSN's
                ``connect_timeout``, else 5; libpq waits at least 2).
            application_name: the connection's name in ``pg_stat_activity``
                (default: the DSN's, else ``squall``).
            label: how errors name this state (default: its table).

        Raises:
            ValueError: the DSN, table or timeout is not usable.
            TypeError: ``state_type`` is not a :class:`StateType`.
        """
        _checked(dsn_problem(dsn))
        _checked(name_problem("table", table, qualified=True))
        _checked(timeout_problem(connect_timeout))
        #: The connection string (its password shown only to libpq).
        self.dsn = dsn
        #: The state's table.
        self.table = table
        self.state_type = check_state_type(state_type)
        self.connect_timeout = connect_timeout
        self.application_name = application_name
        #: How errors name this state.
        self.label = label or state_label(table, None, 0, 1)
        self._layout = LAYOUTS[self.state_type]
        self._identifier = table_identifier(table)
        self._select = self._layout.select(self._identifier)
        self._upsert = self._layout.upsert(self._identifier)
        self._connection: psycopg.Connection[Any] | None = None

    @classmethod
    def factory(
        cls,
        dsn: str,
        table: str,
        state_type: StateType = StateType.OPAQUE,
        cache_size: int = 1000,
        connect_timeout: int | None = None,
        application_name: str | None = None,
    ) -> PostgresMapStateFactory:
        """A factory of map states of ``state_type`` over ``table`` of the database at
        ``dsn``.

        Runs where the topology is declared; checks the options, connects nowhere.
        Every partition of the state uses the same table (each key belongs to one
        partition).

        Args:
            dsn: the database, e.g. ``postgresql://user:password@db.example:5432/app``.
            table: the table, ``name`` or ``schema.name``: created on first use with the
                layout of ``state_type``; give each state its own.
            state_type: the map state wrapped around the table.
            cache_size: keys of the per-partition :class:`CachedMap` (0: none). The cache
                assumes the partition is the only writer of its keys; use 0 when other
                topologies or programs write the same table.
            connect_timeout: seconds to open a connection (whole seconds; default: the
                DSN's ``connect_timeout``, else 5; libpq waits at least 2).
            application_name: the connections' name in ``pg_stat_activity``
                (default: the DSN's, else ``squall``).

        Raises:
            ValueError: the DSN is not a connection string, the table not a SQL name,
                ``cache_size`` or ``connect_timeout`` out of range.
            TypeError: ``state_type`` is not a :class:`StateType`.
        """
        return PostgresMapStateFactory(
            dsn=dsn,
            table=table,
            state_type=state_type,
            cache_size=cache_size,
            connect_timeout=connect_timeout,
            application_name=application_name,
        )

    @staticmethod
    def contents(factory: PostgresMapStateFactory, raw: bool = False) -> dict[tuple[Any, ...], Any]:
        """Every key of the factory's table and its value (for tests and debugging).
        With ``raw``, the stored wrappers instead of the current values.

        Raises:
            StateConnectionError: the server cannot be reached.
        """
        state = factory.make_backing_map({}, None, 0, 1)
        try:
            columns = sql.SQL(", ").join(sql.Identifier(c) for c in state._layout.columns)
            query = sql.SQL("SELECT key, {} FROM {}").format(columns, state._identifier)
            rows = state._call(lambda connection: connection.execute(query).fetchall())
        finally:
            state.close()
        contents: dict[tuple[Any, ...], Any] = {}
        for row in rows:
            stored = state._layout.from_row(row[1:])
            contents[deserialize_key(row[0])] = stored if raw else current_value(stored)
        return contents

    def _ensure_table(self, connection: psycopg.Connection[Any]) -> None:
        """Create the table if missing and check it has this state type's columns, once
        per process (tasks creating it at once wait for each other on an advisory
        lock)."""
        ready = (self.dsn, self.table, self.state_type)
        with _READY_LOCK:
            if ready in _READY:
                return
        name = self._identifier.as_string(connection)
        exists = connection.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
        if not (exists and exists[0]):  # (an existing table needs no CREATE privilege)
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (name,))
                connection.execute(self._layout.create_table(self._identifier))
        cursor = connection.execute(sql.SQL("SELECT * FROM {} LIMIT 0").format(self._identifier))
        columns = {column.name for column in cursor.description or ()}
        found = layout_of_columns(columns)
        if found is not self.state_type:
            kind = f"the columns of {_a(found.value)} state" if found else "other columns"
            raise StateError(
                f"PostgresMapState table {self.table!r} has {kind} ({', '.join(sorted(columns))}); "
                f"{_a(self.state_type.value)} state needs key, key_values, "
                f"{', '.join(self._layout.columns)} (give each state a table of its own)"
            )
        with _READY_LOCK:
            _READY.add(ready)

    def _call(self, work: Callable[[psycopg.Connection[Any]], _Result]) -> _Result:
        """``work(connection)`` on the open connection, made first (and the table made
        ready) if there is none; database errors as state errors naming the state."""
        connection = self._connection
        try:
            if connection is None or connection.closed:
                connection = None
                connection = connect(self.dsn, self.connect_timeout, self.application_name)
                self._ensure_table(connection)
                self._connection = connection
            return work(connection)
        except psycopg.Error as error:
            lost = server_lost(error, connection)
            if lost or connection is not self._connection:
                close_quietly(connection)
                self.close()
            if lost:
                raise StateConnectionError(
                    f"PostgresMapState cannot reach {redact_dsn(self.dsn)} ({self.label}): "
                    f"{one_line(error)}"
                ) from error
            raise StateError(
                f"PostgresMapState failed on {redact_dsn(self.dsn)} ({self.label}): "
                f"{one_line(error)}"
            ) from error
        except BaseException:
            if connection is not self._connection:
                close_quietly(connection)
            raise

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any | None]:
        """The stored values, ``None`` where absent: one ``SELECT``. Runs in the owning
        task.

        Raises:
            StateConnectionError: the server cannot be reached.
            StateError: the table is not this state type's, or another database error.
        """
        texts = [serialize_key(key) for key in as_keys(keys)]
        if not texts:
            return []
        distinct = list(dict.fromkeys(texts))
        rows = self._call(
            lambda connection: connection.execute(self._select, (distinct,)).fetchall()
        )
        found = {row[0]: self._layout.from_row(row[1:]) for row in rows}
        return [found.get(text) for text in texts]

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        """Store the values: one ``INSERT ... ON CONFLICT DO UPDATE`` statement, so all
        or none are written. Runs in the owning task within a commit.

        Raises:
            StateError: a key or value is not JSON-serialisable (nothing is written), or
                the server refused the values.
            StateConnectionError: the server cannot be reached.
        """
        keys = as_keys(keys)
        if len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        if not keys:
            return
        rows: dict[str, tuple[Any, ...]] = {}  # the last value of a key repeated wins
        for key, value in zip(keys, values, strict=True):
            rows[serialize_key(key)] = self._layout.to_row(value)
        columns = [list(rows)] + [list(column) for column in zip(*rows.values(), strict=True)]
        self._call(lambda connection: connection.execute(self._upsert, columns))

    def close(self) -> None:
        """Close the connection (a later use opens a new one)."""
        connection, self._connection = self._connection, None
        close_quietly(connection)


@dataclass(frozen=True, repr=False)
class PostgresMapStateFactory(MapStateFactory):
    """Makes map states over one table of a PostgreSQL database (see
    :class:`PostgresMapState`). Picklable; connects only where a state is used; its repr
    hides the DSN's password. ``SHARED`` locality: every process reaches the server."""

    dsn: str
    table: str
    state_type: StateType = StateType.OPAQUE
    cache_size: int = 1000
    connect_timeout: int | None = None
    application_name: str | None = None

    def __post_init__(self) -> None:
        _checked(dsn_problem(self.dsn))
        _checked(name_problem("table", self.table, qualified=True))
        check_state_type(self.state_type)
        check_cache_size(self.cache_size)
        _checked(timeout_problem(self.connect_timeout))
        if self.application_name is not None and not isinstance(self.application_name, str):
            raise TypeError(
                f"PostgresMapState application_name must be a str, got {self.application_name!r}"
            )

    def __repr__(self) -> str:
        return (
            f"PostgresMapStateFactory(dsn={redact_dsn(self.dsn)!r}, table={self.table!r}, "
            f"state_type={self.state_type}, cache_size={self.cache_size}, "
            f"connect_timeout={effective_connect_timeout(self.dsn, self.connect_timeout)})"
        )

    def make_backing_map(
        self,
        conf: dict[str, Any],
        context: TopologyContext | None,
        partition_index: int,
        num_partitions: int,
    ) -> PostgresMapState:
        """The partition's backing map (not connected yet). Runs in the task's process;
        errors name the task's component and partition (``context``, if given)."""
        return PostgresMapState(
            self.dsn,
            self.table,
            state_type=self.state_type,
            connect_timeout=self.connect_timeout,
            application_name=self.application_name,
            label=state_label(self.table, context, partition_index, num_partitions),
        )
