"""Storm's ``WindowManagerTest``, end to end: each test method whose case a topology can
express, through a windowed bolt on LocalCluster with a manual clock.

tests/test_windowing_manager_storm.py ports every method against the window manager;
here the same cases run as a topology does them, and the names are Storm's again:

* Storm's events are the ``v`` values of tuples fed to one windowed bolt (``win``,
  :class:`~tests.test_local_windowing.WindowLog`, which records each window's tuples,
  new and expired ones, and bounds); an event's expiry (Storm's ``onExpiry``) is its
  ack at the spout, which the tests assert after every step.
* Processing time: an event's timestamp is the clock's time when the bolt gets it;
  the task starts at ``T0`` and its ticks come every sliding interval from there.
* Event time: an event's timestamp is its ``ts`` field, and Storm's watermark events
  are the bolt's watermarks: every second of the clock, the highest timestamp received
  less the lag. Storm's cases send watermarks that are their highest timestamp less
  5 ms, so the tests use a lag of 5 ms, and their watermarks are Storm's; where a
  watermark is not (the docstring says which), it makes the same windows.
"""

from __future__ import annotations

from typing import Any

from squall import Config, Count, Duration, LocalCluster, ManualClock, WindowedBolt
from tests.helpers import wait_until
from tests.test_local_windowing import T0, Run, WindowLog

#: Storm's ``WindowManager.EXPIRE_EVENTS_THRESHOLD``.
EXPIRE_EVENTS_THRESHOLD = 100
#: The watermark interval of the event-time bolts (their default).
WATERMARK_INTERVAL_MS = 1000


def seq(start: int, stop: int | None = None) -> list[int]:
    """Storm's ``seq``: ``start`` to ``stop``, inclusive (``start`` alone without it)."""
    return list(range(start, (start if stop is None else stop) + 1))


