"""HTTP clients of a :class:`~squall.drpc.DRPCServer` (standard library only).

:class:`DRPCClient` calls DRPC functions on the server's client port (Storm's
``DRPCClient``); :class:`DRPCInvocationsClient` is the topology side on its invocations
port (Storm's ``DRPCInvocationsClient``), for DRPC spouts of topologies running in
another process. Both open one short HTTP/1.0 connection per call, send the port's
token as ``Authorization: Bearer <token>`` when given one, never use proxy settings, and
are safe to share between threads.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from squall.drpc.broker import DEFAULT_TIMEOUT_SECS
from squall.drpc.config import (
    DEFAULT_INVOCATIONS_PORT,
    DEFAULT_PORT,
    DRPC_INVOCATIONS_AUTHORIZATION_TOKEN,
    DRPC_INVOCATIONS_PORT,
    DRPC_SERVERS,
    check_token,
    port_from_conf,
    token_from_conf,
)
from squall.drpc.errors import DRPCError, DRPCErrorReason, DRPCExecutionError, execution_error
from squall.drpc.request import DRPCRequest

__all__ = [
    "DRPCClient",
    "DRPCInvocationsClient",
    "invocations_clients_from_conf",
]

_GRACE_SECS = 5.0
"""Extra time ``DRPCClient`` waits past the request timeout for the server's answer."""

_TEXT = "text/plain; charset=utf-8"
_JSON = "application/json"


@dataclass(frozen=True)
class _Response:
    status: int
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json_object(self) -> dict[str, object] | None:
        try:
            data = json.loads(self.body.decode("utf-8"))
        except ValueError:
            return None
        return data if isinstance(data, dict) else None


class _TransportError(Exception):
    """The server could not be reached or did not answer in time."""

    def __init__(self, detail: str, timed_out: bool) -> None:
        super().__init__(detail)
        self.timed_out = timed_out


