"""Capacity on Spark: how much of the recent micro-batches' time a bolt's tasks were busy.

On the local engine a task's capacity is the fraction of the last ~10 s it spent
executing tuples (Storm's capacity). On Spark a bolt's tasks run only inside
micro-batches, one after the other, so the closest honest equivalent measures against
the micro-batches' wall time instead of the clock's: for the micro-batches that ended
in the last ~10 s, the time a task spent in ``execute`` divided by the time those
micro-batches took on the driver. Near 1.0, the bolt's task is what the micro-batches
wait for; a bolt whose topology processes nothing (no micro-batch for 10 s) has 0.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Hashable, Mapping

from squall.runtime.metrics import CAPACITY_WINDOW_SECS


class CapacityWindow:
    """Cumulative busy seconds per key (a task, or a stage) sampled after each
    micro-batch, with the micro-batches' cumulative wall time.

    ``record`` runs on the thread Spark calls ``foreachBatch`` in, ``capacity`` on any
    thread.
    """

    def __init__(self, window_secs: float = CAPACITY_WINDOW_SECS) -> None:
        self.window_secs = window_secs
        self._lock = threading.Lock()
        self._batch_secs = 0.0
        #: ``(end time, cumulative batch seconds, cumulative busy seconds per key)``,
        #: oldest first; the first is the baseline of the window.
        self._samples: deque[tuple[float, float, dict[Hashable, float]]] = deque(
            [(time.monotonic(), 0.0, {})]
        )

    def record(self, batch_secs: float, busy: Mapping[Hashable, float]) -> None:
        """A micro-batch that took ``batch_secs`` ended; ``busy`` holds each key's
        busy seconds so far (cumulative)."""
        now = time.monotonic()
        with self._lock:
            self._batch_secs += batch_secs
            self._samples.append((now, self._batch_secs, dict(busy)))
            start = now - self.window_secs
            while len(self._samples) > 2 and self._samples[1][0] <= start:
                self._samples.popleft()

    def capacity(self, key: Hashable, tasks: int = 1) -> float:
        """The fraction of the recent micro-batches' time ``key`` was busy, divided by
        ``tasks`` when ``key``'s busy time is summed over that many tasks; 0.0 when no
        micro-batch ended in the window. At most 1.0."""
        start = time.monotonic() - self.window_secs
        with self._lock:
            base = self._samples[0]
            for sample in self._samples:
                if sample[0] > start:
                    break
                base = sample
            last = self._samples[-1]
        elapsed = last[1] - base[1]
        if elapsed <= 0 or tasks <= 0:
            return 0.0
        busy = last[2].get(key, 0.0) - base[2].get(key, 0.0)
        return max(0.0, min(1.0, busy / (elapsed * tasks)))
