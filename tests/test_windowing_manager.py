"""WindowManager on its own: the eight window configurations in processing time, event
time driven by watermarks (Storm's worked example included), expiry and memory; the
cases of Storm's ``WindowManagerTest`` for count windows on event time and time windows
evicting against the current time, with Storm's expected windows."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from squall.windowing import Count, Duration, TupleWindow, WindowManager, WindowSpec

B = 1_000_000  # a processing-time origin, in ms


class Ev:
    """A stand-in for a tuple: the manager only stores and returns it."""

    __slots__ = ("__weakref__", "name")

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Ev({self.name})"


def names(tuples: list[Any]) -> list[str]:
    return [t.name for t in tuples]


class Recorder:
    """Collects the manager's callbacks."""

    def __init__(self, spec: WindowSpec, start_ms: int | None = None) -> None:
        self.windows: list[TupleWindow] = []
        self.expiries: list[list[str]] = []
        self.manager = WindowManager(spec, self.windows.append, self._expire, start_ms)
        self.events: dict[str, Ev] = {}

    def _expire(self, tuples: list[Any]) -> None:
        self.expiries.append(names(tuples))

    def add(self, name: str, ts: int) -> None:
        event = Ev(name)
        self.events[name] = event
        self.manager.add(event, ts)

    def snapshots(self) -> list[tuple[Any, ...]]:
        return [snapshot(w) for w in self.windows]

    def expired(self) -> list[str]:
        return [name for batch in self.expiries for name in batch]


def snapshot(window: TupleWindow) -> tuple[Any, ...]:
    return (
        names(window.get()),
        names(window.get_new()),
        names(window.get_expired()),
        window.start_timestamp,
        window.end_timestamp,
    )


def processing(length: Any, sliding: Any = None) -> WindowSpec:
    return WindowSpec(length, Count(1) if sliding is None else sliding)


def event_time(length: Any, sliding: Any, lag: int = 0) -> WindowSpec:
    return WindowSpec(length, sliding, timestamp_field="ts", lag=Duration(lag))


# --- processing time: the eight configurations -------------------------------------------


def test_count_length_count_sliding() -> None:
    rec = Recorder(processing(Count(3), Count(2)))
    fired_after = []
    for i, name in enumerate("abcdef"):
        rec.add(name, B + i)
        fired_after.append(len(rec.windows))
    assert fired_after == [0, 1, 1, 2, 2, 3]
    assert rec.snapshots() == [
        (["a", "b"], ["a", "b"], [], None, None),
        (["b", "c", "d"], ["c", "d"], ["a"], None, None),
        (["d", "e", "f"], ["e", "f"], ["b", "c"], None, None),
    ]
    assert rec.expiries == [["a"], ["b", "c"]]
    assert names(rec.manager.held()) == ["d", "e", "f"]


def test_count_length_slides_every_tuple_by_default() -> None:
    rec = Recorder(processing(Count(3)))
    for i, name in enumerate("abcde"):
        rec.add(name, B + i)
        assert len(rec.windows) == i + 1
    assert rec.snapshots() == [
        (["a"], ["a"], [], None, None),
        (["a", "b"], ["b"], [], None, None),
        (["a", "b", "c"], ["c"], [], None, None),
        (["b", "c", "d"], ["d"], ["a"], None, None),
        (["c", "d", "e"], ["e"], ["b"], None, None),
    ]
    assert rec.expiries == [["a"], ["b"]]


def test_count_length_duration_sliding() -> None:
    rec = Recorder(processing(Count(3), Duration(100)))
    for offset, name in ((10, "a"), (20, "b"), (30, "c"), (40, "d")):
        rec.add(name, B + offset)
    assert rec.windows == []
    rec.manager.on_time(B + 100)
    rec.add("e", B + 150)
    assert len(rec.windows) == 1
    rec.manager.on_time(B + 200)
    rec.manager.on_time(B + 300)  # no new tuple: the same last three fire again
    assert rec.snapshots() == [
        (["b", "c", "d"], ["b", "c", "d"], ["a"], None, None),
        (["c", "d", "e"], ["e"], ["b"], None, None),
        (["c", "d", "e"], [], [], None, None),
    ]
    assert rec.expiries == [["a"], ["b"]]


