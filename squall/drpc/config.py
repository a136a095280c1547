"""DRPC configuration: Storm's key names, squall's additions, and the server's limits.

A DRPC server listens on two ports, as Storm's does: the *client port* (``drpc.port``)
serves ``execute`` and the *invocations port* (``drpc.invocations.port``) serves the
topology side (fetch a request, return a result, fail it). Each port may require its
own bearer token and has its own pool of handler threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from squall.runtime.http_limits import check_count, check_seconds

DEFAULT_PORT = 3772
"""The client port of ``squall drpc``: Storm's ``drpc.port``."""
DEFAULT_INVOCATIONS_PORT = 3773
"""The invocations port of ``squall drpc``: Storm's ``drpc.invocations.port``."""

DRPC_SERVERS = "drpc.servers"
"""Storm's key: the hosts of the DRPC servers (a list of names)."""
DRPC_PORT = "drpc.port"
"""Storm's key: the client port of the DRPC servers (3772 by default)."""
DRPC_INVOCATIONS_PORT = "drpc.invocations.port"
"""Storm's key: the invocations port of the DRPC servers (3773 by default)."""
DRPC_REQUEST_TIMEOUT_SECS = "drpc.request.timeout.secs"
"""Storm's key: how long a request may take (600 s by default)."""
DRPC_WORKER_THREADS = "drpc.worker.threads"
"""Storm's key: handler threads of the client port (64 by default)."""
DRPC_INVOCATIONS_THREADS = "drpc.invocations.threads"
"""Storm's key: handler threads of the invocations port (64 by default)."""
DRPC_QUEUE_SIZE = "drpc.queue.size"
"""Storm's key: connections per port that wait for a free handler (128 by default)."""
DRPC_AUTHORIZATION_TOKEN = "drpc.authorization.token"
"""squall's key: the bearer token the client port requires (none by default)."""
DRPC_INVOCATIONS_AUTHORIZATION_TOKEN = "drpc.invocations.authorization.token"
"""squall's key: the bearer token the invocations port requires (none by default)."""
DRPC_REQUEST_MAX_BYTES = "drpc.request.max.bytes"
"""squall's key: the largest request body one request may send (64 MiB by default)."""
DRPC_REQUEST_BUDGET_BYTES = "drpc.request.budget.bytes"
"""squall's key: request-body bytes held at once per port (128 MiB by default)."""
DRPC_REQUEST_READ_TIMEOUT_SECS = "drpc.request.read.timeout.secs"
"""squall's key: the deadline for receiving a request's headers and body (30 s)."""

_MIB = 1024 * 1024


@dataclass(frozen=True)
class DRPCLimits:
    """The bounds of a :class:`~squall.drpc.DRPCServer`.

    Each port has a pool of at most ``handlers`` (client port) or
    ``invocations_handlers`` (invocations port) threads, started as connections need
    them and kept until the server stops. A connection arriving while every handler of
    its port is busy waits in a queue of ``backlog`` connections; when that queue is
    full too, it is answered ``503`` (``server busy``) at once and closed.

    A handler of the client port is busy for the whole length of an ``execute`` call:
    ``handlers`` is the number of calls in progress at once. The invocations port has
    its own pool, so topologies can always fetch requests and return results however
    many clients wait.

    Each port accepts request bodies of at most ``max_body_bytes`` (``413`` above it)
    and holds at most ``body_budget_bytes`` of bodies at once (a request whose body
    would go over it gets ``503``); neither is read into memory when refused. A request
    must arrive whole, headers and body, within ``read_timeout_secs`` of its handler
    taking the connection (``408`` after it); a client that does not read its answer is
    dropped after the same time.

    Raises:
        ValueError: A limit is not positive, or ``max_body_bytes`` is over
            ``body_budget_bytes``; the message names the limit.
    """

    handlers: int = 64
    invocations_handlers: int = 64
    backlog: int = 128
    max_body_bytes: int = 64 * _MIB
    body_budget_bytes: int = 128 * _MIB
    read_timeout_secs: float = 30.0

    def __post_init__(self) -> None:
        for name in ("handlers", "invocations_handlers", "backlog"):
            check_count(getattr(self, name), f"DRPC server limits: {name}")
        for name in ("max_body_bytes", "body_budget_bytes"):
            check_count(getattr(self, name), f"DRPC server limits: {name}")
        check_seconds(self.read_timeout_secs, "DRPC server limits: read_timeout_secs")
        if self.max_body_bytes > self.body_budget_bytes:
            raise ValueError(
                f"DRPC server limits: max_body_bytes ({self.max_body_bytes}) cannot be over "
                f"body_budget_bytes ({self.body_budget_bytes}): such bodies would always be "
                "refused"
            )

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> DRPCLimits:
        """The limits named in a configuration; the defaults for keys it lacks.

        Keys: ``drpc.worker.threads``, ``drpc.invocations.threads``,
        ``drpc.queue.size``, ``drpc.request.max.bytes``, ``drpc.request.budget.bytes``,
        ``drpc.request.read.timeout.secs``.

        Raises:
            ValueError: A value is invalid; the message names its key.
        """
        given: dict[str, Any] = {}
        for field, key in _LIMIT_KEYS.items():
            value = conf.get(key)
            if value is None:
                continue
            if field == "read_timeout_secs":
                check_seconds(value, f"configuration key {key!r}")
            else:
                check_count(value, f"configuration key {key!r}")
            given[field] = value
        return cls(**given)


_LIMIT_KEYS = {
    "handlers": DRPC_WORKER_THREADS,
    "invocations_handlers": DRPC_INVOCATIONS_THREADS,
    "backlog": DRPC_QUEUE_SIZE,
    "max_body_bytes": DRPC_REQUEST_MAX_BYTES,
    "body_budget_bytes": DRPC_REQUEST_BUDGET_BYTES,
    "read_timeout_secs": DRPC_REQUEST_READ_TIMEOUT_SECS,
}


def token_from_conf(conf: Mapping[str, Any], key: str) -> str | None:
    """The bearer token configured under ``key``, or ``None`` when it is unset or empty.

    Raises:
        ValueError: The value is not a string of visible ASCII characters.
    """
    value = conf.get(key)
    if value is None or value == "":
        return None
    return check_token(value, f"configuration key {key!r}")


def check_token(token: object, what: str) -> str:
    """``token`` if it can travel in an ``Authorization: Bearer`` header.

    Raises:
        ValueError: It is not a non-empty string of visible ASCII characters; the message
            names ``what``.
    """
    if not isinstance(token, str) or not token or not all("!" <= c <= "~" for c in token):
        kind = "" if isinstance(token, str) else f", not {type(token).__name__}"
        raise ValueError(
            f"{what}: a DRPC token must be a non-empty string of visible ASCII characters "
            f"(no spaces or control characters){kind}"
        )
    return token


def port_from_conf(conf: Mapping[str, Any], key: str, default: int) -> int:
    """The port configured under ``key`` (``default`` when unset).

    Raises:
        ValueError: The value is not an integer from 0 to 65535; the message names ``key``.
    """
    value = conf.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise ValueError(f"{key!r} must be an integer port (0-65535), not {value!r}")
    return value
