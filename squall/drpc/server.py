"""DRPCServer: a DRPC broker behind HTTP, for clients and topologies in other processes.

Protocol (UTF-8 bodies; JSON where noted):

- ``POST /drpc/<function>`` (body: the args text; optional query ``?timeout=SECS``
  shortens the server's timeout for this request): ``200`` with the result text, or
  ``500`` (failed), ``504`` (timed out), ``503`` (server shutting down) with JSON
  ``{"error", "reason", "function", "request_id"}``.
- ``GET /drpc/<function>[/<args>]``: the same call with URL-encoded args in the path.
- ``GET /fetch/<function>``: ``200`` with JSON ``{"request_id", "function", "args",
  "return_info"}``, or ``204`` when no request is pending.
- ``POST /result/<request_id>`` (body: the result text) and ``POST /fail/<request_id>``
  (body: JSON ``{"message": ...}``, may be empty): ``200`` with JSON ``{"accepted": bool}``
  (``false`` when the request already ended: a late answer is ignored).

Path segments are URL-encoded. Other errors: ``400`` bad request, ``404`` unknown path,
``405`` wrong method, ``411`` missing ``Content-Length``, ``413`` body too large, all with
JSON ``{"error": ...}``.
"""

from __future__ import annotations

import itertools
import json
import logging
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from squall.drpc.broker import DEFAULT_TIMEOUT_SECS, DRPCBroker
from squall.drpc.errors import DRPCErrorReason, DRPCExecutionError
from squall.runtime.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)

DEFAULT_PORT = 3772
"""The port of ``squall drpc``: Storm's DRPC port (``drpc.port``)."""

MAX_BODY_BYTES = 64 * 1024 * 1024
_POLL_SECS = 0.05
_JOIN_SECS = 5.0

_STATUS_BY_REASON = {
    DRPCErrorReason.FAILED: HTTPStatus.INTERNAL_SERVER_ERROR,
    DRPCErrorReason.TIMEOUT: HTTPStatus.GATEWAY_TIMEOUT,
    DRPCErrorReason.SHUTDOWN: HTTPStatus.SERVICE_UNAVAILABLE,
}
_WILDCARD_HOSTS = {"", "0.0.0.0", "::"}


