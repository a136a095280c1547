"""When a connector tries its server again after a failure: capped exponential
back-off, and the error that names the connector and the address."""

from __future__ import annotations

import time
from collections.abc import Callable

from squall.connectors.errors import ConnectorUnavailableError

#: Milliseconds before the first retry after a connection failure.
INITIAL_WAIT_MS = 100.0
#: The longest wait between two attempts.
MAX_WAIT_MS = 5_000.0


class Outage:
    """The back-off of one connector instance against its server.

    Runs in the task that owns the connector (not thread-safe). After the ``n``-th
    consecutive failure the next attempt is allowed ``min(initial * 2 ** (n - 1), max)``
    milliseconds later; a success starts the schedule over.

    Attributes:
        connector: names the connector in errors (its class and, in a task, component).
        address: the server's address, password hidden.
        failures: consecutive failures since the last success.
    """

    def __init__(
        self,
        connector: str,
        address: str,
        initial_ms: float = INITIAL_WAIT_MS,
        max_ms: float = MAX_WAIT_MS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.connector = connector
        self.address = address
        self.initial_ms = initial_ms
        self.max_ms = max_ms
        self.failures = 0
        self._clock = clock
        self._retry_at = 0.0

    def ready(self) -> bool:
        """Whether an attempt may be made now (no failure, or its wait has passed)."""
        return self.failures == 0 or self._clock() >= self._retry_at

    def wait_ms(self) -> float:
        """Milliseconds until an attempt may be made (0 if now)."""
        if self.failures == 0:
            return 0.0
        return max(0.0, (self._retry_at - self._clock()) * 1000.0)

    def wait(self) -> None:
        """Sleep until an attempt may be made (used by sinks, which have nothing else
        to do while their server is down)."""
        pause = self.wait_ms()
        if pause > 0:
            time.sleep(pause / 1000.0)

    def failed(self, error: BaseException) -> ConnectorUnavailableError:
        """Record a failed attempt; the error to report, naming the connector, the
        address, the cause and when it tries again."""
        self.failures += 1
        wait = min(self.initial_ms * 2 ** min(self.failures - 1, 60), self.max_ms)
        self._retry_at = self._clock() + wait / 1000.0
        return ConnectorUnavailableError(
            f"{self.connector} cannot reach {self.address}: {error} "
            f"(attempt {self.failures}; retrying in {wait / 1000.0:g} s)"
        )

    def recovered(self) -> None:
        """Record a successful attempt."""
        self.failures = 0
        self._retry_at = 0.0
