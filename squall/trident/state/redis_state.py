"""The Redis backend (Storm's ``RedisMapState``): one Redis string per key.

A key is stored at ``key_prefix`` + the JSON array of its group-by values (for example
``trident:["cow"]``), its value as JSON (see :mod:`squall.trident.state.serialization`;
values must be JSON-serialisable and tuples come back as lists). Reads are one ``MGET``,
writes one ``MSET`` in a ``MULTI``/``EXEC`` pipeline, so a batch's writes are atomic.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from squall.trident.state.base import (
    BackingMap,
    StateConnectionError,
    StateType,
    as_keys,
    current_value,
)
from squall.trident.state.factory import MapStateFactory, check_cache_size, check_state_type
from squall.trident.state.serialization import deserialize_key, serialize_key, serializer_for

if TYPE_CHECKING:
    import redis

DEFAULT_KEY_PREFIX = "trident:"
#: Keys per ``MGET``/``MSET`` command.
_CHUNK = 10_000
_SCHEMES = ("redis", "rediss", "unix")

_Result = TypeVar("_Result")


def redact_url(url: str) -> str:
    """``url`` with its password, if any, replaced by ``***`` (for error messages)."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def _check_url(url: Any) -> str:
    if not isinstance(url, str) or urllib.parse.urlsplit(url).scheme not in _SCHEMES:
        raise ValueError(f"RedisMapState needs a redis://, rediss:// or unix:// URL, got {url!r}")
    return url


def _glob_escape(text: str) -> str:
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)


class RedisMapState(BackingMap):
    """A backing map in a Redis server.

    Runs in the owning task; thread-safe (the client's connection pool opens a connection
    per concurrent caller, and again after a fork). Connection errors are retried
    ``retries`` times with a short backoff, then raise :class:`StateConnectionError`
    naming the URL (its password hidden). Writes are durable as far as the server's
    persistence settings make them.
    """

    def __init__(
        self,
        url: str,
        state_type: StateType = StateType.OPAQUE,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        socket_timeout: float = 5.0,
        retries: int = 2,
    ) -> None:
        """Connect to ``url`` and check the server answers (``PING``).

        Args:
            url: ``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` or
                ``unix://``.
            state_type: decides the stored format.
            key_prefix: prepended to every key; give each state of a server its own.
            socket_timeout: seconds to connect and to wait for a reply.
            retries: how often a command failing on the connection is retried.

        Raises:
            StateConnectionError: the server cannot be reached.
        """
        import redis
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        #: The server's URL.
        self.url = _check_url(url)
        #: Prepended to every key.
        self.key_prefix = key_prefix
        self._serializer = serializer_for(check_state_type(state_type))
        self._connection_errors = (redis.ConnectionError, redis.TimeoutError)
        self._client: redis.Redis = redis.Redis.from_url(
            url,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_timeout,
            retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries),
        )
        self._call(self._client.ping)

    @classmethod
    def factory(
        cls,
        url: str,
        state_type: StateType = StateType.OPAQUE,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        cache_size: int = 1000,
        socket_timeout: float = 5.0,
        retries: int = 2,
    ) -> RedisMapStateFactory:
        """A factory of map states of ``state_type`` over the Redis server at ``url``.

        Runs where the topology is declared (nothing is connected there).

        Args:
            url: the server, e.g. ``redis://127.0.0.1:6379/0``.
            state_type: the map state wrapped around the server's keys.
            key_prefix: prepended to every key; give each state of a server its own.
            cache_size: keys of the per-partition :class:`CachedMap` (0: none). The cache
                assumes the partition is the only writer of its keys; use 0 when other
                programs write the same keys.
            socket_timeout: seconds to connect and to wait for a reply.
            retries: how often a command failing on the connection is retried.
        """
        return RedisMapStateFactory(
            url=url,
            state_type=state_type,
            key_prefix=key_prefix,
            cache_size=cache_size,
            socket_timeout=socket_timeout,
            retries=retries,
        )

    @staticmethod
    def contents(factory: RedisMapStateFactory, raw: bool = False) -> dict[tuple[Any, ...], Any]:
        """Every key under the factory's prefix and its value (``SCAN``, for tests and
        debugging). With ``raw``, the stored wrappers instead of the current values."""
        state = factory.make_backing_map({}, None, 0, 1)
        try:
            prefix = state.key_prefix.encode("utf-8")
            names = state._call(
                lambda: list(state._client.scan_iter(match=_glob_escape(state.key_prefix) + "*"))
            )
            texts = state._mget(names)
        finally:
            state.close()
        contents: dict[tuple[Any, ...], Any] = {}
        for name, text in zip(names, texts, strict=True):
            if text is None:  # deleted meanwhile
                continue
            stored = state._serializer.deserialize(text)
            contents[deserialize_key(name[len(prefix) :])] = (
                stored if raw else current_value(stored)
            )
        return contents

    def _call(self, function: Callable[[], _Result]) -> _Result:
        try:
            return function()
        except self._connection_errors as error:
            raise StateConnectionError(
                f"RedisMapState cannot reach {redact_url(self.url)}: {error}"
            ) from error

    def _mget(self, names: list[Any]) -> list[bytes | None]:
        def read() -> list[bytes | None]:
            found: list[bytes | None] = []
            for start in range(0, len(names), _CHUNK):
                found.extend(
                    cast("list[bytes | None]", self._client.mget(names[start : start + _CHUNK]))
                )
            return found

        return self._call(read)

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any | None]:
        """The stored values, ``None`` where absent: one ``MGET`` per 10,000 keys.

        Runs in the owning task.

        Raises:
            StateConnectionError: the server cannot be reached.
        """
        names = [self.key_prefix + serialize_key(key) for key in as_keys(keys)]
        if not names:
            return []
        return [
            None if text is None else self._serializer.deserialize(text)
            for text in self._mget(names)
        ]

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        """Store the values atomically: ``MSET`` (per 10,000 keys) in one
        ``MULTI``/``EXEC`` pipeline. Runs in the owning task within a commit.

        Raises:
            StateError: a key or value is not JSON-serialisable (nothing is written).
            StateConnectionError: the server cannot be reached.
        """
        keys = as_keys(keys)
        if len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        if not keys:
            return
        mapping = {
            self.key_prefix + serialize_key(key): self._serializer.serialize(value)
            for key, value in zip(keys, values, strict=True)
        }
        items = list(mapping.items())

        def write() -> None:
            pipeline = self._client.pipeline(transaction=True)
            for start in range(0, len(items), _CHUNK):
                pipeline.mset(dict(items[start : start + _CHUNK]))
            pipeline.execute()

        self._call(write)

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()


