"""Windowed bolts end to end on LocalCluster with a manual clock: what depends on exactly
when tuples and ticks come. The window configurations step by step, watermarks over
several streams, bad timestamps, and reliability (anchoring, acking on expiry,
failures).

What holds whenever ticks come (count windows, event-time windows for given timestamps,
late tuples, acks of window tuples) is tested on both engines in
``tests/test_core_windowing.py``, with the components defined here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from squall import (
    Config,
    Count,
    Duration,
    InvalidTopologyError,
    LocalCluster,
    ManualClock,
    TopologyBuilder,
    TupleWindow,
    WindowedBolt,
)
from squall.testing import CapturingBolt, FeederSpout, SharedRecord
from tests.helpers import settle, wait_until

T0 = 1_000_000  # the clock fixture's start
WATERMARK_INTERVAL = Duration.seconds(1)  # event_bolt's default
NAME = "windows"


def vs(tuples: Sequence[Any]) -> list[Any]:
    return [t["v"] for t in tuples]


class WindowLog(WindowedBolt):
    """Records every window as ``(get, get_new, get_expired, start, end)`` (the ``v``
    values) and emits the ``v`` values of the window; raises on a window holding
    ``fail_on``."""

    outputs = ["vs"]

    def __init__(self, fail_on: Any = None) -> None:
        self.record = SharedRecord()
        self.fail_on = fail_on

    def execute(self, window: TupleWindow) -> None:
        values = vs(window.get())
        self.record.append(
            "windows",
            (
                values,
                vs(window.get_new()),
                vs(window.get_expired()),
                window.start_timestamp,
                window.end_timestamp,
            ),
        )
        if self.fail_on is not None and self.fail_on in values:
            raise RuntimeError(f"cannot handle a window with {self.fail_on!r}")
        self.collector.emit([values])

    def windows(self) -> list[Any]:
        return self.record.get("windows")


class Run:
    """A submitted topology around one windowed bolt ``win``, fed by spouts, with its
    default stream captured by ``out``; steps wait until the bolt executed them."""

    def __init__(
        self,
        cluster: LocalCluster,
        clock: ManualClock,
        bolt: WindowedBolt,
        spouts: dict[str, Sequence[str]] | None = None,
        conf: dict[str, Any] | None = None,
        out_fail_first: int = 0,
        extra: Any = None,
    ) -> None:
        self.cluster = cluster
        self.clock = clock
        self.bolt = bolt
        self.spouts = {sid: FeederSpout(list(f)) for sid, f in (spouts or {"src": ["v"]}).items()}
        self.out = CapturingBolt(fail_first=out_fail_first)
        builder = TopologyBuilder()
        for sid, spout in self.spouts.items():
            builder.set_spout(sid, spout)
        declarer = builder.set_bolt("win", bolt)
        for sid in self.spouts:
            declarer.shuffle_grouping(sid)
        builder.set_bolt("out", self.out).shuffle_grouping("win")
        if extra is not None:
            extra(builder)
        cluster.submit_topology(NAME, conf or {}, builder.create_topology())
        settle(cluster, NAME)  # the workers run: the clock may move from here on

    @property
    def spout(self) -> FeederSpout:
        return self.spouts["src"]

    def info(self) -> Any:
        return self.cluster.get_topology_info(NAME).components["win"]

    def executed(self) -> int:
        return self.info().executed

    def feed(self, *values: Any, spout: str = "src") -> None:
        """Feed one tuple (msg id: its last value) and wait until ``win`` executed it."""
        before = self.executed()
        self.spouts[spout].feed(list(values), msg_id=values[-1])
        wait_until(lambda: self.executed() == before + 1)

    def advance(self, ms: int, ticks: int = 1) -> None:
        """Move the clock; wait until ``win`` executed the ``ticks`` tick tuples due."""
        before = self.executed()
        self.clock.advance(ms)
        if ticks:
            wait_until(lambda: self.executed() == before + ticks)
        else:
            settle(self.cluster, NAME)
            assert self.executed() == before

    def drain(self) -> None:
        """Wait until nothing is queued anywhere (acks delivered to the spouts)."""
        assert self.cluster.get_running(NAME).wait_idle(5.0, pending_too=False)

    def windows(self) -> list[Any]:
        return self.bolt.windows()  # type: ignore[attr-defined]

    def acked(self, spout: str = "src") -> list[Any]:
        self.drain()
        return sorted(self.spouts[spout].acked)

    def failed(self, spout: str = "src") -> list[Any]:
        self.drain()
        return sorted(self.spouts[spout].failed)


# --- processing time: the configurations, step by step ----------------------------------
# (the exact contents of count windows, on both engines: tests/test_core_windowing.py)


def test_count_length_duration_sliding(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    run = Run(manual_cluster, clock, WindowLog().with_window(Count(2), Duration(100)))
    run.advance(10, ticks=0)
    for v in "abc":
        run.feed(v)
    assert run.windows() == []
    run.advance(90)  # tick at T0 + 100
    assert run.windows() == [(["b", "c"], ["b", "c"], ["a"], None, None)]
    assert run.acked() == ["a"]
    run.advance(100)
    assert run.windows()[1:] == [(["b", "c"], [], [], None, None)]
    assert run.acked() == ["a"]


def test_duration_length_duration_sliding(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    run = Run(manual_cluster, clock, WindowLog().with_window(Duration(200), Duration(100)))
    run.advance(10, ticks=0)
    run.feed("a")  # at T0 + 10
    run.advance(90)  # a tick at t evaluates t - 1, as Storm's time trigger
    assert run.windows() == [(["a"], ["a"], [], T0 - 101, T0 + 99)]
    run.advance(50, ticks=0)
    run.feed("b")  # at T0 + 150
    run.advance(50)
    assert run.windows()[1:] == [(["a", "b"], ["b"], [], T0 - 1, T0 + 199)]
    assert run.acked() == []
    run.advance(100)  # (T0 + 99, T0 + 299]: a leaves its last window
    assert run.windows()[2:] == [(["b"], [], ["a"], T0 + 99, T0 + 299)]
    assert run.acked() == ["a"]
    run.advance(100)  # (T0 + 200, T0 + 400]: empty, no window; b leaves
    assert len(run.windows()) == 3
    assert run.acked() == ["a", "b"]
    assert run.info().custom["window_tuples_held"] == 0


def test_duration_length_slides_every_tuple(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    run = Run(manual_cluster, clock, WindowLog().with_window(Duration(200)))
    run.advance(10, ticks=0)
    run.feed("a")
    run.advance(150, ticks=0)
    run.feed("b")
    run.advance(100, ticks=0)
    run.feed("c")
    assert run.windows() == [
        (["a"], ["a"], [], T0 - 190, T0 + 10),
        (["a", "b"], ["b"], [], T0 - 40, T0 + 160),
        (["b", "c"], ["c"], ["a"], T0 + 60, T0 + 260),
    ]
    assert run.acked() == ["a"]


def test_duration_length_count_sliding(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    run = Run(manual_cluster, clock, WindowLog().with_window(Duration(200), Count(2)))
    run.advance(10, ticks=0)
    run.feed("a")
    run.advance(10, ticks=0)
    run.feed("b")
    run.advance(280, ticks=0)
    run.feed("c")
    run.advance(10, ticks=0)
    assert run.acked() == []
    run.feed("d")
    assert run.windows() == [
        (["a", "b"], ["a", "b"], [], T0 - 180, T0 + 20),
        (["c", "d"], ["c", "d"], ["a", "b"], T0 + 110, T0 + 310),
    ]
    assert run.acked() == ["a", "b"]


def test_tumbling_count(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    """Each window fires at its last tuple; its tuples are acked as the next fires."""
    run = Run(manual_cluster, clock, WindowLog().with_tumbling_window(Count(2)))
    run.feed("a")
    run.feed("b")
    assert run.windows() == [(["a", "b"], ["a", "b"], [], None, None)]
    assert run.acked() == []
    run.feed("c")
    assert run.acked() == []
    run.feed("d")
    assert run.windows()[1:] == [(["c", "d"], ["c", "d"], ["a", "b"], None, None)]
    assert run.acked() == ["a", "b"]
    assert run.out.values() == [[["a", "b"]], [["c", "d"]]]


def test_tumbling_duration(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    run = Run(manual_cluster, clock, WindowLog().with_tumbling_window(Duration(100)))
    run.advance(10, ticks=0)
    run.feed("a")
    run.advance(40, ticks=0)
    run.feed("b")
    run.advance(50)
    assert run.windows() == [(["a", "b"], ["a", "b"], [], T0 - 1, T0 + 99)]
    assert run.acked() == []
    run.advance(20, ticks=0)
    run.feed("c")
    run.advance(80)
    assert run.windows()[1:] == [(["c"], ["c"], ["a", "b"], T0 + 99, T0 + 199)]
    assert run.acked() == ["a", "b"]
    run.advance(100)  # empty: no window, c leaves
    assert len(run.windows()) == 2
    assert run.acked() == ["a", "b", "c"]
    assert run.info().custom["windows_fired"] == 2


def test_a_late_tick_does_not_drop_tuples_from_a_tumbling_duration_window(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    run = Run(manual_cluster, clock, WindowLog().with_tumbling_window(Duration(100)))
    run.advance(10, ticks=0)
    run.feed("a")  # at T0 + 10
    # The tick due at T0 + 100 comes at T0 + 150: the window starts where the task
    # started, (T0 - 1, T0 + 149]
    run.advance(140)
    assert run.windows() == [(["a"], ["a"], [], T0 - 1, T0 + 149)]


def test_a_sliding_interval_longer_than_the_length(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    """100 ms windows every 200 ms: the first window holds its last 100 ms only; a,
    older, is acked as it expires with it, not held in it until the second window."""
    run = Run(manual_cluster, clock, WindowLog().with_window(Duration(100), Duration(200)))
    run.advance(10, ticks=0)
    run.feed("a")  # at T0 + 10
    run.advance(140, ticks=0)
    run.feed("b")  # at T0 + 150
    run.advance(50)  # tick at T0 + 200: (T0 + 99, T0 + 199]
    assert run.windows() == [(["b"], ["b"], ["a"], T0 + 99, T0 + 199)]
    assert run.acked() == ["a"]
    run.advance(200)  # tick at T0 + 400: (T0 + 299, T0 + 399] is empty; b leaves
    assert len(run.windows()) == 1
    assert run.acked() == ["a", "b"]
    assert run.info().custom["window_tuples_held"] == 0


def test_ticks_follow_the_sliding_interval_only_when_it_is_a_duration(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    run = Run(manual_cluster, clock, WindowLog().with_window(Duration(500), Count(2)))
    run.advance(10_000, ticks=0)  # no tick tuples for a count sliding interval
    run.feed("a")
    assert run.executed() == 1


# --- processing time: acking on expiry ---------------------------------------------------


def test_a_tuple_is_acked_exactly_when_it_leaves_its_last_window(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    run = Run(manual_cluster, clock, WindowLog().with_window(Duration(300), Duration(100)))
    run.advance(10, ticks=0)
    run.feed("x")  # at T0 + 10: in the windows ending T0 + 100, + 200, + 300
    now = 10
    for end in (100, 200, 300):
        run.advance(end - now)
        now = end
        assert run.windows()[-1] == (
            ["x"],
            ["x"] if end == 100 else [],
            [],
            T0 + end - 301,
            T0 + end - 1,
        )
        assert run.acked() == []
    run.advance(100)  # (T0 + 99, T0 + 399]
    assert run.acked() == ["x"]
    assert len(run.windows()) == 3


def test_tuples_older_than_the_window_are_acked_every_100_tuples_before_the_next_window(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    """100 ms windows every 10 s: the 100th tuple after the first hundred makes the task
    drop what is older than the window, and the spout's acks come before any window
    fires; the window that fires next reports them as expired."""
    run = Run(manual_cluster, clock, WindowLog().with_window(Duration(100), Duration(10_000)))

    def feed_all(values: list[str]) -> None:
        before = run.executed()
        for v in values:
            run.spout.feed([v], msg_id=v)
        wait_until(lambda: run.executed() == before + len(values))

    run.advance(10, ticks=0)
    early = [f"a{n:03d}" for n in range(100)]
    feed_all(early)  # at T0 + 10
    run.advance(200, ticks=0)
    late = [f"b{n:03d}" for n in range(100)]
    feed_all(late[:99])  # at T0 + 210
    assert run.acked() == []
    run.feed(late[99])  # the 100th since the last check: up to T0 + 110 expires
    assert run.acked() == early
    assert run.windows() == []
    assert run.info().custom["window_tuples_held"] == 100
    run.advance(9_740, ticks=0)
    run.feed("c")  # at T0 + 9950
    run.advance(50)  # tick at T0 + 10 s: (T0 + 9899, T0 + 9999]
    assert run.windows() == [(["c"], ["c"], early + late, T0 + 9_899, T0 + 9_999)]
    assert run.acked() == early + late


def test_emits_are_anchored_to_every_tuple_of_the_window(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    run = Run(manual_cluster, clock, WindowLog().with_tumbling_window(Count(3)), out_fail_first=1)
    for v in "abc":
        run.feed(v)
    wait_until(lambda: len(run.spout.failed) == 3)  # out failed the window's emit
    assert run.failed() == ["a", "b", "c"]
    assert run.acked() == []
    for v in "def":
        run.feed(v)  # a, b, c expire: their trees already failed
    assert run.out.values() == [[["a", "b", "c"]], [["d", "e", "f"]]]
    assert run.acked() == []  # d, e, f are still in the window
    for v in "ghi":
        run.feed(v)
    assert run.acked() == ["d", "e", "f"]
    assert run.failed() == ["a", "b", "c"]


def test_an_exception_in_execute_is_reported_and_fails_the_window(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    run = Run(manual_cluster, clock, WindowLog(fail_on="boom").with_tumbling_window(Count(2)))
    run.feed("a")
    run.feed("boom")
    assert run.failed() == ["a", "boom"]
    info = run.info()
    assert len(info.errors) == 1
    assert "RuntimeError" in info.errors[0].error
    assert "cannot handle a window with 'boom'" in info.errors[0].error
    run.feed("c")
    run.feed("d")  # a and boom expire: failed, so not acked
    assert run.acked() == []
    run.feed("e")
    run.feed("f")
    assert run.acked() == ["c", "d"]
    assert run.failed() == ["a", "boom"]
    assert run.out.values() == [[["c", "d"]], [["e", "f"]]]


# --- submit-time checks ------------------------------------------------------------------


def windowed_topology(bolt: WindowedBolt) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("src", FeederSpout(["v"]))
    builder.set_bolt("slow-window", bolt).shuffle_grouping("src")
    return builder.create_topology()


@pytest.mark.parametrize(
    "bolt",
    [
        WindowLog().with_window(Duration.seconds(20), Duration.seconds(15)),
        WindowLog().with_window(Duration.seconds(31), Count(1)),
        WindowLog().with_tumbling_window(Duration.seconds(16)),
    ],
)
def test_window_span_beyond_the_message_timeout_is_rejected_at_submit(
    cluster: LocalCluster, bolt: WindowedBolt
) -> None:
    topology = windowed_topology(bolt)
    with pytest.raises(InvalidTopologyError) as info:
        cluster.submit_topology(NAME, {}, topology)
    message = str(info.value)
    assert "'slow-window'" in message
    assert "topology.message.timeout.secs" in message
    assert NAME not in cluster.topology_names()


def test_window_span_within_the_message_timeout_is_accepted(cluster: LocalCluster) -> None:
    bolt = WindowLog().with_window(Duration.seconds(20), Duration.seconds(15))
    cluster.submit_topology(
        NAME, {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 40}, windowed_topology(bolt)
    )
    assert cluster.topology_names() == [NAME]


def test_window_span_is_not_checked_with_acking_off(cluster: LocalCluster) -> None:
    bolt = WindowLog().with_window(Duration.seconds(20), Duration.seconds(15))
    cluster.submit_topology(NAME, {Config.TOPOLOGY_ACKER_EXECUTORS: 0}, windowed_topology(bolt))
    assert cluster.topology_names() == [NAME]


# --- event time --------------------------------------------------------------------------


def hms(hours: int, minutes: int, seconds: int) -> int:
    return ((hours * 60 + minutes) * 60 + seconds) * 1000


def event_bolt(
    length: Any,
    sliding: Any,
    lag: int = 0,
    watermark: Duration = WATERMARK_INTERVAL,
    **kwargs: Any,
) -> WindowLog:
    """A :class:`WindowLog` on event time (field ``ts``), watermarks every ``watermark``."""
    bolt = (
        WindowLog(**kwargs)
        .with_window(length, sliding)
        .with_timestamp_field("ts")
        .with_watermark_interval(watermark)
    )
    return bolt.with_lag(Duration(lag)) if lag else bolt


EVENT = {"src": ["ts", "v"]}


def two_stream_run(cluster: LocalCluster, clock: ManualClock) -> Run:
    return Run(
        cluster,
        clock,
        event_bolt(Duration(10_000), Duration(10_000)),
        spouts={"a": ["ts", "v"], "b": ["ts", "v"]},
    )


def test_event_time_watermark_follows_the_slowest_stream(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    run = two_stream_run(manual_cluster, clock)
    for ts in (5_000, 15_000, 25_000, 35_000):
        run.feed(ts, f"a{ts // 1000}", spout="a")
    run.feed(12_000, "b12", spout="b")
    run.advance(1000)  # min(35 s, 12 s)
    assert [w[0] for w in run.windows()] == [["a5"]]
    run.feed(28_000, "b28", spout="b")
    run.advance(1000)  # min(35 s, 28 s)
    assert [w[0] for w in run.windows()] == [["a5"], ["b12", "a15"]]
    run.feed(50_000, "b50", spout="b")
    run.advance(1000)  # min(35 s, 50 s)
    assert [w[0] for w in run.windows()] == [["a5"], ["b12", "a15"], ["a25", "b28"]]
    assert run.acked("a") == ["a15", "a5"]
    assert run.acked("b") == ["b12"]


def test_event_time_an_idle_stream_holds_the_watermark_back(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    run = two_stream_run(manual_cluster, clock)
    for ts in (5_000, 15_000, 25_000):
        run.feed(ts, f"a{ts // 1000}", spout="a")
    run.advance(1000)  # b has delivered nothing: no watermark
    assert run.windows() == []
    run.feed(11_000, "b11", spout="b")
    run.advance(1000)
    assert [w[0] for w in run.windows()] == [["a5"]]
    run.feed(95_000, "a95", spout="a")
    run.advance(1000)  # b idle since 11 s: still held back
    run.advance(1000)
    assert [w[0] for w in run.windows()] == [["a5"]]
    assert run.acked("a") == []
    run.feed(40_000, "b40", spout="b")
    run.advance(1000)  # watermark 40 s
    assert [w[0] for w in run.windows()] == [["a5"], ["b11", "a15"], ["a25"], ["b40"]]
    assert run.acked("a") == ["a15", "a25", "a5"]
    assert run.acked("b") == ["b11"]


def test_missing_timestamp_field_fails_the_tuple_with_a_clear_error(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    run = Run(
        manual_cluster,
        clock,
        event_bolt(Duration(10_000), Duration(10_000)),
        spouts={"events": ["ts", "v"], "other": ["v"]},
    )
    run.feed("x", spout="other")
    assert run.failed("other") == ["x"]
    errors = run.info().errors
    assert len(errors) == 1
    assert "'ts'" in errors[0].error
    assert "'other'" in errors[0].error
    assert "ValueError" in errors[0].error
    run.feed(5_000, "a", spout="events")  # the bolt keeps processing
    assert run.info().custom["window_tuples_held"] == 1
    run.feed("y", spout="other")
    assert run.failed("other") == ["x", "y"]
    assert run.info().errors_total == 2
    assert run.acked("events") == []
    assert run.failed("events") == []


def test_non_integer_timestamps_fail_the_tuple_and_processing_goes_on(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    run = Run(manual_cluster, clock, event_bolt(Duration(10_000), Duration(10_000)), spouts=EVENT)
    run.feed(1.5, "float")
    run.feed("5000", "str")
    run.feed(True, "bool")
    assert run.failed() == ["bool", "float", "str"]
    errors = [e.error for e in run.info().errors]
    assert len(errors) == 3
    for error, kind in zip(errors, ("float", "str", "bool"), strict=True):
        assert "'ts'" in error
        assert f"({kind})" in error
    run.feed(5_000, "a")
    run.feed(15_000, "b")
    run.advance(1000)
    assert run.windows() == [(["a"], ["a"], [], 0, 10_000)]
    assert run.failed() == ["bool", "float", "str"]


def ts_from_when(tup: Any) -> Any:
    return tup["when"]


def test_timestamp_extractor(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    bolt = (
        WindowLog()
        .with_tumbling_window(Duration(10_000))
        .with_timestamp_extractor(ts_from_when)
        .with_watermark_interval(500)
    )
    run = Run(manual_cluster, clock, bolt, spouts={"src": ["when", "v"]})
    run.feed(8_000, "a")
    run.feed(2_000.0, "bad")
    run.feed(12_000, "b")
    assert run.failed() == ["bad"]
    assert "extractor" in run.info().errors[0].error
    run.advance(500)
    assert run.windows() == [(["a"], ["a"], [], 0, 10_000)]


# --- the collector inside execute ----------------------------------------------------------


class Judge(WindowedBolt):
    """Fails window tuples whose value starts with "bad" and "acks" the others (a no-op:
    window tuples are acked when they leave the window); emits unanchored on request."""

    outputs = ["v"]

    def execute(self, window: TupleWindow) -> None:
        for tup in window.get_new():
            if tup["v"].startswith("bad"):
                self.collector.fail(tup)
                self.collector.fail(tup)  # twice: failed once
            else:
                self.collector.ack(tup)
            if tup["v"].startswith("free"):
                self.collector.emit([tup["v"]], anchors=[])


def test_collector_fail_fails_at_once_and_ack_waits_for_expiry(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    run = Run(manual_cluster, clock, Judge().with_tumbling_window(Count(2)), out_fail_first=1)
    run.feed("bad-1")
    run.feed("ok-1")
    assert run.failed() == ["bad-1"]
    assert run.acked() == []  # ack() inside execute does not ack early
    run.feed("free-1")  # its emit is not anchored: out failing it fails nothing
    run.feed("ok-2")  # bad-1 and ok-1 expire: only ok-1 is acked
    assert run.out.values() == [["free-1"]]
    assert run.acked() == ["ok-1"]
    assert run.failed() == ["bad-1"]
    run.feed("ok-3")
    run.feed("ok-4")
    assert run.acked() == ["free-1", "ok-1", "ok-2"]
    assert run.failed() == ["bad-1"]


# --- configuration and parallelism -------------------------------------------------------


def test_the_window_tick_interval_overrides_the_topology_tick_frequency(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    run = Run(
        manual_cluster,
        clock,
        WindowLog().with_tumbling_window(Duration(100)),
        conf={Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 5},
    )
    run.advance(10, ticks=0)
    run.feed("a")
    run.advance(90)
    assert run.windows() == [(["a"], ["a"], [], T0 - 1, T0 + 99)]


def test_each_task_keeps_its_own_windows(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    spout = FeederSpout(["v"])
    bolt = WindowLog().with_tumbling_window(Count(2))
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("win", bolt, 2).all_grouping("src")
    manual_cluster.submit_topology(NAME, {}, builder.create_topology())
    settle(manual_cluster, NAME)
    for v in "ab":
        spout.feed([v], msg_id=v)
    wait_until(lambda: len(bolt.windows()) == 2)
    assert bolt.windows() == [(["a", "b"], ["a", "b"], [], None, None)] * 2
    spout.feed(["c"], msg_id="c")
    spout.feed(["d"], msg_id="d")
    # a and b are acked once both tasks let them go
    wait_until(lambda: len(spout.acked) == 2)
    assert sorted(spout.acked) == ["a", "b"]
    custom = manual_cluster.get_topology_info(NAME).components["win"].custom
    assert custom["windows_fired"] == 4
    assert custom["window_tuples_held"] == 4


@pytest.mark.parametrize(
    ("bolt", "max_pending"),
    [
        (WindowLog().with_tumbling_window(Count(10)), 19),
        (WindowLog().with_window(Count(10), Count(5)), 14),
        (WindowLog().with_window(Count(10), Duration(100)), 9),
        (WindowLog().with_window(Duration(100), Count(10)), 9),
    ],
)
def test_window_count_beyond_max_spout_pending_is_rejected_at_submit(
    cluster: LocalCluster, bolt: WindowedBolt, max_pending: int
) -> None:
    """Storm's rule: a count window that needs more tuples than the spouts may have
    pending would wait forever (the tuples are acked only when they leave it)."""
    topology = windowed_topology(bolt)
    with pytest.raises(InvalidTopologyError, match=r"topology\.max\.spout\.pending"):
        cluster.submit_topology(NAME, {Config.TOPOLOGY_MAX_SPOUT_PENDING: max_pending}, topology)
    assert NAME not in cluster.topology_names()


def test_window_count_within_max_spout_pending_is_accepted(cluster: LocalCluster) -> None:
    topology = windowed_topology(WindowLog().with_tumbling_window(Count(10)))
    cluster.submit_topology(NAME, {Config.TOPOLOGY_MAX_SPOUT_PENDING: 20}, topology)
    assert cluster.topology_names() == [NAME]
