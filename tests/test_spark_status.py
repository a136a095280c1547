"""What SparkCluster says about a running topology beyond its counts: the resources it
runs on, each bolt's capacity, and whether it resumed from a checkpoint."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

from squall import BasicBolt, Fields, Spout, TopologyBuilder
from squall.model.topology import StormTopology
from squall.runtime.cluster import Cluster
from squall.spark import CheckpointMismatchError, SparkCluster
from squall.spark.control.rundir import last_committed_batch
from squall.testing import CapturingBolt, FixedTupleSpout
from squall.trident import FixedBatchSpout, Function, TridentTopology
from tests.helpers import wait_until

#: Small, quick micro-batches; no second run of a failed one (none is expected).
CONF = {
    "topology.spark.batch.interval.millis": 50,
    "topology.spark.batch.max.tuples": 10,
    "topology.spark.batch.retries": 0,
}
#: Seconds a bolt below sleeps per tuple: a micro-batch of 10 tuples keeps it busy 0.3 s.
SLEEP_SECS = 0.03


@pytest.fixture
def cluster(spark: Any, tmp_path: Path) -> Any:
    """A SparkCluster on the session's Spark, checkpoints under ``tmp_path``."""
    spark_cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path / "checkpoint"))
    yield spark_cluster
    spark_cluster.shutdown()


def test_spark_cluster_is_a_cluster_and_says_what_it_runs_on(cluster: Any) -> None:
    assert isinstance(cluster, Cluster)
    assert cluster.engine == "spark"
    # The tests' session: local[2, 4], two threads.
    assert cluster.resources == "local[2, 4]: 2 cores"


class Counter(Spout):
    """Emits 1, 2, 3... for ever (unanchored)."""

    outputs = ["n"]

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        self.n += 1
        self.collector.emit([self.n])


class Sleepy(BasicBolt):
    def execute(self, tup: Any, collector: Any) -> None:
        time.sleep(SLEEP_SECS)


class Trivial(BasicBolt):
    def execute(self, tup: Any, collector: Any) -> None:
        pass


def test_a_bolt_busy_in_each_batch_has_a_capacity_and_a_trivial_one_less(cluster: Any) -> None:
    """Capacity on Spark: a task's time in execute over the recent micro-batches' time.
    The sleeping bolt spends at least 0.3 s of each micro-batch of 10 tuples sleeping.
    And the resources the topology runs on."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", Counter())
    builder.set_bolt("sleepy", Sleepy()).shuffle_grouping("numbers")
    builder.set_bolt("trivial", Trivial()).shuffle_grouping("numbers")
    cluster.submit_topology("capacity", CONF, builder.create_topology())

    def components() -> dict[str, Any]:
        return cluster.get_topology_info("capacity").components

    wait_until(lambda: components()["sleepy"].capacity > 0.05, timeout=90.0, interval=0.1)
    info = cluster.get_topology_info("capacity")
    assert 0.05 < info.components["sleepy"].capacity <= 1.0
    assert info.components["trivial"].capacity < info.components["sleepy"].capacity
    # What the session runs on (the tests' session: local[2, 4], two threads).
    assert info.extra["resources"] == "local[2, 4]: 2 cores"
    assert info.spark is not None and info.local is None
    assert info.spark.resources == "local[2, 4]: 2 cores"
    assert list(info.spark.queries) == ["core"]


class SleepyFunction(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        time.sleep(SLEEP_SECS)
        collector.emit([tup[0]])


def test_a_trident_stage_busy_in_each_batch_has_a_capacity(cluster: Any) -> None:
    spout = FixedBatchSpout(Fields("word"), 10, *[[f"w{i}"] for i in range(10)])
    spout.set_cycle(True)
    topology = TridentTopology()
    topology.new_stream("words", spout).each(Fields("word"), SleepyFunction(), Fields("same"))
    cluster.submit_topology("trident-capacity", CONF, topology.build())

    def stages() -> list[Any]:
        components = cluster.get_topology_info("trident-capacity").components.values()
        return [stats for stats in components if stats.kind == "bolt"]

    wait_until(lambda: any(s.capacity > 0.05 for s in stages()), timeout=90.0, interval=0.1)
    assert all(s.capacity <= 1.0 for s in stages())


def test_a_topology_submitted_again_on_its_checkpoint_says_it_resumes(
    cluster: Any, caplog: pytest.LogCaptureFixture
) -> None:
    def topology() -> Any:
        builder = TopologyBuilder()
        builder.set_spout("numbers", FixedTupleSpout([[n] for n in range(25)], ["n"]))
        builder.set_bolt("trivial", Trivial()).shuffle_grouping("numbers")
        return builder.create_topology()

    cluster.submit_topology("again", CONF, topology())
    assert cluster.wait_idle("again", 120.0)
    first = cluster.get_topology_info("again")
    assert "resumed_from_batch" not in first.extra
    assert first.spark is not None and first.spark.first.resumed_from_batch is None
    last = first.extra["last_batch_id"]
    assert last >= 2  # 25 tuples, at most 10 a micro-batch
    checkpoint = os.path.join(cluster.checkpoint_dir, "again", "core", "checkpoint")
    wait_until(lambda: last_committed_batch(checkpoint) == last, timeout=60.0)
    cluster.kill_topology("again")

    with caplog.at_level(logging.WARNING, logger="squall"):
        cluster.submit_topology("again", CONF, topology())
    second = cluster.get_topology_info("again")
    assert second.extra["resumed_from_batch"] == last
    assert second.extra["checkpoint_dir"] == cluster.checkpoint_dir
    assert second.spark is not None and second.spark.first.resumed_from_batch == last
    assert second.spark.checkpoint_dir == cluster.checkpoint_dir
    directory = os.path.join(cluster.checkpoint_dir, "again")
    assert [record.getMessage() for record in caplog.records] == [
        f"topology 'again' resumes from checkpoint {directory} after batch {last}: its spouts "
        "continue from there (another name or checkpoint directory starts afresh)"
    ]


def numbers_topology(sink: CapturingBolt, fields: bool = False, tasks: int = 1) -> StormTopology:
    """25 numbers into ``sink`` (bolt ``count``): by shuffle, or by fields grouping on
    ``n`` with ``tasks`` tasks."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[n] for n in range(25)], ["n"]))
    declarer = builder.set_bolt("count", sink, tasks)
    if fields:
        declarer.fields_grouping("numbers", ["n"])
    else:
        declarer.shuffle_grouping("numbers")
    return builder.create_topology()


