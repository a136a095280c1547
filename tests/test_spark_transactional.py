"""Transactional topologies on SparkCluster: the global count exact, committers in
strict transaction order on the driver, a failing batch retried and counted once, a
restart continuing the transactions, several streams and direct grouping; on both engines,
a custom grouping and the task ids batch bolts see."""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path
from typing import Any

from examples.transactional_global_count import Database, build_topology, global_count
from squall import Tuple
from squall.model.config import effective_config
from squall.model.grouping import CustomStreamGrouping
from squall.runtime.plan import build_plan
from squall.runtime.system import system_topology
from squall.spark import SparkCluster
from squall.testing import SharedRecord
from squall.transactional import (
    BatchBolt,
    Committer,
    TransactionalTopologyBuilder,
)
from squall.transactional.spouts import PartitionedTransactionalSpout
from tests.conftest import Engine

CONF = {"topology.spark.batch.interval.millis": 50}


class Partitions:
    def __init__(self, count: int) -> None:
        self.count = count

    def number_of_partitions(self) -> int:
        return self.count

    def is_ready(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to release."""


class NumberEmitter:
    """Partition ``p`` holds the numbers ``p, p + partitions, ...`` below ``limit``; a
    batch takes the next ``size`` of them (metadata: ``(start, end)`` positions)."""

    def __init__(self, partitions: int, limit: int, size: int) -> None:
        self.partitions = partitions
        self.limit = limit
        self.size = size

    def _numbers(self, partition: int) -> list[int]:
        return list(range(partition, self.limit, self.partitions))

    def emit_partition_batch_new(
        self, attempt: Any, collector: Any, partition: int, last: Any
    ) -> tuple[int, int]:
        start = 0 if last is None else last[1]
        meta = (start, min(start + self.size, len(self._numbers(partition))))
        self.emit_partition_batch(attempt, collector, partition, meta)
        return meta

    def emit_partition_batch(
        self, attempt: Any, collector: Any, partition: int, meta: tuple[int, int]
    ) -> None:
        for number in self._numbers(partition)[meta[0] : meta[1]]:
            collector.emit([attempt, number])

    def close(self) -> None:
        """Nothing to release."""


class NumberSpout(PartitionedTransactionalSpout):
    outputs = ["attempt", "n"]

    def __init__(self, partitions: int, limit: int, size: int) -> None:
        self.partitions = partitions
        self.limit = limit
        self.size = size

    def get_coordinator(self, conf: dict[str, Any], context: Any) -> Partitions:
        return Partitions(self.partitions)

    def get_emitter(self, conf: dict[str, Any], context: Any) -> NumberEmitter:
        return NumberEmitter(self.partitions, self.limit, self.size)


class PartialSum(BatchBolt):
    """Sums its part of the batch; fails the first ``failures`` batches it finishes
    (counted in ``failure_file`` across processes) after summing."""

    outputs = ["attempt", "sum"]

    def __init__(self, failure_file: str | None = None, failures: int = 0) -> None:
        self.failure_file = failure_file
        self.failures = failures

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any, id: Any) -> None:
        self.collector = collector
        self.attempt = id
        self.sum = 0

    def execute(self, tup: Tuple) -> None:
        self.sum += tup["n"]

    def finish_batch(self) -> None:
        if self.failure_file is not None:
            with open(self.failure_file, "a+") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                handle.seek(0)
                if len(handle.read()) < self.failures:
                    handle.write(".")
                    raise RuntimeError("injected batch failure")
        self.collector.emit([self.attempt, self.sum])


class TotalCommitter(BatchBolt, Committer):
    """Adds the partial sums to ``totals`` once per transaction; records each commit's
    txid in order (it runs in the driver process: the test reads the same object)."""

    outputs = ["attempt", "total"]

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.committed: list[int] = []
        self.total = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> TotalCommitter:
        return self  # one record for every batch's instance

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any, id: Any) -> None:
        self.collector = collector
        self.attempt = id
        self.batch_sum = 0

    def execute(self, tup: Tuple) -> None:
        self.batch_sum += tup["sum"]

    def finish_batch(self) -> None:
        with self.lock:
            self.committed.append(self.attempt.transaction_id)
            self.total += self.batch_sum


def sum_topology(committer: TotalCommitter, limit: int, **partial: Any) -> Any:
    builder = TransactionalTopologyBuilder("sums", "numbers", NumberSpout(3, limit, 5), 2)
    builder.set_bolt("partial", PartialSum(**partial), 3).shuffle_grouping("numbers")
    builder.set_committer_bolt("total", committer).global_grouping("partial")
    return builder.build_topology()


def test_global_count_example_is_exact_on_spark(spark: Any, tmp_path: Path) -> None:
    database = Database()
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path))
    try:
        topology = build_topology(900, batch_size=100, partitions=3, database=database)
        cluster.submit_topology("global-count", CONF, topology)
        assert cluster.wait_idle("global-count")
        assert global_count(database) == 900
        assert cluster.get_topology_info("global-count").components["spout"].emitted == 900
    finally:
        cluster.shutdown()


def test_committers_commit_every_transaction_once_in_order(spark: Any, tmp_path: Path) -> None:
    committer = TotalCommitter()
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path))
    try:
        cluster.submit_topology("sums", CONF, sum_topology(committer, 100))
        assert cluster.wait_idle("sums")
        assert committer.total == sum(range(100))
        # 100 numbers over 3 partitions, 5 per partition a batch: 7 batches with numbers.
        assert committer.committed[:7] == [1, 2, 3, 4, 5, 6, 7]
        assert committer.committed == sorted(set(committer.committed))
    finally:
        cluster.shutdown()


def test_a_failing_batch_is_run_again_and_counted_once(spark: Any, tmp_path: Path) -> None:
    """Batch bolt tasks fail twelve times in all: some task of the three fails all of
    Spark's four task attempts, so the micro-batch is run again, as a new attempt of
    the same transaction."""
    committer = TotalCommitter()
    failures = tmp_path / "failures"
    conf = {**CONF, "topology.spark.batch.retries": 3}
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path / "checkpoint"))
    try:
        topology = sum_topology(committer, 60, failure_file=str(failures), failures=12)
        cluster.submit_topology("sums", conf, topology)
        assert cluster.wait_idle("sums")
        assert committer.total == sum(range(60))
        assert committer.committed == sorted(set(committer.committed))
        info = cluster.get_topology_info("sums")
        assert info.extra["retries"] >= 1
        reporting = {cid: s.errors for cid, s in info.components.items() if s.errors_total}
        assert list(reporting) == ["partial"]  # the batch bolt that failed
        assert "injected batch failure" in reporting["partial"][0].error
    finally:
        cluster.shutdown()


def test_a_restarted_topology_continues_its_transactions(spark: Any, tmp_path: Path) -> None:
    checkpoint = str(tmp_path / "checkpoint")
    first, second = TotalCommitter(), TotalCommitter()
    cluster = SparkCluster(spark=spark, checkpoint_dir=checkpoint)
    try:
        cluster.submit_topology("sums", CONF, sum_topology(first, 40))
        assert cluster.wait_idle("sums")
    finally:
        cluster.shutdown()
    assert first.total == sum(range(40))

    cluster = SparkCluster(spark=spark, checkpoint_dir=checkpoint)
    try:
        cluster.submit_topology("sums", CONF, sum_topology(second, 100))
        assert cluster.wait_idle("sums")
    finally:
        cluster.shutdown()
    # The partitions' positions continue from the first run's last transaction.
    assert first.total + second.total == sum(range(100))
    assert min(second.committed) > max(first.committed)


class Router(BatchBolt):
    """Even numbers on "even"; odd ones straight to task ``n % 2`` of ``collect``."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream("even", ["attempt", "n"])
        declarer.declare_stream("odd", ["attempt", "n"], direct=True)

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any, id: Any) -> None:
        self.collector = collector
        self.attempt = id
        self.targets = context.get_component_tasks("collect")

    def execute(self, tup: Tuple) -> None:
        n = tup["n"]
        if n % 2 == 0:
            self.collector.emit([self.attempt, n], "even")
        else:
            self.collector.emit_direct(self.targets[(n // 2) % 2], [self.attempt, n], "odd")


class Collect(BatchBolt, Committer):
    """Records ``(stream, task index, n)`` for every tuple (runs on the driver)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int]] = []

    def __deepcopy__(self, memo: dict[int, Any]) -> Collect:
        return self

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["attempt", "n"])

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any, id: Any) -> None:
        self.task = context.task_index

    def execute(self, tup: Tuple) -> None:
        self.seen.append((tup.source_stream, self.task, tup["n"]))


def test_several_streams_and_direct_grouping(spark: Any, tmp_path: Path) -> None:
    collect = Collect()
    builder = TransactionalTopologyBuilder("route", "numbers", NumberSpout(2, 20, 10))
    builder.set_bolt("router", Router(), 2).shuffle_grouping("numbers")
    builder.set_committer_bolt("collect", collect, 2).fields_grouping(
        "router", ["n"], "even"
    ).direct_grouping("router", "odd")
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path))
    try:
        cluster.submit_topology("route", CONF, builder.build_topology())
        assert cluster.wait_idle("route")
    finally:
        cluster.shutdown()
    odd = sorted((task, n) for stream, task, n in collect.seen if stream == "odd")
    assert odd == sorted(((n // 2) % 2, n) for n in range(1, 20, 2))
    even = [(task, n) for stream, task, n in collect.seen if stream == "even"]
    assert sorted(n for _, n in even) == list(range(0, 20, 2))
    tasks_of = {}
    for task, n in even:
        assert tasks_of.setdefault(n, task) == task


class Spread(CustomStreamGrouping):
    """Number ``n`` emitted by task ``t`` goes to target ``(n + t) % targets``: the
    choice depends on the emitting task's id and the target task ids. Records what each
    emitting task was prepared with."""

    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def prepare(self, context: Any, stream: Any, target_tasks: list[int]) -> None:
        self.targets = target_tasks
        self.record.append(
            "prepared",
            (context.task_id, context.component_id, stream.component_id, tuple(target_tasks)),
        )

    def choose_tasks(self, task_id: int, values: list[Any]) -> list[int]:
        return [self.targets[(values[1] + task_id) % len(self.targets)]]  # [attempt, n]


class Seen(BatchBolt):
    """Records its task (as its context tells it) and every number it receives."""

    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any, id: Any) -> None:
        self.task = context.task_id
        self.record.append(
            "context",
            (
                context.component_id,
                context.task_id,
                context.get_this_task_index(),
                tuple(context.get_component_tasks("seen")),
                tuple(context.get_component_tasks("numbers")),
            ),
        )

    def execute(self, tup: Tuple) -> None:
        self.record.append("seen", (self.task, tup["n"]))

    def finish_batch(self) -> None:
        """Nothing to emit."""


def test_a_custom_grouping_and_batch_bolts_see_the_local_engines_task_ids(
    engine: Engine,
) -> None:
    """On both engines: the batch bolt's tasks see the local engine's task ids, the
    custom grouping is prepared with them by each emitter task, and each task receives
    exactly the numbers the grouping chose for it."""
    record = SharedRecord()
    builder = TransactionalTopologyBuilder("custom", "numbers", NumberSpout(2, 20, 10), 2)
    builder.set_bolt("seen", Seen(record), 3).custom_grouping("numbers", Spread(record))
    topology = builder.build_topology()
    conf = engine.conf()
    plan = build_plan(system_topology(topology, effective_config(conf)), effective_config(conf))
    seen_tasks = plan.component_tasks["seen"]
    emitters = plan.component_tasks["numbers"]
    with engine.running(topology, conf, name="custom") as run:
        run.wait_until(lambda: len(record.get("seen")) >= 20, engine.timeout)
        run.drain()
    # Partition p holds the numbers p, p + 2, ...: emitter task p emits them.
    expected: dict[int, list[int]] = {task: [] for task in seen_tasks}
    for n in range(20):
        sender = emitters[n % 2]
        expected[seen_tasks[(n + sender) % 3]].append(n)
    got: dict[int, list[int]] = {task: [] for task in seen_tasks}
    for task, n in record.get("seen"):
        got[task].append(n)
    assert {task: sorted(numbers) for task, numbers in got.items()} == expected
    assert set(record.get("prepared")) == {
        (sender, "numbers", "numbers", tuple(seen_tasks)) for sender in emitters
    }
    assert set(record.get("context")) == {
        ("seen", task, index, tuple(seen_tasks), tuple(emitters))
        for index, task in enumerate(seen_tasks)
    }
