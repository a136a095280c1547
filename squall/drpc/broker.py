"""The DRPC broker: pending requests per function, and clients waiting for results.

The broker is Storm's DRPC server logic without the network: a client thread calls
``execute`` and blocks; a DRPC spout (on any thread) takes the request with
``fetch_request``; the topology's last step calls ``result`` or ``fail_request`` with the
request id, which wakes the client. Used in-process by :class:`~squall.drpc.LocalDRPC`
and behind HTTP by :class:`~squall.drpc.DRPCServer`.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from squall.drpc.errors import DRPCErrorReason, execution_error
from squall.drpc.request import DRPCRequest
from squall.model.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECS = 600.0
"""Storm's ``drpc.request.timeout.secs`` default."""

# A waiting client re-reads the clock at least this often, so an injected clock that is
# moved by hand (ManualClock) is noticed; the system clock needs no more than one wait.
_WAIT_SLICE_SECS = 0.1


@dataclass
class _Outstanding:
    """A request from ``execute`` until a result, a failure, a timeout or shutdown."""

    request: DRPCRequest
    done: threading.Event = field(default_factory=threading.Event)
    result: str | None = None
    failure: DRPCErrorReason | None = None
    message: str = ""
    fetched: bool = False


class DRPCBroker:
    """Thread-safe broker between DRPC clients and the topologies that serve them.

    Requests are handed out per function in FIFO order. Each request gets a unique
    random 64-bit id (16 hex digits). A request ends exactly once: with a result, a
    failure, a timeout or the broker's shutdown; anything said about it afterwards (a
    late result, a second failure) is ignored.

    Every method may be called from any thread. ``execute`` blocks its caller; the
    others return at once.

    Args:
        timeout_secs: Default time a request may take, fetched or not, before its client
            gets a timeout error (Storm's ``drpc.request.timeout.secs``).
        return_info: Address of this broker, copied into every request's
            ``return_info`` (with the ``request_id`` added) so results can be routed
            back to it.
        clock: Where time is read; waits are real-time, but deadlines follow the clock.
    """

    def __init__(
        self,
        timeout_secs: float = DEFAULT_TIMEOUT_SECS,
        return_info: Mapping[str, Any] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        _check_timeout(timeout_secs)
        self.timeout_secs = float(timeout_secs)
        self._return_info = dict(return_info or {})
        self._clock = clock
        self._lock = threading.Lock()
        self._outstanding: dict[str, _Outstanding] = {}
        self._queues: dict[str, deque[str]] = {}
        self._shut_down = False

    # --- the client side ---------------------------------------------------------------

    def execute(
        self,
        function: str,
        args: str,
        timeout_secs: float | None = None,
        *,
        cancelled: Callable[[], bool] | None = None,
    ) -> str:
        """Call ``function`` with ``args``; block until the topology returns the result.

        Runs on the caller's thread, which blocks for at most the timeout.

        Args:
            function: The DRPC function name (a topology's ``new_drpc_stream`` name).
            args: The argument string.
            timeout_secs: This request's timeout; the broker's default if ``None``.
            cancelled: Asked on the caller's thread about every 0.1 s while the call
                waits; once it returns ``True`` (the caller went away) the request is
                dropped as a timed-out one is: taken off its queue if no topology
                fetched it yet, its result ignored if one did, and the call raises
                with reason ``CANCELLED``.

        Returns:
            The result text, exactly as the topology passed it to ``result`` (for Storm
            topologies, the JSON text of the result tuples, e.g. ``'[[2]]'``).

        Raises:
            DRPCExecutionError: The topology failed the request, no result came within
                the timeout (the request is then forgotten: a late result is ignored),
                the call was cancelled, or the broker shut down.
            TypeError: ``function`` or ``args`` is not a string.
            ValueError: ``function`` is empty or the timeout is not positive.
        """
        _check_function(function)
        if not isinstance(args, str):
            raise TypeError(f"DRPC args must be a string, not {type(args).__name__}")
        timeout = self.timeout_secs if timeout_secs is None else float(timeout_secs)
        _check_timeout(timeout)
        outstanding = self._submit(function, args)
        request_id = outstanding.request.request_id
        deadline_ms = self._clock.now_ms() + timeout * 1000.0
        while True:
            remaining_secs = (deadline_ms - self._clock.now_ms()) / 1000.0
            if remaining_secs <= 0 and self._drop(outstanding, DRPCErrorReason.TIMEOUT):
                state = "fetched but not answered" if outstanding.fetched else "never fetched"
                raise execution_error(
                    function,
                    DRPCErrorReason.TIMEOUT,
                    request_id=request_id,
                    detail=f"after {timeout:g} s with no result; it was {state}",
                )
            if outstanding.done.wait(max(0.0, min(remaining_secs, _WAIT_SLICE_SECS))):
                break
            if (
                cancelled is not None
                and cancelled()
                and self._drop(outstanding, DRPCErrorReason.CANCELLED)
            ):
                state = (
                    "a topology had fetched it: its result will be ignored"
                    if outstanding.fetched
                    else "no topology had fetched it"
                )
                raise execution_error(
                    function,
                    DRPCErrorReason.CANCELLED,
                    request_id=request_id,
                    detail=f"its caller went away; {state}",
                )
        if outstanding.result is not None:
            return outstanding.result
        reason = outstanding.failure or DRPCErrorReason.FAILED
        raise execution_error(function, reason, request_id=request_id, detail=outstanding.message)

    def _submit(self, function: str, args: str) -> _Outstanding:
        with self._lock:
            if self._shut_down:
                raise execution_error(
                    function, DRPCErrorReason.SHUTDOWN, detail="the DRPC service is shut down"
                )
            request_id = _new_request_id()
            while request_id in self._outstanding:
                request_id = _new_request_id()
            return_info = {**self._return_info, "request_id": request_id}
            outstanding = _Outstanding(DRPCRequest(request_id, function, args, return_info))
            self._outstanding[request_id] = outstanding
            self._queues.setdefault(function, deque()).append(request_id)
            return outstanding

    def _drop(self, outstanding: _Outstanding, reason: DRPCErrorReason) -> bool:
        """Forget a request that timed out or whose caller went away: off its queue if
        not fetched, and a later result is ignored. ``False`` if it ended meanwhile
        (use that end)."""
        request = outstanding.request
        with self._lock:
            if outstanding.done.is_set():
                return False
            del self._outstanding[request.request_id]
            if not outstanding.fetched:
                queue = self._queues.get(request.function)
                if queue is not None:
                    queue.remove(request.request_id)
                    if not queue:
                        del self._queues[request.function]
            outstanding.failure = reason
            outstanding.done.set()
            return True

    # --- the topology side (invocations) ------------------------------------------------

    def fetch_request(self, function: str) -> DRPCRequest | None:
        """The oldest request for ``function`` not yet fetched, or ``None``. Never blocks.

        The request stays outstanding (and its timeout keeps running) until ``result``
        or ``fail_request`` names it.
        """
        with self._lock:
            queue = self._queues.get(function)
            if not queue:
                return None
            request_id = queue.popleft()
            if not queue:
                del self._queues[function]
            outstanding = self._outstanding[request_id]
            outstanding.fetched = True
            return outstanding.request

    def result(self, request_id: str, result: str) -> None:
        """Hand ``result`` to the client waiting on ``request_id``; ignored if it ended.

        Raises:
            TypeError: ``result`` is not a string (it must be the result's JSON text).
        """
        if not isinstance(result, str):
            raise TypeError(f"a DRPC result must be a string, not {type(result).__name__}")
        self.complete(request_id, result=result)

    def fail_request(self, request_id: str, message: str = "") -> None:
        """Fail ``request_id``: its client gets a DRPCExecutionError naming ``message``.

        Ignored if the request already ended.
        """
        self.complete(request_id, failure=str(message))

    def complete(
        self, request_id: str, *, result: str | None = None, failure: str | None = None
    ) -> bool:
        """End a request with a result or, if ``result`` is ``None``, a failure.

        Returns:
            ``True`` if the request was outstanding and is now ended; ``False`` if it
            was unknown or already ended (timed out, answered, failed), so ignored.
        """
        with self._lock:
            outstanding = self._outstanding.pop(request_id, None)
            if outstanding is None:
                logger.debug("ignoring the end of unknown or ended DRPC request %s", request_id)
                return False
            if not outstanding.fetched:
                queue = self._queues.get(outstanding.request.function)
                if queue is not None:
                    queue.remove(request_id)
                    if not queue:
                        del self._queues[outstanding.request.function]
            if result is not None:
                outstanding.result = result
            else:
                outstanding.failure = DRPCErrorReason.FAILED
                outstanding.message = failure or ""
            outstanding.done.set()
            return True

    # --- lifecycle and inspection ---------------------------------------------------------

    def shutdown(self) -> None:
        """End every outstanding request with a shutdown error; refuse new ones.

        Clients blocked in ``execute`` wake up and raise DRPCExecutionError. Idempotent.
        """
        with self._lock:
            self._shut_down = True
            ended = list(self._outstanding.values())
            self._outstanding.clear()
            self._queues.clear()
            for outstanding in ended:
                outstanding.failure = DRPCErrorReason.SHUTDOWN
                outstanding.message = "the DRPC service shut down"
                outstanding.done.set()

    @property
    def is_shut_down(self) -> bool:
        """Whether :meth:`shutdown` was called."""
        return self._shut_down

    def pending_count(self, function: str | None = None) -> int:
        """Requests not yet fetched, for ``function`` or for every function."""
        with self._lock:
            if function is not None:
                return len(self._queues.get(function, ()))
            return sum(len(queue) for queue in self._queues.values())

    def outstanding_count(self) -> int:
        """Requests not yet ended (fetched or not)."""
        with self._lock:
            return len(self._outstanding)


def _new_request_id() -> str:
    return f"{random.getrandbits(64):016x}"


def _check_function(function: str) -> None:
    if not isinstance(function, str):
        raise TypeError(f"a DRPC function name must be a string, not {type(function).__name__}")
    if not function:
        raise ValueError("a DRPC function name cannot be empty")


def _check_timeout(timeout_secs: float) -> None:
    if not timeout_secs > 0:
        raise ValueError(f"a DRPC timeout must be positive, not {timeout_secs!r}")
