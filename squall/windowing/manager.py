"""The window manager: which tuples are in which window, and when windows fire.

Engine-neutral and single-threaded: the task that owns a windowed bolt feeds it tuples
and time, and it calls back with window activations and expired tuples. Semantics are
Storm's (``WindowManager`` with its trigger and eviction policies):

* Processing time: a tuple's timestamp is its arrival time. A count sliding interval
  fires after every ``n`` tuples, at the ``n``-th tuple's arrival ``now``; a time
  sliding interval fires every period (the engine ticks the manager at ``now``), and,
  as Storm's time trigger does, evaluates its window at ``now - 1``: tuples may still
  arrive in the tick's millisecond, and they belong to the next window. A count length
  keeps the last ``n`` tuples, a time length the tuples with
  ``reference - length < ts <= reference`` (``reference`` being ``now`` or ``now - 1``):
  a tuple expires once ``reference - ts >= length``, Storm's ``TimeEvictionPolicy``.
  With a time sliding interval the window of a tick at reference ``r`` after the
  previous one at ``p`` holds ``p + sliding - length < ts <= r``: when ticks come late
  or early, the window adjusts to the drift as Storm's eviction policy does (a tumbling
  window holds every tuple since the previous window, once). The task's start
  (``start_ms``, reference ``start_ms - 1``) counts as the tick before the first;
  without it the first tick is taken as on time, its window
  ``r - length < ts <= r``. Until a window fires, tuples are evicted against the
  current time, so a window whose sliding interval exceeds its length holds only its
  last ``length`` of tuples, the first one too.
* Event time: windows fire on watermarks. A time sliding interval fires every window
  whose end is at or before the watermark; window ends are aligned to the sliding
  interval, the first being the earliest timestamp rounded up to it, and spans without
  tuples produce no window. A count sliding interval counts tuples, not timestamps: it
  fires at every ``n``-th tuple (in timestamp order, arrival order among equal
  timestamps) at or before the watermark, each tuple counted once, so tuples sharing a
  timestamp fill windows one by one. A count length holds that tuple and the ones
  before it (the last ``n``); a time length the tuples with ``end - length < ts <= end``,
  ``end`` being that tuple's timestamp. With a time sliding interval a count length
  holds the last ``n`` tuples with ``ts <= end``.

Tuples are kept sorted by timestamp (arrival order among equal timestamps), so a window
is a slice found by bisection and expiry trims the front of the list: memory holds only
the tuples that a present or future window can still contain.

Between windows (Storm's ``EXPIRE_EVENTS_THRESHOLD``): with processing time, every
``COMPACT_EVERY`` tuples added since the last such check, the tuples no future window
can hold expire at once (``on_expiry``: the engine acks them) and wait, like those that
leave as a window fires, to be the next window's ``get_expired()``. Event time needs no
such check: tuples below the watermark are late (the engine drops them), so every held
tuple is at or above the last window evaluated and may be in the next one.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from squall.model.tuple import Tuple
from squall.windowing.spec import Count, Duration, WindowSpec
from squall.windowing.window import TupleWindow

ActivationHandler = Callable[[TupleWindow], None]
ExpiryHandler = Callable[[list[Tuple]], None]

#: Processing time: tuples added between two checks for tuples no future window holds.
COMPACT_EVERY = 100


class WindowManager:
    """Window state of one windowed bolt task.

    Args:
        spec: the window configuration.
        on_activation: called with each window that fires (non-empty windows only).
        on_expiry: called with tuples as they leave every future window.
        start_ms: processing time, when the task started (engines pass it): the first
            tick's window starts from it as from a previous tick. None: the first tick
            is taken as on time.
    """

    def __init__(
        self,
        spec: WindowSpec,
        on_activation: ActivationHandler,
        on_expiry: ExpiryHandler,
        start_ms: int | None = None,
    ) -> None:
        self.spec = spec
        self.on_activation = on_activation
        self.on_expiry = on_expiry
        self._timestamps: list[int] = []
        self._tuples: list[Tuple] = []
        self._expired_since_trigger: list[Tuple] = []
        self._previous_window: list[Tuple] = []
        self._count_since_trigger = 0
        self._adds_since_compaction = 0
        self._next_window_end: int | None = None
        #: Event time, count sliding interval: how many held tuples (from the front) the
        #: windows fired so far have counted.
        self._counted = 0
        length, sliding = spec.length, spec.sliding
        self._length_ms = length.value if isinstance(length, Duration) else None
        self._length_count = length.value if isinstance(length, Count) else None
        self._sliding_ms = sliding.value if isinstance(sliding, Duration) else None
        self._sliding_count = sliding.value if isinstance(sliding, Count) else None
        #: Processing time, time sliding interval: the reference time of the last
        #: window fired (the task's start stands for the tick before the first).
        self._last_tick: int | None = (
            self._tick_reference(start_ms)
            if start_ms is not None and self._sliding_ms is not None and not spec.event_time
            else None
        )

    def __len__(self) -> int:
        """Tuples held (in a window, or waiting for one)."""
        return len(self._tuples)

    def held(self) -> list[Tuple]:
        """The tuples held, oldest timestamp first."""
        return list(self._tuples)

    def kept_timestamp(self, ts: int) -> int:
        """The timestamp under which :meth:`add` keeps a tuple given ``ts``: ``ts``
        itself, except with processing time for a tuple at or before the reference time
        of the last tick (a clock that went back, or windows restored from another
        clock's run), which belongs to the next window (the tick's window has fired).
        A tuple arriving in a tick's millisecond keeps its own timestamp: the tick
        evaluated the millisecond before."""
        last_tick = self._last_tick
        if last_tick is not None and ts <= last_tick and not self.spec.event_time:
            return last_tick + 1
        return ts

    def add(self, tup: Tuple, ts: int) -> None:
        """Track ``tup`` at timestamp ``ts`` (kept as :meth:`kept_timestamp` says); with
        processing time and a count sliding interval this may fire a window right away.
        With event time, ``ts`` must not be below the last watermark (the engine drops
        such late tuples before)."""
        ts = self.kept_timestamp(ts)
        timestamps = self._timestamps
        if not timestamps or ts >= timestamps[-1]:
            timestamps.append(ts)
            self._tuples.append(tup)
        else:
            position = bisect_right(timestamps, ts)
            timestamps.insert(position, ts)
            self._tuples.insert(position, tup)
            if position < self._counted:  # behind the count: it does not trigger
                self._counted += 1
        if self.spec.event_time:
            return
        if self._sliding_count is not None:
            self._count_since_trigger += 1
            if self._count_since_trigger >= self._sliding_count:
                self._trigger(ts)
                return
        self._adds_since_compaction += 1
        if self._adds_since_compaction >= COMPACT_EVERY:
            self._compact(ts)

    def on_time(self, now: int) -> None:
        """Processing time moved to ``now``: fire if the sliding interval is a duration,
        the window at :meth:`tick_reference` ``(now)``."""
        if not self.spec.event_time and self._sliding_ms is not None:
            reference = self._tick_reference(now)
            self._trigger(reference, self._tick_floor(reference))
            self._last_tick = reference

    def _tick_reference(self, now: int) -> int:
        """The time a processing-time tick at ``now`` evaluates its window at: ``now -
        1`` for a duration length, as Storm's time trigger (tuples may still arrive in
        the tick's millisecond; they are the next window's), ``now`` for a count
        length (every tuple held is in its window, as Storm's count eviction has it)."""
        return now - 1 if self._length_ms is not None else now

    def _tick_floor(self, reference: int) -> int | None:
        """Processing time with a time sliding interval and a time length: the lower
        bound (exclusive) of the window a tick evaluates at ``reference``, adjusted for
        drift (see the module docstring). None for a count length."""
        length = self._length_ms
        if length is None or self._sliding_ms is None or self.spec.event_time:
            return None
        if self._last_tick is None:
            return reference - length
        return self._last_tick + self._sliding_ms - length

    def on_watermark(self, watermark: int) -> None:
        """Event time: fire every window the watermark completes, in order."""
        if self._sliding_ms is not None:
            self._fire_time_windows(watermark, self._sliding_ms)
        else:
            self._fire_count_windows(watermark, self._sliding_count or 1)

    def _fire_time_windows(self, watermark: int, sliding: int) -> None:
        end = self._next_window_end
        if end is None:
            end = self._next_aligned_end(None, watermark, sliding)
            if end is None:
                return
        while end <= watermark:
            if self._trigger(end):
                end += sliding
                continue
            following = self._next_aligned_end(end, watermark, sliding)
            if following is None:
                break
            end = following
        self._next_window_end = end

    def _next_aligned_end(self, after: int | None, until: int, sliding: int) -> int | None:
        """End of the first window (aligned to ``sliding``) holding a tuple with
        ``after < ts <= until``; None if there is no such tuple."""
        timestamps = self._timestamps
        position = 0 if after is None else bisect_right(timestamps, after)
        if position >= len(timestamps) or timestamps[position] > until:
            return None
        earliest = timestamps[position]
        remainder = earliest % sliding
        return earliest if remainder == 0 else earliest + sliding - remainder

    def _fire_count_windows(self, watermark: int, sliding: int) -> None:
        """Fire a window at every ``sliding``-th tuple not yet counted, in timestamp
        order, up to the last tuple at or before ``watermark``."""
        timestamps = self._timestamps
        ready = bisect_right(timestamps, watermark)
        while self._counted + sliding <= ready:
            position = self._counted + sliding
            held = len(timestamps)
            self._trigger(timestamps[position - 1], count_stop=position)
            expired = held - len(timestamps)
            self._counted = position - expired
            ready -= expired

    def _window_bounds(
        self, reference: int, floor: int | None = None, count_stop: int | None = None
    ) -> tuple[int, int]:
        """``(first, stop)`` indexes of the window ending at ``reference``: a time
        length's window starts after ``floor`` when given; a count length's window ends
        before index ``count_stop`` when given (else after the last tuple at or before
        ``reference``)."""
        timestamps = self._timestamps
        if self._length_ms is not None:
            stop = bisect_right(timestamps, reference)
            low = reference - self._length_ms if floor is None else floor
            first = bisect_right(timestamps, low, 0, stop)
        else:
            stop = bisect_right(timestamps, reference) if count_stop is None else count_stop
            first = max(0, stop - (self._length_count or 0))
        return first, stop

    def _expire_before(self, first: int) -> None:
        if first <= 0:
            return
        expired = self._tuples[:first]
        del self._tuples[:first]
        del self._timestamps[:first]
        self._expired_since_trigger.extend(expired)
        self.on_expiry(expired)

    def _compact(self, now: int) -> None:
        """Processing time: drop what no future window can hold (their reference is
        at least ``now``, and the next tick's window starts after its floor): tuples
        are evicted against the current time, before the first window too."""
        self._adds_since_compaction = 0
        floor = self._tick_floor(now)
        if floor is not None and self._length_ms is not None:
            floor = min(floor, now - self._length_ms)
        first, _ = self._window_bounds(now, floor)
        self._expire_before(first)

    def _trigger(
        self, reference: int, floor: int | None = None, count_stop: int | None = None
    ) -> bool:
        """Evaluate the window ending at ``reference`` (see ``_window_bounds`` for
        ``floor`` and ``count_stop``); True if it held any tuple."""
        self._count_since_trigger = 0
        first, stop = self._window_bounds(reference, floor, count_stop)
        self._expire_before(first)
        stop -= first
        expired, self._expired_since_trigger = self._expired_since_trigger, []
        if stop == 0:
            self._previous_window = []
            return False
        tuples = self._tuples[:stop]
        previous = self._previous_window
        self._previous_window = tuples
        start_ts: int | None = None
        end_ts: int | None = None
        if self._length_ms is not None:
            end_ts = reference
            start_ts = reference - self._length_ms if floor is None else floor
        # get_new() is computed only if the bolt asks for it (it is O(window)).
        self.on_activation(TupleWindow(tuples, None, expired, start_ts, end_ts, previous))
        return True

    def bookkeeping(self) -> dict[str, int | None]:
        """Where the windows stand, apart from the tuples (what :meth:`restore` takes
        back): the next event-time window end, the tuples counted by event-time count
        windows, the reference time of the last processing-time tick, the tuples since the
        last trigger."""
        return {
            "next_window_end": self._next_window_end,
            "counted": self._counted,
            "last_tick": self._last_tick,
            "count_since_trigger": self._count_since_trigger,
        }

    def expired_since_trigger(self) -> list[Tuple]:
        """The tuples that left every window since the last trigger (the next window's
        ``get_expired()``)."""
        return list(self._expired_since_trigger)

    def previous_window(self) -> list[Tuple]:
        """The tuples of the last window fired (empty if the last trigger found none);
        the next window's ``get_new()`` leaves them out."""
        return self._previous_window

    def restore(
        self,
        held: list[tuple[int, Tuple]],
        expired: list[Tuple],
        previous: list[Tuple],
        bookkeeping: dict[str, int | None],
    ) -> None:
        """Start again from saved windows: ``held`` the tuples held with the timestamps
        they are kept under, oldest first; ``expired`` and ``previous`` as
        :meth:`expired_since_trigger` and :meth:`previous_window` did, and
        ``bookkeeping`` from :meth:`bookkeeping`. No window fires and nothing expires
        here."""
        self._timestamps = [ts for ts, _ in held]
        self._tuples = [tup for _, tup in held]
        self._expired_since_trigger = list(expired)
        self._previous_window = list(previous)
        self._next_window_end = bookkeeping["next_window_end"]
        self._counted = bookkeeping["counted"] or 0
        self._last_tick = bookkeeping["last_tick"]
        self._count_since_trigger = bookkeeping["count_since_trigger"] or 0
        self._adds_since_compaction = 0