def test_duration_length_duration_sliding() -> None:
    rec = Recorder(processing(Duration(300), Duration(100)))
    rec.add("a", B + 50)
    rec.manager.on_time(B + 100)
    rec.add("b", B + 150)
    rec.manager.on_time(B + 200)
    rec.add("c", B + 250)
    rec.manager.on_time(B + 300)
    rec.add("d", B + 350)
    rec.manager.on_time(B + 400)
    rec.manager.on_time(B + 500)
    rec.manager.on_time(B + 600)
    rec.manager.on_time(B + 700)  # nothing left: no window, d expires
    # a tick at t evaluates its window at t - 1, as Storm's time trigger
    assert rec.snapshots() == [
        (["a"], ["a"], [], B - 201, B + 99),
        (["a", "b"], ["b"], [], B - 101, B + 199),
        (["a", "b", "c"], ["c"], [], B - 1, B + 299),
        (["b", "c", "d"], ["d"], ["a"], B + 99, B + 399),
        (["c", "d"], [], ["b"], B + 199, B + 499),
        (["d"], [], ["c"], B + 299, B + 599),
    ]
    assert rec.expiries == [["a"], ["b"], ["c"], ["d"]]
    assert len(rec.manager) == 0


def test_duration_length_slides_every_tuple_by_default() -> None:
    rec = Recorder(processing(Duration(300)))
    for offset, name in ((0, "a"), (100, "b"), (250, "c"), (300, "d"), (301, "e")):
        rec.add(name, B + offset)
    assert rec.snapshots() == [
        (["a"], ["a"], [], B - 300, B),
        (["a", "b"], ["b"], [], B - 200, B + 100),
        (["a", "b", "c"], ["c"], [], B - 50, B + 250),
        # (B, B + 300]: a, at exactly B, is out
        (["b", "c", "d"], ["d"], ["a"], B, B + 300),
        (["b", "c", "d", "e"], ["e"], [], B + 1, B + 301),
    ]
    assert rec.expiries == [["a"]]


def test_duration_length_count_sliding() -> None:
    rec = Recorder(processing(Duration(300), Count(2)))
    rec.add("a", B)
    rec.add("b", B + 100)
    rec.add("c", B + 350)
    assert len(rec.windows) == 1
    rec.add("d", B + 400)
    assert rec.snapshots() == [
        (["a", "b"], ["a", "b"], [], B - 200, B + 100),
        (["c", "d"], ["c", "d"], ["a", "b"], B + 100, B + 400),
    ]
    assert rec.expiries == [["a", "b"]]


def test_tumbling_count() -> None:
    rec = Recorder(processing(Count(3), Count(3)))
    for i, name in enumerate("abcdefg"):
        rec.add(name, B + i)
    assert rec.snapshots() == [
        (["a", "b", "c"], ["a", "b", "c"], [], None, None),
        (["d", "e", "f"], ["d", "e", "f"], ["a", "b", "c"], None, None),
    ]
    assert rec.expiries == [["a", "b", "c"]]
    assert names(rec.manager.held()) == ["d", "e", "f", "g"]


def test_tumbling_duration() -> None:
    """d arrives in the millisecond of the tick at B + 200, which evaluates B + 199:
    d is the next window's."""
    rec = Recorder(processing(Duration(100), Duration(100)))
    rec.add("a", B + 10)
    rec.add("b", B + 90)
    rec.manager.on_time(B + 100)
    rec.add("c", B + 150)
    rec.add("d", B + 200)
    rec.manager.on_time(B + 200)
    rec.manager.on_time(B + 300)
    rec.manager.on_time(B + 400)
    assert rec.snapshots() == [
        (["a", "b"], ["a", "b"], [], B - 1, B + 99),
        (["c"], ["c"], ["a", "b"], B + 99, B + 199),
        (["d"], ["d"], ["c"], B + 199, B + 299),
    ]
    assert rec.expiries == [["a", "b"], ["c"], ["d"]]
    assert len(rec.manager) == 0


