"""PostgreSQL state factories, spouts and topologies shared by the PostgreSQL connector
tests, in a module that Spark's Python workers and the crash test's child process
import.

* :class:`NotingPostgresFactory` notes, in a table beside the state's, which process
  committed which transaction of which partition.
* :class:`KillingPostgresFactory` kills the process named in a flag file (the child
  running the topology) with SIGKILL once a partition has written a chosen transaction:
  a crash with that transaction half applied.
* :class:`GatedSpout` emits the next chunk of words only when the test releases it.

Run as ``python -m tests.postgres_topologies ENGINE DIRECTORY DSN TABLE FLAG STATE_TYPE``
it is the crash test's child: it counts words into PostgreSQL until the state kills it.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import psycopg

from squall import Config, Fields
from squall.connectors.postgres import PostgresMapState, PostgresMapStateFactory
from squall.testing import SharedRecord
from squall.trident import BatchSpout, Count, FixedBatchSpout, TridentTopology
from squall.trident.state import MapState, StateType
from tests.spark_spouts import CRASH_ROWS, ListSpout, OpaqueListSpout

SENTENCES = [
    ["the cow jumped over the moon"],
    ["the man went to the store"],
    ["four score and seven years ago"],
    ["the cow"],
    ["a cow and a man"],
    ["seven stores"],
]

#: The words of each batch a :class:`GatedSpout` releases, in order.
CHUNKS = [
    ["apple", "pear", "apple"],
    ["fig", "apple", "kiwi"],
    ["pear", "fig", "plum"],
]


def sentence_counts() -> dict[tuple[Any, ...], int]:
    """The true word counts of :data:`SENTENCES`."""
    counts = Counter(word for [sentence] in SENTENCES for word in sentence.split())
    return {(word,): n for word, n in counts.items()}


def chunk_counts(chunks: int) -> dict[tuple[Any, ...], int]:
    """The true counts once the first ``chunks`` chunks are counted."""
    counts = Counter(word for chunk in CHUNKS[:chunks] for word in chunk)
    return {(word,): n for word, n in counts.items()}


def word_count(factory: Any, spout: Any = None) -> TridentTopology:
    """Words of :data:`SENTENCES` (or ``spout``'s ``word`` field) counted into
    ``factory``'s state over two partitions."""
    topology = TridentTopology()
    if spout is None:
        stream = topology.new_stream(
            "sentences", FixedBatchSpout(Fields("sentence"), 2, *SENTENCES)
        ).each(Fields("sentence"), lambda tup: tup[0].split(), Fields("word"))
    else:
        stream = topology.new_stream("words", spout)
    stream.group_by(Fields("word")).persistent_aggregate(
        factory, Count(), Fields("count")
    ).parallelism_hint(2)
    return topology


# --- noting where the state is committed ----------------------------------------------


def notes_table(factory: PostgresMapStateFactory) -> str:
    return f"{factory.table}_notes"


class NotingState(MapState):
    """Wraps a partition's map state; at each commit, inserts ``(partition, txid,
    process id)`` into the notes table."""

    def __init__(self, inner: MapState, dsn: str, notes: str, partition: int) -> None:
        self.inner = inner
        self.dsn = dsn
        self.notes = notes
        self.partition = partition

    def begin_commit(self, txid: int) -> None:
        self.inner.begin_commit(txid)

    def commit(self, txid: int) -> None:
        self.inner.commit(txid)
        with psycopg.connect(self.dsn, autocommit=True) as connection:
            connection.execute(
                f"INSERT INTO {self.notes} (partition, txid, pid) VALUES (%s, %s, %s)",
                (self.partition, txid, os.getpid()),
            )

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any]:
        return self.inner.multi_get(keys)

    def multi_update(self, keys: list[tuple[Any, ...]], updaters: list[Any]) -> list[Any]:
        return self.inner.multi_update(keys, updaters)

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        self.inner.multi_put(keys, values)

    def close(self) -> None:
        self.inner.close()


@dataclass(frozen=True, repr=False)
class NotingPostgresFactory(PostgresMapStateFactory):
    """A :class:`PostgresMapStateFactory` whose states are :class:`NotingState`."""

    def make_state(
        self, conf: dict[str, Any], context: Any, partition_index: int, num_partitions: int
    ) -> MapState:
        inner = super().make_state(conf, context, partition_index, num_partitions)
        return NotingState(inner, self.dsn, notes_table(self), partition_index)


def create_notes(factory: PostgresMapStateFactory) -> None:
    with psycopg.connect(factory.dsn, autocommit=True) as connection:
        connection.execute(
            f"CREATE TABLE {notes_table(factory)} (partition INT, txid BIGINT, pid INT, "
            "noted SERIAL PRIMARY KEY)"
        )


def noted(factory: PostgresMapStateFactory) -> list[tuple[int, int, int]]:
    """``(partition, txid, pid)`` of every commit, in order."""
    with psycopg.connect(factory.dsn) as connection:
        rows = connection.execute(
            f"SELECT partition, txid, pid FROM {notes_table(factory)} ORDER BY noted"
        ).fetchall()
    return [(int(p), int(t), int(pid)) for p, t, pid in rows]


# --- a crash half-way through a transaction ------------------------------------------