class _HTTPError(Exception):
    """A request the handler refuses, with its status and message."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Server(ThreadingHTTPServer):
    """The HTTP server: one named daemon thread per connection, tracked for joining."""

    daemon_threads = True
    request_queue_size = 128  # clients wait in execute: many connections stay open
    broker: DRPCBroker

    def __init__(self, address: tuple[str, int]) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self._handler_threads: set[threading.Thread] = set()
        self._handler_lock = threading.Lock()
        self._handler_numbers = itertools.count(1)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        name = f"squall-drpc-http-{next(self._handler_numbers)}"
        thread = threading.Thread(
            target=self._handle, args=(request, client_address), name=name, daemon=True
        )
        with self._handler_lock:
            self._handler_threads.add(thread)
        thread.start()

    def _handle(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._handler_lock:
                self._handler_threads.discard(threading.current_thread())

    def join_handlers(self, timeout_secs: float) -> None:
        with self._handler_lock:
            threads = list(self._handler_threads)
        for thread in threads:
            thread.join(timeout_secs)


class _Handler(BaseHTTPRequestHandler):
    """One HTTP request; runs on its connection's thread."""

    server: _Server
    server_version = "squall-drpc"
    protocol_version = "HTTP/1.0"
    timeout = 30.0  # per socket read/write: a stalled client cannot hold a thread forever

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s - %s", self.address_string(), format % args)

    def _dispatch(self, method: str) -> None:
        try:
            self._route(method)
        except _HTTPError as exc:
            self._send_json(exc.status, {"error": str(exc)})
        except DRPCExecutionError as exc:
            status = _STATUS_BY_REASON.get(exc.reason, HTTPStatus.INTERNAL_SERVER_ERROR)
            body = {
                "error": str(exc),
                "reason": exc.reason.value,
                "function": exc.function,
                "request_id": exc.request_id,
            }
            self._send_json(status, body)
        except (TypeError, ValueError) as exc:
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})

    def _route(self, method: str) -> None:
        parts = urlsplit(self.path)
        segments = [unquote(segment) for segment in parts.path.strip("/").split("/")]
        action, names = segments[0], segments[1:]
        broker = self.server.broker
        if action == "drpc":
            if method == "POST" and len(names) == 1:
                args = self._read_text()
            elif method == "GET" and len(names) in (1, 2):
                args = names[1] if len(names) == 2 else ""
            else:
                raise _HTTPError(HTTPStatus.NOT_FOUND, f"no such path: {parts.path}")
            requested = _timeout_query(parts.query)
            timeout = (
                broker.timeout_secs if requested is None else min(requested, broker.timeout_secs)
            )
            result = broker.execute(names[0], args, timeout)
            self._send(HTTPStatus.OK, result.encode("utf-8"), "text/plain; charset=utf-8")
            return
        if len(names) != 1 or not names[0]:
            raise _HTTPError(HTTPStatus.NOT_FOUND, f"no such path: {parts.path}")
        (name,) = names
        if action == "fetch":
            _require(method, "GET")
            request = broker.fetch_request(name)
            if request is None:
                self._send(HTTPStatus.NO_CONTENT, b"", None)
            else:
                self._send_json(HTTPStatus.OK, request.to_dict())
        elif action == "result":
            _require(method, "POST")
            accepted = broker.complete(name, result=self._read_text())
            self._send_json(HTTPStatus.OK, {"accepted": accepted})
        elif action == "fail":
            _require(method, "POST")
            text = self._read_text()
            message = ""
            if text.strip():
                try:
                    data = json.loads(text)
                except ValueError:
                    raise _HTTPError(HTTPStatus.BAD_REQUEST, "the body is not JSON") from None
                if not isinstance(data, dict):
                    raise _HTTPError(HTTPStatus.BAD_REQUEST, 'the body must be {"message": ...}')
                message = str(data.get("message", ""))
            accepted = broker.complete(name, failure=message)
            self._send_json(HTTPStatus.OK, {"accepted": accepted})
        else:
            raise _HTTPError(HTTPStatus.NOT_FOUND, f"no such path: {parts.path}")

    def _read_text(self) -> str:
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            raise _HTTPError(HTTPStatus.LENGTH_REQUIRED, "a Content-Length header is required")
        try:
            length = int(length_header)
        except ValueError:
            raise _HTTPError(HTTPStatus.BAD_REQUEST, "invalid Content-Length") from None
        if length < 0:
            raise _HTTPError(HTTPStatus.BAD_REQUEST, "invalid Content-Length")
        if length > MAX_BODY_BYTES:
            raise _HTTPError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "the body is too large")
        try:
            return self.rfile.read(length).decode("utf-8")
        except UnicodeDecodeError:
            raise _HTTPError(HTTPStatus.BAD_REQUEST, "the body is not UTF-8 text") from None

    def _send_json(self, status: HTTPStatus, body: dict[str, Any]) -> None:
        self._send(status, json.dumps(body).encode("utf-8"), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str | None) -> None:
        try:
            self.send_response(status)
            if content_type is not None:
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError as exc:  # the client went away: nothing left to tell it
            logger.debug("could not answer %s: %s", self.address_string(), exc)


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