def test_time_window_bounds_are_start_exclusive_end_inclusive() -> None:
    """Ticks at B + 100, 200, 300 evaluate B + 99, 199, 299: x, at B + 99, is in the
    three windows; the tick at B + 400 evaluates (B + 99, B + 399], without it: x is
    exactly one length (300 ms) old, which expires it (Storm's TimeEvictionPolicy)."""
    rec = Recorder(processing(Duration(300), Duration(100)))
    rec.add("x", B + 99)
    for now in (B + 100, B + 200, B + 300):
        rec.manager.on_time(now)
    assert rec.expiries == []
    rec.manager.on_time(B + 400)
    assert [s[0] for s in rec.snapshots()] == [["x"]] * 3
    assert rec.snapshots()[0][3:] == (B - 201, B + 99)
    assert rec.expiries == [["x"]]
    assert len(rec.windows) == 3


def test_windows_adjust_to_ticks_that_come_late_or_early() -> None:
    """Storm's drift adjustment: after a tick at ``p``, the next window holds
    ``p + sliding - length < ts <= now`` whenever the tick comes, so a tuple is in
    length / sliding windows, neither skipped by a late tick nor repeated by an early one."""
    rec = Recorder(processing(Duration(200), Duration(100)))
    rec.add("a", B + 50)
    rec.manager.on_time(B + 100)  # (B - 100, B + 100]
    rec.add("b", B + 120)
    rec.manager.on_time(B + 260)  # late by 60: (B, B + 260]
    rec.add("c", B + 270)
    rec.manager.on_time(B + 330)  # early by 30: (B + 160, B + 330]
    rec.manager.on_time(B + 430)  # (B + 230, B + 430]
    assert [s[0] for s in rec.snapshots()] == [["a"], ["a", "b"], ["c"], ["c"]]
    assert rec.expiries == [["a", "b"]]


def test_on_time_does_nothing_for_count_sliding() -> None:
    rec = Recorder(processing(Count(2), Count(2)))
    rec.add("a", B)
    rec.manager.on_time(B + 10_000)
    assert rec.windows == []
    assert rec.expiries == []


def test_a_tuple_is_in_a_window_only_once_even_with_equal_timestamps() -> None:
    rec = Recorder(processing(Duration(100), Duration(50)))
    for name in "abc":
        rec.add(name, B + 10)
    rec.manager.on_time(B + 50)
    rec.manager.on_time(B + 100)
    assert rec.snapshots() == [
        (["a", "b", "c"], ["a", "b", "c"], [], B - 51, B + 49),
        (["a", "b", "c"], [], [], B - 1, B + 99),
    ]


# --- event time --------------------------------------------------------------------------


def hms(hours: int, minutes: int, seconds: int) -> int:
    """A time of day in ms."""
    return ((hours * 60 + minutes) * 60 + seconds) * 1000


def test_storm_worked_example() -> None:
    """Storm's windowing docs: length 20 s, sliding 10 s, lag 5 s."""
    rec = Recorder(event_time(Duration.seconds(20), Duration.seconds(10), lag=5000))
    first = [
        ("e1", hms(6, 0, 3)),
        ("e2", hms(6, 0, 5)),
        ("e3", hms(6, 0, 7)),
        ("e4", hms(6, 0, 18)),
        ("e5", hms(6, 0, 26)),
        ("e6", hms(6, 0, 36)),
    ]
    for name, ts in first:
        rec.add(name, ts)
    assert rec.windows == []  # event time fires on watermarks only
    rec.manager.on_watermark(hms(6, 0, 36) - 5000)
    assert rec.snapshots() == [
        (["e1", "e2", "e3"], ["e1", "e2", "e3"], [], hms(5, 59, 50), hms(6, 0, 10)),
        (["e1", "e2", "e3", "e4"], ["e4"], [], hms(6, 0, 0), hms(6, 0, 20)),
        (["e4", "e5"], ["e5"], ["e1", "e2", "e3"], hms(6, 0, 10), hms(6, 0, 30)),
    ]
    assert rec.expiries == [["e1", "e2", "e3"]]

    second = [
        ("e7", hms(8, 0, 25)),
        ("e8", hms(8, 0, 26)),
        ("e9", hms(8, 0, 27)),
        ("e10", hms(8, 0, 39)),
    ]
    for name, ts in second:
        rec.add(name, ts)
    rec.manager.on_watermark(hms(8, 0, 39) - 5000)
    assert rec.snapshots()[3:] == [
        (["e5", "e6"], ["e6"], ["e4"], hms(6, 0, 20), hms(6, 0, 40)),
        (["e6"], [], ["e5"], hms(6, 0, 30), hms(6, 0, 50)),
        (["e7", "e8", "e9"], ["e7", "e8", "e9"], [], hms(8, 0, 10), hms(8, 0, 30)),
    ]
    assert len(rec.windows) == 6
    # every tuple of 6:00 left the windows; e10 waits for a later watermark
    assert rec.expired() == ["e1", "e2", "e3", "e4", "e5", "e6"]
    assert names(rec.manager.held()) == ["e7", "e8", "e9", "e10"]


