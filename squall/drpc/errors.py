"""Errors of DRPC: what a DRPC client sees when a request does not return a result."""

from __future__ import annotations

from enum import Enum
from typing import Any

from squall.model.errors import SquallError


class DRPCErrorReason(str, Enum):
    """Why a DRPC request ended without a result (Storm's ``DRPCExceptionType``)."""

    FAILED = "failed"
    """The topology failed the request (``fail_request``)."""
    TIMEOUT = "timeout"
    """No result arrived within the request timeout."""
    SHUTDOWN = "shutdown"
    """The DRPC server or ``LocalDRPC`` shut down before a result arrived."""
    UNREACHABLE = "unreachable"
    """The DRPC server could not be reached (network client only)."""
    PROTOCOL = "protocol"
    """The DRPC server answered something that is not the DRPC protocol."""
    UNAUTHORIZED = "unauthorized"
    """The DRPC server refused the request: its token is missing or wrong (HTTP 401)."""
    BUSY = "busy"
    """The DRPC server refused the request for now: every handler is busy, or its body
    would exceed the bytes the server holds at once (HTTP 503); try again later."""
    REJECTED = "rejected"
    """The DRPC server refused the request itself: its body is over the size limit
    (HTTP 413), or it did not arrive whole within the read deadline (HTTP 408)."""
    CANCELLED = "cancelled"
    """The caller went away (closed its connection) before the result came: the server
    dropped the request. Only the server sees it; no caller is left to tell."""


class DRPCError(SquallError):
    """Base class of DRPC errors.

    Raised as such by :class:`~squall.drpc.DRPCInvocationsClient` when the DRPC server
    cannot be reached or answers outside the protocol, and when a ``LocalDRPC`` cannot
    be resolved in this process.
    """


class DRPCExecutionError(DRPCError):
    """A DRPC ``execute`` call ended without a result.

    The message names the function, the request id when one was assigned, the DRPC
    server (``host:port``) for network clients, and the reason.

    Attributes:
        function: The DRPC function that was called.
        reason: Why the request ended (failed, timed out, shut down, unreachable or
            refusing server).
        request_id: The request id, or ``None`` if the request never reached a broker.
        server: ``"host:port"`` of the DRPC server for network clients, else ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        function: str,
        reason: DRPCErrorReason,
        request_id: str | None = None,
        server: str | None = None,
    ) -> None:
        super().__init__(message)
        self.function = function
        self.reason = reason
        self.request_id = request_id
        self.server = server

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_execution_error,
            (str(self), self.function, self.reason.value, self.request_id, self.server),
        )


def _rebuild_execution_error(
    message: str, function: str, reason: str, request_id: str | None, server: str | None
) -> DRPCExecutionError:
    return DRPCExecutionError(
        message,
        function=function,
        reason=DRPCErrorReason(reason),
        request_id=request_id,
        server=server,
    )


def execution_error(
    function: str,
    reason: DRPCErrorReason,
    *,
    request_id: str | None = None,
    detail: str = "",
    server: str | None = None,
) -> DRPCExecutionError:
    """A :class:`DRPCExecutionError` with the standard message for ``reason``.

    Args:
        function: The DRPC function name.
        reason: Why the request ended.
        request_id: The request id, if one was assigned.
        detail: Extra words: the topology's failure message, the timeout, the OS error.
        server: ``"host:port"`` of the DRPC server, for network clients.
    """
    subject = f"DRPC request {request_id} for function {function!r}"
    if request_id is None:
        subject = f"DRPC request for function {function!r}"
    if reason is DRPCErrorReason.FAILED:
        message = f"{subject} failed: {detail or 'the topology failed the request'}"
    elif reason is DRPCErrorReason.TIMEOUT:
        message = f"{subject} timed out{f' {detail}' if detail else ''}"
    elif reason is DRPCErrorReason.SHUTDOWN:
        message = f"{subject} was abandoned: {detail or 'the DRPC service shut down'}"
    elif reason is DRPCErrorReason.CANCELLED:
        message = f"{subject} was dropped: {detail or 'its caller went away'}"
    elif reason in (DRPCErrorReason.UNAUTHORIZED, DRPCErrorReason.BUSY, DRPCErrorReason.REJECTED):
        message = f"{subject} was refused: {detail}"
    elif reason is DRPCErrorReason.UNREACHABLE:
        where = f"DRPC server {server}" if server else "the DRPC server"
        message = f"{subject} could not be sent: {where} is unreachable ({detail})"
    else:
        message = f"{subject} got an invalid answer: {detail}"
    if server and reason is not DRPCErrorReason.UNREACHABLE:
        message += f" (DRPC server {server})"
    return DRPCExecutionError(
        message, function=function, reason=reason, request_id=request_id, server=server
    )
