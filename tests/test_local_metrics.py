"""Metrics from get_topology_info on LocalCluster: exact counts for a small topology."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from squall import (
    Bolt,
    ComponentStats,
    Config,
    LocalCluster,
    TopologyBuilder,
    TopologyInfo,
)
from squall.testing import CapturingBolt, FixedTupleSpout
from tests.helpers import wait_until


class Split(Bolt):
    """Emits one tuple per word of the sentence, anchored; sleeps a little per tuple."""

    outputs = ["word"]

    def execute(self, tup: Any) -> None:
        time.sleep(0.001)
        for word in tup["sentence"].split():
            self.collector.emit([word], anchors=tup)
        self.collector.ack(tup)


SENTENCES = [["a b"], ["c d e"], ["f"], ["g h"], ["i j k l"]]  # 12 words


def submit(cluster: LocalCluster, conf: dict[str, Any]) -> tuple[FixedTupleSpout, CapturingBolt]:
    spout = FixedTupleSpout(SENTENCES, ["sentence"])
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("split", Split(), 3).all_grouping("src")
    builder.set_bolt("sink", sink, 2).shuffle_grouping("split")
    cluster.submit_topology("metrics", conf, builder.create_topology())
    wait_until(lambda: len(spout.acked) == 5)
    wait_until(lambda: len(sink.received) == 36)
    assert cluster.wait_idle("metrics", 5.0)
    return spout, sink


def test_exact_counts_with_all_grouping(cluster: LocalCluster) -> None:
    spout, sink = submit(cluster, {})
    info = cluster.get_topology_info("metrics")
    running = cluster.get_running("metrics")
    tasks = running.plan.component_tasks
    assert sorted(spout.acked) == list(range(5))
    assert len(sink.received) == 36

    src = info.components["src"]
    assert src.kind == "spout"
    assert src.tasks == tasks["src"]
    assert (src.emitted, src.transferred) == (5, 15)  # transferred = emitted * 3 tasks
    assert (src.acked, src.failed, src.timed_out) == (5, 0, 0)
    assert src.streams["default"] == {"emitted": 5, "transferred": 15}

    split = info.components["split"]
    assert split.kind == "bolt"
    assert (split.executed, split.acked, split.failed) == (15, 15, 0)
    assert (split.emitted, split.transferred) == (36, 36)
    assert split.task_stats == {
        task: {"emitted": 12, "transferred": 12, "executed": 5, "acked": 5, "failed": 0}
        for task in tasks["split"]
    }

    sink_stats = info.components["sink"]
    assert (sink_stats.executed, sink_stats.acked, sink_stats.emitted) == (36, 36, 0)
    assert sum(t["executed"] for t in sink_stats.task_stats.values()) == 36
    assert sorted(sink_stats.task_stats) == tasks["sink"]
    assert {t["executed"] for t in sink_stats.task_stats.values()} == {18}

    # Latencies and capacity.
    assert src.complete_latency_ms > 0
    assert split.execute_latency_ms >= 1.0  # each execute sleeps 1 ms
    assert sink_stats.execute_latency_ms >= 0
    for stats in info.components.values():
        assert 0.0 <= stats.capacity <= 1.0
        assert stats.errors == []
        assert stats.errors_total == 0

    acker = info.components["__acker"]
    assert acker.kind == "bolt"
    assert acker.tasks == tasks["__acker"]
    assert acker.executed > 0
    assert info.name == "metrics"
    assert info.status == "ACTIVE"
    assert info.workers == 1
    assert info.uptime_secs > 0
    assert (info.extra["pending"], info.extra["queued"]) == (0, 0)
    assert info.extra["ack_messages"] >= 5  # at least one init per tree


def test_acker_traffic_is_counted(cluster: LocalCluster) -> None:
    # Inits and acks are XOR-combined per worker before they are sent: counted per
    # topology. The acker's answers and the bolts' fails are counted on their streams.
    spout = FixedTupleSpout(SENTENCES, ["sentence"])
    sink = CapturingBolt(fail_first=1)
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("split", Split(), 1).shuffle_grouping("src")
    builder.set_bolt("sink", sink, 1).shuffle_grouping("split")
    cluster.submit_topology("metrics", {}, builder.create_topology())
    wait_until(lambda: len(spout.acked) + len(spout.failed) == 5)
    assert cluster.wait_idle("metrics", 5.0)
    info = cluster.get_topology_info("metrics")
    assert len(spout.failed) == 1
    assert info.components["sink"].streams["__ack_fail"] == {"emitted": 1, "transferred": 1}
    acker = info.components["__acker"].streams
    assert acker["__ack_ack"]["emitted"] == 4
    assert acker["__ack_fail"]["emitted"] == 1
    assert "__ack_init" not in info.components["src"].streams
    assert info.extra["ack_messages"] >= 5


def test_no_acker_when_acking_is_off(cluster: LocalCluster) -> None:
    spout, _ = submit(cluster, {Config.TOPOLOGY_ACKER_EXECUTORS: 0})
    info = cluster.get_topology_info("metrics")
    assert sorted(info.components) == ["sink", "split", "src"]
    src = info.components["src"]
    assert (src.emitted, src.transferred, src.acked) == (5, 15, 5)
    assert not any(stream.startswith("__") for stream in src.streams)
    assert info.components["split"].executed == 15
    assert info.components["sink"].executed == 36
    assert sorted(spout.acked) == list(range(5))


@pytest.mark.parametrize("ackers", [1, 3])
def test_acker_tasks_follow_the_configuration(cluster: LocalCluster, ackers: int) -> None:
    submit(cluster, {Config.TOPOLOGY_ACKER_EXECUTORS: ackers})
    info = cluster.get_topology_info("metrics")
    assert len(info.components["__acker"].tasks) == ackers
    assert info.components["src"].acked == 5


def test_item_access_and_json(cluster: LocalCluster) -> None:
    submit(cluster, {})
    info = cluster.get_topology_info("metrics")
    assert isinstance(info, TopologyInfo)
    assert isinstance(info["components"]["split"], ComponentStats)
    assert info["components"]["split"]["acked"] == 15
    assert info["components"]["src"]["transferred"] == 15
    assert info["name"] == "metrics"

    data = info.to_dict()
    text = json.dumps(data)
    loaded = json.loads(text)
    assert loaded["components"]["split"]["acked"] == 15
    assert loaded["components"]["sink"]["executed"] == 36
    assert loaded["components"]["src"]["streams"]["default"] == {"emitted": 5, "transferred": 15}
    component = info.components["split"].to_dict()
    assert json.loads(json.dumps(component))["executed"] == 15


def test_errors_in_json_form(cluster: LocalCluster) -> None:
    class Failing(Bolt):
        def execute(self, tup: Any) -> None:
            raise ValueError(f"no {tup['n']}")

    spout = FixedTupleSpout([[1], [2]], ["n"])
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("failing", Failing()).shuffle_grouping("src")
    cluster.submit_topology("json-errors", {}, builder.create_topology())
    wait_until(lambda: len(spout.failed) == 2)
    assert cluster.wait_idle("json-errors", 5.0)
    loaded = json.loads(json.dumps(cluster.get_topology_info("json-errors").to_dict()))
    failing = loaded["components"]["failing"]
    assert failing["errors_total"] == 2
    assert sorted(e["error"] for e in failing["errors"]) == ["ValueError: no 1", "ValueError: no 2"]
    assert all(e["component_id"] == "failing" for e in failing["errors"])
    assert loaded["components"]["src"]["failed"] == 2