@dataclass(frozen=True, repr=False)
class RedisMapStateFactory(MapStateFactory):
    """Makes map states over one Redis server and key prefix (see
    :class:`RedisMapState`). Picklable; connects only in :meth:`make_state`; its repr
    hides the URL's password."""

    url: str
    state_type: StateType = StateType.OPAQUE
    key_prefix: str = DEFAULT_KEY_PREFIX
    cache_size: int = 1000
    socket_timeout: float = 5.0
    retries: int = 2

    def __post_init__(self) -> None:
        _check_url(self.url)
        check_state_type(self.state_type)
        check_cache_size(self.cache_size)
        if not isinstance(self.key_prefix, str):
            raise TypeError(f"key_prefix must be a str, got {self.key_prefix!r}")

    def __repr__(self) -> str:
        return (
            f"RedisMapStateFactory(url={redact_url(self.url)!r}, state_type={self.state_type}, "
            f"key_prefix={self.key_prefix!r}, cache_size={self.cache_size}, "
            f"socket_timeout={self.socket_timeout}, retries={self.retries})"
        )

    def make_backing_map(
        self, conf: dict[str, Any], context: Any, partition_index: int, num_partitions: int
    ) -> RedisMapState:
        """Connect to the server. Runs in the task's process.

        Raises:
            StateConnectionError: the server cannot be reached.
        """
        return RedisMapState(
            self.url,
            state_type=self.state_type,
            key_prefix=self.key_prefix,
            socket_timeout=self.socket_timeout,
            retries=self.retries,
        )
