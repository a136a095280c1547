"""Storm's ``WindowManagerTest``, every test method, against squall's ``WindowManager``.

Each test is named after Storm's method and makes each of Storm's assertions an exact
one. The harness adapts Storm's to squall's manager, the semantics stay Storm's:

* Storm's ``Listener`` is :class:`Listener` (same fields: the last expiry, the last
  activation's events, new and expired events, and every one since the last
  ``clear()``); events are Storm's integers, held in :class:`Event` objects as Storm
  holds them in its own (two events of one value are two events).
* Storm sets the eviction and trigger policies; squall takes a :class:`WindowSpec`:
  ``CountEvictionPolicy(n)`` is a ``Count(n)`` length, ``TimeEvictionPolicy(ms)`` a
  ``Duration(ms)`` length, ``CountTriggerPolicy(n)`` a ``Count(n)`` sliding interval,
  ``TimeTriggerPolicy(ms)`` a ``Duration`` one, and the watermark policies the same on
  event time (a timestamp field).
* Storm's ``add(event)`` stamps the event with the current time; the harness gives
  that time. ``add(new WaterMarkEvent(ts))`` is ``on_watermark(ts)``.
* Storm's tests trigger a time window by hand: ``setContext(new
  DefaultEvictionContext(ref))`` then ``onTrigger()``, a window at reference time
  ``ref`` with no drift. A squall tick at ``now`` evaluates its window at ``now - 1``
  (as Storm's ``TimeTriggerPolicy`` does), so :meth:`Listener.trigger` ticks at
  ``ref + 1``, and the sliding interval is the spacing of Storm's triggers, so that
  squall's drift adjustment is 0 as Storm's is.

tests/test_windowing_storm_end_to_end.py runs the same cases through a windowed bolt
on LocalCluster.
"""

from __future__ import annotations

from typing import Any

from squall.windowing import Count, Duration, TupleWindow, WindowManager, WindowSpec

#: Storm's ``WindowManager.EXPIRE_EVENTS_THRESHOLD``: squall's ``COMPACT_EVERY``.
EXPIRE_EVENTS_THRESHOLD = 100
#: Storm's ``System.currentTimeMillis()`` at the start of a test, in ms.
NOW = 1_700_000_000_000


class Event:
    """One of Storm's events: an integer, as an object of its own."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Event({self.value})"


def values(events: list[Any]) -> list[int]:
    return [event.value for event in events]


def seq(start: int, stop: int | None = None) -> list[int]:
    """Storm's ``seq``: ``start`` to ``stop``, inclusive (``start`` alone without it)."""
    return list(range(start, (start if stop is None else stop) + 1))


class Listener:
    """Storm's ``Listener``, fed by a squall manager built from ``spec``."""

    def __init__(self, spec: WindowSpec) -> None:
        self.manager = WindowManager(spec, self._on_activation, self._on_expiry)
        self.clear()

    def clear(self) -> None:
        self.on_expiry_events: list[int] = []
        self.on_activation_events: list[int] = []
        self.on_activation_new_events: list[int] = []
        self.on_activation_expired_events: list[int] = []
        self.all_on_expiry_events: list[list[int]] = []
        self.all_on_activation_events: list[list[int]] = []
        self.all_on_activation_new_events: list[list[int]] = []
        self.all_on_activation_expired_events: list[list[int]] = []
        self.activation_bounds: list[tuple[int | None, int | None]] = []

    def _on_expiry(self, events: list[Any]) -> None:
        self.on_expiry_events = values(events)
        self.all_on_expiry_events.append(self.on_expiry_events)

    def _on_activation(self, window: TupleWindow) -> None:
        self.on_activation_events = values(window.get())
        self.all_on_activation_events.append(self.on_activation_events)
        self.on_activation_new_events = values(window.get_new())
        self.all_on_activation_new_events.append(self.on_activation_new_events)
        self.on_activation_expired_events = values(window.get_expired())
        self.all_on_activation_expired_events.append(self.on_activation_expired_events)
        self.activation_bounds.append((window.start_timestamp, window.end_timestamp))

    def add(self, value: int, ts: int) -> None:
        """Storm's ``windowManager.add(value, ts)`` (or ``add(value)`` at time ``ts``)."""
        self.manager.add(Event(value), ts)

    def watermark(self, ts: int) -> None:
        """Storm's ``windowManager.add(new WaterMarkEvent<>(ts))``."""
        self.manager.on_watermark(ts)

    def trigger(self, reference: int) -> None:
        """Storm's ``setContext(new DefaultEvictionContext(reference))`` and
        ``onTrigger()``: a tick at ``reference + 1``."""
        self.manager.on_time(reference + 1)


