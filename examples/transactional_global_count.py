"""Transactional global count: Storm's ``TransactionalGlobalCount``, exactly once.

A partitioned transactional spout reads words from in-memory partitions (a fixed list of
words, chosen with a seeded random generator and split into partitions, standing in for
the shards of a queue). Each transaction takes up to ``batch_size`` words from every
partition. ``partial-count`` counts the tuples of each batch and emits ``[attempt,
count]`` when its task has received the whole batch; the committer ``sum`` adds the
partial counts to a global count kept in a database, in strict transaction order.

The database row stores the count together with the transaction id that last updated
it. A transaction that is replayed after its commit already happened (for instance,
the commit was written but its acknowledgement was lost) finds its own txid stored and
leaves the count alone: the count is exact even though batches may be processed more
than once.

Run it::

    squall run examples/transactional_global_count.py --seconds 5

or ``python examples/transactional_global_count.py``, which runs until every word is
counted and prints the total. ``build_topology(words=1000, batch_size=10, partitions=3)``
is what the tests use.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from squall import Config, LocalCluster, StormTopology, TopologyContext, Tuple
from squall.transactional import (
    BatchBolt,
    BatchOutputCollector,
    Committer,
    PartitionedTransactionalSpout,
    TransactionalTopologyBuilder,
    TransactionAttempt,
)

WORDS = ["nathan", "mike", "jackson", "golda", "bertels", "chicken", "dog", "cat", "apple"]
GLOBAL_COUNT = "GLOBAL-COUNT"

#: A base configuration for ``squall run``: three batches in flight.
conf = Config()
conf.set_max_spout_pending(3)


def word_sequence(count: int, seed: int = 7) -> list[str]:
    """``count`` words chosen with a generator seeded with ``seed`` (reproducible)."""
    chooser = random.Random(seed)
    return [chooser.choice(WORDS) for _ in range(count)]


def split_partitions(words: list[str], partitions: int) -> list[list[str]]:
    """Deal ``words`` round-robin into ``partitions`` lists."""
    return [words[index::partitions] for index in range(partitions)]


@dataclass(frozen=True)
class Value:
    """A row of the database: a value and the transaction that wrote it."""

    txid: int
    value: int


class Database:
    """A database, as far as this example is concerned: rows by key, updated atomically.

    Every task holding it shares the same rows (copying the component that holds it
    keeps the same database), and it is safe to use from several threads. On Spark the
    committer runs in the driver process, so it updates this very object.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, Value] = {}

    def __deepcopy__(self, memo: dict[int, Any]) -> Database:
        return self

    def __getstate__(self) -> dict[str, Any]:
        return {"_rows": self._rows}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._rows = state["_rows"]
        self._lock = threading.Lock()

    def get(self, key: str) -> Value | None:
        """The row at ``key``, or None."""
        with self._lock:
            return self._rows.get(key)

    def put(self, key: str, value: Value) -> None:
        """Write the row at ``key``."""
        with self._lock:
            self._rows[key] = value


class Progress:
    """How far the emitters have read each partition (shared, like the partitions).

    The spout's coordinator starts new transactions only while some partition has words
    left, so a finite input ends with the topology idle. On Spark the coordinator and
    the emitters run in other processes, each with its own copy: there the coordinator
    goes on starting transactions, which are empty once the words are read (the engine
    then polls an idle spout less and less often).
    """

    def __init__(self, sizes: list[int]) -> None:
        self._lock = threading.Lock()
        self._sizes = list(sizes)
        self._read = [0] * len(sizes)

    def __deepcopy__(self, memo: dict[int, Any]) -> Progress:
        return self

    def __getstate__(self) -> dict[str, Any]:
        return {"_sizes": self._sizes, "_read": self._read}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def mark(self, partition: int, end: int) -> None:
        """Words before ``end`` of ``partition`` have been emitted."""
        with self._lock:
            self._read[partition] = max(self._read[partition], end)

    def remaining(self) -> bool:
        """Whether some partition has words not emitted yet."""
        with self._lock:
            return any(read < size for read, size in zip(self._read, self._sizes, strict=True))


@dataclass(frozen=True)
class PartitionMeta:
    """What one transaction took from one partition: ``count`` words from ``offset``."""

    offset: int
    count: int


class _Coordinator:
    def __init__(self, partitions: int, progress: Progress) -> None:
        self.partitions = partitions
        self.progress = progress

    def number_of_partitions(self) -> int:
        return self.partitions

    def is_ready(self) -> bool:
        return self.progress.remaining()

    def close(self) -> None:
        pass


