"""Capped exponential back-off between the attempts of a failed batch.

Both engines replay a failed batch under the same transaction id: the local engine's
transactional coordinator starts it again, a Spark batch runner runs the micro-batch
again. Without a pause, a batch failing on an unreachable store (a database that is
down) would be retried as fast as it fails. :class:`RetryBackoff` is the schedule both
use: after the ``n``-th consecutive failure the next attempt waits
``min(initial * 2 ** (n - 1), max)`` milliseconds; a success starts the schedule over.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from squall.model.config import Config
from squall.model.errors import InvalidTopologyError

#: Milliseconds before the first retry of a failed batch (when the key is unset).
DEFAULT_INITIAL_MS = 100.0
#: The longest wait between two attempts (when the key is unset).
DEFAULT_MAX_MS = 10_000.0
#: Doubling stops growing past this exponent (``2 ** 60`` ms is far past any cap).
_MAX_EXPONENT = 60


def _millis(conf: dict[str, Any], key: str, default: float, owner: str) -> float:
    value = conf.get(key)
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise InvalidTopologyError(
            f"{owner}: {key} must be a number of milliseconds >= 0, got {value!r}"
        )
    return float(value)


@dataclass
class RetryBackoff:
    """The wait before the next attempt of a failed batch.

    Not thread-safe: one owner (a coordinator task, a batch runner) calls it.

    Attributes:
        initial_ms: the wait after the first failure; 0 turns the back-off off.
        max_ms: the cap on any wait.
        failures: consecutive failures since the last success.
    """

    initial_ms: float = DEFAULT_INITIAL_MS
    max_ms: float = DEFAULT_MAX_MS
    failures: int = 0

    @classmethod
    def from_conf(cls, conf: dict[str, Any], owner: str) -> RetryBackoff:
        """The schedule configured by ``topology.trident.batch.retry.initial.millis``
        and ``topology.trident.batch.retry.max.millis``.

        Runs where the topology is submitted or its task starts.

        Args:
            conf: the topology's configuration.
            owner: names what retries in error messages (a component, a topology).

        Raises:
            InvalidTopologyError: a value is not a number >= 0, or the cap is below the
                initial wait.
        """
        initial_key = Config.TOPOLOGY_TRIDENT_BATCH_RETRY_INITIAL_MILLIS
        max_key = Config.TOPOLOGY_TRIDENT_BATCH_RETRY_MAX_MILLIS
        initial = _millis(conf, initial_key, DEFAULT_INITIAL_MS, owner)
        cap = _millis(conf, max_key, max(DEFAULT_MAX_MS, initial), owner)
        if cap < initial:
            raise InvalidTopologyError(
                f"{owner}: {max_key} ({cap:g}) must not be below {initial_key} ({initial:g})"
            )
        return cls(initial, cap)

    @property
    def delay_ms(self) -> float:
        """The wait before the next attempt: 0 after a success, else the schedule's
        wait for the current run of consecutive failures."""
        if self.failures == 0 or self.initial_ms == 0:
            return 0.0
        exponent = min(self.failures - 1, _MAX_EXPONENT)
        return min(self.initial_ms * 2.0**exponent, self.max_ms)

    def failed(self) -> float:
        """Count a failed attempt; returns the wait before the next one."""
        self.failures += 1
        return self.delay_ms

    def succeeded(self) -> None:
        """A batch succeeded: the next failure waits ``initial_ms`` again."""
        self.failures = 0