def processing(length: Count | Duration, sliding: Count | Duration) -> WindowSpec:
    return WindowSpec(length, sliding)


def event_time(length: Count | Duration, sliding: Count | Duration) -> WindowSpec:
    return WindowSpec(length, sliding, timestamp_field="ts")


def test_count_based_window() -> None:
    """testCountBasedWindow: the last 5 events every 2 events."""
    listener = Listener(processing(Count(5), Count(2)))
    listener.add(1, NOW + 1)
    listener.add(2, NOW + 2)
    # nothing expired yet
    assert listener.on_expiry_events == []
    assert listener.on_activation_events == seq(1, 2)
    assert listener.on_activation_new_events == seq(1, 2)
    assert listener.on_activation_expired_events == []
    listener.add(3, NOW + 3)
    listener.add(4, NOW + 4)
    # nothing expired yet
    assert listener.on_expiry_events == []
    assert listener.on_activation_events == seq(1, 4)
    assert listener.on_activation_new_events == seq(3, 4)
    assert listener.on_activation_expired_events == []
    listener.add(5, NOW + 5)
    listener.add(6, NOW + 6)
    # 1 expired
    assert listener.on_expiry_events == seq(1)
    assert listener.on_activation_events == seq(2, 6)
    assert listener.on_activation_new_events == seq(5, 6)
    assert listener.on_activation_expired_events == seq(1)
    listener.clear()
    listener.add(7, NOW + 7)
    # nothing expires until threshold is hit
    assert listener.on_expiry_events == []
    listener.add(8, NOW + 8)
    # 2 and 3 expired
    assert listener.on_expiry_events == seq(2, 3)
    assert listener.on_activation_events == seq(4, 8)
    assert listener.on_activation_new_events == seq(7, 8)
    assert listener.on_activation_expired_events == seq(2, 3)


def test_expire_threshold() -> None:
    """testExpireThreshold: a count length of 5 sliding every hour; at the 100th
    event (EXPIRE_EVENTS_THRESHOLD) all but the last 5 expire, before any window."""
    threshold = EXPIRE_EVENTS_THRESHOLD
    window_length = 5
    listener = Listener(processing(Count(5), Duration.hours(1)))
    for i in seq(1, 5):
        listener.add(i, NOW + i)
    # nothing expired yet
    assert listener.on_expiry_events == []
    for i in seq(6, 10):
        listener.add(i, NOW + i)
    for i in seq(11, threshold):
        listener.add(i, NOW + i)
    # window should be compacted and events should be expired.
    assert listener.on_expiry_events == seq(1, threshold - window_length)
    assert listener.all_on_activation_events == []


def evict_before_watermark(spec: WindowSpec, window_length: int) -> None:
    """Storm's testEvictBeforeWatermarkForWatermarkEvictionPolicy: nothing is evicted
    before the first watermark; the events are in the window it fires, and all of
    them expire at the next."""
    threshold = EXPIRE_EVENTS_THRESHOLD
    listener = Listener(spec)
    for i in seq(1, threshold):
        listener.add(i, i)
    # The watermark eviction policies never evict events before the first watermark.
    assert listener.on_expiry_events == []
    listener.watermark(threshold)
    # The events are put in a window when the first watermark is received.
    assert listener.on_activation_events == seq(1, threshold)
    for i in seq(threshold + 1, threshold * 2):
        listener.add(i, i)
    listener.watermark(threshold + window_length + 1)
    # All the events expire when the next watermark is received.
    assert listener.on_expiry_events == seq(1, threshold)
    assert listener.all_on_activation_events == [seq(1, threshold), seq(threshold + 1, 200)]


def test_expire_threshold_with_watermark_count_eviction_policy() -> None:
    """testExpireThresholdWithWatermarkCountEvictionPolicy: event time, a count length
    of 100 sliding every 100 events."""
    window_length = EXPIRE_EVENTS_THRESHOLD
    spec = event_time(Count(window_length), Count(window_length))
    evict_before_watermark(spec, window_length)


def test_expire_threshold_with_watermark_time_eviction_policy() -> None:
    """testExpireThresholdWithWatermarkTimeEvictionPolicy: event time, a 100 ms length
    sliding every 100 events."""
    window_length = EXPIRE_EVENTS_THRESHOLD
    spec = event_time(Duration(window_length), Count(window_length))
    evict_before_watermark(spec, window_length)


