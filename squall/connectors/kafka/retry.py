"""When a failed Kafka record is emitted again: Storm's exponential back-off
(``KafkaSpoutRetryExponentialBackoff``), and the schedule of a spout task's retries."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import Any

from squall.connectors.options import OptionChecker


@dataclass(frozen=True)
class RetryBackoff:
    """How a ``KafkaSpout`` emits a failed record again.

    The record's first retry comes ``initial_ms`` after its first failure; after its
    ``n``-th failure (``n`` >= 2), ``period_ms * 2 ** (n - 1)`` milliseconds later, never
    more than ``max_ms``. With ``max_retries`` set, a record is emitted again at most that
    many times: its next failure exhausts its retries and the spout counts it as done (as
    Storm does, which then marks it acked), reports it and counts it in the
    ``retries_exhausted`` metric. ``max_retries=None`` retries for ever.

    Attributes:
        initial_ms: the wait before the first retry.
        period_ms: the base of the later waits.
        max_retries: the retries of one record at most (None: no limit).
        max_ms: the longest wait.
    """

    initial_ms: int = 0
    period_ms: int = 2
    max_retries: int | None = None
    max_ms: int = 10_000

    def delay_ms(self, failures: int) -> int:
        """Milliseconds from a record's ``failures``-th failure to its retry."""
        if failures <= 1:
            return min(self.initial_ms, self.max_ms)
        return int(min(self.period_ms * 2 ** min(failures - 1, 62), self.max_ms))

    def exhausted(self, failures: int) -> bool:
        """Whether a record that failed ``failures`` times is not retried again."""
        return self.max_retries is not None and failures > self.max_retries

    def check(self, checker: OptionChecker) -> None:
        """Raise the checker's error if a field is wrong."""
        for name in ("initial_ms", "period_ms", "max_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise checker.fail(f"retry.{name} must be an int >= 0, got {value!r}")
        retries = self.max_retries
        if retries is not None and (
            isinstance(retries, bool) or not isinstance(retries, int) or retries < 0
        ):
            raise checker.fail(f"retry.max_retries must be None or an int >= 0, got {retries!r}")


class RetrySchedule:
    """The failed records of one spout task waiting for their retry, and each record's
    failures so far.

    Used on the spout task's thread only; picklable (kept in Spark snapshots).
    """

    def __init__(self, backoff: RetryBackoff) -> None:
        self.backoff = backoff
        self._failures: dict[Any, int] = {}
        self._due: list[tuple[float, int, Any]] = []
        self._order = itertools.count()

    def failed(self, msg_id: Any, now: float) -> bool:
        """Count a failure of ``msg_id`` at ``now`` (seconds); schedule its retry and
        return True, or return False if its retries are exhausted (then forgotten)."""
        failures = self._failures.get(msg_id, 0) + 1
        if self.backoff.exhausted(failures):
            self._failures.pop(msg_id, None)
            return False
        self._failures[msg_id] = failures
        due = now + self.backoff.delay_ms(failures) / 1000.0
        heapq.heappush(self._due, (due, next(self._order), msg_id))
        return True

    def done(self, msg_id: Any) -> None:
        """Forget ``msg_id`` (acked)."""
        self._failures.pop(msg_id, None)

    @property
    def failing(self) -> bool:
        """Whether any record has failed and is not done yet."""
        return bool(self._failures)

    def failures(self, msg_id: Any) -> int:
        """The failures of ``msg_id`` so far."""
        return self._failures.get(msg_id, 0)

    def next_due(self) -> float | None:
        """When the earliest scheduled retry is due (None: none scheduled)."""
        return self._due[0][0] if self._due else None

    def pop_due(self, now: float) -> list[Any]:
        """The message ids whose retry is due at ``now``, earliest first."""
        due = self._due
        ready: list[Any] = []
        while due and due[0][0] <= now:
            ready.append(heapq.heappop(due)[2])
        return ready

    def forget(self, keep: Any) -> None:
        """Drop the records for which ``keep(msg_id)`` is false (a partition lost)."""
        self._due = [entry for entry in self._due if keep(entry[2])]
        heapq.heapify(self._due)
        self._failures = {key: value for key, value in self._failures.items() if keep(key)}

    def __len__(self) -> int:
        return len(self._due)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(vars(self))
        state["_order"] = next(self._order)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self._order = itertools.count(state["_order"])


__all__ = ["RetryBackoff", "RetrySchedule"]
