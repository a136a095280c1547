"""storm-starter's StatefulWindowingTopology, ported as Storm writes it (sliding count
windows with a message id field, a running sum in the bolt's state), run to completion
with exact sums computed here, on LocalCluster and SparkCluster."""

from __future__ import annotations

import random
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from squall import LocalCluster
from squall.testing import complete_topology
from tests.helpers import wait_until
from tests.starter_loading import load_starter


def load(name: str) -> ModuleType:
    """The example ``name``, imported from its file."""
    return load_starter(name)


def expected_sums(count: int, seed: int) -> list[int]:
    """Windows of the last 5 tuples fire at every 3rd tuple; each adds its values."""
    chooser = random.Random(seed)
    values = [chooser.randrange(1000) for _ in range(count)]
    sums, total = [], 0
    for end in range(3, count + 1, 3):
        total += sum(values[max(0, end - 5) : end])
        sums.append(total)
    return sums


CONF = {"topology.state.checkpoint.interval.ms": 50}


def test_the_running_sum_of_every_window_on_local_cluster() -> None:
    """Window tuples stay pending while in a window (their acks wait for their expiry),
    so the topology is never idle: the emits are watched as they happen."""
    example = load("stateful_windowing")
    sums: list[list[int]] = []

    def capture(component: str, stream: str, task: int, values: Any, targets: Any) -> None:
        if component == "sumbolt" and stream == "default":
            sums.append(list(values))

    expected = [[total] for total in expected_sums(14, 3)]
    with LocalCluster() as cluster:
        topology = example.build_topology(count=14, seed=3, interval_ms=0)
        cluster.submit_topology("test", CONF, topology, emit_listener=capture)
        wait_until(lambda: len(sums) >= len(expected), 10)
        cluster.kill_topology("test")
    assert sums == expected


@pytest.mark.spark
def test_the_running_sum_of_every_window_on_spark(spark: Any, tmp_path: Path) -> None:
    """On Spark the windows' tuples are settled with each micro-batch: the run goes idle."""
    from squall.spark import SparkCluster

    example = load("stateful_windowing")
    with SparkCluster(spark=spark, checkpoint_dir=str(tmp_path)) as cluster:
        result = complete_topology(
            example.build_topology(count=14, seed=3, interval_ms=0),
            conf={**CONF, "topology.spark.batch.interval.millis": 50},
            cluster=cluster,
            timeout_secs=60,
        )
    assert [values[2] for values in result.read_tuples("spout")] == list(range(1, 15))
    assert result.read_tuples("sumbolt") == [[total] for total in expected_sums(14, 3)]
    assert result.read_tuples("printer") == []