class KillingState(MapState):
    """Wraps a map state; once partition ``partition`` has written transaction ``txid``
    while ``flag`` exists, SIGKILLs the process whose id ``flag`` holds, then its own."""

    def __init__(self, inner: MapState, index: int, partition: int, flag: str, txid: int):
        self.inner = inner
        self.index = index
        self.partition = partition
        self.flag = flag
        self.txid = txid
        self.current = 0

    def begin_commit(self, txid: int) -> None:
        self.current = txid
        self.inner.begin_commit(txid)

    def commit(self, txid: int) -> None:
        self.inner.commit(txid)

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any]:
        return self.inner.multi_get(keys)

    def multi_update(self, keys: list[tuple[Any, ...]], updaters: list[Any]) -> list[Any]:
        values = self.inner.multi_update(keys, updaters)
        if self.index == self.partition and self.current == self.txid and os.path.exists(self.flag):
            with open(self.flag) as handle:
                os.kill(int(handle.read()), signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)
        return values

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        self.inner.multi_put(keys, values)

    def close(self) -> None:
        self.inner.close()


@dataclass(frozen=True, repr=False)
class KillingPostgresFactory(PostgresMapStateFactory):
    """Makes :class:`KillingState` around PostgreSQL states."""

    kill_partition: int = -1
    flag: str = ""
    kill_txid: int = 0

    def make_state(
        self, conf: dict[str, Any], context: Any, partition_index: int, num_partitions: int
    ) -> MapState:
        state = super().make_state(conf, context, partition_index, num_partitions)
        return KillingState(state, partition_index, self.kill_partition, self.flag, self.kill_txid)


def crash_topology(dsn: str, table: str, flag: str, state_type: str) -> TridentTopology:
    """Word counts of :data:`CRASH_ROWS` into PostgreSQL (a transactional or opaque
    partitioned spout, as the state); partition 1 of the state kills the run in
    transaction 2 while ``flag`` exists."""
    kind = StateType[state_type]
    spout: Any = (
        ListSpout(CRASH_ROWS, 4)
        if kind is StateType.TRANSACTIONAL
        else OpaqueListSpout(CRASH_ROWS, 4)
    )
    factory = KillingPostgresFactory(
        dsn, table, kind, cache_size=0, kill_partition=1, flag=flag, kill_txid=2
    )
    topology = TridentTopology()
    topology.new_stream("items", spout).group_by(Fields("word")).persistent_aggregate(
        factory, Count(), Fields("count")
    ).parallelism_hint(2)
    return topology


def crash_counts(dsn: str, table: str, state_type: str) -> dict[str, int]:
    factory = PostgresMapState.factory(dsn, table, StateType[state_type], cache_size=0)
    return {key[0]: value for key, value in PostgresMapState.contents(factory).items()}


#: The local engine's coordination store, under the crash test's directory.
COORDINATION = "coordination"
#: The Spark engine's checkpoints, under the crash test's directory.
CHECKPOINT = "checkpoint"
CRASH_CONF: dict[str, Any] = {
    Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 1,
    "topology.spark.batch.interval.millis": 50,
}


def run_crash_child(
    engine: str, directory: str, dsn: str, table: str, flag: str, state_type: str
) -> None:
    """Run :func:`crash_topology` until its state kills this process."""
    with open(flag, "w") as handle:
        handle.write(str(os.getpid()))
    topology = crash_topology(dsn, table, flag, state_type).build()
    if engine in ("local", "process"):
        from squall import LocalCluster

        conf = {
            **CRASH_CONF,
            Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR: f"{directory}/{COORDINATION}",
            Config.TOPOLOGY_WORKERS: 2 if engine == "process" else 1,
            Config.TOPOLOGY_WORKER_KIND: engine if engine == "process" else "thread",
        }
        LocalCluster().submit_topology("crash", conf, topology)
    else:
        from squall.spark import SparkCluster

        cluster = SparkCluster(
            master="local[2]",
            checkpoint_dir=f"{directory}/{CHECKPOINT}",
            spark_conf={
                "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
            },
        )
        cluster.submit_topology("crash", CRASH_CONF, topology)
    time.sleep(120)
    sys.exit("the state did not kill the run")


# --- a spout the test feeds -------------------------------------------------------------


class GatedSpout(BatchSpout):
    """Emits the next chunk of :data:`CHUNKS` in a batch only once the test has released
    it (:func:`release`); a replayed batch gets exactly its first tuples again."""

    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def get_output_fields(self) -> Fields:
        return Fields("word")

    def open(self, conf: dict[str, Any], context: Any) -> None:
        self.next_chunk = 0
        self.batches: dict[int, list[str]] = {}

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        words = self.batches.get(batch_id)
        if words is None:
            words = []
            if self.next_chunk < len(self.record.get("released")):
                words = CHUNKS[self.next_chunk]
                self.next_chunk += 1
                self.batches[batch_id] = words
        for word in words:
            collector.emit([word])

    def ack(self, batch_id: int) -> None:
        self.batches.pop(batch_id, None)


def release(record: SharedRecord) -> None:
    """Let a :class:`GatedSpout` emit its next chunk."""
    record.append("released", True)


if __name__ == "__main__":
    from tests.postgres_topologies import run_crash_child as run

    run(*sys.argv[1:7])
