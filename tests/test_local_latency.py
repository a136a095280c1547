"""Latency percentiles of topologies on LocalCluster: exact complete latencies on a
manual clock, and histograms merged over tasks in threads and in worker processes."""

from __future__ import annotations

from typing import Any

from squall import BasicBolt, Config, LocalCluster, ManualClock, Spout, TopologyBuilder
from squall.runtime.latency import PERCENTILES, UNITS_PER_MS, LatencyHistogram, bucket_floor_ms
from squall.runtime.metrics import TopologyInfo
from tests.helpers import wait_until

#: The clock a :class:`Delay` bolt moves (set by the test that runs it).
CLOCK: ManualClock | None = None


class DelaySpout(Spout):
    """Emits each of ``delays`` once, tracked (msg id: its position)."""

    outputs = ["delay"]

    def __init__(self, delays: list[float]) -> None:
        self.delays = delays

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.position = 0

    def next_tuple(self) -> None:
        if self.position < len(self.delays):
            self.collector.emit([self.delays[self.position]], msg_id=self.position)
            self.position += 1


class Delay(BasicBolt):
    """Moves the manual clock by the tuple's delay before it is acked."""

    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        assert CLOCK is not None
        CLOCK.advance(tup["delay"])


class Pass(BasicBolt):
    outputs = ["delay"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup["delay"]])


def _bounds_ms(histogram: LatencyHistogram) -> tuple[float, float]:
    """The least and the greatest sum the latencies ``histogram`` counts can have (each
    is at least its bucket's lower bound and below the next bucket's)."""
    low = high = 0.0
    for index, count in histogram.counts.items():
        low += bucket_floor_ms(index) * count
        high += (((index & 255) + 1) << (index >> 8)) / UNITS_PER_MS * count
    return low, high


def _sum_within_buckets(histogram: LatencyHistogram) -> bool:
    """Whether ``histogram``'s exact sum lies within what its buckets allow: true
    whatever the latencies were, if they were bucketed in the unit their sum is kept in."""
    low, high = _bounds_ms(histogram)
    return low * (1 - 1e-9) <= histogram.sum < high * (1 + 1e-9)


def _acked(cluster: LocalCluster, name: str, count: int) -> TopologyInfo:
    wait_until(lambda: cluster.get_topology_info(name).components["spout"].acked == count, 20)
    return cluster.get_topology_info(name)


def test_complete_latency_percentiles_are_exact_on_a_manual_clock(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    global CLOCK
    CLOCK = clock
    delays = [1.0] * 49 + [64.0] + [1.0] * 49 + [1024.0]
    builder = TopologyBuilder()
    builder.set_spout("spout", DelaySpout(delays), 1)
    builder.set_bolt("delay", Delay(), 1).shuffle_grouping("spout")
    conf = Config()
    conf.set_max_spout_pending(1)  # one tree at a time: its delay is all the clock moves
    manual_cluster.submit_topology("delays", conf, builder.create_topology())
    info = _acked(manual_cluster, "delays", 100)
    spout = info.components["spout"]
    assert spout.complete_latency_percentiles == {
        50.0: 1.0,
        90.0: 1.0,
        99.0: 64.0,
        99.9: 1024.0,
        99.99: 1024.0,
    }
    assert spout.latency_histograms["complete"].count == 100
    assert spout.latency_histograms["complete"].sum == sum(delays)
    assert spout.complete_latency_ms == sum(delays) / 100
    bolt = info.components["delay"]
    # Execute latency is real time, not the manual clock's: its counts are exact, and
    # each latency lies in its bucket (the inline recording uses the histogram's unit).
    assert bolt.latency_histograms["execute"].count == 100
    assert bolt.latency_histograms["process"].count == bolt.process_count == 100
    assert _sum_within_buckets(bolt.latency_histograms["execute"])
    assert _sum_within_buckets(spout.latency_histograms["complete"])
    assert bolt.complete_latency_percentiles == dict.fromkeys(PERCENTILES, 0.0)


def _check_merged(info: TopologyInfo, trees: int) -> None:
    spout, bolt = info.components["spout"], info.components["pass"]
    for stats, kind, count in [
        (spout, "complete", trees),
        (bolt, "execute", bolt.executed),
        (bolt, "process", bolt.process_count),
    ]:
        per_task = [histograms[kind] for histograms in stats.task_latency_histograms.values()]
        assert sorted(stats.task_latency_histograms) == sorted(stats.tasks)
        assert all(histogram.count > 0 for histogram in per_task), (kind, per_task)
        assert LatencyHistogram.merged(per_task) == stats.latency_histograms[kind]
        assert stats.latency_histograms[kind].count == count
        assert _sum_within_buckets(stats.latency_histograms[kind]), kind
    percentiles = spout.complete_latency_percentiles
    assert 0.0 < percentiles[50.0] <= percentiles[99.0] <= percentiles[99.9]
    assert bolt.executed == trees


def _merged_topology(workers: int) -> tuple[Config, Any]:
    builder = TopologyBuilder()
    builder.set_spout("spout", DelaySpout([1.0] * 200), 2)
    builder.set_bolt("pass", Pass(), 2).shuffle_grouping("spout")
    builder.set_bolt("sink", Pass(), 2).shuffle_grouping("pass")
    conf = Config()
    conf.set_max_spout_pending(10)
    conf["topology.workers"] = workers
    return conf, builder.create_topology()


def test_histograms_merge_over_tasks_in_threads(cluster: LocalCluster) -> None:
    conf, topology = _merged_topology(1)
    cluster.submit_topology("merged", conf, topology)
    _check_merged(_acked(cluster, "merged", 400), 400)


def test_histograms_merge_over_tasks_in_worker_processes(cluster: LocalCluster) -> None:
    conf, topology = _merged_topology(2)
    cluster.submit_topology("processes", conf, topology)
    info = _acked(cluster, "processes", 400)
    assert info.workers == 2
    _check_merged(info, 400)
