"""Windowed bolts and tick tuples on both engines, with exact assertions.

Each test takes the ``engine`` fixture (see ``tests/conftest.py``): it runs once on
LocalCluster and once on SparkCluster, with the same topology. Time is the real clock
on both (the Spark engine cannot run on a ``ManualClock``; its ticks come at the start of
micro-batches), so the tests assert only what does not depend on when ticks come:

* Count windows: exact contents, new and expired tuples (they do not depend on time).
* Event-time windows: with timestamps ascending (or out of order within the lag), the
  windows a watermark completes hold the same tuples whenever it comes. A
  :class:`PhasedSpout` emits each phase of its tuples only once the test saw the
  windows of the previous phase fire, so the watermark is known when the next phase
  arrives and its late tuples are exact.
* Tick tuples: that they come, to every task of the bolts configured for them only,
  with their source, stream and rate.
* Processing-time windows, on Spark only and loosely: every tuple in one tumbling window.

What needs a ``ManualClock`` (exact timing of processing-time windows and of tick
tuples) is tested on the local engine only, in ``tests/test_local_windowing.py`` and
``tests/test_local_ticks.py``, whose components these tests reuse.

Where the engines differ by design, the expected values are exact per engine
(:func:`acked`): on Spark a tuple a window holds is acked at the end of the micro-batch
it arrived in (the window state is in the task's snapshot, see ``settle_batch`` in
``squall/windowing/executor.py``) and not again when it expires; on the local engine it
is acked when it leaves its last window.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from squall import Bolt, Config, Count, Duration, Fields, TopologyBuilder, WindowedBolt
from squall.model.components import Spout
from squall.model.topology import StormTopology
from squall.testing import CapturingBolt, SharedRecord
from tests.conftest import Engine, Run
from tests.test_local_ticks import TickRecorder
from tests.test_local_windowing import WindowLog, event_bolt, hms


class FieldsRecorder(Bolt):
    """Records ``(stream, fields, values)`` of every tuple; fails the first ``fail_first``."""

    def __init__(self, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.record = SharedRecord()

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.seen = 0

    def execute(self, tup: Any) -> None:
        self.record.append("tuples", (tup.source_stream, tup.fields.to_list(), list(tup.values)))
        self.seen += 1
        if self.seen <= self.fail_first:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)

    def tuples(self) -> list[Any]:
        return self.record.get("tuples")


class PhasedSpout(Spout):
    """Emits its tuples once each, phase after phase; the msg id of a tuple is its last
    value. Phase ``n + 1`` starts once the test called :meth:`open_next` ``n`` times
    (the gate is a ``SharedRecord``, so it works in the Spark source's process too).
    Records the msg ids acked and failed; does not replay."""

    def __init__(self, fields: Sequence[str], *phases: Sequence[Sequence[Any]]) -> None:
        self.fields = list(fields)
        self.phases = [[list(row) for row in phase] for phase in phases]
        self.record = SharedRecord()

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.fields)

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.rows = [(number, row) for number, phase in enumerate(self.phases) for row in phase]
        self.position = 0

    def next_tuple(self) -> None:
        if self.position >= len(self.rows):
            return
        phase, values = self.rows[self.position]
        if phase > len(self.record.get("gates")):
            return
        self.position += 1
        self.collector.emit(values, msg_id=values[-1])

    def open_next(self) -> None:
        """Let the next phase be emitted."""
        self.record.append("gates", True)

    def ack(self, msg_id: Any) -> None:
        self.record.append("acked", msg_id)

    def fail(self, msg_id: Any) -> None:
        self.record.append("failed", msg_id)

    def msg_ids(self, phases: int | None = None) -> list[Any]:
        """The msg ids of the first ``phases`` phases (default: all)."""
        return [row[-1] for phase in self.phases[:phases] for row in phase]

    def acked(self) -> list[Any]:
        """Msg ids acked so far, sorted (duplicates kept)."""
        return sorted(self.record.get("acked"))

    def failed(self) -> list[Any]:
        """Msg ids failed so far, sorted (duplicates kept)."""
        return sorted(self.record.get("failed"))


def acked(
    engine: Engine, released: Sequence[Any], emitted: Sequence[Any], failed: Sequence[Any] = ()
) -> list[Any]:
    """The msg ids a spout sees acked, sorted: on the local engine those ``released``
    (tuples that left every window, late tuples); on Spark every one ``emitted`` but
    those ``failed``, window tuples being acked with the micro-batch they arrived in."""
    if not engine.is_spark:
        return sorted(released)
    return sorted(msg_id for msg_id in emitted if msg_id not in failed)


def windowed(
    bolt: WindowedBolt,
    spout: PhasedSpout,
    extra: Callable[[TopologyBuilder], None] | None = None,
) -> tuple[StormTopology, CapturingBolt]:
    """``src`` (the spout) -> ``win`` (the bolt, one task) -> ``out`` (captures the
    default stream of ``win``); ``extra`` adds components."""
    out = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("win", bolt).shuffle_grouping("src")
    builder.set_bolt("out", out).shuffle_grouping("win")
    if extra is not None:
        extra(builder)
    return builder.create_topology(), out


def settle(run: Run, engine: Engine, component: str) -> None:
    """Once the input is exhausted, in a topology where ``component`` gets ticks: wait
    until everything emitted so far is processed and its acks reached the spouts, and a
    little longer (room for a wrong extra window or ack to show). Spark: two more
    micro-batches (the first may be the one in progress; the second starts after its
    outcome is written, and delivers it to the spouts); local: nothing queued, then two
    more ticks executed by ``component``."""
    if run.spark:
        target = run.info().extra["batches"] + 2
        run.wait_until(lambda: run.info().extra["batches"] >= target, engine.timeout)
        return
    drain(run)
    target = run.info().components[component].executed + 2
    run.wait_until(lambda: run.info().components[component].executed >= target, engine.timeout)


def drain(run: Run) -> None:
    """A topology without ticks: wait until everything emitted is processed (Spark:
    every batch the spouts have; local: nothing queued. Tuples held in windows keep
    their trees pending on the local engine, so not ``run.wait_idle``)."""
    if run.spark:
        run.wait_idle()
    else:
        assert run.cluster.get_running(run.name).wait_idle(10.0, pending_too=False)


# --- count windows -----------------------------------------------------------------------


def test_count_windows_hold_exact_tuples_new_and_expired(engine: Engine) -> None:
    """Three count-window bolts on one stream: tumbling (two tasks, each with its own
    windows over every tuple), sliding by count, and sliding on every tuple."""
    bolts = {
        "tumbling": WindowLog().with_tumbling_window(Count(2)),
        "sliding": WindowLog().with_window(Count(3), Count(2)),
        "every": WindowLog().with_window(Count(2)),
    }
    spout = PhasedSpout(["v"], [[v] for v in "abcdef"])
    out = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("tumbling", bolts["tumbling"], 2).all_grouping("src")
    builder.set_bolt("sliding", bolts["sliding"]).shuffle_grouping("src")
    builder.set_bolt("every", bolts["every"]).shuffle_grouping("src")
    subscriber = builder.set_bolt("out", out)
    for bolt_id in bolts:
        subscriber.shuffle_grouping(bolt_id)
    fired = {"tumbling": 6, "sliding": 3, "every": 6}
    # a, b, c left every window of the three bolts (local: d stays in "sliding")
    expected_acks = acked(engine, ["a", "b", "c"], spout.msg_ids())
    with engine.running(builder.create_topology()) as run:
        run.wait_until(
            lambda: all(len(bolts[b].windows()) == fired[b] for b in bolts), engine.timeout
        )
        run.wait_until(lambda: spout.acked() == expected_acks, engine.timeout)
        drain(run)
        components = run.info().components
    assert sorted(bolts["tumbling"].windows()) == [
        (["a", "b"], ["a", "b"], [], None, None),
        (["a", "b"], ["a", "b"], [], None, None),
        (["c", "d"], ["c", "d"], ["a", "b"], None, None),
        (["c", "d"], ["c", "d"], ["a", "b"], None, None),
        (["e", "f"], ["e", "f"], ["c", "d"], None, None),
        (["e", "f"], ["e", "f"], ["c", "d"], None, None),
    ]
    assert bolts["sliding"].windows() == [
        (["a", "b"], ["a", "b"], [], None, None),
        (["b", "c", "d"], ["c", "d"], ["a"], None, None),
        (["d", "e", "f"], ["e", "f"], ["b", "c"], None, None),
    ]
    assert bolts["every"].windows() == [
        (["a"], ["a"], [], None, None),
        (["a", "b"], ["b"], [], None, None),
        (["b", "c"], ["c"], ["a"], None, None),
        (["c", "d"], ["d"], ["b"], None, None),
        (["d", "e"], ["e"], ["c"], None, None),
        (["e", "f"], ["f"], ["d"], None, None),
    ]
    for bolt_id, bolt in bolts.items():  # each window's emit, with its tuples
        emitted = [r.values for r in out.received if r.source_component == bolt_id]
        assert sorted(emitted) == sorted([window[0]] for window in bolt.windows())
    assert spout.acked() == expected_acks
    assert spout.failed() == []
    assert {b: components[b].custom for b in bolts} == {
        "tumbling": {"late_tuples": 0, "windows_fired": 6, "window_tuples_held": 4},
        "sliding": {"late_tuples": 0, "windows_fired": 3, "window_tuples_held": 3},
        "every": {"late_tuples": 0, "windows_fired": 6, "window_tuples_held": 2},
    }


# --- event time --------------------------------------------------------------------------

#: Watermark interval of the event-time tests: on Spark a tick is due at most once per
#: micro-batch anyway, so any interval shorter than a micro-batch gives one per batch.
WATERMARK = Duration(50)

#: Storm's worked example (see docs/windowing.md): phase 1 is e1-e6, phase 2 e7-e10;
#: phase 3 adds a late e11 (below the second watermark, 08:00:34) and e12.
STORM_PHASES = (
    [[hms(6, 0, s), f"e{i}"] for i, s in enumerate((3, 5, 7, 18, 26, 36), start=1)],
    [[hms(8, 0, s), f"e{i}"] for i, s in enumerate((25, 26, 27, 39), start=7)],
    [[hms(8, 0, 30), "e11"], [hms(8, 0, 40), "e12"]],
)


def test_storm_worked_example_with_a_late_tuple_stream(engine: Engine) -> None:
    """Storm's example (20 s windows sliding every 10 s, a 5 s lag) in three phases: the
    windows of each watermark, e11 on the late-tuple stream, and no window for a
    watermark (08:00:35) that completes none."""
    bolt = event_bolt(
        Duration.seconds(20), Duration.seconds(10), lag=5_000, watermark=WATERMARK
    ).with_late_tuple_stream("late")
    late_sink = FieldsRecorder(fail_first=1)
    spout = PhasedSpout(["ts", "v"], *STORM_PHASES)
    topology, out = windowed(
        bolt,
        spout,
        lambda b: b.set_bolt("late-sink", late_sink).shuffle_grouping("win", "late"),
    )
    with engine.running(topology) as run:
        # Watermark 1 is 06:00:31 (06:00:36 - 5 s): the window ending 06:00:30 fires
        # only once e6 arrived, so when it has fired the watermark is known.
        run.wait_until(lambda: len(bolt.windows()) == 3, engine.timeout)
        # e1-e3 left every window (local); e1-e6 were acked with their batch (Spark)
        phase_1 = acked(engine, ["e1", "e2", "e3"], spout.msg_ids(1))
        run.wait_until(lambda: spout.acked() == phase_1, engine.timeout)
        spout.open_next()
        run.wait_until(lambda: len(bolt.windows()) == 6, engine.timeout)  # watermark 08:00:34
        spout.open_next()
        run.wait_until(lambda: len(late_sink.tuples()) == 1, engine.timeout)
        settle(run, engine, "win")  # e12 arrived: watermark 08:00:35
        custom = run.info().components["win"].custom
    assert bolt.windows() == [
        (["e1", "e2", "e3"], ["e1", "e2", "e3"], [], hms(5, 59, 50), hms(6, 0, 10)),
        (["e1", "e2", "e3", "e4"], ["e4"], [], hms(6, 0, 0), hms(6, 0, 20)),
        (["e4", "e5"], ["e5"], ["e1", "e2", "e3"], hms(6, 0, 10), hms(6, 0, 30)),
        (["e5", "e6"], ["e6"], ["e4"], hms(6, 0, 20), hms(6, 0, 40)),
        (["e6"], [], ["e5"], hms(6, 0, 30), hms(6, 0, 50)),
        (["e7", "e8", "e9"], ["e7", "e8", "e9"], [], hms(8, 0, 10), hms(8, 0, 30)),
    ]
    assert out.values() == [[window[0]] for window in bolt.windows()]
    assert late_sink.tuples() == [("late", ["late_tuple"], [[hms(8, 0, 30), "e11"]])]
    # The late-stream emit is anchored to e11: the sink failing it fails e11.
    assert spout.failed() == ["e11"]
    released = ["e1", "e2", "e3", "e4", "e5", "e6"]  # e7-e10 and e12 are held (local)
    assert spout.acked() == acked(engine, released, spout.msg_ids(), failed=["e11"])
    assert custom == {"late_tuples": 1, "windows_fired": 6, "window_tuples_held": 5}


def test_event_time_count_windows_count_tuples_sharing_a_timestamp(engine: Engine) -> None:
    """Storm's cases with several events per timestamp (WindowManagerTest's
    testCountBasedTumblingWithSameEventTs and testCountBasedSlidingWithSameEventTs):
    count windows on event time count tuples, so e5-e7, all at 12 ms, fill consecutive
    windows. The timestamps never go down, so no tuple is late and the windows are the
    same whenever watermarks come; e11 (100 ms) pushes the watermark past e10."""
    timestamps = [10, 10, 11, 12, 12, 12, 12, 13, 14, 15, 100]
    rows = [[ts, f"e{number}"] for number, ts in enumerate(timestamps, 1)]
    spout = PhasedSpout(["ts", "v"], rows)
    bolts = {
        "tumbling": event_bolt(Count(2), Count(2), watermark=WATERMARK),
        "sliding": event_bolt(Count(5), Count(2), watermark=WATERMARK),
    }
    out = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    subscriber = builder.set_bolt("out", out)
    for bolt_id, bolt in bolts.items():
        builder.set_bolt(bolt_id, bolt).global_grouping("src")
        subscriber.global_grouping(bolt_id)

    def events(first: int, last: int) -> list[str]:
        return [f"e{number}" for number in range(first, last + 1)]

    # Local: e1-e5 left the windows of both bolts (the sliding one holds e6-e10).
    expected_acks = acked(engine, events(1, 5), spout.msg_ids())
    with engine.running(builder.create_topology()) as run:
        run.wait_until(lambda: all(len(b.windows()) == 5 for b in bolts.values()), engine.timeout)
        run.wait_until(lambda: spout.acked() == expected_acks, engine.timeout)
        settle(run, engine, "tumbling")
        components = run.info().components
    assert bolts["tumbling"].windows() == [
        (events(1, 2), events(1, 2), [], None, None),
        (events(3, 4), events(3, 4), events(1, 2), None, None),
        (events(5, 6), events(5, 6), events(3, 4), None, None),
        (events(7, 8), events(7, 8), events(5, 6), None, None),
        (events(9, 10), events(9, 10), events(7, 8), None, None),
    ]
    assert bolts["sliding"].windows() == [
        (events(1, 2), events(1, 2), [], None, None),
        (events(1, 4), events(3, 4), [], None, None),
        (events(2, 6), events(5, 6), events(1, 1), None, None),
        (events(4, 8), events(7, 8), events(2, 3), None, None),
        (events(6, 10), events(9, 10), events(4, 5), None, None),
    ]
    for bolt_id, bolt in bolts.items():
        emitted = [r.values for r in out.received if r.source_component == bolt_id]
        assert emitted == [[window[0]] for window in bolt.windows()]
    assert spout.acked() == expected_acks
    assert spout.failed() == []
    assert {b: components[b].custom for b in bolts} == {
        "tumbling": {"late_tuples": 0, "windows_fired": 5, "window_tuples_held": 3},
        "sliding": {"late_tuples": 0, "windows_fired": 5, "window_tuples_held": 6},
    }


def test_event_time_windows_include_their_end_and_skip_empty_spans(engine: Engine) -> None:
    """10 s windows sliding every 5 s: ``b`` at 10 s is in the window ending at 10 s
    (``start < ts <= end``), and the spans without tuples produce no window."""
    bolt = event_bolt(Duration(10_000), Duration(5_000), watermark=WATERMARK)
    spout = PhasedSpout(["ts", "v"], [[3_000, "a"], [10_000, "b"], [501_000, "c"], [520_000, "d"]])
    topology, out = windowed(bolt, spout)
    with engine.running(topology) as run:
        run.wait_until(lambda: len(bolt.windows()) == 6, engine.timeout)  # watermark 520 s
        expected_acks = acked(engine, ["a", "b", "c"], spout.msg_ids())
        run.wait_until(lambda: spout.acked() == expected_acks, engine.timeout)
        settle(run, engine, "win")
        custom = run.info().components["win"].custom
    assert bolt.windows() == [
        (["a"], ["a"], [], -5_000, 5_000),
        (["a", "b"], ["b"], [], 0, 10_000),
        (["b"], [], ["a"], 5_000, 15_000),
        # (10 s, 20 s] is empty: evaluation jumps to c's window; b left unreported
        (["c"], ["c"], [], 495_000, 505_000),
        (["c"], [], [], 500_000, 510_000),
        (["d"], ["d"], [], 510_000, 520_000),
    ]
    assert out.values() == [[window[0]] for window in bolt.windows()]
    assert spout.acked() == expected_acks
    assert spout.failed() == []
    assert custom == {"late_tuples": 0, "windows_fired": 6, "window_tuples_held": 1}


def test_event_time_lag_admits_out_of_order_tuples(engine: Engine) -> None:
    """With a 3 s lag, ``ooo`` (9.5 s, after ``y`` at 12 s) is not late: the watermark
    is at most 9 s when it arrives. The window ending at 10 s waits for a watermark of
    10 s (``z`` at 13 s)."""
    bolt = event_bolt(Duration(10_000), Duration(10_000), lag=3_000, watermark=WATERMARK)
    rows = [[9_000, "x"], [12_000, "y"], [9_500, "ooo"], [13_000, "z"], [25_000, "w"]]
    spout = PhasedSpout(["ts", "v"], rows)
    topology, _ = windowed(bolt, spout)
    with engine.running(topology) as run:
        run.wait_until(lambda: len(bolt.windows()) == 2, engine.timeout)  # watermark 22 s
        expected_acks = acked(engine, ["ooo", "x"], spout.msg_ids())
        run.wait_until(lambda: spout.acked() == expected_acks, engine.timeout)
        settle(run, engine, "win")
        custom = run.info().components["win"].custom
    assert bolt.windows() == [
        (["x", "ooo"], ["x", "ooo"], [], 0, 10_000),
        (["y", "z"], ["y", "z"], ["x", "ooo"], 10_000, 20_000),
    ]
    assert spout.acked() == expected_acks
    assert spout.failed() == []
    assert custom == {"late_tuples": 0, "windows_fired": 2, "window_tuples_held": 3}


def test_late_tuples_are_dropped_acked_and_counted(engine: Engine) -> None:
    """Phase 2 arrives once the watermark is 15 s: 14.999 s is late (acked, counted, in
    no window); 15 s, exactly the watermark, is not."""
    bolt = event_bolt(Duration(10_000), Duration(10_000), watermark=WATERMARK)
    spout = PhasedSpout(
        ["ts", "v"],
        [[5_000, "a"], [15_000, "b"]],
        [[14_999, "late"], [15_000, "on-time"], [16_000, "c"], [25_000, "d"]],
    )
    topology, out = windowed(bolt, spout)
    with engine.running(topology) as run:
        # The window ending at 10 s fires once b arrived: the watermark is then 15 s.
        run.wait_until(lambda: len(bolt.windows()) == 1, engine.timeout)
        spout.open_next()
        run.wait_until(lambda: len(bolt.windows()) == 2, engine.timeout)  # watermark 25 s
        expected_acks = acked(engine, ["a", "late"], spout.msg_ids())
        run.wait_until(lambda: spout.acked() == expected_acks, engine.timeout)
        settle(run, engine, "win")
        custom = run.info().components["win"].custom
    assert bolt.windows() == [
        (["a"], ["a"], [], 0, 10_000),
        (["b", "on-time", "c"], ["b", "on-time", "c"], ["a"], 10_000, 20_000),
    ]
    assert out.values() == [[["a"]], [["b", "on-time", "c"]]]
    assert spout.acked() == expected_acks
    assert spout.failed() == []
    assert custom == {"late_tuples": 1, "windows_fired": 2, "window_tuples_held": 4}


def test_an_exception_in_execute_fails_the_tuples_of_the_window(engine: Engine) -> None:
    """The window holding ``boom`` raises: the error is reported and the next window
    fires as usual. Local: the window's tuples a and boom are failed (not acked when they
    expire). Spark: they were acked with the micro-batch they arrived in (the window
    state holding them was snapshotted then), so the spout does not replay them
    (documented in docs/spark.md and docs/windowing.md)."""
    bolt = event_bolt(Duration(10_000), Duration(10_000), watermark=WATERMARK, fail_on="boom")
    rows = [[1_000, "a"], [2_000, "boom"], [12_000, "c"], [25_000, "d"]]
    spout = PhasedSpout(["ts", "v"], rows)
    topology, out = windowed(bolt, spout)
    with engine.running(topology) as run:
        run.wait_until(lambda: len(bolt.windows()) == 2, engine.timeout)  # watermark 25 s
        settle(run, engine, "win")
        errors = run.errors()
    assert [window[0] for window in bolt.windows()] == [["a", "boom"], ["c"]]
    assert out.values() == [[["c"]]]
    assert list(errors) == ["win"]
    assert len(errors["win"]) == 1
    assert "cannot handle a window with 'boom'" in errors["win"][0].error
    if engine.is_spark:
        assert spout.failed() == []
        assert spout.acked() == sorted(spout.msg_ids())
    else:
        assert spout.failed() == ["a", "boom"]
        assert spout.acked() == []  # c and d are held


# --- processing time ---------------------------------------------------------------------


class PacedSpout(PhasedSpout):
    """A one-phase :class:`PhasedSpout` that emits one tuple every ``pace_secs`` at most
    (on Spark: about one per micro-batch)."""

    def __init__(
        self, fields: Sequence[str], rows: Sequence[Sequence[Any]], pace_secs: float
    ) -> None:
        super().__init__(fields, rows)
        self.pace_secs = pace_secs

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().open(conf, context, collector)
        self.last_emit = 0.0

    def next_tuple(self) -> None:
        if time.monotonic() - self.last_emit >= self.pace_secs:
            before = self.position
            super().next_tuple()
            if self.position != before:
                self.last_emit = time.monotonic()


@pytest.mark.parametrize("engine", ["spark"], indirect=True)
def test_processing_time_tumbling_windows_hold_every_tuple_once(engine: Engine) -> None:
    """Spark only, loosely (its ticks come at micro-batch starts, in real time): every
    tuple is in exactly one tumbling window, in order. The local engine's exact timing
    is tested with a manual clock in test_local_windowing.py."""
    bolt = WindowLog().with_tumbling_window(Duration(100))
    values = [f"t{i}" for i in range(8)]
    spout = PacedSpout(["v"], [[v] for v in values], pace_secs=0.05)
    topology, _ = windowed(bolt, spout)
    with engine.running(topology) as run:
        run.wait_until(lambda: spout.acked() == sorted(values), engine.timeout)
        ticks = run.info().components["win"].executed + 2  # after every tuple's batch
        run.wait_until(lambda: run.info().components["win"].executed >= ticks, engine.timeout)
    windows = bolt.windows()
    assert [v for window in windows for v in window[0]] == values
    assert all(window[1] == window[0] for window in windows)  # tumbling: all new
    # Each window starts where the previous one ended, however late its tick came.
    bounds = [(start, end) for _, _, _, start, end in windows]
    assert all(later[0] == earlier[1] for earlier, later in itertools.pairwise(bounds))
    assert spout.failed() == []


# --- tick tuples -------------------------------------------------------------------------


def test_tick_tuples_reach_every_task_of_the_bolts_configured_for_them(engine: Engine) -> None:
    """A bolt with a tick frequency (0.1 s, its own configuration) gets tick tuples on
    each of its two tasks, from ``__system`` on ``__tick`` with the rate; a bolt
    without one gets none, and data tuples flow alongside."""
    ticked = TickRecorder({Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 0.1})
    plain = TickRecorder()
    spout = PhasedSpout(["v"], [["x"], ["y"]])
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("ticked", ticked, 2).all_grouping("src")
    builder.set_bolt("plain", plain).shuffle_grouping("src")
    with engine.running(builder.create_topology()) as run:
        tasks = run.info().components["ticked"].tasks
        run.wait_until(
            lambda: all([t[0] for t in ticked.ticks()].count(task) >= 3 for task in tasks),
            engine.timeout,
        )
        run.wait_until(lambda: spout.acked() == ["x", "y"], engine.timeout)
        plain_executed = run.info().components["plain"].executed
    assert len(tasks) == 2
    assert {(t[1:5], tuple(t[5]), t[6]) for t in ticked.ticks()} == {
        ((True, "__system", "__tick", -1), (0.1,), Fields("rate_secs"))
    }
    data = [t for t in ticked.record.get("tuples") if not t[1]]
    assert sorted((t[0], t[5]) for t in data) == sorted((task, [v]) for task in tasks for v in "xy")
    assert plain.ticks() == []
    assert sorted(t[5] for t in plain.record.get("tuples")) == [["x"], ["y"]]
    assert plain_executed == 2
    assert spout.failed() == []
