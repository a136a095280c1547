"""DRPCServer: a DRPC broker behind HTTP, for clients and topologies in other processes.

The server listens on two ports, as Storm's DRPC server does. The **client port**
(``drpc.port``, 3772 for ``squall drpc``) serves:

- ``POST /drpc/<function>`` (body: the args text; optional query ``?timeout=SECS``
  shortens the server's timeout for this request): ``200`` with the result text, or
  ``500`` (failed), ``504`` (timed out), ``503`` (server shutting down) with JSON
  ``{"error", "reason", "function", "request_id"}``;
- ``GET /drpc/<function>[/<args>]``: the same call with URL-encoded args in the path.

The **invocations port** (``drpc.invocations.port``, 3773) serves the topology side:

- ``GET /fetch/<function>``: ``200`` with JSON ``{"request_id", "function", "args",
  "return_info"}``, or ``204`` when no request is pending;
- ``POST /result/<request_id>`` (body: the result text) and ``POST /fail/<request_id>``
  (body: JSON ``{"message": ...}``, may be empty): ``200`` with JSON ``{"accepted": bool}``
  (``false`` when the request already ended: a late answer is ignored).

Path segments are URL-encoded. A port answers ``404`` to the other port's paths. Each
port may require a bearer token (``401`` without it). Other errors: ``400`` bad request,
``404`` unknown path, ``405`` wrong method, ``408`` request not received within the read
deadline, ``411`` missing ``Content-Length``, ``413`` body too large, ``503`` server busy
(``"reason": "busy"``), all with JSON ``{"error": ...}``. See :class:`DRPCLimits`.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
from http import HTTPStatus
from typing import Any

from squall.drpc.broker import DEFAULT_TIMEOUT_SECS, DRPCBroker
from squall.drpc.config import (
    DEFAULT_INVOCATIONS_PORT,
    DEFAULT_PORT,
    DRPC_AUTHORIZATION_TOKEN,
    DRPC_INVOCATIONS_AUTHORIZATION_TOKEN,
    DRPC_INVOCATIONS_PORT,
    DRPC_PORT,
    DRPC_REQUEST_TIMEOUT_SECS,
    DRPCLimits,
    check_token,
    port_from_conf,
    token_from_conf,
)
from squall.drpc.errors import DRPCErrorReason
from squall.drpc.handler import PortContext, Role, json_answer, serve_connection
from squall.drpc.listener import BodyBudget, Listener
from squall.model.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_INVOCATIONS_PORT", "DEFAULT_PORT", "DRPCServer"]

_GRACE_SECS = 1.0
"""How long ``stop`` lets handlers finish before shutting their connections."""
_JOIN_SECS = 5.0
_WILDCARD_HOSTS = {"", "0.0.0.0", "::"}


class DRPCServer:
    """A DRPC broker served over HTTP from background threads.

    Clients anywhere call it on the client port with :class:`~squall.drpc.DRPCClient`
    (or any HTTP client); topologies running elsewhere serve it on the invocations port
    through :class:`~squall.drpc.DRPCInvocationsClient`. A topology in the server's own
    process may use :attr:`broker` directly. Each request waits at most
    ``timeout_secs`` (a client may ask for less), fetched or not; a later result is
    ignored.

    ``start()`` binds both ports. Each accepts connections on its own thread
    (``squall-drpc-server-<port>`` for the client port, ``squall-drpc-invocations-<port>``
    for the invocations port) and serves them on a pool of at most ``limits.handlers``
    / ``limits.invocations_handlers`` threads (``squall-drpc-handler-<port>-<n>``),
    with ``limits.backlog`` more connections waiting; a connection beyond that gets
    ``503 server busy`` at once. ``stop()`` fails the outstanding requests with a
    shutdown error (status 503) if the server made its broker, closes the sockets and
    joins the threads. One start and one stop per instance; also a context manager.

    Args:
        host: Address to bind; loopback by default. ``"0.0.0.0"`` serves every interface.
        port: Client port to bind; ``0`` picks a free one (read it from :attr:`port`);
            ``None`` serves no client port (only the invocations side of ``broker``).
        timeout_secs: Longest time a request may take (Storm's
            ``drpc.request.timeout.secs``, 600 s by default).
        advertised_host: Host put in every request's ``return_info`` for topologies to
            send results back to; ``host`` by default (this machine's name when ``host``
            is a wildcard address).
        clock: Where request deadlines are read.
        broker: Serve this existing broker (a ``LocalDRPC``'s ``broker``, to reach it
            from other processes) instead of a new one. Its owner shuts it down:
            ``stop()`` does not, and an ``execute`` call in progress on the client port
            then ends with its request (result, failure or timeout).
        invocations_port: Invocations port to bind; ``0`` picks a free one (read it
            from :attr:`invocations_port`).
        client_token: Bearer token the client port requires (``None``: none).
        invocations_token: Bearer token the invocations port requires (``None``: none).
        limits: Handler pools, backlog, body sizes and the read deadline.

    Raises:
        ValueError: A port, a token, the timeout or the limits are invalid; the message
            names the argument.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int | None = 0,
        timeout_secs: float = DEFAULT_TIMEOUT_SECS,
        advertised_host: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        broker: DRPCBroker | None = None,
        *,
        invocations_port: int = 0,
        client_token: str | None = None,
        invocations_token: str | None = None,
        limits: DRPCLimits | None = None,
    ) -> None:
        if not timeout_secs > 0:
            raise ValueError(f"DRPCServer: timeout_secs must be positive, not {timeout_secs!r}")
        if port is not None:
            _check_port(port, "port")
        _check_port(invocations_port, "invocations_port")
        if limits is not None and not isinstance(limits, DRPCLimits):
            raise ValueError(f"DRPCServer: limits must be a DRPCLimits, not {limits!r}")
        self.host = host
        self._requested_port = port
        self._requested_invocations_port = invocations_port
        self.timeout_secs = float(timeout_secs)
        self._advertised_host = advertised_host
        self._clock = clock
        self._client_token = _checked_token(client_token, "client_token")
        self._invocations_token = _checked_token(invocations_token, "invocations_token")
        self.limits = limits or DRPCLimits()
        self._broker: DRPCBroker | None = None
        #: An existing broker to serve (e.g. a ``LocalDRPC``'s), instead of a new one.
        self._given_broker = broker
        self._listeners: dict[Role, Listener] = {}
        self._contexts: dict[Role, PortContext] = {}
        self._started = False
        self._stopped = False
        self._lock = threading.Lock()

    @classmethod
    def from_conf(
        cls,
        conf: dict[str, Any],
        host: str = "127.0.0.1",
        advertised_host: str | None = None,
        broker: DRPCBroker | None = None,
    ) -> DRPCServer:
        """A server set up from Storm-style configuration keys.

        Reads ``drpc.port`` (3772), ``drpc.invocations.port`` (3773),
        ``drpc.request.timeout.secs`` (600), ``drpc.authorization.token``,
        ``drpc.invocations.authorization.token`` and the keys of
        :meth:`DRPCLimits.from_conf`.

        Raises:
            ValueError: A value is invalid; the message names its key.
        """
        timeout = conf.get(DRPC_REQUEST_TIMEOUT_SECS, DEFAULT_TIMEOUT_SECS)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(
                f"{DRPC_REQUEST_TIMEOUT_SECS!r} must be a positive number, not {timeout!r}"
            )
        return cls(
            host,
            port_from_conf(conf, DRPC_PORT, DEFAULT_PORT),
            timeout,
            advertised_host,
            broker=broker,
            invocations_port=port_from_conf(conf, DRPC_INVOCATIONS_PORT, DEFAULT_INVOCATIONS_PORT),
            client_token=token_from_conf(conf, DRPC_AUTHORIZATION_TOKEN),
            invocations_token=token_from_conf(conf, DRPC_INVOCATIONS_AUTHORIZATION_TOKEN),
            limits=DRPCLimits.from_conf(conf),
        )

    def start(self) -> DRPCServer:
        """Bind both ports and serve in the background; returns ``self``.

        Raises:
            OSError: A port cannot be bound (in use, unknown host); the message names
                the port. Nothing stays bound.
            RuntimeError: The server was already started.
        """
        with self._lock:
            if self._started or self._stopped:
                raise RuntimeError("a DRPCServer can be started only once")
            listeners = self._bind()
            port = listeners["invocations"].port
            advertised = self._advertised_host
            if advertised is None:
                advertised = socket.gethostname() if self.host in _WILDCARD_HOSTS else self.host
            return_info = {"kind": "http", "host": advertised, "port": port}
            broker = self._given_broker or DRPCBroker(self.timeout_secs, return_info, self._clock)
            tokens: dict[Role, str | None] = {
                "client": self._client_token,
                "invocations": self._invocations_token,
            }
            for role, listener in listeners.items():
                context = PortContext(
                    role,
                    broker,
                    tokens[role],
                    self.limits,
                    BodyBudget(self.limits.body_budget_bytes),
                )
                self._contexts[role] = context
                name = "server" if role == "client" else "invocations"
                handlers = self.limits.handlers
                if role == "invocations":
                    handlers = self.limits.invocations_handlers
                listener.start(
                    f"squall-drpc-{name}-{listener.port}",
                    handlers,
                    functools.partial(serve_connection, context),
                )
            self._broker, self._listeners, self._started = broker, listeners, True
        logger.info("DRPC server listening on %s", self)
        return self

    def _bind(self) -> dict[Role, Listener]:
        """Bind the ports: the client port (if any), then the invocations port."""
        wanted: list[tuple[Role, int]] = [("invocations", self._requested_invocations_port)]
        if self._requested_port is not None:
            wanted.insert(0, ("client", self._requested_port))
        listeners: dict[Role, Listener] = {}
        try:
            for role, port in wanted:
                try:
                    listeners[role] = Listener(
                        (self.host, port), self.limits.backlog, _busy_answer(role, self.limits)
                    )
                except OSError as exc:
                    raise OSError(
                        exc.errno, f"{exc.strerror} (the {role} port {self.host}:{port})"
                    ) from exc
        except OSError:
            for listener in listeners.values():
                listener.close()
            raise
        return listeners

    def stop(self) -> None:
        """Stop serving: fail the outstanding requests (shutdown) if this server made
        its broker, close the ports and join the threads.

        Idempotent; does nothing if the server never started. A stalled client is
        disconnected after a short grace period.
        """
        with self._lock:
            broker, listeners = self._broker, self._listeners
            if self._stopped or not self._started or broker is None:
                return
            self._stopped = True
        if self._given_broker is None:
            broker.shutdown()
        for listener in listeners.values():
            listener.stop(_GRACE_SECS, _JOIN_SECS)
        logger.info("DRPC server %s stopped", self)

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
        """The bound client port (the free one chosen when ``port=0``).

        Raises:
            RuntimeError: The server has not been started, or serves no client port.
        """
        return self._listener("client").port

    @property
    def invocations_port(self) -> int:
        """The bound invocations port (the free one chosen when ``invocations_port=0``).

        Raises:
            RuntimeError: The server has not been started.
        """
        return self._listener("invocations").port

    def _listener(self, role: Role) -> Listener:
        if not self._started:
            raise RuntimeError("the DRPCServer has not been started")
        listener = self._listeners.get(role)
        if listener is None:
            raise RuntimeError("this DRPCServer serves no client port (port=None)")
        return listener

    @property
    def url(self) -> str:
        """``http://host:port`` of the client port."""
        return self._url(self.port)

    @property
    def invocations_url(self) -> str:
        """``http://host:port`` of the invocations port."""
        return self._url(self.invocations_port)

    def _url(self, port: int) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{port}"

    @property
    def running(self) -> bool:
        """Whether the server is started and not stopped."""
        return self._started and not self._stopped

    def handler_threads(self) -> int:
        """Handler threads started on both ports (never more than the limits)."""
        return sum(
            listener.pool.thread_count
            for listener in self._listeners.values()
            if listener.pool is not None
        )

    def body_bytes_in_flight(self) -> int:
        """Request-body bytes held now on both ports (reserved in their budgets)."""
        return sum(context.budget.in_use for context in self._contexts.values())

    def __enter__(self) -> DRPCServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        if self._started:
            ports = "/".join(str(listener.port) for listener in self._listeners.values())
            where = f"{self.host}:{ports}"
        else:
            where = self.host
        state = "running" if self.running else ("stopped" if self._stopped else "not started")
        return f"DRPCServer({where}, {state})"


def _busy_answer(role: Role, limits: DRPCLimits) -> bytes:
    """The ``503`` sent when every handler of the port is busy and its backlog is full."""
    handlers = limits.handlers if role == "client" else limits.invocations_handlers
    message = (
        f"server busy: all {handlers} handlers of the {role} port are busy and "
        f"{limits.backlog} connections are waiting; try again later"
    )
    body = {"error": message, "reason": DRPCErrorReason.BUSY.value}
    return json_answer(HTTPStatus.SERVICE_UNAVAILABLE, body)


def _check_port(port: object, name: str) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"DRPCServer: {name} must be an integer from 0 to 65535, not {port!r}")


def _checked_token(token: str | None, name: str) -> str | None:
    return None if token is None else check_token(token, f"DRPCServer {name}")
