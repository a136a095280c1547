"""What every request to the UI server must pass before a handler sees it: the
``Host`` it names, the ``Origin`` of a change, and the token (see :class:`Guard`).

Runs on the server's event loop, in the application's outermost middleware; reads
headers only, never the body.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from collections.abc import Iterable
from http import HTTPStatus
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from squall.model.errors import excerpt

#: The cookie a browser keeps the token in, once it opened a page with ``?token=``.
TOKEN_COOKIE = "squall_token"
#: Names of this machine's loopback interface, as a ``Host`` header spells them.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: Addresses that listen on every interface.
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
#: The ``allowed_hosts`` entry that turns the Host check off.
ANY_HOST = "*"
#: Methods that change nothing: they need no Origin check.
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def error_answer(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON error answer of the UI server: ``{"error", "errorMessage"}``."""
    phrase = HTTPStatus(status).phrase
    body = {"error": phrase, "errorMessage": message}
    return JSONResponse(body, status_code=status, headers=headers)


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` serves this machine only (127.0.0.0/8, ::1,
    ``localhost``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a name: it may resolve to any interface
        return False


def _split_host(host_header: str) -> tuple[str, int | None] | None:
    """``(name, port)`` of a ``Host`` header (``port`` None when absent); None if it is
    malformed. IPv6 addresses keep their brackets; names are lower-cased."""
    host = host_header.strip().lower()
    if host.startswith("["):
        name, bracket, rest = host.partition("]")
        name += bracket
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else None
    else:
        name, colon, port_text_or_empty = host.partition(":")
        port_text = port_text_or_empty if colon else None
    if not name:
        return None
    if port_text is None:
        return name, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return name, int(port_text)


def _is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name[1:-1] if name.startswith("[") else name)
    except ValueError:
        return False
    return True


def _host_name(host: str) -> str:
    """``host`` (an address to listen on) as a ``Host`` header names it."""
    host = host.lower()
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class Guard:
    """What every request must pass before a handler sees it.

    * **Host.** The ``Host`` header must name the server: a loopback name
      (``127.0.0.1``, ``localhost``, ``[::1]``) or the address it listens on, with its
      port; on a wildcard address (``0.0.0.0``, ``::``), also this machine's host names
      (:func:`socket.gethostname`, :func:`socket.getfqdn`) and any IP address, with its
      port; or a name of ``allowed_hosts`` (``NAME``: with the server's port or without
      a port, as a reverse proxy forwards it; ``NAME:PORT``: with that port). A page of
      another site thus cannot reach the server through a name of its own that
      resolves to this machine (DNS rebinding): a browser sends that name. Other
      requests get ``403``, ``400`` if the header is malformed. ``allowed_hosts``
      containing ``"*"`` turns this check off.
    * **Origin.** A request that changes something (not GET, HEAD or OPTIONS) and
      carries an ``Origin`` must come from an allowed origin: ``http`` or ``https``
      with a host the Host check accepts (``403`` otherwise). Command-line clients send
      no ``Origin``.
    * **Token.** With a token, every request carries it: ``Authorization: Bearer
      <token>``, or the cookie a browser got by opening a page with ``?token=<token>``.

    Args:
        token: The token every request needs, or None.
        host: The address the server listens on.
        port: The port it listens on.
        allowed_hosts: More names the ``Host`` header may give (see above).
    """

    def __init__(
        self, token: str | None, host: str, port: int, allowed_hosts: Iterable[str] = ()
    ) -> None:
        self.token = token
        self.port = port
        self.wildcard = host in WILDCARD_HOSTS
        names = {*LOOPBACK_NAMES, _host_name(host)}
        if self.wildcard:
            names.update(_host_name(name) for name in (socket.gethostname(), socket.getfqdn()))
        self.names = frozenset(name for name in names if name not in WILDCARD_HOSTS)
        self.any_host = False
        #: Allowed names of ``allowed_hosts``, with the ports they may come with.
        self.allowed: dict[str, set[int | None]] = {}
        for entry in allowed_hosts:
            if entry == ANY_HOST:
                self.any_host = True
                continue
            split = _split_host(entry)
            if split is None:
                raise ValueError(f"allowed_hosts: {entry!r} is not a host name or NAME:PORT")
            name, entry_port = split
            ports = {port, None} if entry_port is None else {entry_port}
            self.allowed.setdefault(name, set()).update(ports)

    def host_allowed(self, host_header: str) -> bool:
        """Whether ``host_header`` (a ``Host`` header, or an origin's ``host[:port]``)
        names this server."""
        if self.any_host:
            return True
        split = _split_host(host_header)
        if split is None:
            return False
        name, port = split
        if name in self.allowed and port in self.allowed[name]:
            return True
        if name in self.names or (self.wildcard and _is_ip_literal(name)):
            return port == self.port
        return False

    def describe_hosts(self) -> str:
        """The hosts this server answers, for an error message."""
        shown = [f"{name}:{self.port}" for name in sorted(self.names)]
        if self.wildcard:
            shown.append(f"any IP address of this machine with port {self.port}")
        shown += sorted(self.allowed)
        return ", ".join(shown)

    def _token_given(self, request: Request) -> bool:
        assert self.token is not None
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        candidates = [given.strip()] if scheme.lower() == "bearer" else []
        cookie = request.cookies.get(TOKEN_COOKIE)
        if cookie:
            candidates.append(cookie)
        return any(hmac.compare_digest(c.encode(), self.token.encode()) for c in candidates)

    def _origin_allowed(self, origin: str) -> bool:
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and self.host_allowed(parts.netloc)

    def refusal(self, request: Request) -> Response | None:
        """None if ``request`` may go on, else the answer that refuses it."""
        host = request.headers.get("host", "")
        if _split_host(host) is None and not self.any_host:
            return error_answer(400, f"the Host header {excerpt(host)} is missing or malformed")
        if not self.host_allowed(host):
            return error_answer(
                403,
                f"this server does not answer requests for host {excerpt(host)}; it answers "
                f"{self.describe_hosts()} (allowed_hosts, --ui-allowed-host add names)",
            )
        origin = request.headers.get("origin")
        if request.method not in SAFE_METHODS and origin and not self._origin_allowed(origin):
            return error_answer(
                403, f"requests from {excerpt(origin)} may not change anything here"
            )
        if self.token is None or self._token_given(request):
            return None
        offered = request.query_params.get("token")
        if (
            request.method == "GET"
            and offered
            and hmac.compare_digest(offered.encode(), self.token.encode())
        ):
            answer = Response(status_code=303, headers={"location": request.url.path})
            answer.set_cookie(TOKEN_COOKIE, offered, httponly=True, samesite="strict")
            return answer
        return error_answer(401, "a token is needed: Authorization: Bearer <token>")


__all__ = ["TOKEN_COOKIE", "Guard", "error_answer", "is_loopback"]