def test_time_based_window() -> None:
    """testTimeBasedWindow: a 1 s length. The 100th event finds the first 50 exactly
    1 s old, which Storm's TimeEvictionPolicy expires (``now - ts >= length``); a
    window at ``NOW + 100`` holds the events of the last second, and reports the
    expired ones, those of the 100th event's check included."""
    listener = Listener(processing(Duration.seconds(1), Duration(100)))
    # add with past ts
    for i in seq(1, 50):
        listener.add(i, NOW - 1000)
    # add with current ts
    for i in seq(51, EXPIRE_EVENTS_THRESHOLD):
        listener.add(i, NOW)
    # first 50 should have expired due to expire events threshold
    assert len(listener.on_expiry_events) == 50
    assert listener.on_expiry_events == seq(1, 50)
    # add more events with past ts
    for i in seq(EXPIRE_EVENTS_THRESHOLD + 1, EXPIRE_EVENTS_THRESHOLD + 100):
        listener.add(i, NOW - 1000)
    # simulate the time trigger by setting the reference time and invoking onTrigger()
    listener.trigger(NOW + 100)
    # 100 events with past ts should expire
    assert len(listener.on_expiry_events) == 100
    assert listener.on_expiry_events == seq(
        EXPIRE_EVENTS_THRESHOLD + 1, EXPIRE_EVENTS_THRESHOLD + 100
    )
    activations_events = seq(51, EXPIRE_EVENTS_THRESHOLD)
    assert listener.on_activation_events == seq(51, EXPIRE_EVENTS_THRESHOLD)
    assert listener.on_activation_new_events == seq(51, EXPIRE_EVENTS_THRESHOLD)
    # activation expired list should contain even the ones expired due to
    # EXPIRE_EVENTS_THRESHOLD
    expired_list = seq(1, 50) + seq(EXPIRE_EVENTS_THRESHOLD + 1, EXPIRE_EVENTS_THRESHOLD + 100)
    assert listener.on_activation_expired_events == expired_list
    listener.clear()
    # add more events with current ts
    new_events = seq(EXPIRE_EVENTS_THRESHOLD + 101, EXPIRE_EVENTS_THRESHOLD + 200)
    for i in new_events:
        listener.add(i, NOW)
    activations_events += new_events
    listener.trigger(NOW + 200)
    assert listener.on_expiry_events == []
    assert listener.on_activation_events == activations_events
    assert listener.on_activation_new_events == new_events
    assert listener.activation_bounds == [(NOW - 800, NOW + 200)]


def test_time_based_window_expiry() -> None:
    """testTimeBasedWindowExpiry: a 100 ms length; the window at ``NOW + 60`` holds the
    10 events, the one at ``NOW + 120`` none (they expire, and no window fires), and
    nothing fires after."""
    listener = Listener(processing(Duration(100), Duration(60)))
    # add 10 events
    for i in seq(1, 10):
        listener.add(i, NOW)
    # simulate the time trigger by setting the reference time and invoking onTrigger()
    listener.trigger(NOW + 60)
    assert listener.on_activation_events == seq(1, 10)
    assert listener.on_activation_expired_events == []
    listener.clear()
    # wait so all events expire
    listener.trigger(NOW + 120)
    assert listener.on_expiry_events == seq(1, 10)
    assert listener.on_activation_events == []
    listener.clear()
    listener.trigger(NOW + 180)
    assert listener.on_activation_expired_events == []
    assert listener.on_activation_events == []
    assert listener.all_on_expiry_events == []
    assert len(listener.manager) == 0


def test_tumbling_window() -> None:
    """testTumblingWindow: tumbling windows of 3 events."""
    listener = Listener(processing(Count(3), Count(3)))
    listener.add(1, NOW + 1)
    listener.add(2, NOW + 2)
    # nothing expired yet
    assert listener.on_expiry_events == []
    listener.add(3, NOW + 3)
    assert listener.on_expiry_events == []
    assert listener.on_activation_events == seq(1, 3)
    assert listener.on_activation_expired_events == []
    assert listener.on_activation_new_events == seq(1, 3)
    listener.clear()
    listener.add(4, NOW + 4)
    listener.add(5, NOW + 5)
    listener.add(6, NOW + 6)
    assert listener.on_expiry_events == seq(1, 3)
    assert listener.on_activation_events == seq(4, 6)
    assert listener.on_activation_expired_events == seq(1, 3)
    assert listener.on_activation_new_events == seq(4, 6)