def test_event_time_tuple_exactly_at_window_end_belongs_to_that_window() -> None:
    rec = Recorder(event_time(Duration(10_000), Duration(10_000)))
    rec.add("at-10s", 10_000)
    rec.add("at-20s", 20_000)
    rec.add("after-20s", 20_001)
    rec.manager.on_watermark(9_999)
    assert rec.windows == []
    rec.manager.on_watermark(10_000)  # the window ending at the watermark fires
    rec.manager.on_watermark(30_000)
    assert rec.snapshots() == [
        (["at-10s"], ["at-10s"], [], 0, 10_000),
        (["at-20s"], ["at-20s"], ["at-10s"], 10_000, 20_000),
        (["after-20s"], ["after-20s"], ["at-20s"], 20_000, 30_000),
    ]


def test_event_time_first_window_end_is_earliest_timestamp_rounded_up() -> None:
    rec = Recorder(event_time(Duration(15_000), Duration(5_000)))
    rec.add("b", 13_000)
    rec.add("a", 12_345)  # out of order: still the earliest
    rec.manager.on_watermark(25_000)
    assert rec.snapshots() == [
        (["a", "b"], ["a", "b"], [], 0, 15_000),
        (["a", "b"], [], [], 5_000, 20_000),
        (["a", "b"], [], [], 10_000, 25_000),
    ]
    rec.manager.on_watermark(31_000)
    assert rec.windows[3:] == []  # (15 s, 30 s] is empty
    assert rec.expiries == [["a", "b"]]


def test_event_time_spans_without_tuples_produce_no_windows() -> None:
    rec = Recorder(event_time(Duration(10_000), Duration(10_000)))
    rec.add("early", 1_000)
    rec.add("late", 95_000)
    rec.manager.on_watermark(100_000)
    assert rec.snapshots() == [
        (["early"], ["early"], [], 0, 10_000),
        # as in Storm, "early" left at the (empty) window ending at 20 s: that empty
        # evaluation took it, so no window reports it as expired
        (["late"], ["late"], [], 90_000, 100_000),
    ]
    assert rec.expiries == [["early"]]


def test_event_time_windows_are_sorted_by_timestamp() -> None:
    rec = Recorder(event_time(Duration(10_000), Duration(10_000)))
    for name, ts in (("c", 9_000), ("a", 1_000), ("d", 9_000), ("b", 5_000)):
        rec.add(name, ts)
    rec.manager.on_watermark(10_000)
    assert rec.snapshots() == [(["a", "b", "c", "d"], ["a", "b", "c", "d"], [], 0, 10_000)]


def test_event_time_watermark_going_backwards_fires_nothing_again() -> None:
    rec = Recorder(event_time(Duration(10_000), Duration(10_000)))
    rec.add("a", 5_000)
    rec.add("b", 15_000)
    rec.manager.on_watermark(12_000)
    rec.manager.on_watermark(11_000)
    rec.manager.on_watermark(12_000)
    assert len(rec.windows) == 1
    rec.manager.on_watermark(20_000)
    assert [s[0] for s in rec.snapshots()] == [["a"], ["b"]]


def test_event_time_on_time_and_adds_fire_nothing() -> None:
    rec = Recorder(event_time(Count(2), Count(2)))
    for i in range(5):
        rec.add(f"t{i}", 1_000 * i)
    rec.manager.on_time(10**12)
    assert rec.windows == []
    assert rec.expiries == []
    assert len(rec.manager) == 5


