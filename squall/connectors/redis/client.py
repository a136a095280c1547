"""The Redis client of a connector task, and the option checks the Redis connectors
share.

Every client is bounded in time (``connect_timeout`` to open a connection,
``socket_timeout`` per reply) and retries a broken connection once, at once, on a new
one: waiting longer is the connector's back-off's job (:class:`~squall.connectors.outage.Outage`
for the spout and the bolt, the engine's batch retries for the Trident spout).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from squall.connectors.options import OptionChecker
from squall.connectors.redaction import redact_url

#: Seconds to open a connection.
DEFAULT_CONNECT_TIMEOUT = 5.0
#: Seconds to wait for each reply.
DEFAULT_SOCKET_TIMEOUT = 10.0
#: The URL schemes redis-py connects to.
SCHEMES = ("redis", "rediss", "unix")
#: What a server that cannot be reached raises.
CONNECTION_ERRORS: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)

#: A stream entry id: ``<ms>-<seq>`` or ``<ms>``.
_ENTRY_ID = re.compile(r"^\d+(-\d+)?$")


def connect(url: str, connect_timeout: float, socket_timeout: float) -> redis.Redis:
    """A client of the server at ``url`` whose replies are decoded to ``str``; nothing
    is sent until the first command."""
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_connect_timeout=connect_timeout,
        socket_timeout=socket_timeout,
        retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
    )


def close_quietly(client: redis.Redis | None) -> None:
    """Close ``client``'s connections, ignoring errors (the server may be gone)."""
    if client is not None:
        with contextlib.suppress(Exception):
            client.close()


def one_line(error: BaseException) -> str:
    """``error``'s message on one line (redis-py's messages may span several)."""
    return " ".join(str(error).split()) or type(error).__name__


def is_entry_id(value: Any) -> bool:
    """Whether ``value`` is a stream entry id (``1700000000000-0`` or ``1700000000000``)."""
    return isinstance(value, str) and _ENTRY_ID.match(value) is not None


def full_id(entry_id: str) -> str:
    """``entry_id`` with its sequence number (``5`` -> ``5-0``)."""
    return entry_id if "-" in entry_id else f"{entry_id}-0"


def check_connection(checker: OptionChecker, url: Any, timeouts: Mapping[str, Any]) -> None:
    """Check the URL and the timeouts (seconds, finite, > 0)."""
    checker.url("url", url, SCHEMES)
    for name, value in timeouts.items():
        checker.positive_number(name, value)
        if not math.isfinite(value):
            raise checker.fail(f"{name} must be a finite number of seconds, got {value!r}")


def check_fields(checker: OptionChecker, name: str, fields: Any, allow_none: bool) -> None:
    """Check a list of field names: non-empty, distinct, each a non-empty string."""
    if fields is None and allow_none:
        return
    checker.field_names(name, fields)


def check_decode(checker: OptionChecker, decode: Any, fields: Sequence[str]) -> None:
    """Check ``decode``: a mapping of field name -> callable; with fields other than
    ``("id", "data")`` each name must be one of ``fields`` (``"id"`` excepted: the entry
    id is never converted)."""
    if not isinstance(decode, Mapping):
        raise checker.fail(f"decode must be a mapping of field -> callable, got {decode!r}")
    per_field = tuple(fields) != ("id", "data")
    for name, converter in decode.items():
        if not isinstance(name, str) or not callable(converter):
            raise checker.fail(
                f"decode must map field names to callables, got {name!r}: {converter!r}"
            )
        if name == "id" or (per_field and name not in fields):
            wanted = [f for f in fields if f != "id"]
            raise checker.fail(f"decode names {name!r}, which is not one of the fields {wanted}")


__all__ = [
    "CONNECTION_ERRORS",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_SOCKET_TIMEOUT",
    "SCHEMES",
    "check_connection",
    "check_decode",
    "check_fields",
    "close_quietly",
    "connect",
    "full_id",
    "is_entry_id",
    "one_line",
    "redact_url",
]