class DRPCServer:
    """A DRPC broker served over HTTP from background threads.

    Clients anywhere call it with :class:`~squall.drpc.DRPCClient` (or any HTTP
    client); topologies running elsewhere serve it through
    :class:`~squall.drpc.DRPCInvocationsClient`. A topology in the server's own process
    may use :attr:`broker` directly. Each request waits at most ``timeout_secs`` (a
    client may ask for less), fetched or not; a later result is ignored.

    ``start()`` binds the address and serves from a thread named
    ``squall-drpc-server-<port>``, each connection on a ``squall-drpc-http-<n>`` thread;
    ``stop()`` fails the outstanding requests with a shutdown error (status 503), closes
    the socket and joins the threads. One start and one stop per instance; also a
    context manager.

    Args:
        host: Address to bind; loopback by default. ``"0.0.0.0"`` serves every interface.
        port: Port to bind; ``0`` picks a free one (read it from :attr:`port`).
        timeout_secs: Longest time a request may take (Storm's
            ``drpc.request.timeout.secs``, 600 s by default).
        advertised_host: Host put in every request's ``return_info`` for topologies to
            send results back to; ``host`` by default (this machine's name when ``host``
            is a wildcard address).
        clock: Where request deadlines are read.
        broker: serve this existing broker (a ``LocalDRPC``'s ``broker``, to reach it
            from other processes) instead of a new one.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        timeout_secs: float = DEFAULT_TIMEOUT_SECS,
        advertised_host: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        broker: DRPCBroker | None = None,
    ) -> None:
        if not timeout_secs > 0:
            raise ValueError(f"a DRPC timeout must be positive, not {timeout_secs!r}")
        self.host = host
        self._requested_port = port
        self.timeout_secs = float(timeout_secs)
        self._advertised_host = advertised_host
        self._clock = clock
        self._broker: DRPCBroker | None = None
        #: An existing broker to serve (e.g. a ``LocalDRPC``'s), instead of a new one.
        self._given_broker = broker
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._lock = threading.Lock()

    def start(self) -> DRPCServer:
        """Bind the address and serve in the background; returns ``self``.

        Raises:
            OSError: The address cannot be bound (port in use, unknown host).
            RuntimeError: The server was already started.
        """
        with self._lock:
            if self._httpd is not None or self._stopped:
                raise RuntimeError("a DRPCServer can be started only once")
            httpd = _Server((self.host, self._requested_port))
            port = int(httpd.server_address[1])
            advertised = self._advertised_host
            if advertised is None:
                advertised = socket.gethostname() if self.host in _WILDCARD_HOSTS else self.host
            return_info = {"kind": "http", "host": advertised, "port": port}
            broker = self._given_broker or DRPCBroker(self.timeout_secs, return_info, self._clock)
            httpd.broker = broker
            thread = threading.Thread(
                target=httpd.serve_forever,
                kwargs={"poll_interval": _POLL_SECS},
                name=f"squall-drpc-server-{port}",
                daemon=True,
            )
            self._broker, self._httpd, self._thread = broker, httpd, thread
            thread.start()
        logger.info("DRPC server listening on %s", self.url)
        return self

    def stop(self) -> None:
        """Fail outstanding requests (shutdown), stop serving and join the threads.

        Idempotent; does nothing if the server never started.
        """
        with self._lock:
            httpd, thread, broker = self._httpd, self._thread, self._broker
            if self._stopped or httpd is None or thread is None or broker is None:
                return
            self._stopped = True
        broker.shutdown()
        httpd.shutdown()
        httpd.server_close()
        thread.join(_JOIN_SECS)
        httpd.join_handlers(_JOIN_SECS)
        logger.info("DRPC server on port %d stopped", self.port)

    @property
    def broker(self) -> DRPCBroker:
        """The broker behind the server (for a topology in this process).

        Raises:
            RuntimeError: The server has not been started.
        """
        if self._broker is None:
            raise RuntimeError("the DRPCServer has not been started")
        return self._broker

    @property
    def port(self) -> int:
        """The bound port (the free one chosen when ``port=0``).

        Raises:
            RuntimeError: The server has not been started.
        """
        if self._httpd is None:
            raise RuntimeError("the DRPCServer has not been started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://host:port`` of the server."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the server is started and not stopped."""
        return self._httpd is not None and not self._stopped

    def __enter__(self) -> DRPCServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = f"{self.host}:{self.port}" if self._httpd is not None else self.host
        state = "running" if self.running else ("stopped" if self._stopped else "not started")
        return f"DRPCServer({where}, {state})"
