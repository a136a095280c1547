"""Running a micro-batch again when it fails, with a back-off between attempts.

The micro-batch driver of every query (core, Trident or transactional) uses
:class:`BatchRetries`: a failed attempt is recorded, then, while retries are left, the
driver waits the back-off of :class:`~squall.runtime.backoff.RetryBackoff` (on the
cluster's clock) and runs the batch again under the same transaction id. Killing the
topology ends a wait at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from squall.model.clock import Clock
from squall.model.errors import InvalidTopologyError
from squall.runtime.backoff import RetryBackoff
from squall.spark.errors import component_failure

logger = logging.getLogger("squall")

RETRIES_KEY = "topology.spark.batch.retries"
DEFAULT_RETRIES = 3

_Result = TypeVar("_Result")


class FailureLog(Protocol):
    """Where failed attempts are recorded (``BatchFigures``)."""

    retries: int

    def record(self, exc: BaseException) -> None:
        """Keep the error of a failed attempt."""


def retries_from(conf: dict[str, Any], owner: str) -> int:
    """``topology.spark.batch.retries`` of ``conf`` (default 3).

    Raises:
        InvalidTopologyError: it is not an int >= 0.
    """
    value = conf.get(RETRIES_KEY, DEFAULT_RETRIES)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidTopologyError(f"{owner}: {RETRIES_KEY} must be an int >= 0, got {value!r}")
    return value


class BatchRetries:
    """Runs attempts of a micro-batch until one succeeds or the retries run out.

    Runs on the driver, in the thread Spark calls ``foreachBatch`` in; ``stop`` may be
    called from any thread. The back-off carries over from one micro-batch to the next
    until an attempt succeeds, so a long outage keeps its long waits.

    Args:
        conf: the topology's configuration (retries and back-off keys).
        figures: where each failed attempt is recorded and retries counted.
        clock: whose ``sleep_ms`` waits between attempts.
        owner: names the topology in configuration errors.

    Raises:
        InvalidTopologyError: a retry or back-off setting is invalid.
    """

    def __init__(self, conf: dict[str, Any], figures: FailureLog, clock: Clock, owner: str):
        self.retries = retries_from(conf, owner)
        self.backoff = RetryBackoff.from_conf(conf, owner)
        self.figures = figures
        self.clock = clock
        self._stop = threading.Event()

    @property
    def stopping(self) -> bool:
        """Set when the topology is killed: an interrupted batch is not run again."""
        return self._stop.is_set()

    def stop(self) -> None:
        """The topology is being killed: end a wait, run no further attempt."""
        self._stop.set()

    def run(self, batch_id: int, attempt: Callable[[int], _Result]) -> _Result:
        """``attempt(0)``, then ``attempt(1)``... after each failure, until one returns.

        Returns:
            What the successful attempt returned.

        Raises:
            Exception: the last attempt's error, once ``retries`` attempts have failed
                after the first, or as soon as the topology is being killed.
        """
        number = 0
        while True:
            try:
                result = attempt(number)
            except Exception as exc:
                if self.stopping:  # killed: the batch was interrupted, not failed
                    raise
                self.figures.record(exc)
                delay = self.backoff.failed()
                if number >= self.retries:
                    raise
                self.figures.retries += 1
                logger.warning(
                    "batch %d failed (%s); running it again in %g ms", batch_id, _cause(exc), delay
                )
                if self.clock.sleep_ms(delay, self._stop) or self.stopping:
                    raise
                number += 1
                continue
            self.backoff.succeeded()
            return result


def _cause(exc: BaseException) -> object:
    """What a failed attempt's warning names: the component's error (``component 'x'
    task 3: ValueError: ...``) when a component's code raised it, else the error."""
    source = component_failure(exc)
    if source is None:
        return exc
    return f"component {source.component_id!r} task {source.task_id}: {source.error}"
