"""Trident spouts on SparkCluster: partitioned transactional and opaque spouts read on
executors, several spouts in one topology, an idle spout, and exactly-once across a
driver killed in the middle of a batch."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from squall import Fields
from squall.spark import SparkCluster
from squall.trident import Count, FixedBatchSpout, Function, TridentTopology
from squall.trident.state import SqliteMapState, StateType
from tests.spark_spouts import (
    CRASH_ROWS,
    ListSpout,
    OpaqueListSpout,
    counts,
    crash_topology,
    partitions,
    true_counts,
)

ROWS = partitions(3, 10)
CONF = {"topology.spark.batch.interval.millis": 50}


def word_counts(factory: Any) -> dict[str, int]:
    return {key[0]: value for key, value in SqliteMapState.contents(factory).items()}


class FailTimes(Function):
    """Raises on "fig" until it has raised ``times`` times (counted in ``path``)."""

    def __init__(self, path: str, times: int) -> None:
        self.path = path
        self.times = times

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[0] == "fig":
            with open(self.path, "a+") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)  # executors run it in parallel
                handle.seek(0)
                if len(handle.read()) < self.times:
                    handle.write(".")
                    raise RuntimeError("injected failure after the state update")
        collector.emit([tup[0]])


def count_words(spout: Any, factory: Any, name: str = "items") -> TridentTopology:
    topology = TridentTopology()
    topology.new_stream(name, spout).group_by(Fields("word")).persistent_aggregate(
        factory, Count(), Fields("count")
    ).parallelism_hint(2)
    return topology


def test_a_transactional_partitioned_spout_reads_its_partitions_on_executors(
    spark: Any, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    factory = SqliteMapState.factory(str(tmp_path / "s.db"), StateType.TRANSACTIONAL)
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path / "checkpoint"))
    try:
        cluster.submit_topology(
            "items", CONF, count_words(ListSpout(ROWS, 4, str(pids)), factory).build()
        )
        assert cluster.wait_idle("items")
        assert word_counts(factory) == true_counts(ROWS)
        info = cluster.get_topology_info("items")
        assert info.components["items"].emitted == 30
        # 4 + 4 + 2 rows per partition, then an empty batch, after which the idle
        # spout is polled less often.
        assert info.extra["batches"] == 4
    finally:
        cluster.shutdown()
    emitting = {int(pid) for pid in pids.read_text().split()}
    assert emitting and os.getpid() not in emitting  # in Spark's Python workers
    assert len(pids.read_text().split()) == 3 * 4  # each partition read once a batch


def test_an_opaque_spout_replaying_other_tuples_after_a_failure_stays_exact(
    spark: Any, tmp_path: Path
) -> None:
    """The batch with "fig" fails six times before the state update: four task attempts
    (Spark's own retries, on the batch's rows as read) fail the micro-batch, which is
    run again: that re-reads the opaque spout, which now emits other tuples (fewer).
    The state still counts every tuple exactly once."""
    shrink = tmp_path / "shrink"
    shrink.touch()
    failures = tmp_path / "failures"
    factory = SqliteMapState.factory(str(tmp_path / "s.db"), StateType.OPAQUE)
    topology = TridentTopology()
    topology.new_stream("items", OpaqueListSpout(ROWS, 4, str(shrink))).each(
        Fields("word"), FailTimes(str(failures), 6), Fields("seen")
    ).group_by(Fields("word")).persistent_aggregate(
        factory, Count(), Fields("count")
    ).parallelism_hint(2)
    conf = {**CONF, "topology.spark.batch.retries": 5}
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path / "checkpoint"))
    try:
        cluster.submit_topology("opaque", conf, topology.build())
        assert cluster.wait_idle("opaque")
        shrink.unlink()
        assert cluster.wait_idle("opaque")
        assert word_counts(factory) == true_counts(ROWS)
        info = cluster.get_topology_info("opaque")
        assert info.extra["retries"] == 1
        reporting = {cid: s.errors for cid, s in info.components.items() if s.errors_total}
        assert list(reporting) == ["b1-each(FailTimes)"]  # the bolt running the failing each
        assert "injected failure" in reporting["b1-each(FailTimes)"][0].error
        assert info.components["items"].emitted == 30
    finally:
        cluster.shutdown()


def test_several_spouts_feed_one_transaction_each_batch(spark: Any, tmp_path: Path) -> None:
    factory = SqliteMapState.factory(str(tmp_path / "s.db"), StateType.TRANSACTIONAL)
    sentences = [["fig plum"], ["apple"], ["kiwi kiwi fig"]]
    topology = TridentTopology()
    words = topology.new_stream("sentences", FixedBatchSpout(Fields("sentence"), 2, *sentences))
    split = words.flat_map(lambda t: [[w] for w in t["sentence"].split()], Fields("word"))
    items = topology.new_stream("items", ListSpout(ROWS, 5)).project(Fields("word"))
    topology.merge(split, items).group_by(Fields("word")).persistent_aggregate(
        factory, Count(), Fields("count")
    ).parallelism_hint(2)
    expected = Counter(true_counts(ROWS))
    expected.update(w for [s] in sentences for w in s.split())

    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path / "checkpoint"))
    try:
        cluster.submit_topology("merged", CONF, topology.build())
        assert cluster.wait_idle("merged")
        assert word_counts(factory) == dict(expected)
        info = cluster.get_topology_info("merged")
        assert info.components["sentences"].emitted == 3
        assert info.components["items"].emitted == 30
        assert list(info.extra["queries"]) == ["spouts"]  # one query for both spouts
    finally:
        cluster.shutdown()


def test_an_idle_partitioned_spout_lets_the_topology_go_idle_and_keeps_its_log_small(
    spark: Any, tmp_path: Path
) -> None:
    factory = SqliteMapState.factory(str(tmp_path / "s.db"), StateType.TRANSACTIONAL)
    checkpoint = tmp_path / "checkpoint"
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(checkpoint))
    try:
        cluster.submit_topology("items", CONF, count_words(ListSpout(ROWS, 1), factory).build())
        assert cluster.wait_idle("items")
        assert word_counts(factory) == true_counts(ROWS)
        batches = cluster.get_topology_info("items").extra["batches"]
        assert cluster.wait_idle("items")  # returns although the spout may be polled again
        # Idle: empty batches come ever more rarely (at most one more here).
        assert cluster.get_topology_info("items").extra["batches"] <= batches + 2
    finally:
        cluster.shutdown()
    log = checkpoint / "items" / "spouts" / "items" / "spout-log"
    assert len(list(log.iterdir())) <= 3 * (3 + 2)  # the newest batches only


@pytest.mark.parametrize("state_type", ["TRANSACTIONAL", "OPAQUE"])
def test_a_driver_killed_mid_batch_restarts_exactly_once(
    spark: Any, tmp_path: Path, state_type: str
) -> None:
    """The driver process is killed (SIGKILL) while transaction 2 is half applied: one
    state partition has written it, the other not. A new SparkCluster on the same
    checkpoint directory replays the batch; the counts equal the true counts."""
    checkpoint, database, flag = (str(tmp_path / n) for n in ("checkpoint", "s.db", "kill"))
    Path(flag).touch()
    root = Path(__file__).resolve().parent.parent
    child = subprocess.run(
        [sys.executable, "-m", "tests.spark_spouts", checkpoint, database, flag, state_type],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=180,
        start_new_session=True,
    )
    assert child.returncode == -9, child.stderr[-3000:]
    partial = counts(database, state_type)
    expected = true_counts(CRASH_ROWS)
    assert partial and partial != expected  # transaction 2 was half written

    os.remove(flag)
    cluster = SparkCluster(spark=spark, checkpoint_dir=checkpoint)
    try:
        cluster.submit_topology("crash", CONF, crash_topology(database, flag, state_type).build())
        assert cluster.wait_idle("crash")
        assert counts(database, state_type) == expected
    finally:
        cluster.shutdown()