class _Transport:
    """One HTTP call at a time to ``host:port``; HTTP error statuses are answers too."""

    def __init__(self, host: str, port: int, token: str | None, owner: str) -> None:
        self.host = host
        self.port = int(port)
        netloc = f"[{host}]" if ":" in host else host
        self.base_url = f"http://{netloc}:{self.port}"
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self._token = None if token is None else check_token(token, f"{owner} token")

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def call(
        self,
        method: str,
        path: str,
        timeout_secs: float,
        body: bytes | None = None,
        content_type: str = _TEXT,
    ) -> _Response:
        request = urllib.request.Request(self.base_url + path, data=body, method=method)
        if body is not None:
            request.add_header("Content-Type", content_type)
        if self._token is not None:
            request.add_header("Authorization", f"Bearer {self._token}")
        try:
            with self._opener.open(request, timeout=timeout_secs) as response:
                return _Response(response.status, response.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return _Response(exc.code, exc.read())
        except urllib.error.URLError as exc:
            reason = exc.reason
            timed_out = isinstance(reason, TimeoutError)
            raise _TransportError(str(reason), timed_out) from exc
        except TimeoutError as exc:
            raise _TransportError(str(exc) or "timed out", True) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise _TransportError(str(exc) or type(exc).__name__, False) from exc


class DRPCClient:
    """Calls DRPC functions on a :class:`~squall.drpc.DRPCServer`.

    Args:
        host: The DRPC server's host.
        port: The DRPC server's client port.
        timeout_secs: How long one ``execute`` may take. Sent to the server, which uses
            the smaller of it and its own timeout; the client itself gives up
            5 s later if the server does not answer.
        token: The client port's bearer token, if the server requires one.

    Raises:
        ValueError: ``timeout_secs`` is not positive or ``token`` is not a valid token.
    """

    def __init__(
        self,
        host: str,
        port: int = DEFAULT_PORT,
        timeout_secs: float = DEFAULT_TIMEOUT_SECS,
        *,
        token: str | None = None,
    ) -> None:
        if not timeout_secs > 0:
            raise ValueError(f"a DRPC timeout must be positive, not {timeout_secs!r}")
        self._transport = _Transport(host, port, token, "DRPCClient")
        self.timeout_secs = float(timeout_secs)

    @property
    def host(self) -> str:
        """The DRPC server's host."""
        return self._transport.host

    @property
    def port(self) -> int:
        """The DRPC server's client port."""
        return self._transport.port

    def execute(self, function: str, args: str) -> str:
        """Call DRPC ``function`` with ``args``; block until its result.

        Runs on the caller's thread for at most ``timeout_secs`` plus a few seconds.

        Returns:
            The result text returned by the topology (JSON text of the result tuples).

        Raises:
            DRPCExecutionError: The topology failed the request, it timed out, the
                server shut down, refused the request (busy, or the token is missing or
                wrong), is unreachable, or answered outside the DRPC protocol. The
                message names ``host:port``; a timeout's message states how long this
                call waited.
            TypeError: ``function`` or ``args`` is not a string.
        """
        if not isinstance(function, str) or not isinstance(args, str):
            raise TypeError("DRPC function and args must be strings")
        path = f"/drpc/{quote(function, safe='')}?timeout={self.timeout_secs!r}"
        server = self._transport.address
        started = time.monotonic()
        try:
            response = self._transport.call(
                "POST", path, self.timeout_secs + _GRACE_SECS, args.encode("utf-8")
            )
        except _TransportError as exc:
            if exc.timed_out:
                waited = time.monotonic() - started
                detail = (
                    f"after waiting {_seconds(waited)} s with no answer from the server (request "
                    f"timeout {self.timeout_secs:g} s, plus {_GRACE_SECS:g} s for the answer)"
                )
                raise execution_error(
                    function, DRPCErrorReason.TIMEOUT, detail=detail, server=server
                ) from exc
            raise execution_error(
                function, DRPCErrorReason.UNREACHABLE, detail=str(exc), server=server
            ) from exc
        if response.status == 200:
            return response.body.decode("utf-8")
        raise _answer_error(function, server, response)

    def __repr__(self) -> str:
        return f"DRPCClient({self._transport.address})"


def _seconds(value: float) -> str:
    """``value`` seconds, to three significant digits and never in exponent form."""
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


_REFUSALS = (DRPCErrorReason.UNAUTHORIZED, DRPCErrorReason.BUSY, DRPCErrorReason.REJECTED)


def _answer_error(function: str, server: str, response: _Response) -> DRPCExecutionError:
    """The error a non-200 answer to ``/drpc`` stands for."""
    data = response.json_object() or {}
    message, reason_text, request_id = data.get("error"), data.get("reason"), data.get("request_id")
    try:
        reason = DRPCErrorReason(reason_text)
    except ValueError:
        reason = DRPCErrorReason.PROTOCOL
    if isinstance(message, str) and reason in _REFUSALS:
        return execution_error(function, reason, detail=message, server=server)
    if not isinstance(message, str) or reason is DRPCErrorReason.PROTOCOL:
        detail = f"HTTP {response.status}: {message or response.text()[:200]}"
        return execution_error(function, DRPCErrorReason.PROTOCOL, detail=detail, server=server)
    return DRPCExecutionError(
        f"{message} (DRPC server {server})",
        function=function,
        reason=reason,
        request_id=request_id if isinstance(request_id, str) else None,
        server=server,
    )


class DRPCInvocationsClient:
    """The invocations interface over HTTP, for topologies running away from the server.

    A DRPC spout calls :meth:`fetch_request` to take requests; the topology's last step
    calls :meth:`result` or :meth:`fail_request`. Thread-safe.

    Args:
        host: The DRPC server's host.
        port: The DRPC server's invocations port.
        timeout_secs: Socket timeout of each call (they are all answered at once).
        token: The invocations port's bearer token, if the server requires one.

    Raises:
        DRPCError: From every method, when the server cannot be reached, does not answer
            within ``timeout_secs``, refuses the call (busy, token missing or wrong) or
            answers outside the protocol; the message names ``host:port`` and the
            server's reason.
        ValueError: From the constructor: ``timeout_secs`` is not positive or ``token``
            is not a valid token.
    """

    def __init__(
        self,
        host: str,
        port: int = DEFAULT_INVOCATIONS_PORT,
        timeout_secs: float = 10.0,
        *,
        token: str | None = None,
    ) -> None:
        if not timeout_secs > 0:
            raise ValueError(f"a timeout must be positive, not {timeout_secs!r}")
        self._transport = _Transport(host, port, token, "DRPCInvocationsClient")
        self.timeout_secs = float(timeout_secs)

    @property
    def host(self) -> str:
        """The DRPC server's host."""
        return self._transport.host

    @property
    def port(self) -> int:
        """The DRPC server's invocations port."""
        return self._transport.port

    def fetch_request(self, function: str) -> DRPCRequest | None:
        """The oldest pending request for ``function`` at the server, or ``None``."""
        response = self._call("GET", f"/fetch/{quote(function, safe='')}", None, _TEXT, function)
        if response.status == 204:
            return None
        data = response.json_object() if response.status == 200 else None
        if data is None:
            raise self._protocol_error(f"fetching a request for {function!r}", response)
        try:
            return DRPCRequest.from_dict(data, function)
        except ValueError as exc:
            raise DRPCError(
                f"DRPC server {self._transport.address} sent an invalid request: {exc}"
            ) from None

    def result(self, request_id: str, result: str) -> None:
        """Send ``result`` for ``request_id``; the server ignores it if the request ended."""
        if not isinstance(result, str):
            raise TypeError(f"a DRPC result must be a string, not {type(result).__name__}")
        path = f"/result/{quote(request_id, safe='')}"
        response = self._call("POST", path, result.encode("utf-8"), _TEXT, request_id)
        if response.status != 200:
            raise self._protocol_error(f"returning the result of {request_id}", response)

    def fail_request(self, request_id: str, message: str = "") -> None:
        """Fail ``request_id`` with ``message``; ignored by the server if it ended."""
        path = f"/fail/{quote(request_id, safe='')}"
        body = json.dumps({"message": str(message)}).encode("utf-8")
        response = self._call("POST", path, body, _JSON, request_id)
        if response.status != 200:
            raise self._protocol_error(f"failing request {request_id}", response)

    def _call(
        self, method: str, path: str, body: bytes | None, content_type: str, subject: str
    ) -> _Response:
        try:
            return self._transport.call(method, path, self.timeout_secs, body, content_type)
        except _TransportError as exc:
            what = "did not answer in time" if exc.timed_out else "is unreachable"
            raise DRPCError(
                f"DRPC server {self._transport.address} {what} ({subject!r}): {exc}"
            ) from exc

    def _protocol_error(self, doing: str, response: _Response) -> DRPCError:
        data = response.json_object() or {}
        error = data.get("error")
        said = error if isinstance(error, str) else response.text()[:200]
        return DRPCError(
            f"DRPC server {self._transport.address} answered HTTP {response.status} when "
            f"{doing}: {said}"
        )

    def __repr__(self) -> str:
        return f"DRPCInvocationsClient({self._transport.address})"


def invocations_clients_from_conf(conf: Mapping[str, Any]) -> list[DRPCInvocationsClient]:
    """One :class:`DRPCInvocationsClient` per server named by ``drpc.servers``.

    For DRPC spouts given no ``LocalDRPC``: as in Storm, they serve every DRPC server
    of the configuration, on its invocations port ``drpc.invocations.port`` (3773 by
    default), sending ``drpc.invocations.authorization.token`` when it is set.

    Raises:
        DRPCError: ``drpc.servers`` is missing or empty, an entry is not a host name, or
            the port or token is invalid; the message names the key.
    """
    servers = conf.get(DRPC_SERVERS)
    if isinstance(servers, str):
        servers = [servers]
    if not servers:
        raise DRPCError(
            f"no DRPC server configured: set {DRPC_SERVERS!r} (a list of hosts) and "
            f"{DRPC_INVOCATIONS_PORT!r}, or give the DRPC stream a LocalDRPC"
        )
    try:
        port = port_from_conf(conf, DRPC_INVOCATIONS_PORT, DEFAULT_INVOCATIONS_PORT)
        token = token_from_conf(conf, DRPC_INVOCATIONS_AUTHORIZATION_TOKEN)
    except ValueError as exc:
        raise DRPCError(str(exc)) from None
    clients = []
    for host in servers:
        if not isinstance(host, str) or not host:
            raise DRPCError(f"{DRPC_SERVERS!r} must list host names, not {host!r}")
        clients.append(DRPCInvocationsClient(host, port, token=token))
    return clients