def test_event_time_count_length_count_sliding() -> None:
    """Every 2nd tuple by timestamp at or before the watermark ends a window of the last
    3 tuples."""
    rec = Recorder(event_time(Count(3), Count(2)))
    for name, ts in (("a", 1_000), ("c", 3_000), ("b", 2_000), ("d", 4_000), ("e", 5_000)):
        rec.add(name, ts)
    rec.manager.on_watermark(4_500)
    assert rec.snapshots() == [
        (["a", "b"], ["a", "b"], [], None, None),
        (["b", "c", "d"], ["c", "d"], ["a"], None, None),
    ]
    rec.add("f", 6_000)
    rec.manager.on_watermark(6_000)
    assert rec.snapshots()[2:] == [(["d", "e", "f"], ["e", "f"], ["b", "c"], None, None)]
    assert rec.expiries == [["a"], ["b", "c"]]


def test_event_time_duration_length_count_sliding() -> None:
    rec = Recorder(event_time(Duration(10_000), Count(2)))
    for name, ts in (("a", 1_000), ("b", 4_000), ("c", 12_000), ("d", 14_000)):
        rec.add(name, ts)
    rec.manager.on_watermark(13_000)
    rec.manager.on_watermark(14_000)
    assert rec.snapshots() == [
        (["a", "b"], ["a", "b"], [], -6_000, 4_000),
        # (4 s, 14 s]: b, at exactly 4 s, is out
        (["c", "d"], ["c", "d"], ["a", "b"], 4_000, 14_000),
    ]


def test_event_time_count_length_duration_sliding() -> None:
    rec = Recorder(event_time(Count(2), Duration(10_000)))
    for name, ts in (("a", 1_000), ("b", 2_000), ("c", 3_000), ("d", 12_000)):
        rec.add(name, ts)
    rec.manager.on_watermark(20_000)
    assert rec.snapshots() == [
        (["b", "c"], ["b", "c"], ["a"], None, None),
        (["c", "d"], ["d"], ["b"], None, None),
    ]


