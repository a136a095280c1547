"""The coordination store: Storm's ZooKeeper role for transactional state, for every
engine.

Transaction ids and spout metadata are kept per transactional id (a transactional
topology's id, or a Trident stream id) under namespaces. Transactional and Trident
components open it in their tasks with ``open_store``: ``LocalCluster`` owns an
in-memory store that its tasks' contexts carry, ``SparkCluster`` gives its emitter
tasks a SQLite store in the run's directory. With
``topology.transactional.state.dir`` set, the store is a SQLite file in that directory
(durable: a restarted topology continues its transaction ids; safe for concurrent
tasks and processes); without it, an in-memory store that lives as long as the cluster.
"""

from __future__ import annotations

import os
import pickle
import sqlite3
import threading
import time
from typing import Any

import cloudpickle

from squall.model.config import Config
from squall.model.coordination import CoordinationStore
from squall.model.hooks import CarriesCoordinationStore

STORE_FILE = "coordination.sqlite"


def close_process_connections(
    connections: list[tuple[int, sqlite3.Connection]], lock: threading.Lock
) -> None:
    """Close and forget the connections of ``connections`` (``(pid, connection)``
    pairs, guarded by ``lock``) that this process opened: a forked child leaves its
    parent's alone."""
    pid = os.getpid()
    with lock:
        mine = [connection for owner, connection in connections if owner == pid]
        connections[:] = [entry for entry in connections if entry[0] != pid]
    for connection in mine:
        connection.close()


def connect_sqlite(path: str, timeout: float, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """A connection in WAL mode with a busy timeout, safe while other threads and
    processes open the same file.

    WAL mode is stored in the file, so it is set only when the file is not in WAL yet;
    switching needs a lock that SQLite does not wait for, so a switch that finds the file
    locked (another opener is switching) is tried again, up to ``timeout`` seconds.
    """
    connection = sqlite3.connect(
        path, timeout=timeout, isolation_level=None, check_same_thread=False
    )
    deadline = time.monotonic() + timeout
    while True:
        try:
            mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                connection.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                connection.close()
                raise
            time.sleep(0.01)
    connection.execute(f"PRAGMA synchronous={synchronous}")
    return connection


class MemoryCoordinationStore(CoordinationStore):
    """In-process store; lives as long as its owner (a cluster)."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, bytes]] = {}
        self._lock = threading.Lock()

    def get(self, namespace: str, key: str, default: Any = None) -> Any:
        with self._lock:
            raw = self._data.get(namespace, {}).get(key)
        return default if raw is None else pickle.loads(raw)

    def put(self, namespace: str, key: str, value: Any) -> None:
        raw = pickle.dumps(value)  # a copy: later changes to value do not leak in
        with self._lock:
            self._data.setdefault(namespace, {})[key] = raw

    def delete(self, namespace: str, key: str) -> None:
        with self._lock:
            self._data.get(namespace, {}).pop(key, None)

    def keys(self, namespace: str) -> list[str]:
        with self._lock:
            return sorted(self._data.get(namespace, {}))


class SqliteCoordinationStore(CoordinationStore):
    """Durable store in ``<directory>/coordination.sqlite`` (WAL mode, one connection
    per thread, so tasks on different threads and processes can share it)."""

    def __init__(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, STORE_FILE)
        self._local = threading.local()
        with self._connection() as connection:
            connection.execute(
                "CREATE TABLE IF NOT EXISTS coordination ("
                "namespace TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, "
                "PRIMARY KEY (namespace, key))"
            )

    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = connect_sqlite(self.path, 30.0)
            self._local.connection = connection
        return connection

    def get(self, namespace: str, key: str, default: Any = None) -> Any:
        row = (
            self._connection()
            .execute(
                "SELECT value FROM coordination WHERE namespace = ? AND key = ?",
                (namespace, key),
            )
            .fetchone()
        )
        return default if row is None else pickle.loads(row[0])

    def put(self, namespace: str, key: str, value: Any) -> None:
        # cloudpickle: metadata classes of user code pickled by value (Spark) are not
        # importable by name where they are stored.
        self._connection().execute(
            "INSERT OR REPLACE INTO coordination (namespace, key, value) VALUES (?, ?, ?)",
            (namespace, key, cloudpickle.dumps(value)),
        )

    def delete(self, namespace: str, key: str) -> None:
        self._connection().execute(
            "DELETE FROM coordination WHERE namespace = ? AND key = ?", (namespace, key)
        )

    def keys(self, namespace: str) -> list[str]:
        rows = self._connection().execute(
            "SELECT key FROM coordination WHERE namespace = ? ORDER BY key", (namespace,)
        )
        return [row[0] for row in rows]

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None


def open_store(conf: dict[str, Any], context: CarriesCoordinationStore) -> CoordinationStore:
    """The store a task should use: SQLite under ``topology.transactional.state.dir``
    when set, else the engine's store (``context.coordination_store``: every
    ``TopologyContext`` carries one, ``None`` where the engine has none).

    Runs in the task opening the store (``open``/``prepare``).

    Raises:
        RuntimeError: no directory is configured and the context carries no store.
    """
    directory = conf.get(Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR)
    if directory:
        return SqliteCoordinationStore(str(directory))
    store = context.coordination_store
    if store is None:
        raise RuntimeError(
            "no coordination store: set topology.transactional.state.dir, or run on an "
            "engine that provides one (LocalCluster, SparkCluster)"
        )
    return store


def txid_key(txid: int) -> str:
    """A key that sorts transaction ids numerically."""
    return f"{txid:020d}"