class _Emitter:
    def __init__(self, partitions: list[list[str]], batch_size: int, progress: Progress) -> None:
        self.partitions = partitions
        self.batch_size = batch_size
        self.progress = progress

    def emit_partition_batch_new(
        self,
        attempt: TransactionAttempt,
        collector: BatchOutputCollector,
        partition: int,
        last_partition_meta: PartitionMeta | None,
    ) -> PartitionMeta:
        offset = 0
        if last_partition_meta is not None:
            offset = last_partition_meta.offset + last_partition_meta.count
        words = self.partitions[partition][offset : offset + self.batch_size]
        meta = PartitionMeta(offset, len(words))
        self.emit_partition_batch(attempt, collector, partition, meta)
        self.progress.mark(partition, offset + len(words))
        return meta

    def emit_partition_batch(
        self,
        attempt: TransactionAttempt,
        collector: BatchOutputCollector,
        partition: int,
        partition_meta: PartitionMeta,
    ) -> None:
        start = partition_meta.offset
        for word in self.partitions[partition][start : start + partition_meta.count]:
            collector.emit([attempt, word])

    def close(self) -> None:
        pass


class MemoryPartitionedSpout(PartitionedTransactionalSpout):
    """Words from in-memory partitions, ``batch_size`` per partition per transaction."""

    outputs = ["attempt", "word"]

    def __init__(self, partitions: list[list[str]], batch_size: int) -> None:
        self.partitions = partitions
        self.batch_size = batch_size
        self.progress = Progress([len(partition) for partition in partitions])

    def get_coordinator(self, conf: dict[str, Any], context: TopologyContext) -> _Coordinator:
        return _Coordinator(len(self.partitions), self.progress)

    def get_emitter(self, conf: dict[str, Any], context: TopologyContext) -> _Emitter:
        return _Emitter(self.partitions, self.batch_size, self.progress)


class BatchCount(BatchBolt):
    """Counts the tuples of its batch; emits ``[attempt, count]`` at the end."""

    outputs = ["attempt", "count"]

    def prepare(
        self,
        conf: dict[str, Any],
        context: TopologyContext,
        collector: BatchOutputCollector,
        id: TransactionAttempt,
    ) -> None:
        self.collector = collector
        self.attempt = id
        self.count = 0

    def execute(self, tup: Tuple) -> None:
        self.count += 1

    def finish_batch(self) -> None:
        self.collector.emit([self.attempt, self.count])


class UpdateGlobalCount(BatchBolt, Committer):
    """Adds the batch's partial counts to the global count, once per transaction."""

    outputs = ["attempt", "sum"]

    def __init__(self, database: Database) -> None:
        self.database = database

    def prepare(
        self,
        conf: dict[str, Any],
        context: TopologyContext,
        collector: BatchOutputCollector,
        id: TransactionAttempt,
    ) -> None:
        self.collector = collector
        self.attempt = id
        self.sum = 0

    def execute(self, tup: Tuple) -> None:
        self.sum += tup["count"]

    def finish_batch(self) -> None:
        txid = self.attempt.transaction_id
        row = self.database.get(GLOBAL_COUNT)
        if row is not None and row.txid == txid:
            total = row.value  # this transaction was already committed: do not add again
        else:
            total = (row.value if row is not None else 0) + self.sum
            self.database.put(GLOBAL_COUNT, Value(txid, total))
        self.collector.emit([self.attempt, total])


def global_count(database: Database) -> int:
    """The committed global count (0 before the first commit)."""
    row = database.get(GLOBAL_COUNT)
    return 0 if row is None else row.value


#: What ``squall run`` shows under its final metrics (as ``--show`` would):
#: the global count after each of the last transactions ``sum`` committed.
show = ["sum"]


def build_topology(
    words: int = 20_000,
    batch_size: int = 50,
    partitions: int = 4,
    *,
    seed: int = 7,
    database: Database | None = None,
    emitters: int = 2,
    committer: UpdateGlobalCount | None = None,
) -> StormTopology:
    """The global count topology.

    Args:
        words: how many words the partitions hold in all.
        batch_size: words per partition per transaction.
        partitions: number of partitions.
        seed: seed of the word choice.
        database: where the global count is stored (a new one by default).
        emitters: emitter tasks of the spout (partitions are spread over them).
        committer: the committer bolt (an ``UpdateGlobalCount`` on ``database`` by default).
    """
    spout = MemoryPartitionedSpout(
        split_partitions(word_sequence(words, seed), partitions), batch_size
    )
    if committer is None:
        committer = UpdateGlobalCount(database if database is not None else Database())
    builder = TransactionalTopologyBuilder("global-count", "spout", spout, emitters)
    builder.set_bolt("partial-count", BatchCount(), 3).none_grouping("spout")
    builder.set_committer_bolt("sum", committer).global_grouping("partial-count")
    return builder.build_topology()


def main(words: int = 20_000) -> None:
    """Count ``words`` words on a LocalCluster and print the committed total."""
    database = Database()
    run_conf = Config(conf)
    run_conf[Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS] = 0  # no pause between batches
    with LocalCluster() as cluster:
        cluster.submit_topology("global-count", run_conf, build_topology(words, database=database))
        deadline = time.monotonic() + 60.0
        while global_count(database) < words and time.monotonic() < deadline:
            time.sleep(0.01)
        cluster.kill_topology("global-count")
    print("global count:", global_count(database))


if __name__ == "__main__":
    main()