def run_to_the_end(cluster: Any, name: str) -> int:
    """Wait until topology ``name`` processed everything and committed its last
    micro-batch; kill it; the last batch id."""
    assert cluster.wait_idle(name, 120.0)
    last: int = cluster.get_topology_info(name).extra["last_batch_id"]
    checkpoint = os.path.join(cluster.checkpoint_dir, name, "core", "checkpoint")
    wait_until(lambda: last_committed_batch(checkpoint) == last, timeout=60.0)
    cluster.kill_topology(name)
    return last


def test_another_topology_is_refused_on_a_checkpoint_unless_asked_to_start_afresh(
    cluster: Any,
) -> None:
    """A topology of other components or groupings submitted under a name whose
    checkpoint another one wrote is refused, naming the name, the checkpoint and what
    differs; with ``fresh=True`` the checkpoint is discarded and it starts afresh."""
    cluster.submit_topology("shapes", CONF, numbers_topology(CapturingBolt()))
    run_to_the_end(cluster, "shapes")
    sink = CapturingBolt()
    changed = numbers_topology(sink, fields=True, tasks=2)
    with pytest.raises(CheckpointMismatchError) as refused:
        cluster.submit_topology("shapes", CONF, changed)
    directory = os.path.join(cluster.checkpoint_dir, "shapes")
    assert str(refused.value) == (
        f"topology 'shapes' cannot resume from the checkpoint in {directory}: another "
        "topology wrote it (component 'count': 2 tasks, was 1; input numbers:default by "
        "fields(n), was shuffle). Submit it under another name or checkpoint directory, or "
        "with fresh=True (squall run --fresh) to discard that checkpoint and start afresh"
    )
    assert cluster.topology_names() == []  # nothing was started

    cluster.submit_topology("shapes", CONF, changed, fresh=True)
    assert "resumed_from_batch" not in cluster.get_topology_info("shapes").extra
    assert cluster.wait_idle("shapes", 120.0)
    assert sorted(sink.values()) == [[n] for n in range(25)]  # all of them, afresh


def test_a_topology_with_other_components_is_refused_naming_them(cluster: Any) -> None:
    cluster.submit_topology("parts", CONF, numbers_topology(CapturingBolt()))
    run_to_the_end(cluster, "parts")
    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[n] for n in range(25)], ["n"]))
    builder.set_bolt("sum", Trivial()).shuffle_grouping("numbers")
    with pytest.raises(
        CheckpointMismatchError,
        match=(r"another topology wrote it \(component 'count' is gone; component 'sum' is new\)"),
    ):
        cluster.submit_topology("parts", CONF, builder.create_topology())


def test_a_temporary_checkpoint_directory_is_removed_at_shutdown(spark: Any) -> None:
    cluster = SparkCluster(spark=spark)
    directory = cluster.checkpoint_dir
    assert os.path.isdir(directory)
    cluster.shutdown()
    assert not os.path.exists(directory)


def test_a_given_checkpoint_directory_is_kept_at_shutdown(spark: Any, tmp_path: Path) -> None:
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path / "kept"))
    os.makedirs(cluster.checkpoint_dir)
    cluster.shutdown()
    assert os.path.isdir(tmp_path / "kept")
