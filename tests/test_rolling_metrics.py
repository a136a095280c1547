"""Rolling windows of a topology's metrics (10 minutes, 3 hours, 1 day, all time)."""

from __future__ import annotations

import time

import pytest

from squall import Config, LocalCluster, TopologyBuilder
from squall.model.fields import Fields
from squall.runtime.metrics import ComponentStats, ErrorInfo, TopologyInfo
from squall.runtime.rolling import BUCKETS, MetricsHistory
from squall.testing import FeederSpout
from tests.helpers import wait_until


def info_at(
    emitted: int,
    executed: int,
    execute_ms_total: float,
    acked: int,
    complete_ms_total: float,
    errors: list[ErrorInfo] | None = None,
) -> TopologyInfo:
    """A topology of one bolt ``count`` (tasks 1 and 2, each half of the figures) and
    one spout ``words``, with these cumulative figures."""
    bolt = ComponentStats(
        "count",
        "bolt",
        [1, 2],
        emitted=emitted,
        transferred=2 * emitted,
        executed=executed,
        acked=executed,
        execute_latency_ms=execute_ms_total / executed if executed else 0.0,
        capacity=0.5,
        streams={"default": {"emitted": emitted, "transferred": 2 * emitted}},
        errors=errors or [],
        errors_total=len(errors or []),
        custom={"held": 7.0},
        task_stats={
            task: {
                "emitted": emitted // 2,
                "transferred": emitted,
                "executed": executed // 2,
                "acked": executed // 2,
                "failed": 0,
            }
            for task in (1, 2)
        },
    )
    spout = ComponentStats(
        "words",
        "spout",
        [3],
        emitted=acked,
        transferred=acked,
        acked=acked,
        complete_latency_ms=complete_ms_total / acked if acked else 0.0,
        complete_count=acked,
    )
    return TopologyInfo("t", "ACTIVE", 0.0, 1, {"count": bolt, "words": spout})


def test_a_window_holds_the_figures_since_its_start() -> None:
    history = MetricsHistory(started=0.0)
    # One snapshot per 10 s of the 10-minute window: at 90 s the bolt had executed 100
    # tuples in 200 ms; at 100 s, 120 in 230 ms.
    for second in range(0, 701, 10):
        executed = 100 if second == 90 else 120 if second == 100 else second * 2
        ms = 200.0 if second == 90 else 230.0 if second == 100 else second * 3.0
        history.record(float(second), info_at(second, executed, ms, second, second * 5.0))
    now = info_at(
        emitted=900, executed=520, execute_ms_total=630.0, acked=800, complete_ms_total=6000.0
    )
    window = history.window(700.0, now, 600)
    bolt, spout = window.components["count"], window.components["words"]
    # The window began at 100 s: the snapshot then is subtracted.
    assert (bolt.emitted, bolt.transferred, bolt.executed, bolt.acked) == (800, 1600, 400, 400)
    assert bolt.execute_latency_ms == pytest.approx((630.0 - 230.0) / 400)
    assert bolt.streams == {"default": {"emitted": 800, "transferred": 1600}}
    assert bolt.task_stats == {
        task: {"emitted": 400, "transferred": 800, "executed": 200, "acked": 200, "failed": 0}
        for task in (1, 2)
    }
    assert (bolt.capacity, bolt.custom) == (0.5, {"held": 7.0})  # as they are now
    assert (spout.acked, spout.complete_count) == (700, 700)
    assert spout.complete_latency_ms == pytest.approx((6000.0 - 500.0) / 700)
    assert history.window(700.0, now, None) is now  # all time


def test_a_topology_younger_than_a_window_has_all_its_figures_in_it() -> None:
    history = MetricsHistory(started=1000.0)
    history.record(1010.0, info_at(10, 10, 10.0, 10, 10.0))
    now = info_at(50, 40, 80.0, 30, 90.0)
    for window in (600, 10_800, 86_400):
        figures = history.window(1500.0, now, window).components["count"]
        assert (figures.emitted, figures.executed) == (50, 40)
        assert figures.execute_latency_ms == pytest.approx(2.0)


def test_a_window_keeps_only_the_errors_reported_within_it() -> None:
    history = MetricsHistory(started=0.0)
    wall = time.time()
    old = ErrorInfo(wall - 700, "count", 1, "ValueError: old")
    new = ErrorInfo(wall - 60, "count", 2, "KeyError: new")
    history.record(0.0, info_at(0, 0, 0.0, 0, 0.0))
    history.record(200.0, info_at(1, 1, 1.0, 1, 1.0, errors=[old]))
    window = history.window(900.0, info_at(2, 2, 2.0, 2, 2.0, errors=[old, new]), 600)
    bolt = window.components["count"]
    assert bolt.errors == [new]
    assert bolt.errors_total == 1  # two in all, one before the window began


def test_a_history_keeps_a_bounded_number_of_snapshots() -> None:
    history = MetricsHistory(started=0.0)
    for second in range(0, 200_000, 1):
        history.record(float(second), info_at(second, second, 0.0, second, 0.0))
    for window in history.windows:
        assert len(history._rings[window]) <= BUCKETS + 2
    figures = history.window(199_999.0, info_at(199_999, 199_999, 0.0, 199_999, 0.0), 86_400)
    # The day began at 113,599 s; the snapshot kept for it is at most a step older.
    assert 86_400 <= figures.components["count"].emitted <= 86_400 + 86_400 // BUCKETS


def test_an_unknown_window_is_refused_by_name() -> None:
    history = MetricsHistory(started=0.0)
    with pytest.raises(ValueError, match=r"window 60 s is not kept \(windows: \[600, 10800"):
        history.window(10.0, info_at(0, 0, 0.0, 0, 0.0), 60)


def test_a_local_clusters_windows_answer_while_the_topology_runs() -> None:
    spout = FeederSpout(Fields("word"))
    builder = TopologyBuilder()
    builder.set_spout("words", spout)
    with LocalCluster() as cluster:
        cluster.submit_topology("words", Config(), builder.create_topology())
        assert cluster.metric_windows == [600, 10_800, 86_400]
        for index in range(5):
            spout.feed([f"w{index}"], msg_id=index)
        wait_until(lambda: cluster.get_topology_info("words").components["words"].acked == 5)
        for window in (600, 10_800, 86_400):
            figures = cluster.get_topology_info("words", window_secs=window)
            assert figures.components["words"].acked == 5  # started within every window
        with pytest.raises(ValueError, match="the windows kept are 600, 10800, 86400 seconds"):
            cluster.get_topology_info("words", window_secs=60)
