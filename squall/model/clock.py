"""Injected time: engines read the clock through these objects, never directly."""

from __future__ import annotations

import threading
import time


class Clock:
    """A source of time in milliseconds (monotonic; not wall-clock epoch)."""

    def now_ms(self) -> float:
        """Milliseconds since an arbitrary fixed origin."""
        return time.monotonic() * 1000.0

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