class Events(Run):
    """A :class:`Run` whose spout ``src`` emits ``[v, ts]``; each tuple's message id is
    its place in the order fed, so that two events may share a value."""

    def __init__(
        self,
        cluster: LocalCluster,
        clock: ManualClock,
        bolt: WindowedBolt,
        conf: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(cluster, clock, bolt, spouts={"src": ["v", "ts"]}, conf=conf)
        self.values_by_id: dict[int, int] = {}

    def add(self, value: int, ts: int = 0) -> None:
        """Feed event ``value`` (``ts``: its timestamp, for event time) and wait until
        the windowed bolt executed it."""
        before = self.executed()
        msg_id = len(self.values_by_id) + 1
        self.values_by_id[msg_id] = value
        self.spout.feed([value, ts], msg_id=msg_id)
        wait_until(lambda: self.executed() == before + 1)

    def add_all(self, values: list[int], timestamps: list[int] | None = None) -> None:
        for value, ts in zip(values, timestamps or [0] * len(values), strict=True):
            self.add(value, ts)

    def expired(self) -> list[int]:
        """The values of the events acked so far (those that left every window)."""
        return sorted(self.values_by_id[msg_id] for msg_id in self.acked())

    def watermark(self) -> None:
        """One watermark interval: the bolt computes a watermark (one tick tuple)."""
        self.advance(WATERMARK_INTERVAL_MS)

    def events(self) -> list[list[int]]:
        """Every window's events so far (Storm's ``allOnActivationEvents``)."""
        return [window[0] for window in self.windows()]


def event_bolt(length: Count | Duration, sliding: Count | Duration, lag: int = 5) -> WindowLog:
    bolt = WindowLog().with_window(length, sliding).with_timestamp_field("ts")
    return bolt.with_lag(Duration(lag))


def test_count_based_window(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    """testCountBasedWindow: the last 5 events every 2 events."""
    run = Events(manual_cluster, clock, WindowLog().with_window(Count(5), Count(2)))
    run.add_all(seq(1, 2))
    assert run.windows() == [(seq(1, 2), seq(1, 2), [], None, None)]
    assert run.expired() == []
    run.add_all(seq(3, 4))
    assert run.windows()[1:] == [(seq(1, 4), seq(3, 4), [], None, None)]
    assert run.expired() == []
    run.add_all(seq(5, 6))
    assert run.windows()[2:] == [(seq(2, 6), seq(5, 6), seq(1), None, None)]
    assert run.expired() == seq(1)
    run.add(7)
    # nothing expires until threshold is hit
    assert run.expired() == seq(1)
    assert len(run.windows()) == 3
    run.add(8)
    assert run.windows()[3:] == [(seq(4, 8), seq(7, 8), seq(2, 3), None, None)]
    assert run.expired() == seq(1, 3)


def test_expire_threshold(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    """testExpireThreshold: a count length of 5 sliding every hour; at the 100th event
    all but the last 5 are acked, before any window (the message timeout exceeds the
    hour, as squall requires)."""
    bolt = WindowLog().with_window(Count(5), Duration.hours(1))
    conf = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 3_700}
    run = Events(manual_cluster, clock, bolt, conf)
    run.add_all(seq(1, 5))
    assert run.expired() == []
    run.add_all(seq(6, EXPIRE_EVENTS_THRESHOLD - 1))
    assert run.expired() == []
    run.add(EXPIRE_EVENTS_THRESHOLD)
    assert run.expired() == seq(1, EXPIRE_EVENTS_THRESHOLD - 5)
    assert run.windows() == []
    assert run.info().custom["window_tuples_held"] == 5


def evict_before_watermark(run: Events) -> None:
    """testEvictBeforeWatermarkForWatermarkEvictionPolicy: nothing is acked before the
    first watermark, which fires a window of every event; at the next one every event
    of that window expires. Storm's second watermark, 201, is the timestamp of an event
    here (201, which stays held): a watermark follows the events."""
    threshold = EXPIRE_EVENTS_THRESHOLD
    for i in seq(1, threshold):
        run.add(i, i)
    assert run.expired() == []
    run.watermark()  # 100
    assert run.events() == [seq(1, threshold)]
    assert run.expired() == []
    for i in seq(threshold + 1, threshold * 2):
        run.add(i, i)
    run.add(threshold * 2 + 1, threshold * 2 + 1)
    run.watermark()  # 201
    assert run.events() == [seq(1, threshold), seq(threshold + 1, threshold * 2)]
    assert run.windows()[1][1:3] == (seq(threshold + 1, threshold * 2), seq(1, threshold))
    assert run.expired() == seq(1, threshold)


def test_expire_threshold_with_watermark_count_eviction_policy(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    """testExpireThresholdWithWatermarkCountEvictionPolicy: event time, a count length
    of 100 sliding every 100 events."""
    length = EXPIRE_EVENTS_THRESHOLD
    bolt = event_bolt(Count(length), Count(length), lag=0)
    evict_before_watermark(Events(manual_cluster, clock, bolt))


def test_expire_threshold_with_watermark_time_eviction_policy(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    """testExpireThresholdWithWatermarkTimeEvictionPolicy: event time, a 100 ms length
    sliding every 100 events."""
    length = EXPIRE_EVENTS_THRESHOLD
    bolt = event_bolt(Duration(length), Count(length), lag=0)
    evict_before_watermark(Events(manual_cluster, clock, bolt))


def test_time_based_window(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    """testTimeBasedWindow, as far as processing time can express it: a 1 s length
    sliding every 1.1 s (no tick before the 100th event); 50 events at the start and
    50 a second later. The 100th finds the first 50 exactly 1 s old: they are acked
    then (Storm's ``now - ts >= length``), and the window at the tick reports them as
    expired. Storm's case goes on with events in the past and windows at times of its
    choosing, which arrival times and ticks every sliding interval cannot give (the
    manager test ports them)."""
    run = Events(manual_cluster, clock, WindowLog().with_window(Duration(1000), Duration(1100)))
    run.add_all(seq(1, 50))  # at T0
    run.advance(1000, ticks=0)
    run.add_all(seq(51, EXPIRE_EVENTS_THRESHOLD - 1))  # at T0 + 1000
    assert run.expired() == []
    run.add(EXPIRE_EVENTS_THRESHOLD)
    # first 50 should have expired due to expire events threshold
    assert run.expired() == seq(1, 50)
    assert run.windows() == []
    run.advance(100)  # the tick at T0 + 1100 evaluates (T0 + 99, T0 + 1099]
    in_window = seq(51, EXPIRE_EVENTS_THRESHOLD)
    assert run.windows() == [(in_window, in_window, seq(1, 50), T0 + 99, T0 + 1099)]
    assert run.expired() == seq(1, 50)


def test_time_based_window_expiry(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    """testTimeBasedWindowExpiry: a 100 ms length ticked every 60 ms; the window at
    T0 + 60 holds the 10 events, they are acked at the next tick (no window fires), and
    nothing fires after."""
    run = Events(manual_cluster, clock, WindowLog().with_window(Duration(100), Duration(60)))
    run.add_all(seq(1, 10))  # at T0
    run.advance(60)
    assert run.windows() == [(seq(1, 10), seq(1, 10), [], T0 - 41, T0 + 59)]
    assert run.expired() == []
    run.advance(60)  # wait so all events expire
    assert run.expired() == seq(1, 10)
    assert len(run.windows()) == 1
    run.advance(60)
    assert len(run.windows()) == 1
    assert run.info().custom["window_tuples_held"] == 0


def test_tumbling_window(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    """testTumblingWindow: tumbling windows of 3 events."""
    run = Events(manual_cluster, clock, WindowLog().with_tumbling_window(Count(3)))
    run.add_all(seq(1, 2))
    assert run.expired() == []
    assert run.windows() == []
    run.add(3)
    assert run.expired() == []
    assert run.windows() == [(seq(1, 3), seq(1, 3), [], None, None)]
    run.add_all(seq(4, 6))
    assert run.expired() == seq(1, 3)
    assert run.windows()[1:] == [(seq(4, 6), seq(4, 6), seq(1, 3), None, None)]


def test_event_time_based_window(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    """testEventTimeBasedWindow: event time, 20 ms windows every 10 ms. The first
    watermark is 602 (Storm's: 609); either finds no window to fire."""
    run = Events(manual_cluster, clock, event_bolt(Duration(20), Duration(10)))
    run.add_all(seq(1, 3), [603, 605, 607])
    run.watermark()  # 602
    assert run.windows() == []
    run.add_all(seq(4, 6), [618, 626, 636])
    run.watermark()  # 631: three windows
    assert run.windows() == [
        (seq(1, 3), seq(1, 3), [], 590, 610),
        (seq(1, 4), seq(4, 4), [], 600, 620),
        (seq(4, 5), seq(5, 5), seq(1, 3), 610, 630),
    ]
    assert run.expired() == seq(1, 3)
    # add more events with a gap in ts
    run.add_all(seq(7, 10), [825, 826, 827, 839])
    run.watermark()  # 834
    assert run.windows()[3:] == [
        (seq(5, 6), seq(6, 6), seq(4, 4), 620, 640),
        (seq(6, 6), [], seq(5, 5), 630, 650),
        (seq(7, 9), seq(7, 9), [], 810, 830),
    ]
    assert run.expired() == seq(1, 6)


def test_count_based_window_with_event_ts(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    """testCountBasedWindowWithEventTs: event time, the last 3 events at or before each
    window end (every 10 ms)."""
    run = Events(manual_cluster, clock, event_bolt(Count(3), Duration(10)))
    run.add_all(seq(1, 6), [603, 605, 607, 618, 626, 636])
    run.watermark()  # 631
    assert run.events() == [seq(1, 3), seq(2, 4), seq(3, 5)]
    assert run.expired() == seq(1, 2)
    run.add_all(seq(7, 10), [665, 666, 667, 679])
    run.watermark()  # 674
    # same set of events part of three windows
    assert run.events()[3:] == [seq(4, 6), seq(4, 6), seq(4, 6), seq(7, 9)]
    assert run.expired() == seq(1, 6)


def test_count_based_trigger_with_event_ts(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    """testCountBasedTriggerWithEventTs: event time, every 3rd event ends a 20 ms window
    at its timestamp; two events have the value 12, as in Storm's case."""
    run = Events(manual_cluster, clock, event_bolt(Duration(20), Count(3)))
    run.add_all(seq(1, 8), [603, 605, 607, 618, 625, 626, 629, 636])
    run.watermark()  # 631
    assert run.events() == [seq(1, 3), seq(3, 6)]
    assert run.expired() == seq(1, 2)
    run.add_all([9, 10, 11, 12, 12], [665, 666, 667, 669, 679])
    run.watermark()  # 674
    assert run.events()[2:] == [seq(9), seq(9, 12)]
    assert run.expired() == seq(1, 8)


#: Timestamps of events 1 to 10 in Storm's cases with several events per timestamp.
SAME_TIMESTAMPS = [10, 10, 11, 12, 12, 12, 12, 13, 14, 15]


def test_count_based_tumbling_with_same_event_ts(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    """testCountBasedTumblingWithSameEventTs: the watermark is 15 (Storm's: 20); every
    event is at or before either."""
    run = Events(manual_cluster, clock, event_bolt(Count(2), Count(2), lag=0))
    run.add_all(seq(1, 10), SAME_TIMESTAMPS)
    run.watermark()  # 15
    assert run.events() == [seq(1, 2), seq(3, 4), seq(5, 6), seq(7, 8), seq(9, 10)]
    assert run.expired() == seq(1, 8)


def test_count_based_sliding_with_same_event_ts(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    """testCountBasedSlidingWithSameEventTs: the last 5 events every 2; the watermark
    is 15 (Storm's: 20), every event is at or before either."""
    run = Events(manual_cluster, clock, event_bolt(Count(5), Count(2), lag=0))
    run.add_all(seq(1, 10), SAME_TIMESTAMPS)
    run.watermark()  # 15
    assert run.events() == [seq(1, 2), seq(1, 4), seq(2, 6), seq(4, 8), seq(6, 10)]
    assert run.expired() == seq(1, 5)


def test_event_time_lag(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    """testEventTimeLag: with a lag of 5 ms, out of order events (632 before 629) are
    in the windows of their timestamps up to the watermark."""
    run = Events(manual_cluster, clock, event_bolt(Duration(20), Duration(10)))
    run.add_all(seq(1, 8), [603, 605, 607, 618, 626, 632, 629, 636])
    run.watermark()  # 631
    assert run.events() == [seq(1, 3), seq(1, 4), [4, 5, 7]]
    assert run.expired() == seq(1, 3)
    assert run.info().custom["late_tuples"] == 0


def test_scan_stop(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    """testScanStop: the windows up to the watermark (634; Storm's: 631, which ends the
    same windows) leave the events after them held, neither in a window nor acked.
    Storm's assertion that its policy never looked at events 8 to 10 is about its scan,
    which squall does not have (see the manager test)."""
    run = Events(manual_cluster, clock, event_bolt(Duration(20), Duration(10)))
    run.add_all(seq(1, 10), [603, 605, 607, 618, 626, 629, 636, 637, 638, 639])
    run.watermark()  # 634
    assert run.events() == [seq(1, 3), seq(1, 4), [4, 5, 6]]
    assert run.expired() == seq(1, 3)
    assert run.info().custom["window_tuples_held"] == 7