def test_event_time_tumbling_count() -> None:
    rec = Recorder(event_time(Count(2), Count(2)))
    for name, ts in (("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)):
        rec.add(name, ts)
    rec.manager.on_watermark(5)
    assert rec.snapshots() == [
        (["a", "b"], ["a", "b"], [], None, None),
        (["c", "d"], ["c", "d"], ["a", "b"], None, None),
    ]


# --- memory ------------------------------------------------------------------------------


def test_sliding_time_window_memory_stays_flat_over_a_long_stream() -> None:
    total = 300_000
    fired = [0]
    sizes: list[int] = []
    expired = [0]

    def activate(window: TupleWindow) -> None:
        fired[0] += 1
        sizes.append(len(window))

    def expire(tuples: list[Any]) -> None:
        expired[0] += len(tuples)

    manager = WindowManager(processing(Duration(100), Duration(50)), activate, expire)
    peak = 0
    for i in range(1, total + 1):
        manager.add(i, B + i)
        held = len(manager)
        if held > peak:
            peak = held
        if i % 50 == 0:
            manager.on_time(B + i)  # evaluates B + i - 1: tuple i is the next window's
    assert fired[0] == total // 50
    # every full window (after the first two) holds exactly its 100 ms of tuples
    assert sizes[:2] == [49, 99]
    assert set(sizes[2:]) == {100}
    assert peak <= 200
    assert len(manager) == 101
    assert expired[0] == total - 101


def test_event_time_window_memory_stays_flat_over_a_long_stream() -> None:
    total = 300_000
    sizes: list[int] = []
    expired = [0]

    def expire(tuples: list[Any]) -> None:
        expired[0] += len(tuples)

    manager = WindowManager(
        event_time(Duration(100), Duration(50), lag=20),
        lambda w: sizes.append(len(w)),
        expire,
    )
    peak = 0
    for i in range(1, total + 1):
        manager.add(i, i)
        peak = max(peak, len(manager))
        if i % 50 == 0:
            manager.on_watermark(i - 20)
    assert sizes[0] == 50
    assert set(sizes[1:]) == {100}
    assert len(sizes) == (total - 20) // 50
    # the window, plus what arrives while the watermark (lag 20, every 50) catches up
    assert peak <= 200
    assert expired[0] + len(manager) == total


def test_expired_tuples_are_released() -> None:
    manager = WindowManager(processing(Duration(100), Duration(100)), lambda w: None, list)
    events = [Ev(str(i)) for i in range(10)]
    refs = [weakref.ref(e) for e in events]
    for i, event in enumerate(events):
        manager.add(event, B + 10 + i)
    del events, event
    manager.on_time(B + 100)
    gc.collect()
    assert all(r() is not None for r in refs)  # still in the current window
    manager.on_time(B + 200)
    manager.on_time(B + 300)
    gc.collect()
    assert [r() for r in refs] == [None] * 10
    assert len(manager) == 0


@pytest.mark.parametrize(
    ("length", "sliding", "bound"),
    [
        (Count(10), Count(10), 19),
        (Count(10), Count(1), 10),
        (Count(10), Count(3), 12),
        (Duration(50), Count(1), 50),
        (Duration(50), Count(5), 54),
    ],
)
def test_count_triggered_windows_hold_only_what_they_need(
    length: Any, sliding: Any, bound: int
) -> None:
    manager = WindowManager(processing(length, sliding), lambda w: None, lambda t: None)
    peak = 0
    for i in range(20_000):
        manager.add(i, B + i)
        peak = max(peak, len(manager))
    assert peak <= bound


def test_a_tuple_arriving_in_the_millisecond_of_a_tick_goes_to_the_next_window() -> None:
    """The tick's window has fired: a tuple added at its timestamp afterwards (same
    millisecond) is in the next window, not lost between the two."""
    rec = Recorder(processing(Duration(100), Duration(100)))
    rec.manager.on_time(B + 100)
    rec.add("a", B + 100)
    rec.manager.on_time(B + 200)
    assert [s[0] for s in rec.snapshots()] == [["a"]]


def seq(first: int, last: int) -> list[str]:
    """Storm's ``seq``: the names ``first`` to ``last``, inclusive."""
    return [str(number) for number in range(first, last + 1)]


def test_event_time_count_windows_count_each_tuple_once_across_watermarks() -> None:
    """c, at the first watermark's timestamp, is left over by the first window; d comes
    at that timestamp after the watermark (not late): the two make the next window."""
    rec = Recorder(event_time(Count(2), Count(2)))
    for name in "abc":
        rec.add(name, 10)
    rec.manager.on_watermark(10)
    rec.add("d", 10)
    rec.manager.on_watermark(11)
    assert rec.snapshots() == [
        (["a", "b"], ["a", "b"], [], None, None),
        (["c", "d"], ["c", "d"], ["a", "b"], None, None),
    ]
    assert rec.manager.bookkeeping()["counted"] == 2


def test_event_time_a_tuple_added_behind_the_count_ends_no_window() -> None:
    """Used directly, the manager may be given a tuple older than the last watermark
    (the executor drops those as late): it joins the held tuples in timestamp order but
    is not counted, so the next window still ends at the 2nd tuple after the last one."""
    rec = Recorder(event_time(Count(3), Count(2)))
    rec.add("a", 1)
    rec.add("b", 2)
    rec.manager.on_watermark(2)
    rec.add("old", 1)
    rec.add("c", 3)
    rec.manager.on_watermark(3)
    assert len(rec.windows) == 1
    rec.add("d", 4)
    rec.manager.on_watermark(4)
    assert rec.snapshots() == [
        (["a", "b"], ["a", "b"], [], None, None),
        (["b", "c", "d"], ["c", "d"], ["a", "old"], None, None),
    ]


# --- time windows: evicting against the current time --------------------------------------


@pytest.mark.parametrize("start_ms", [B, None])
def test_sliding_interval_longer_than_the_length(start_ms: int | None) -> None:
    """A 10 s window every 20 s holds the last 10 s before each tick, the first one
    too: tuples older than that expire with the first window instead of being held in
    it (and until the second). Same whether the task's start is known or not."""
    rec = Recorder(processing(Duration(10_000), Duration(20_000)), start_ms)
    for second in (1, 5, 12, 15):
        rec.add(f"{second}s", B + second * 1000)
    rec.manager.on_time(B + 20_000)
    rec.add("22s", B + 22_000)
    rec.add("35s", B + 35_000)
    rec.manager.on_time(B + 40_000)
    rec.manager.on_time(B + 60_000)
    assert rec.snapshots() == [
        (["12s", "15s"], ["12s", "15s"], ["1s", "5s"], B + 9_999, B + 19_999),
        (["35s"], ["35s"], ["12s", "15s", "22s"], B + 29_999, B + 39_999),
    ]
    assert rec.expiries == [["1s", "5s"], ["12s", "15s", "22s"], ["35s"]]
    assert len(rec.manager) == 0


@pytest.mark.parametrize(("start_ms", "last_expired"), [(B, 179), (None, 180)])
def test_tuples_are_evicted_against_the_current_time_before_the_first_window(
    start_ms: int | None, last_expired: int
) -> None:
    """100 ms windows every second, a tuple every 5 ms: the compaction at every 100th
    tuple expires what is 100 ms old or older, so the first window holds its last 100 ms
    only, and memory does not hold a whole sliding interval of tuples.

    The 200th tuple, at B + 1000, expires up to B + 900 against its own arrival, or up
    to B + 899 when the task started at B: the first tick's window, evaluated at
    B + 999, starts after B + 899 (the start's reference B - 1, plus the sliding
    interval, less the length). That window holds up to tuple 199 (at B + 995): tuple
    200 arrived in the tick's millisecond, the next window's."""
    rec = Recorder(processing(Duration(100), Duration(1000)), start_ms)
    for number in range(1, 201):
        rec.add(str(number), B + 5 * number)
        if number == 100:  # at B + 500: up to B + 400 expire
            assert (rec.expiries, len(rec.manager)) == ([seq(1, 80)], 20)
    assert rec.expiries == [seq(1, 80), seq(81, last_expired)]
    assert rec.windows == []
    rec.manager.on_time(B + 1000)
    assert rec.snapshots() == [
        (
            seq(last_expired + 1, 199),
            seq(last_expired + 1, 199),
            seq(1, last_expired),
            B + 899,
            B + 999,
        )
    ]
    assert names(rec.manager.held()) == seq(last_expired + 1, 200)


def test_the_first_window_starts_from_the_start_however_late_its_tick() -> None:
    """With the task's start, a late first tick widens the first window as a late tick
    widens any window: a tumbling window loses no tuple. Without it, the first tick is
    taken as on time."""
    started = Recorder(processing(Duration(100), Duration(100)), start_ms=B)
    unknown = Recorder(processing(Duration(100), Duration(100)))
    for rec in (started, unknown):
        rec.add("a", B + 10)
        rec.manager.on_time(B + 150)  # due at B + 100
    assert started.snapshots() == [(["a"], ["a"], [], B - 1, B + 149)]
    assert (unknown.windows, unknown.expiries) == ([], [["a"]])


def test_a_tuple_arriving_in_the_start_millisecond_is_in_the_first_window() -> None:
    """The start counts as a tick at B, whose reference time is B - 1."""
    rec = Recorder(processing(Duration(100), Duration(100)), start_ms=B)
    rec.add("a", B)
    rec.manager.on_time(B + 100)
    assert rec.snapshots() == [(["a"], ["a"], [], B - 1, B + 99)]


@pytest.mark.parametrize("start_ms", [B, None])
def test_a_tuple_one_length_old_expires_at_the_100th_tuple(start_ms: int | None) -> None:
    """Storm's TimeEvictionPolicy expires a tuple once ``now - ts >= length``: 50
    tuples at B (the task's start, or not) are exactly 1 s old when the 100th tuple
    arrives at B + 1000, and expire then, before any window (1 s every 1.1 s)."""
    rec = Recorder(processing(Duration(1000), Duration(1100)), start_ms)
    for number in range(1, 51):
        rec.add(str(number), B)
    for number in range(51, 101):
        rec.add(str(number), B + 1000)
    assert rec.expiries == [seq(1, 50)]
    assert rec.windows == []
    rec.manager.on_time(B + 1100)
    assert rec.snapshots() == [(seq(51, 100), seq(51, 100), seq(1, 50), B + 99, B + 1099)]


def test_a_tuple_arriving_in_the_millisecond_of_a_tick_is_one_length_old_a_length_later() -> None:
    """A tuple that arrives in a tick's millisecond keeps that timestamp (the tick
    evaluated the millisecond before): a length later it is one length old, and the
    check at the 100th tuple expires it."""
    rec = Recorder(processing(Duration(1000), Duration(5000)), start_ms=B)
    rec.manager.on_time(B + 5000)
    rec.add("a", B + 5000)
    for number in range(2, 101):
        rec.add(str(number), B + 6000)
    assert rec.expiries == [["a"]]
    assert rec.windows == []


def test_an_event_exactly_one_length_before_a_window_is_out_of_it() -> None:
    """Storm's boundary at a window: a tuple one length older than the window's
    reference time (the tick's, less 1 ms) is out of it, one a millisecond younger in
    it."""
    rec = Recorder(processing(Duration(100), Duration(100)))
    rec.add("old", B - 100)
    rec.add("young", B - 99)
    rec.manager.on_time(B + 1)
    assert rec.snapshots() == [(["young"], ["young"], ["old"], B - 100, B)]
    assert rec.expiries == [["old"]]


def test_event_time_sliding_interval_longer_than_the_length() -> None:
    """Event time, 10 s windows every 20 s: each window holds its last 10 s; tuples in
    between (1 s, 5 s, 22 s) are in no window and expire as the windows pass them."""
    rec = Recorder(event_time(Duration(10_000), Duration(20_000)))
    for second in (1, 5, 12, 15, 22, 35, 61):
        rec.add(f"{second}s", second * 1000)
    rec.manager.on_watermark(70_000)
    assert rec.snapshots() == [
        (["12s", "15s"], ["12s", "15s"], ["1s", "5s"], 10_000, 20_000),
        (["35s"], ["35s"], ["12s", "15s", "22s"], 30_000, 40_000),
    ]
    # (50 s, 60 s] is empty: 35 s left then; 61 s waits for the window ending at 80 s
    assert rec.expiries == [["1s", "5s"], ["12s", "15s", "22s"], ["35s"]]
    assert names(rec.manager.held()) == ["61s"]


def test_a_count_length_expires_all_but_its_last_tuples_every_100_tuples() -> None:
    """The last 3 tuples every 10 s: at the 100th tuple, before any window, the 97
    oldest expire (Storm's count eviction at EXPIRE_EVENTS_THRESHOLD); the next window
    reports them, and the one that left with it, as expired."""
    rec = Recorder(processing(Count(3), Duration(10_000)), start_ms=B)
    for number in range(1, 100):
        rec.add(str(number), B + number)
    assert rec.expiries == []
    rec.add("100", B + 100)
    assert (rec.expiries, len(rec.manager), rec.windows) == ([seq(1, 97)], 3, [])
    rec.add("101", B + 101)
    assert rec.expiries == [seq(1, 97)]
    rec.manager.on_time(B + 10_000)
    assert rec.expiries == [seq(1, 97), ["98"]]
    assert rec.snapshots() == [(seq(99, 101), seq(99, 101), seq(1, 98), None, None)]


def test_a_time_length_sliding_by_count_expires_old_tuples_every_100_tuples() -> None:
    """100 ms windows every 150 tuples, a tuple every 5 ms: at the 100th tuple (at
    B + 500) those up to B + 400 expire, before the window; the window at the 150th
    reports them with those that left with it."""
    rec = Recorder(processing(Duration(100), Count(150)), start_ms=B)
    for number in range(1, 100):
        rec.add(str(number), B + 5 * number)
    assert rec.expiries == []
    rec.add("100", B + 500)
    assert (rec.expiries, len(rec.manager), rec.windows) == ([seq(1, 80)], 20, [])
    for number in range(101, 151):
        rec.add(str(number), B + 5 * number)
    assert rec.expiries == [seq(1, 80), seq(81, 130)]
    assert rec.snapshots() == [(seq(131, 150), seq(131, 150), seq(1, 130), B + 650, B + 750)]
