"""Injected time: engines read the clock through these objects, never directly."""

from __future__ import annotations

import threading
import time


class Clock:
    """A source of time in milliseconds (monotonic; not wall-clock epoch)."""

    def now_ms(self) -> float:
        """Milliseconds since an arbitrary fixed origin."""
        return time.monotonic() * 1000.0


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


SYSTEM_CLOCK = Clock()
