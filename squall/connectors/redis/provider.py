"""The Redis state provider (``topology.state.provider: redis``): stateful bolts' states
in a Redis server, three keys per namespace (see :mod:`squall.connectors.redis.store`).

Options (``topology.state.provider.config``): ``url`` (required; ``redis://``,
``rediss://`` or ``unix://``), ``connect_timeout`` and ``socket_timeout`` (seconds),
``namespace``. Checked where the topology is submitted and where the provider is made;
nothing connects before a task makes a store.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from squall.connectors.redaction import redact_url
from squall.connectors.redis.client import SCHEMES
from squall.state.base import StateStore
from squall.state.providers.options import (
    OptionCheck,
    common_checks,
    options_problem_of,
    seconds_problem,
)
from squall.state.providers.provider import StateProvider, check_namespace, raise_if_problem

#: Seconds a Redis connection may take to open, and to wait for each reply.
DEFAULT_REDIS_CONNECT_TIMEOUT = 5.0
DEFAULT_REDIS_SOCKET_TIMEOUT = 10.0


def redis_url_problem(value: Any) -> str | None:
    """Why ``url`` is not a Redis URL (``redis://``, ``rediss://``, ``unix://``), or
    None."""
    if not isinstance(value, str) or urllib.parse.urlsplit(value).scheme not in SCHEMES:
        schemes = ", ".join(f"{scheme}://" for scheme in SCHEMES[:-1])
        return f"'url' must be a {schemes} or {SCHEMES[-1]}:// URL, got {value!r}"
    return None


def _redis_checks() -> dict[str, OptionCheck]:
    return {
        **common_checks(),
        "url": redis_url_problem,
        "connect_timeout": lambda value: seconds_problem("connect_timeout", value),
        "socket_timeout": lambda value: seconds_problem("socket_timeout", value),
    }


@dataclass(frozen=True, repr=False)
class RedisStateProvider(StateProvider):
    """Stores in a Redis server, three keys per namespace (see
    :mod:`squall.connectors.redis.store`). Durable as far as the server's
    persistence settings make it. Its repr hides the URL's password."""

    name: ClassVar[str] = "redis"
    durable: ClassVar[bool] = True

    prefix: str
    url: str
    connect_timeout: float = DEFAULT_REDIS_CONNECT_TIMEOUT
    socket_timeout: float = DEFAULT_REDIS_SOCKET_TIMEOUT

    def __post_init__(self) -> None:
        options = {
            "namespace": self.prefix,
            "url": self.url,
            "connect_timeout": self.connect_timeout,
            "socket_timeout": self.socket_timeout,
        }
        raise_if_problem(options_problem_of(self.name, options, _redis_checks()))

    def __repr__(self) -> str:
        return (
            f"RedisStateProvider(prefix={self.prefix!r}, url={redact_url(self.url)!r}, "
            f"connect_timeout={self.connect_timeout!r}, socket_timeout={self.socket_timeout!r})"
        )

    @classmethod
    def options_problem(cls, options: Mapping[Any, Any]) -> str | None:
        """Why ``options`` are not this provider's options, or None."""
        return options_problem_of(cls.name, options, _redis_checks(), required=("url",))

    def make_store(self, namespace: str) -> StateStore:
        """The store of ``namespace`` (its client connects at first use)."""
        from squall.connectors.redis.store import RedisStore

        return RedisStore(self, check_namespace(namespace))


__all__ = [
    "DEFAULT_REDIS_CONNECT_TIMEOUT",
    "DEFAULT_REDIS_SOCKET_TIMEOUT",
    "RedisStateProvider",
    "redis_url_problem",
]
