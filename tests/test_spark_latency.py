"""Latency percentiles on SparkCluster: a tree's complete latency from its emit to its
settling, and the bolts' execute and process latencies shipped from the executors."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from squall import BasicBolt, TopologyBuilder
from squall.runtime.latency import LatencyHistogram
from squall.spark import SparkCluster
from squall.testing import FixedTupleSpout

CONF = {
    "topology.spark.batch.interval.millis": 50,
    "topology.spark.batch.max.tuples": 10,
    "topology.spark.batch.retries": 0,
}


@pytest.fixture
def cluster(spark: Any, tmp_path: Path) -> Any:
    spark_cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path / "checkpoint"))
    yield spark_cluster
    spark_cluster.shutdown()


class Sleep(BasicBolt):
    """Sleeps 5 ms per tuple."""

    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        time.sleep(0.005)


def test_latency_percentiles_on_spark(cluster: Any) -> None:
    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[n] for n in range(30)], ["n"]))
    builder.set_bolt("sleep", Sleep(), 2).shuffle_grouping("numbers")
    cluster.submit_topology("latency", CONF, builder.create_topology())
    assert cluster.wait_idle("latency", 120.0)
    info = cluster.get_topology_info("latency")
    spout, bolt = info.components["numbers"], info.components["sleep"]
    assert spout.acked == 30
    complete = spout.latency_histograms["complete"]
    assert complete.count == 30
    assert complete.sum == pytest.approx(spout.complete_latency_ms * 30)
    percentiles = spout.complete_latency_percentiles
    assert 5.0 < percentiles[50.0] <= percentiles[99.0]
    assert bolt.executed == 30
    for kind, count in [("execute", 30), ("process", bolt.process_count)]:
        per_task = [histograms[kind] for histograms in bolt.task_latency_histograms.values()]
        assert len(per_task) == 2
        assert LatencyHistogram.merged(per_task) == bolt.latency_histograms[kind]
        assert bolt.latency_histograms[kind].count == count > 0
    assert bolt.execute_latency_percentiles[50.0] >= 4.9  # each tuple sleeps 5 ms
    assert bolt.process_latency_percentiles[50.0] >= 4.9
    cluster.kill_topology("latency")
