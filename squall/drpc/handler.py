"""The HTTP side of one DRPC server port: one request per connection, on a handler thread.

The client port serves ``/drpc`` (execute); the invocations port serves ``/fetch``,
``/result`` and ``/fail``; either answers ``404`` for the other's paths. A port with a
token answers ``401`` to a request without ``Authorization: Bearer <token>`` before
reading its body. A caller that hangs up while its ``execute`` waits has its request
dropped and its handler freed at once. Bodies are bounded per request (``413``) and in
total per port (``503``), and refused bodies are never read into memory. The request
line, headers and body must arrive within the read deadline (``408`` after it). Every
error answer is JSON ``{"error": ...}`` (with ``"reason"`` when a DRPC client should tell
it apart).
"""

from __future__ import annotations

import hmac
import io
import json
import logging
import socket
import time
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any, Literal, cast
from urllib.parse import parse_qs, unquote, urlsplit

from squall.drpc.broker import DRPCBroker
from squall.drpc.config import DRPCLimits
from squall.drpc.errors import DRPCErrorReason, DRPCExecutionError
from squall.drpc.listener import BodyBudget
from squall.runtime.http_limits import body_too_large, request_too_slow

logger = logging.getLogger(__name__)

Role = Literal["client", "invocations"]

_LINGER_SECS = 2.0
"""Longest time spent discarding a refused body, so the client can read the answer."""
_MAX_REQUEST_LINE = 65536
_STATUS_BY_REASON = {
    DRPCErrorReason.FAILED: HTTPStatus.INTERNAL_SERVER_ERROR,
    DRPCErrorReason.TIMEOUT: HTTPStatus.GATEWAY_TIMEOUT,
    DRPCErrorReason.SHUTDOWN: HTTPStatus.SERVICE_UNAVAILABLE,
}
_INVOCATION_ACTIONS = ("fetch", "result", "fail")


@dataclass
class PortContext:
    """What the handlers of one port share.

    Attributes:
        role: ``"client"`` (execute) or ``"invocations"`` (fetch, result, fail).
        broker: The broker the requests go to.
        token: The bearer token this port requires, or ``None``.
        limits: The server's limits.
        budget: This port's request-body budget.
    """

    role: Role
    broker: DRPCBroker
    token: str | None
    limits: DRPCLimits
    budget: BodyBudget