def test_event_time_based_window() -> None:
    """testEventTimeBasedWindow: event time, 20 ms windows every 10 ms, ends aligned to
    10 ms; a span without events produces no window."""
    listener = Listener(event_time(Duration(20), Duration(10)))
    listener.add(1, 603)
    listener.add(2, 605)
    listener.add(3, 607)
    # This should find the next aligned window end ts, but not produce any activations
    listener.watermark(609)
    assert listener.all_on_activation_events == []
    listener.add(4, 618)
    listener.add(5, 626)
    listener.add(6, 636)
    # send a watermark event, which should trigger three windows.
    listener.watermark(631)
    assert len(listener.all_on_activation_events) == 3
    assert listener.all_on_activation_events == [seq(1, 3), seq(1, 4), seq(4, 5)]
    assert listener.all_on_activation_expired_events == [[], [], seq(1, 3)]
    assert listener.all_on_activation_new_events == [seq(1, 3), seq(4, 4), seq(5, 5)]
    assert listener.all_on_expiry_events[0] == seq(1, 3)
    assert listener.all_on_expiry_events == [seq(1, 3)]
    assert listener.activation_bounds == [(590, 610), (600, 620), (610, 630)]
    # add more events with a gap in ts
    listener.add(7, 825)
    listener.add(8, 826)
    listener.add(9, 827)
    listener.add(10, 839)
    listener.clear()
    listener.watermark(834)
    assert len(listener.all_on_activation_events) == 3
    assert listener.all_on_activation_events == [seq(5, 6), seq(6, 6), seq(7, 9)]
    assert listener.all_on_activation_expired_events == [seq(4, 4), seq(5, 5), []]
    assert listener.all_on_activation_new_events == [seq(6, 6), [], seq(7, 9)]
    assert listener.all_on_expiry_events == [seq(4, 4), seq(5, 5), seq(6, 6)]
    assert listener.activation_bounds == [(620, 640), (630, 650), (810, 830)]


def test_count_based_window_with_event_ts() -> None:
    """testCountBasedWindowWithEventTs: event time, the last 3 events at or before each
    window end (every 10 ms); over a gap in time the same events make three windows."""
    listener = Listener(event_time(Count(3), Duration(10)))
    for value, ts in zip(seq(1, 6), [603, 605, 607, 618, 626, 636], strict=True):
        listener.add(value, ts)
    # send a watermark event, which should trigger three windows.
    listener.watermark(631)
    assert len(listener.all_on_activation_events) == 3
    assert listener.all_on_activation_events == [seq(1, 3), seq(2, 4), seq(3, 5)]
    # what Storm's policies give as well (its test asserts the windows only)
    assert listener.all_on_activation_new_events == [seq(1, 3), seq(4), seq(5)]
    assert listener.all_on_activation_expired_events == [[], seq(1), seq(2)]
    # add more events with a gap in ts
    for value, ts in zip(seq(7, 10), [665, 666, 667, 679], strict=True):
        listener.add(value, ts)
    listener.clear()
    listener.watermark(674)
    assert len(listener.all_on_activation_events) == 4
    # same set of events part of three windows
    assert listener.all_on_activation_events == [seq(4, 6), seq(4, 6), seq(4, 6), seq(7, 9)]
    assert listener.all_on_activation_new_events == [seq(6), [], [], seq(7, 9)]
    assert listener.all_on_activation_expired_events == [seq(3), [], [], seq(4, 6)]
    assert [value.value for value in listener.manager.held()] == seq(7, 10)


def test_count_based_trigger_with_event_ts() -> None:
    """testCountBasedTriggerWithEventTs: event time, every 3rd event ends a 20 ms window
    at its timestamp. Storm's last event is a second event of value 12 (at 679)."""
    listener = Listener(event_time(Duration(20), Count(3)))
    for value, ts in zip(seq(1, 8), [603, 605, 607, 618, 625, 626, 629, 636], strict=True):
        listener.add(value, ts)
    # send a watermark event, which should trigger three windows.
    listener.watermark(631)
    assert len(listener.all_on_activation_events) == 2
    assert listener.all_on_activation_events == [seq(1, 3), seq(3, 6)]
    assert listener.activation_bounds == [(587, 607), (606, 626)]
    # add more events with a gap in ts
    for value, ts in zip([9, 10, 11, 12, 12], [665, 666, 667, 669, 679], strict=True):
        listener.add(value, ts)
    listener.clear()
    listener.watermark(674)
    assert len(listener.all_on_activation_events) == 2
    assert listener.all_on_activation_events == [seq(9), seq(9, 12)]
    assert listener.all_on_activation_new_events == [seq(9), seq(10, 12)]
    assert listener.all_on_activation_expired_events == [seq(3, 8), []]
    assert listener.activation_bounds == [(645, 665), (649, 669)]


#: Timestamps of events 1 to 10 in Storm's cases with several events per timestamp.
SAME_TIMESTAMPS = [10, 10, 11, 12, 12, 12, 12, 13, 14, 15]


