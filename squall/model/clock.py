"""Injected time: engines read the clock through these objects, never directly."""

from __future__ import annotations

import threading
import time


class Clock:
    """A source of time in milliseconds (monotonic; not wall-clock epoch)."""

    def now_ms(self) -> float:
        """Milliseconds since an arbitrary fixed origin."""
        return time.monotonic() * 1000.0

    def current_time_millis(self) -> int:
        """The time as Storm's ``Time.currentTimeMillis()`` reads it, in whole ms.

        On the system clock (a clock that does not override :meth:`now_ms`) the
        wall-clock time since the epoch, as Storm's real time; on a simulated clock (one
        that does, such as :class:`ManualClock`) its own time, as Storm's simulated time.
        Runs in the caller's thread.
        """
        if type(self).now_ms is Clock.now_ms:
            return time.time_ns() // 1_000_000
        return int(self.now_ms())

    def sleep_ms(self, ms: float, wake: threading.Event | None = None) -> bool:
        """Block the calling thread for ``ms`` milliseconds, or until ``wake`` is set.

        Runs in the caller's thread (a batch runner waiting before a retry).

        Returns:
            Whether ``wake`` was set (the wait may have ended early).
        """
        if wake is None:
            time.sleep(max(0.0, ms) / 1000.0)
            return False
        return wake.wait(max(0.0, ms) / 1000.0)


class ManualClock(Clock):
    """A clock that moves only when told to: ``advance(ms)``. For tests.

    Thread-safe: tests advance it from their thread while engine threads read it.
    """

    def __init__(self, start_ms: float = 0.0) -> None:
        self._now = float(start_ms)
        self._lock = threading.Lock()

    def now_ms(self) -> float:
        return self._now

    def advance(self, ms: float) -> float:
        """Move time forward by ``ms`` milliseconds; returns the new time."""
        if ms < 0:
            raise ValueError("a clock cannot go backwards")
        with self._lock:
            self._now += ms
            return self._now

    def advance_secs(self, seconds: float) -> float:
        """Move time forward by ``seconds``."""
        return self.advance(seconds * 1000.0)

    def sleep_ms(self, ms: float, wake: threading.Event | None = None) -> bool:
        """Move time forward by ``ms`` at once instead of blocking (the schedule of
        waits is exact and costs no real time); whether ``wake`` is set."""
        self.advance(max(0.0, ms))
        return wake is not None and wake.is_set()


SYSTEM_CLOCK = Clock()

_current = threading.local()


def current_clock() -> Clock:
    """The clock of the task running on this thread: the one its engine runs on.

    The engines set it on the threads that run tasks (see :func:`set_current_clock`);
    on any other thread, and on engines that run on the system clock, it is
    :data:`SYSTEM_CLOCK`. Runs in the caller's thread.
    """
    clock: Clock | None = getattr(_current, "clock", None)
    return SYSTEM_CLOCK if clock is None else clock


def set_current_clock(clock: Clock | None) -> None:
    """Make ``clock`` what :func:`current_clock` returns on this thread (None: the
    system clock). Called by an engine on each thread that runs tasks, before it opens
    them."""
    _current.clock = clock