def json_answer(status: HTTPStatus, body: dict[str, Any]) -> bytes:
    """A whole HTTP/1.0 answer with a JSON body (for refusals sent outside a handler)."""
    payload = json.dumps(body).encode("utf-8")
    head = (
        f"HTTP/1.0 {status.value} {status.phrase}\r\nServer: squall-drpc\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("ascii") + payload


def serve_connection(context: PortContext, connection: socket.socket, address: Any) -> None:
    """Serve the one request of ``connection``; runs on a handler thread of the port."""
    _Handler(connection, address, context)


class _HTTPError(Exception):
    """A request the handler refuses, with its status, message and answer fields."""

    def __init__(
        self,
        status: HTTPStatus,
        message: str,
        reason: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.headers = headers or {}


class _DeadlineReader(io.RawIOBase):
    """Reads a socket until a fixed deadline: each read waits at most the time left."""

    def __init__(self, connection: socket.socket, deadline: float) -> None:
        super().__init__()
        self._connection = connection
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the read deadline passed")
        self._connection.settimeout(remaining)
        return self._connection.recv_into(buffer)


class _SocketWriter(io.BufferedIOBase):
    """Writes whole buffers to a socket (``sendall``)."""

    def __init__(self, connection: socket.socket) -> None:
        super().__init__()
        self._connection = connection

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._connection.sendall(data)
        return len(data)


class _Handler(BaseHTTPRequestHandler):
    """One HTTP/1.0 request on one connection; runs on a handler thread of the port."""

    server_version = "squall-drpc"
    protocol_version = "HTTP/1.0"

    def __init__(self, connection: socket.socket, address: Any, context: PortContext) -> None:
        self.context = context
        self.deadline = time.monotonic() + context.limits.read_timeout_secs
        self._reserved = 0  # body bytes reserved in the budget
        self._unread_body = 0  # bytes announced by Content-Length and not read
        super().__init__(connection, address, cast(Any, None))

    def setup(self) -> None:
        # What parse_request sets, for an answer sent before a request line arrived.
        self.command, self.requestline, self.request_version = "", "", "HTTP/1.0"
        self.connection = self.request
        self.rfile = io.BufferedReader(_DeadlineReader(self.connection, self.deadline))
        self.wfile = _SocketWriter(self.connection)

    def finish(self) -> None:
        """Nothing to flush: answers are written whole; the pool closes the socket."""

    def handle(self) -> None:
        self.close_connection = True
        try:
            self.handle_one_request()
        except TimeoutError:
            self._too_slow()
        except OSError as exc:  # the client went away: nothing left to tell it
            logger.debug("DRPC connection from %s dropped: %s", self.address_string(), exc)
        finally:
            if self._reserved:
                self.context.budget.release(self._reserved)
                self._reserved = 0

    def handle_one_request(self) -> None:
        self.raw_requestline = self.rfile.readline(_MAX_REQUEST_LINE + 1)
        if len(self.raw_requestline) > _MAX_REQUEST_LINE:
            self.requestline, self.request_version, self.command = "", "", ""
            self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG, "the request line is too long")
            return
        if not self.raw_requestline or not self.parse_request():
            return  # the client left, or parse_request answered the error
        if self.command not in ("GET", "POST"):
            self.send_error(HTTPStatus.METHOD_NOT_ALLOWED, f"use GET or POST, not {self.command}")
            return
        self._dispatch(self.command)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Answer an error found while parsing the request, as JSON."""
        status = HTTPStatus(code)
        self._send_json(status, {"error": message or status.phrase})

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s - %s", self.address_string(), format % args)

    # --- routing ----------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        self._unread_body = _announced_length(self.headers.get("Content-Length"))
        try:
            self._authorize()
            self._route(method)
        except _HTTPError as exc:
            body: dict[str, Any] = {"error": str(exc)}
            if exc.reason is not None:
                body["reason"] = exc.reason
            self._send_json(exc.status, body, exc.headers)
        except DRPCExecutionError as exc:
            status = _STATUS_BY_REASON.get(exc.reason, HTTPStatus.INTERNAL_SERVER_ERROR)
            self._send_json(
                status,
                {
                    "error": str(exc),
                    "reason": exc.reason.value,
                    "function": exc.function,
                    "request_id": exc.request_id,
                },
            )
        except (TypeError, ValueError) as exc:
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
        if self._unread_body > 0:
            self._linger()

    def _authorize(self) -> None:
        """Raise 401 unless the request carries this port's token (if it has one)."""
        token = self.context.token
        if token is None:
            return
        scheme, _, given = self.headers.get("Authorization", "").strip().partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            problem = "no token was sent"
        elif hmac.compare_digest(given.strip().encode("latin-1"), token.encode("ascii")):
            return
        else:
            problem = "the token is wrong"
        raise _HTTPError(
            HTTPStatus.UNAUTHORIZED,
            f"unauthorized: the {self.context.role} port of this DRPC server requires "
            f"'Authorization: Bearer <token>' and {problem}",
            reason=DRPCErrorReason.UNAUTHORIZED.value,
            headers={"WWW-Authenticate": 'Bearer realm="squall-drpc"'},
        )

    def _route(self, method: str) -> None:
        parts = urlsplit(self.path)
        segments = [unquote(segment) for segment in parts.path.strip("/").split("/")]
        action, names = segments[0], segments[1:]
        if self.context.role == "client":
            if action == "drpc":
                self._execute(method, names, parts.query)
                return
            hint = " (fetch, result and fail are served on the invocations port)"
            hint = hint if action in _INVOCATION_ACTIONS else ""
            raise _HTTPError(
                HTTPStatus.NOT_FOUND, f"no such path on the client port: {parts.path}{hint}"
            )
        if action in _INVOCATION_ACTIONS and len(names) == 1 and names[0]:
            self._invocation(action, method, names[0])
            return
        hint = " (execute is served on the client port)" if action == "drpc" else ""
        raise _HTTPError(
            HTTPStatus.NOT_FOUND, f"no such path on the invocations port: {parts.path}{hint}"
        )

    def _execute(self, method: str, names: list[str], query: str) -> None:
        """``/drpc/<function>``: block this handler until the call ends."""
        if method == "POST" and len(names) == 1:
            args = self._read_text()
        elif method == "GET" and len(names) in (1, 2):
            args = names[1] if len(names) == 2 else ""
        else:
            raise _HTTPError(HTTPStatus.NOT_FOUND, f"no such path: {self.path}")
        broker = self.context.broker
        requested = _timeout_query(query)
        timeout = broker.timeout_secs if requested is None else min(requested, broker.timeout_secs)
        try:
            result = broker.execute(names[0], args, timeout, cancelled=self._caller_gone)
        except DRPCExecutionError as exc:
            if exc.reason is not DRPCErrorReason.CANCELLED:
                raise
            logger.debug("%s: %s", self.address_string(), exc)
            return  # nobody is left to answer
        self._send(HTTPStatus.OK, result.encode("utf-8"), "text/plain; charset=utf-8")

    def _caller_gone(self) -> bool:
        """Whether the caller closed its connection (or reset it) while its ``execute``
        waits; never blocks. A caller sends nothing after its request, so anything
        readable is the end of the stream, or bytes it sent anyway (not gone)."""
        try:
            self.connection.settimeout(0.0)
            return not self.connection.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:  # reset by the caller
            return True

    def _invocation(self, action: str, method: str, name: str) -> None:
        broker = self.context.broker
        if action == "fetch":
            _require(method, "GET")
            request = broker.fetch_request(name)
            if request is None:
                self._send(HTTPStatus.NO_CONTENT, b"", None)
            else:
                self._send_json(HTTPStatus.OK, request.to_dict())
            return
        _require(method, "POST")
        text = self._read_text()
        if action == "result":
            accepted = broker.complete(name, result=text)
        else:
            accepted = broker.complete(name, failure=_failure_message(text))
        self._send_json(HTTPStatus.OK, {"accepted": accepted})

    # --- bodies and answers -----------------------------------------------------------

    def _read_text(self) -> str:
        """The body as text, reserved in the port's budget until the request ends.

        Refused bodies (too large, over the budget) are not read.
        """
        header = self.headers.get("Content-Length")
        if header is None:
            raise _HTTPError(HTTPStatus.LENGTH_REQUIRED, "a Content-Length header is required")
        length = _announced_length(header)
        if length < 0:
            raise _HTTPError(HTTPStatus.BAD_REQUEST, f"invalid Content-Length: {header!r}")
        limits = self.context.limits
        if length > limits.max_body_bytes:
            raise _HTTPError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                body_too_large(length, limits.max_body_bytes),
                reason=DRPCErrorReason.REJECTED.value,
            )
        budget = self.context.budget
        if not budget.reserve(length):
            raise _HTTPError(
                HTTPStatus.SERVICE_UNAVAILABLE,
                f"server busy: a body of {length} bytes would exceed the "
                f"{budget.total_bytes} bytes of request bodies this port holds at once; "
                "try again later",
                reason=DRPCErrorReason.BUSY.value,
            )
        self._reserved += length
        data = self.rfile.read(length)
        self._unread_body = 0
        if len(data) < length:
            raise _HTTPError(HTTPStatus.BAD_REQUEST, "the body is shorter than Content-Length")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise _HTTPError(HTTPStatus.BAD_REQUEST, "the body is not UTF-8 text") from None

    def _too_slow(self) -> None:
        """Answer 408: the request did not arrive before the read deadline."""
        self._unread_body = 0
        seconds = self.context.limits.read_timeout_secs
        logger.debug("dropping %s: no whole request within %g s", self.address_string(), seconds)
        self._send_json(
            HTTPStatus.REQUEST_TIMEOUT,
            {
                "error": request_too_slow(seconds),
                "reason": DRPCErrorReason.REJECTED.value,
            },
        )

    def _linger(self) -> None:
        """Discard a refused body (never kept) for a short while after answering, so
        the client, still sending, can read the answer instead of a reset."""
        self._unread_body = 0
        scratch = bytearray(65536)
        end = min(self.deadline, time.monotonic() + _LINGER_SECS)
        try:
            self.connection.shutdown(socket.SHUT_WR)
            while (remaining := end - time.monotonic()) > 0:
                self.connection.settimeout(remaining)
                if not self.connection.recv_into(scratch):
                    break
        except OSError:  # timed out, or the client left
            pass

    def _send_json(
        self, status: HTTPStatus, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        payload = json.dumps(body).encode("utf-8")
        self._send(status, payload, "application/json", headers)

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str | None,
        headers: dict[str, str] | None = None,
    ) -> None:
        # A client that does not read its answer is dropped after the read timeout.
        self.connection.settimeout(self.context.limits.read_timeout_secs)
        try:
            self.send_response(status)
            if content_type is not None:
                self.send_header("Content-Type", content_type)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError as exc:  # the client went away: nothing left to tell it
            logger.debug("could not answer %s: %s", self.address_string(), exc)