def test_count_based_tumbling_with_same_event_ts() -> None:
    """testCountBasedTumblingWithSameEventTs: a count window counts events, so the
    events sharing a timestamp fill consecutive windows."""
    listener = Listener(event_time(Count(2), Count(2)))
    for value, ts in zip(seq(1, 10), SAME_TIMESTAMPS, strict=True):
        listener.add(value, ts)
    listener.watermark(20)
    assert len(listener.all_on_activation_events) == 5
    assert listener.all_on_activation_events == [
        seq(1, 2),
        seq(3, 4),
        seq(5, 6),
        seq(7, 8),
        seq(9, 10),
    ]
    # what Storm's policies give as well (its test asserts the windows only)
    assert listener.all_on_activation_new_events == listener.all_on_activation_events
    assert listener.all_on_activation_expired_events == [
        [],
        seq(1, 2),
        seq(3, 4),
        seq(5, 6),
        seq(7, 8),
    ]
    assert listener.all_on_expiry_events == [seq(1, 2), seq(3, 4), seq(5, 6), seq(7, 8)]


def test_count_based_sliding_with_same_event_ts() -> None:
    """testCountBasedSlidingWithSameEventTs: the last 5 events, every 2 events."""
    listener = Listener(event_time(Count(5), Count(2)))
    for value, ts in zip(seq(1, 10), SAME_TIMESTAMPS, strict=True):
        listener.add(value, ts)
    listener.watermark(20)
    assert len(listener.all_on_activation_events) == 5
    assert listener.all_on_activation_events == [
        seq(1, 2),
        seq(1, 4),
        seq(2, 6),
        seq(4, 8),
        seq(6, 10),
    ]
    # what Storm's policies give as well (its test asserts the windows only)
    assert listener.all_on_activation_new_events == [
        seq(1, 2),
        seq(3, 4),
        seq(5, 6),
        seq(7, 8),
        seq(9, 10),
    ]
    assert listener.all_on_activation_expired_events == [[], [], seq(1), seq(2, 3), seq(4, 5)]
    assert listener.all_on_expiry_events == [seq(1), seq(2, 3), seq(4, 5)]


#: Events 1 to 8 of Storm's testEventTimeLag, in arrival order (6 and 7 out of order).
LAG_TIMESTAMPS = [603, 605, 607, 618, 626, 632, 629, 636]


def test_event_time_lag() -> None:
    """testEventTimeLag: out of order events are in the windows their timestamps fall
    in, up to the watermark (Storm's lag of 5 ms is the watermark's: here the test
    gives the watermark itself)."""
    listener = Listener(event_time(Duration(20), Duration(10)))
    for value, ts in zip(seq(1, 8), LAG_TIMESTAMPS, strict=True):
        listener.add(value, ts)
    # send a watermark event, which should trigger three windows.
    listener.watermark(631)
    assert len(listener.all_on_activation_events) == 3
    assert listener.all_on_activation_events[0] == seq(1, 3)
    assert listener.all_on_activation_events[1] == seq(1, 4)
    # out of order events should be processed upto the lag
    assert listener.all_on_activation_events[2] == [4, 5, 7]
    assert [value.value for value in listener.manager.held()] == [4, 5, 7, 6, 8]


def test_scan_stop() -> None:
    """testScanStop: the windows up to the watermark leave the events after it alone.

    Storm's test also asserts that its eviction policy was asked about events 1 to 7
    only: its manager scans the events in arrival order and stops at the first one
    more than the lag past the window's end. squall deliberately differs (see "Differences
    from Storm" in docs/windowing.md): it keeps the events sorted by timestamp and
    finds a window's bounds by bisection, asking no policy about any event; so the
    port asserts what the scan's stop guarantees, that the events past the window are
    neither in it nor expired, and are held for the next windows.
    """
    listener = Listener(event_time(Duration(20), Duration(10)))
    timestamps = [603, 605, 607, 618, 626, 629, 636, 637, 638, 639]
    for value, ts in zip(seq(1, 10), timestamps, strict=True):
        listener.add(value, ts)
    # send a watermark event, which should trigger three windows.
    listener.watermark(631)
    assert len(listener.all_on_activation_events) == 3
    assert listener.all_on_activation_events[0] == seq(1, 3)
    assert listener.all_on_activation_events[1] == seq(1, 4)
    # out of order events should be processed upto the lag
    assert listener.all_on_activation_events[2] == [4, 5, 6]
    assert listener.all_on_expiry_events == [seq(1, 3)]
    assert [value.value for value in listener.manager.held()] == seq(4, 10)
