"""WatermarkTracker: the minimum over input streams of their latest timestamp minus the
lag, produced only once every stream delivered and only moving forward; late tuples.
With a WindowManager: windows fire only up to what the slowest stream allows."""

from __future__ import annotations

from typing import Any

from squall.windowing import Duration, TupleWindow, WatermarkTracker, WindowManager, WindowSpec

A = ("a", "default")
B = ("b", "default")
C = ("a", "other")


def hms(hours: int, minutes: int, seconds: int) -> int:
    return ((hours * 60 + minutes) * 60 + seconds) * 1000


def test_no_watermark_before_any_tuple() -> None:
    tracker = WatermarkTracker([A], 0)
    assert tracker.advance() is None
    assert tracker.advance() is None
    assert tracker.last_watermark is None


def test_no_watermark_without_input_streams() -> None:
    tracker = WatermarkTracker([], 0)
    assert tracker.track(A, 5_000)
    assert tracker.advance() is None


def test_watermark_is_latest_timestamp_minus_lag() -> None:
    tracker = WatermarkTracker([A], 5_000)
    for ts in (hms(6, 0, 3), hms(6, 0, 36), hms(6, 0, 18)):
        assert tracker.track(A, ts)
    assert tracker.advance() == hms(6, 0, 31)
    assert tracker.last_watermark == hms(6, 0, 31)
    for ts in (hms(8, 0, 25), hms(8, 0, 39), hms(8, 0, 27)):
        assert tracker.track(A, ts)
    assert tracker.advance() == hms(8, 0, 34)


def test_watermark_without_lag_equals_latest_timestamp() -> None:
    tracker = WatermarkTracker([A], 0)
    tracker.track(A, 7_000)
    assert tracker.advance() == 7_000


def test_watermark_follows_the_slowest_stream() -> None:
    tracker = WatermarkTracker([A, B, C], 1_000)
    tracker.track(A, 50_000)
    tracker.track(B, 20_000)
    tracker.track(C, 30_000)
    assert tracker.advance() == 19_000
    tracker.track(A, 90_000)
    assert tracker.advance() is None  # B is still the slowest
    tracker.track(B, 40_000)
    assert tracker.advance() == 29_000  # now C is
    tracker.track(C, 100_000)
    assert tracker.advance() == 39_000


def test_no_watermark_until_every_stream_delivered() -> None:
    tracker = WatermarkTracker([A, B], 0)
    tracker.track(A, 10_000)
    tracker.track(A, 20_000)
    assert tracker.advance() is None
    assert tracker.last_watermark is None
    tracker.track(B, 3_000)
    assert tracker.advance() == 3_000


def test_an_idle_stream_holds_the_watermark_back() -> None:
    tracker = WatermarkTracker([A, B], 0)
    tracker.track(A, 1_000)
    tracker.track(B, 2_000)
    assert tracker.advance() == 1_000
    tracker.track(A, 5_000)  # only A keeps going
    assert tracker.advance() == 2_000
    for ts in (10_000, 60_000):
        tracker.track(A, ts)
        assert tracker.advance() is None
    assert tracker.last_watermark == 2_000
    tracker.track(B, 45_000)
    assert tracker.advance() == 45_000


def test_watermark_never_moves_backwards() -> None:
    tracker = WatermarkTracker([A], 0)
    tracker.track(A, 10_000)
    assert tracker.advance() == 10_000
    assert not tracker.track(A, 4_000)  # older (late): the latest stays 10 s
    assert tracker.latest[A] == 10_000
    assert tracker.advance() is None
    assert tracker.last_watermark == 10_000
    tracker.track(A, 10_000)
    assert tracker.advance() is None  # not forward either
    tracker.track(A, 10_001)
    assert tracker.advance() == 10_001


def test_late_means_below_the_last_watermark() -> None:
    tracker = WatermarkTracker([A, B], 2_000)
    assert tracker.track(A, 1)  # no watermark yet: nothing is late
    assert tracker.track(A, 20_000)
    assert tracker.track(B, 12_000)
    assert tracker.advance() == 10_000
    assert not tracker.track(A, 9_999)
    assert not tracker.track(B, 0)
    assert tracker.track(B, 10_000)  # exactly the watermark: on time
    assert tracker.track(A, 10_001)
    assert tracker.latest == {A: 20_000, B: 12_000}


# --- tracker and manager together, as a windowed bolt task uses them ----------------------


