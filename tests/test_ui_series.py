"""The samples the UI's charts draw (squall.ui.series) and their endpoints
(``/api/v1/topology/NAME/series``, ``.../component/ID/series``), without a browser;
the topology graph's capacity colours and backpressure marks."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from squall import BasicBolt, LocalCluster, Spout, TopologyBuilder
from squall.model.topology import StormTopology
from squall.runtime.engine_figures import LocalFigures
from squall.runtime.latency import LatencyHistogram
from squall.runtime.metrics import ComponentStats, TopologyInfo
from squall.testing import FeederSpout
from squall.ui import UIServer
from squall.ui import series as series_module
from squall.ui.graph import capacity_colour, topology_svg
from squall.ui.series import SeriesRecorder
from tests.helpers import wait_until

FIELDS = ["emitted", "acked", "latency", "capacity", "queued", "backpressure"]


@dataclass
class FakeCluster:
    """Just what a SeriesRecorder reads of a cluster, with figures set by the test."""

    infos: dict[str, TopologyInfo] = field(default_factory=dict)
    conf: dict[str, Any] = field(default_factory=dict)
    metric_windows: list[int] = field(default_factory=lambda: [600])

    def topology_names(self) -> list[str]:
        return sorted(self.infos)

    def get_topology_info(self, name: str, window_secs: int | None = None) -> TopologyInfo:
        return self.infos[name]

    def in_window(self, name: str, info: TopologyInfo, window_secs: int | None) -> TopologyInfo:
        return info

    def get_topology_conf(self, name: str) -> dict[str, Any]:
        return self.conf


def info(
    emitted: int,
    acked: int,
    completed: int,
    complete_ms: float,
    capacity: float,
    uptime: float = 10.0,
    queued: dict[int, int] | None = None,
) -> TopologyInfo:
    spout = ComponentStats(
        "spout",
        "spout",
        [1],
        emitted=emitted,
        acked=acked,
        complete_count=completed,
        complete_latency_ms=complete_ms,
    )
    bolt = ComponentStats(
        "bolt",
        "bolt",
        [2, 3],
        executed=acked,
        acked=acked,
        execute_latency_ms=0.5,
        capacity=capacity,
    )
    acker = ComponentStats("__acker", "bolt", [4], executed=99)
    return TopologyInfo(
        "t",
        "ACTIVE",
        uptime,
        1,
        {"spout": spout, "bolt": bolt, "__acker": acker},
        local=LocalFigures(task_queued=queued or {}),
    )


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The recorder's monotonic and wall clocks, moved by the test."""
    now = [1000.0]
    monkeypatch.setattr(series_module.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(series_module.time, "time", lambda: now[0] + 1_700_000_000.0)
    return now


def test_rates_and_interval_means_come_from_the_counts_between_samples(clock: list[float]) -> None:
    cluster = FakeCluster({"t": info(100, 50, 50, 10.0, 0.25)})
    recorder = SeriesRecorder(cluster, sample_secs=2.0)  # type: ignore[arg-type]
    recorder.sample()
    clock[0] += 2.0
    # 200 more emitted, 100 more trees done in 2 s; the new trees took 40 ms each.
    cluster.infos["t"] = info(300, 150, 150, (10.0 * 50 + 40.0 * 100) / 150, 0.75)
    recorder.sample()
    samples = recorder.samples("t", None)
    assert [s.time for s in samples] == [1_700_001_000.0, 1_700_001_002.0]
    first, second = samples
    assert first.components["spout"].emitted is None  # no interval yet
    assert first.components["bolt"].capacity == 0.25
    spout, bolt = second.components["spout"], second.components["bolt"]
    assert (spout.emitted, spout.acked, spout.latency) == (100.0, 50.0, 40.0)
    assert (bolt.acked, bolt.capacity, bolt.latency) == (50.0, 0.75, 0.5)
    assert spout.capacity is None
    assert set(second.components) == {"spout", "bolt"}  # no system component
    topology = second.topology
    assert (topology.emitted, topology.acked, topology.latency, topology.capacity) == (
        100.0,
        50.0,
        40.0,
        0.75,
    )
    assert second.latency_kind == "mean"


def histogram(latencies_ms: list[float]) -> LatencyHistogram:
    recorded = LatencyHistogram()
    for ms in latencies_ms:
        recorded.record(ms)
    return recorded


def test_the_latency_is_the_p99_where_the_engine_reports_percentiles(clock: list[float]) -> None:
    figures = info(100, 50, 50, 10.0, 0.25)
    spout, bolt = figures.components["spout"], figures.components["bolt"]
    spout.with_histograms({"complete": histogram([9.0] * 98 + [31.5, 31.5])})
    bolt.with_histograms({"execute": histogram([0.2] * 98 + [1.25, 1.25])})
    recorder = SeriesRecorder(FakeCluster({"t": figures}))  # type: ignore[arg-type]
    recorder.sample()
    (sample,) = recorder.samples("t", None)
    assert sample.latency_kind == "p99"
    assert sample.components["spout"].latency == pytest.approx(31.5, rel=0.01)
    assert sample.components["bolt"].latency == pytest.approx(1.25, rel=0.01)
    assert sample.topology.latency == sample.components["spout"].latency


def test_what_is_kept_is_bounded_and_ended_topologies_are_forgotten(clock: list[float]) -> None:
    cluster = FakeCluster({"t": info(0, 0, 0, 0.0, 0.0)})
    recorder = SeriesRecorder(
        cluster,  # type: ignore[arg-type]
        sample_secs=1.0,
        fine_count=5,
        coarse_secs=10.0,
        coarse_count=3,
    )
    for step in range(100):
        cluster.infos["t"] = info(step * 10, step * 5, step * 5, 1.0, 0.1, uptime=10.0 + step)
        recorder.sample()
        clock[0] += 1.0
    kept = recorder.samples("t", None)
    times = [s.time - 1_700_000_000.0 for s in kept]
    # 3 coarse samples (every 10 s) before the 5 fine ones (every second).
    assert times == [1070.0, 1080.0, 1090.0, 1095.0, 1096.0, 1097.0, 1098.0, 1099.0]
    assert kept[0].components["spout"].emitted == 10.0  # a coarse rate: over its 10 s
    assert [s.time for s in recorder.samples("t", 3)] == [
        1_700_001_097.0,
        1_700_001_098.0,
        1_700_001_099.0,
    ]
    del cluster.infos["t"]
    recorder.sample()
    assert recorder.samples("t", None) == []
    assert list(recorder.names()) == []


def test_a_full_task_queue_is_backpressure(clock: list[float]) -> None:
    cluster = FakeCluster(
        {"t": info(0, 0, 0, 0.0, 0.9, queued={1: 0, 2: 8, 3: 3})},
        conf={"topology.executor.receive.buffer.size": 8},
    )
    recorder = SeriesRecorder(cluster)  # type: ignore[arg-type]
    recorder.sample()
    (sample,) = recorder.samples("t", None)
    assert (sample.components["bolt"].queued, sample.components["bolt"].backpressure) == (11, True)
    assert (sample.components["spout"].queued, sample.components["spout"].backpressure) == (
        0,
        False,
    )
    assert (sample.topology.queued, sample.topology.backpressure) == (11, True)


def test_bad_sampling_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="intervals must be positive, not 0"):
        SeriesRecorder(FakeCluster(), sample_secs=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 2 samples per ring, not 1"):
        SeriesRecorder(FakeCluster(), fine_count=1)  # type: ignore[arg-type]


def test_bolts_are_coloured_by_capacity_and_backpressure_is_marked() -> None:
    builder = TopologyBuilder()
    builder.set_spout("in", FeederSpout(["n"]))
    builder.set_bolt("idle", Slow()).shuffle_grouping("in")
    builder.set_bolt("half", Slow()).shuffle_grouping("in")
    builder.set_bolt("busy", Slow()).shuffle_grouping("in")
    topology: StormTopology = builder.create_topology()
    figures = TopologyInfo(
        "t",
        "ACTIVE",
        1.0,
        1,
        {
            cid: ComponentStats(cid, kind, [task], capacity=capacity)
            for cid, kind, task, capacity in [
                ("in", "spout", 1, 0.0),
                ("idle", "bolt", 2, 0.0),
                ("half", "bolt", 3, 0.5),
                ("busy", "bolt", 4, 1.7),
            ]
        },
    )
    svg = topology_svg("t", topology, figures, {"busy": (12, True), "half": (3, False)})
    filled = r'data-component="(\w+)" data-capacity="[^"]*" data-fill="([^"]*)"'
    nodes = dict(re.findall(filled, svg))
    assert nodes == {
        "in": "#dbeafe",
        "idle": "hsl(120, 70%, 82%)",
        "half": "hsl(60, 70%, 82%)",
        "busy": "hsl(0, 70%, 82%)",
    }
    assert capacity_colour(0.25) == "hsl(90, 70%, 82%)"
    assert re.findall(r'data-component="(\w+)"[^>]*data-backpressure="true"', svg) == ["busy"]
    assert 'stroke="#dc2626" stroke-width="4" stroke-dasharray="8 4"' in svg
    assert "queued 12 · BACKPRESSURE" in svg
    assert "queued 3<" in svg


class Slow(BasicBolt):
    """Takes 20 ms a tuple."""

    def execute(self, tup: Any, collector: Any) -> None:
        time.sleep(0.02)


def test_the_series_endpoints_answer_the_samples_of_a_running_topology() -> None:
    builder = TopologyBuilder()
    feeder = FeederSpout(["n"])
    builder.set_spout("feed", feeder)
    builder.set_bolt("slow", Slow()).shuffle_grouping("feed")
    # Two thread workers: the spout fills the bolt's queue from a thread of its own.
    conf = {
        "topology.executor.receive.buffer.size": 4,
        "topology.workers": 2,
        "topology.worker.kind": "thread",
    }
    with (
        LocalCluster() as cluster,
        UIServer(cluster, port=0, sample_secs=0.2) as ui,
        httpx.Client(base_url=ui.url, timeout=10.0) as client,
    ):
        cluster.submit_topology("slow", conf, builder.create_topology())
        for n in range(200):
            feeder.feed([n])

        def answer() -> dict[str, Any]:
            got = client.get("api/v1/topology/slow/series", params={"window": "600"})
            assert got.status_code == 200, got.text
            document: dict[str, Any] = got.json()
            return document

        wait_until(lambda: len(answer()["times"]) >= 3, timeout=30.0)
        wait_until(lambda: any(answer()["components"]["slow"]["backpressure"]), timeout=30.0)
        document = answer()
        count = len(document["times"])
        assert (document["id"], document["window"], document["sampleSecs"]) == ("slow", "600", 0.2)
        assert document["latencyKind"] == "p99"
        assert list(document["components"]) == ["feed", "slow"]
        assert document["times"] == sorted(document["times"])
        for values in [document["topology"], *document["components"].values()]:
            assert [len(values[name]) for name in FIELDS] == [count] * len(FIELDS)
        slow = document["components"]["slow"]
        assert slow["type"] == "bolt"
        assert slow["emitted"][0] is None
        assert max(q for q in slow["queued"] if q is not None) >= 4
        assert max(c for c in slow["capacity"] if c is not None) > 0.0
        assert document["components"]["feed"]["capacity"] == [None] * count

        visual = client.get("api/v1/topology/slow/visualization").json()
        wait_until(
            lambda: client.get("api/v1/topology/slow/visualization").json()["slow"]["backpressure"],
            timeout=30.0,
        )
        assert visual["slow"]["queued"] >= 0
        wait_until(
            lambda: 'data-backpressure="true"' in client.get("topology/slow/graph.svg").text,
            timeout=30.0,
        )

        one = client.get("api/v1/topology/slow/component/slow/series")
        assert one.status_code == 200
        component = one.json()
        assert (component["id"], component["topologyId"], component["type"]) == (
            "slow",
            "slow",
            "bolt",
        )
        assert component["window"] == ":all-time"
        assert len(component["times"]) >= count
        assert component["times"][: count - 1] == document["times"][: count - 1]
        assert component["capacity"][: count - 1] == slow["capacity"][: count - 1]

        missing = client.get("api/v1/topology/slow/component/nope/series")
        assert missing.status_code == 404
        assert missing.json()["errorMessage"] == "topology 'slow' has no component 'nope'"
        assert client.get("api/v1/topology/nope/series").status_code == 404
        bad = client.get("api/v1/topology/slow/series", params={"window": "5"})
        assert bad.status_code == 422
        assert "query.window" in bad.json()["errorMessage"]


def test_the_local_engine_reports_each_tasks_queue() -> None:
    builder = TopologyBuilder()
    feeder = FeederSpout(["n"])
    builder.set_spout("feed", feeder)
    builder.set_bolt("slow", Slow(), 1).set_num_tasks(2).shuffle_grouping("feed")
    with LocalCluster() as cluster:
        cluster.submit_topology("q", {}, builder.create_topology())
        for n in range(100):
            feeder.feed([n])
        tasks = cluster.get_topology_info("q").components["slow"].tasks

        def queued() -> dict[int, int]:
            local = cluster.get_topology_info("q").local
            assert local is not None
            return local.task_queued

        assert set(tasks) <= set(queued())
        wait_until(lambda: all(queued()[task] > 5 for task in tasks), timeout=30.0)


class Endless(Spout):
    """Emits numbers for ever."""

    outputs = ["n"]

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        self.n += 1
        self.collector.emit([self.n])


def test_worker_processes_report_each_tasks_queue() -> None:
    builder = TopologyBuilder()
    builder.set_spout("endless", Endless())
    builder.set_bolt("slow", Slow()).shuffle_grouping("endless")
    conf = {"topology.workers": 2, "topology.worker.kind": "process"}
    with LocalCluster() as cluster:
        cluster.submit_topology("p", conf, builder.create_topology())
        (task,) = cluster.get_topology_info("p").components["slow"].tasks

        def queued() -> dict[int, int]:
            local = cluster.get_topology_info("p").local
            assert local is not None and local.worker_kind == "process"
            return local.task_queued

        wait_until(lambda: queued().get(task, 0) > 5, timeout=60.0, interval=0.1)
