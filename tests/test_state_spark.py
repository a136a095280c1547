"""Stateful bolts on Spark across failures: a Python worker killed in the middle of a
batch, and a batch failed and run again after the stateful bolt had finished it. The
running counts are emitted once each and the durable state holds the exact counts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from squall import Config, Fields, StatefulBolt, TopologyBuilder
from squall.model.topology import StormTopology
from squall.spark import SparkCluster
from squall.state import KeyValueState
from squall.state.executors import state_namespace
from squall.state.providers import provider_for
from tests.spark_core import (
    CONF,
    LineSink,
    WordSpout,
    kill_if_flagged,
    read_lines,
    true_counts,
    word_list,
)

pytestmark = pytest.mark.spark


class StatefulRunningCount(StatefulBolt):
    """Counts words in its state and emits ``[word, count so far]``; after its
    ``kill_at``-th tuple in a process it dies as ``kill_flag`` says."""

    outputs = ["word", "count"]

    def __init__(self, kill_flag: str = "", kill_at: int = 7) -> None:
        self.kill_flag = kill_flag
        self.kill_at = kill_at

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.seen_in_process = 0

    def init_state(self, state: KeyValueState) -> None:
        self.counts = state

    def execute(self, tup: Any) -> None:
        word = tup[0]
        count = self.counts.get(word, 0) + 1
        self.counts.put(word, count)
        self.collector.emit([word, count], tup)
        self.collector.ack(tup)
        self.seen_in_process += 1
        if self.seen_in_process >= self.kill_at:
            kill_if_flagged(self.kill_flag)


def topology(
    words: list[str], out: Path, count_kill: str = "", sink_kill: str = ""
) -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout("words", WordSpout(words, str(out)))
    builder.set_bolt("count", StatefulRunningCount(count_kill), 2).fields_grouping(
        "words", Fields("word")
    )
    builder.set_bolt("sink", LineSink(str(out / "counts"), sink_kill)).global_grouping("count")
    return builder.create_topology()


def state_conf(directory: Path) -> dict[str, Any]:
    return {
        **CONF,
        Config.TOPOLOGY_STATE_PROVIDER: "sqlite",
        Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"directory": str(directory)},
        "topology.spark.batch.retries": 2,
    }


def stored_counts(conf: dict[str, Any], name: str) -> dict[str, int]:
    """Both count tasks' states: committed, with the last batch's prepared changes."""
    provider = provider_for(conf, name)
    merged: dict[str, int] = {}
    for index in range(2):
        state = provider.make_state(state_namespace("count", index), f"count {index}")
        try:
            merged.update(dict(state))
        finally:
            state.close()
    return merged


def emitted(out: Path) -> Counter[tuple[str, int]]:
    return Counter(
        (word, int(count))
        for word, count in (line.split() for line in read_lines(str(out / "counts")))
    )


@pytest.mark.parametrize("failure", ["count_worker_killed", "batch_run_again"])
def test_counts_stay_exact_when_spark_runs_work_again(
    spark: Any, tmp_path: Path, failure: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    kill = tmp_path / "kill"
    kill.write_text("1" if failure == "count_worker_killed" else "4")
    words = word_list(30)
    conf = state_conf(tmp_path / "state")
    kills = (
        {"count_kill": str(kill)} if failure == "count_worker_killed" else {"sink_kill": str(kill)}
    )
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path / "checkpoint"))
    try:
        cluster.submit_topology("stateful", conf, topology(words, out, **kills))
        assert cluster.wait_idle("stateful")
    finally:
        cluster.shutdown()
    assert kill.read_text() == "0"
    every_once = Counter(
        (word, n) for word, total in true_counts(words).items() for n in range(1, total + 1)
    )
    assert emitted(out) == every_once
    assert stored_counts(conf, "stateful") == true_counts(words)
    assert sorted(int(n) for n in read_lines(str(out / "acked"))) == list(range(30))