def _announced_length(header: str | None) -> int:
    """The Content-Length as an integer: 0 when absent, -1 when not a number."""
    if header is None:
        return 0
    try:
        return int(header)
    except ValueError:
        return -1


def _require(method: str, expected: str) -> None:
    if method != expected:
        raise _HTTPError(HTTPStatus.METHOD_NOT_ALLOWED, f"use {expected} here")


def _timeout_query(query: str) -> float | None:
    values = parse_qs(query).get("timeout")
    if not values:
        return None
    try:
        timeout = float(values[-1])
    except ValueError:
        raise _HTTPError(HTTPStatus.BAD_REQUEST, f"invalid timeout: {values[-1]!r}") from None
    if not timeout > 0:
        raise _HTTPError(HTTPStatus.BAD_REQUEST, f"invalid timeout: {values[-1]!r}")
    return timeout


def _failure_message(text: str) -> str:
    """The message of a ``/fail`` body: JSON ``{"message": ...}``, or empty."""
    if not text.strip():
        return ""
    try:
        data = json.loads(text)
    except ValueError:
        raise _HTTPError(HTTPStatus.BAD_REQUEST, "the body is not JSON") from None
    if not isinstance(data, dict):
        raise _HTTPError(HTTPStatus.BAD_REQUEST, 'the body must be {"message": ...}')
    return str(data.get("message", ""))
