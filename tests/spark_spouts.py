"""Partitioned Trident spouts and states shared by the Spark spout tests and the child
process of the crash test (which imports this module)."""

from __future__ import annotations

import os
import signal
from collections import Counter
from dataclasses import dataclass
from typing import Any

from squall import Fields
from squall.trident import (
    Count,
    OpaquePartitionedTridentSpout,
    PartitionedTridentSpout,
    TridentTopology,
)
from squall.trident.state import MapState, SqliteMapState, SqliteMapStateFactory, StateType

WORDS = ["apple", "pear", "fig", "plum", "kiwi"]


def partitions(count: int, per_partition: int) -> list[list[list[Any]]]:
    """Per partition, ``[id, word]`` rows with unique ids."""
    return [
        [[f"p{p}-{i}", WORDS[(p * 7 + i * 3) % len(WORDS)]] for i in range(per_partition)]
        for p in range(count)
    ]


def true_counts(rows: list[list[list[Any]]]) -> dict[str, int]:
    return dict(Counter(word for partition in rows for _, word in partition))


class PartitionCount:
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions

    def number_of_partitions(self) -> int:
        return self.partitions

    def is_ready(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to release."""


class ListEmitter:
    """A new batch of a partition is its next ``batch_size`` rows; metadata is
    ``(start, end)``. Appends the process id to ``pid_file`` on each emit."""

    def __init__(self, rows: list[list[list[Any]]], batch_size: int, pid_file: str | None):
        self.rows = rows
        self.batch_size = batch_size
        self.pid_file = pid_file

    def _note(self) -> None:
        if self.pid_file:
            with open(self.pid_file, "a") as handle:
                handle.write(f"{os.getpid()}\n")

    def emit_partition_batch_new(
        self, attempt: Any, collector: Any, partition: int, last_meta: Any
    ) -> tuple[int, int]:
        start = last_meta[1] if last_meta else 0
        meta = (start, min(start + self.batch_size, len(self.rows[partition])))
        self.emit_partition_batch(attempt, collector, partition, meta)
        return meta

    def emit_partition_batch(
        self, attempt: Any, collector: Any, partition: int, meta: tuple[int, int]
    ) -> None:
        self._note()
        for row in self.rows[partition][meta[0] : meta[1]]:
            collector.emit(row)

    def close(self) -> None:
        """Nothing to release."""


class ListSpout(PartitionedTridentSpout):
    """A transactional spout over in-memory partitions."""

    def __init__(
        self, rows: list[list[list[Any]]], batch_size: int, pid_file: str | None = None
    ) -> None:
        self.rows = rows
        self.batch_size = batch_size
        self.pid_file = pid_file

    def get_output_fields(self) -> Fields:
        return Fields("id", "word")

    def get_coordinator(self, conf: dict[str, Any], context: Any) -> PartitionCount:
        return PartitionCount(len(self.rows))

    def get_emitter(self, conf: dict[str, Any], context: Any) -> ListEmitter:
        return ListEmitter(self.rows, self.batch_size, self.pid_file)


class OpaqueListEmitter:
    """Continues after the previous batch's ``end``; while ``shrink_file`` exists,
    each attempt emits one row fewer than ``batch_size`` (at least one), so a replayed
    batch can hold other tuples than its first attempt."""

    def __init__(self, rows: list[list[list[Any]]], batch_size: int, shrink_file: str | None):
        self.rows = rows
        self.batch_size = batch_size
        self.shrink_file = shrink_file

    def emit_partition_batch(
        self, attempt: Any, collector: Any, partition: int, last_meta: Any
    ) -> tuple[int, int]:
        start = last_meta[1] if last_meta else 0
        size = self.batch_size
        if self.shrink_file and os.path.exists(self.shrink_file):
            with open(self.shrink_file, "a+") as handle:
                handle.seek(0)
                size = max(1, size - len(handle.read()))
                handle.write(".")
        end = min(start + size, len(self.rows[partition]))
        for row in self.rows[partition][start:end]:
            collector.emit(row)
        return (start, end)

    def close(self) -> None:
        """Nothing to release."""


class OpaqueListSpout(OpaquePartitionedTridentSpout):
    """An opaque spout over in-memory partitions."""

    def __init__(
        self, rows: list[list[list[Any]]], batch_size: int, shrink_file: str | None = None
    ) -> None:
        self.rows = rows
        self.batch_size = batch_size
        self.shrink_file = shrink_file

    def get_output_fields(self) -> Fields:
        return Fields("id", "word")

    def get_coordinator(self, conf: dict[str, Any], context: Any) -> PartitionCount:
        return PartitionCount(len(self.rows))

    def get_emitter(self, conf: dict[str, Any], context: Any) -> OpaqueListEmitter:
        return OpaqueListEmitter(self.rows, self.batch_size, self.shrink_file)


class KillingState(MapState):
    """Wraps a map state; kills its own process (SIGKILL, no clean-up) when partition
    ``partition`` updates transaction ``txid`` while ``flag`` exists."""

    def __init__(self, inner: MapState, partition: int, flag: str, txid: int, index: int):
        self.inner = inner
        self.partition = partition
        self.flag = flag
        self.txid = txid
        self.index = index
        self.current = 0

    def begin_commit(self, txid: int) -> None:
        self.current = txid
        self.inner.begin_commit(txid)

    def commit(self, txid: int) -> None:
        self.inner.commit(txid)

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any]:
        return self.inner.multi_get(keys)

    def multi_update(self, keys: list[tuple[Any, ...]], updaters: list[Any]) -> list[Any]:
        if self.index == self.partition and self.current == self.txid and os.path.exists(self.flag):
            os.kill(os.getpid(), signal.SIGKILL)
        return self.inner.multi_update(keys, updaters)

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        self.inner.multi_put(keys, values)

    def close(self) -> None:
        self.inner.close()


@dataclass(frozen=True)
class KillingFactory(SqliteMapStateFactory):
    """A SQLite factory (its committers run on the Spark driver, which the crash test
    kills) making :class:`KillingState` around its states."""

    kill_partition: int = -1
    flag: str = ""
    kill_txid: int = 0

    def make_state(
        self, conf: dict[str, Any], context: Any, partition_index: int, num_partitions: int
    ) -> MapState:
        state = super().make_state(conf, context, partition_index, num_partitions)
        return KillingState(state, self.kill_partition, self.flag, self.kill_txid, partition_index)


CRASH_ROWS = partitions(3, 12)


def crash_topology(database: str, flag: str, state_type: str) -> TridentTopology:
    """Word counts of :data:`CRASH_ROWS` into SQLite; the state's partition 1 kills the
    process in transaction 2 while ``flag`` exists."""
    kind = StateType[state_type]
    spout: Any = (
        ListSpout(CRASH_ROWS, 4)
        if kind is StateType.TRANSACTIONAL
        else OpaqueListSpout(CRASH_ROWS, 4)
    )
    factory = KillingFactory(database, kind, kill_partition=1, flag=flag, kill_txid=2)
    topology = TridentTopology()
    topology.new_stream("items", spout).group_by(Fields("word")).persistent_aggregate(
        factory, Count(), Fields("count")
    ).parallelism_hint(2)
    return topology


def counts(database: str, state_type: str) -> dict[str, int]:
    contents = SqliteMapState.contents(SqliteMapState.factory(database, StateType[state_type]))
    return {key[0]: value for key, value in contents.items()}


if __name__ == "__main__":  # the crash test's child: run until the state kills us
    import sys
    import time

    from squall.spark import SparkCluster

    checkpoint, database, flag, state_type = sys.argv[1:5]
    cluster = SparkCluster(
        master="local[2]",
        checkpoint_dir=checkpoint,
        spark_conf={"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"},
    )
    cluster.submit_topology(
        "crash",
        {"topology.spark.batch.interval.millis": 50},
        crash_topology(database, flag, state_type).build(),
    )
    time.sleep(120)
    sys.exit("the state did not kill the driver")