class Task:
    """What an event-time windowed bolt task does with tuples and watermark ticks."""

    def __init__(self, streams: list[Any], length: int, sliding: int, lag: int) -> None:
        spec = WindowSpec(
            Duration(length), Duration(sliding), timestamp_field="ts", lag=Duration(lag)
        )
        self.windows: list[tuple[list[str], int | None, int | None]] = []
        self.expired: list[str] = []
        self.late: list[str] = []
        self.manager = WindowManager(spec, self._activate, self._expire)
        self.tracker = WatermarkTracker(streams, lag)

    def _activate(self, window: TupleWindow) -> None:
        self.windows.append(
            ([t[0] for t in window.get()], window.start_timestamp, window.end_timestamp)
        )

    def _expire(self, tuples: list[Any]) -> None:
        self.expired.extend(t[0] for t in tuples)

    def tuple(self, stream: Any, name: str, ts: int) -> None:
        if self.tracker.track(stream, ts):
            self.manager.add((name, ts), ts)
        else:
            self.late.append(name)

    def tick(self) -> int | None:
        watermark = self.tracker.advance()
        if watermark is not None:
            self.manager.on_watermark(watermark)
        return watermark


def test_storm_worked_example_with_watermarks() -> None:
    task = Task([A], 20_000, 10_000, 5_000)
    for i, ts in enumerate(
        (hms(6, 0, 3), hms(6, 0, 5), hms(6, 0, 7), hms(6, 0, 18), hms(6, 0, 26), hms(6, 0, 36)),
        start=1,
    ):
        task.tuple(A, f"e{i}", ts)
    assert task.tick() == hms(6, 0, 31)
    for i, ts in enumerate((hms(8, 0, 25), hms(8, 0, 26), hms(8, 0, 27), hms(8, 0, 39)), start=7):
        task.tuple(A, f"e{i}", ts)
    assert task.tick() == hms(8, 0, 34)
    assert task.tick() is None
    assert task.windows == [
        (["e1", "e2", "e3"], hms(5, 59, 50), hms(6, 0, 10)),
        (["e1", "e2", "e3", "e4"], hms(6, 0, 0), hms(6, 0, 20)),
        (["e4", "e5"], hms(6, 0, 10), hms(6, 0, 30)),
        (["e5", "e6"], hms(6, 0, 20), hms(6, 0, 40)),
        (["e6"], hms(6, 0, 30), hms(6, 0, 50)),
        (["e7", "e8", "e9"], hms(8, 0, 10), hms(8, 0, 30)),
    ]
    assert task.late == []


def test_windows_fire_only_up_to_the_slowest_stream() -> None:
    task = Task([A, B], 10_000, 10_000, 0)
    for ts in (5_000, 15_000, 25_000, 35_000):
        task.tuple(A, f"a{ts // 1000}", ts)
    assert task.tick() is None  # B has delivered nothing
    assert task.windows == []
    task.tuple(B, "b12", 12_000)
    assert task.tick() == 12_000
    assert task.windows == [(["a5"], 0, 10_000)]
    assert task.tick() is None  # B idle: held back at 12 s
    task.tuple(B, "b28", 28_000)
    assert task.tick() == 28_000
    assert task.windows[1:] == [(["b12", "a15"], 10_000, 20_000)]
    task.tuple(B, "b40", 40_000)
    assert task.tick() == 35_000
    assert task.windows[2:] == [(["a25", "b28"], 20_000, 30_000)]
    assert task.expired == ["a5", "b12", "a15"]


def test_lag_delays_windows_and_admits_out_of_order_tuples() -> None:
    task = Task([A], 10_000, 10_000, 3_000)
    task.tuple(A, "x", 9_000)
    task.tuple(A, "y", 12_000)
    assert task.tick() == 9_000  # the window ending at 10 s is not complete yet
    assert task.windows == []
    task.tuple(A, "out-of-order", 9_500)  # within the lag: still counted
    task.tuple(A, "z", 13_000)
    assert task.tick() == 10_000
    assert task.windows == [(["x", "out-of-order"], 0, 10_000)]
    task.tuple(A, "too-late", 9_999)
    task.tuple(A, "on-time", 10_001)
    assert task.late == ["too-late"]
    task.tuple(A, "w", 23_000)
    assert task.tick() == 20_000
    assert task.windows[1:] == [(["on-time", "y", "z"], 10_000, 20_000)]
    assert task.expired == ["x", "out-of-order"]
