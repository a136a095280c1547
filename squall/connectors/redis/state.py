"""The Redis backend (Storm's ``RedisMapState``): one Redis string per key.

A key is stored at ``key_prefix`` + the JSON array of its group-by values (for example
``trident:["cow"]``), its value as JSON (see :mod:`squall.trident.state.serialization`;
values must be JSON-serialisable and tuples come back as lists). Reads are one ``MGET``,
writes one ``MSET`` in a ``MULTI``/``EXEC`` pipeline, so a batch's writes are atomic.

Every command is bounded in time: connecting by ``connect_timeout`` (default 5 s), each
reply by ``socket_timeout`` (default 10 s). A server that is down, unreachable or frozen
therefore fails the batch with a :class:`StateConnectionError` naming the state and the
server (its password hidden) instead of stalling it; the engines replay the batch after
their retry back-off.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from squall.connectors.redaction import redact_url
from squall.model.context import TopologyContext
from squall.runtime.state_errors import StateConnectionError
from squall.trident.state.base import BackingMap, StateType, as_keys, current_value
from squall.trident.state.factory import MapStateFactory, check_cache_size, check_state_type
from squall.trident.state.serialization import deserialize_key, serialize_key, serializer_for

if TYPE_CHECKING:
    import redis

DEFAULT_KEY_PREFIX = "trident:"
#: Seconds to open a connection (when neither the factory nor the URL says).
DEFAULT_CONNECT_TIMEOUT = 5.0
#: Seconds to wait for each reply (when neither the factory nor the URL says).
DEFAULT_SOCKET_TIMEOUT = 10.0
#: Factory option -> the URL query parameter redis-py reads for it.
_URL_TIMEOUTS = {"connect_timeout": "socket_connect_timeout", "socket_timeout": "socket_timeout"}
#: Keys per ``MGET``/``MSET`` command.
_CHUNK = 10_000
_SCHEMES = ("redis", "rediss", "unix")

_Result = TypeVar("_Result")


def _check_url(url: Any) -> str:
    if not isinstance(url, str) or urllib.parse.urlsplit(url).scheme not in _SCHEMES:
        raise ValueError(f"RedisMapState needs a redis://, rediss:// or unix:// URL, got {url!r}")
    return url


def _seconds(name: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"RedisMapState {name} must be a number of seconds > 0, got {value!r}")
    return float(value)


def _timeout(url: str, name: str, given: float | None, default: float) -> float:
    """The effective ``name`` timeout: the factory's option or the URL's query parameter
    (they must agree when both are given), else ``default``."""
    parameter = _URL_TIMEOUTS[name]
    values = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get(parameter)
    in_url: float | None = None
    if values:
        try:
            in_url = _seconds(f"{parameter} (in the URL)", float(values[-1]))
        except ValueError:
            raise ValueError(
                f"RedisMapState {parameter} in the URL {redact_url(url)} must be a number "
                f"of seconds > 0, got {values[-1]!r}"
            ) from None
    if given is None:
        return default if in_url is None else in_url
    seconds = _seconds(name, given)
    if in_url is not None and in_url != seconds:
        raise ValueError(
            f"RedisMapState {name} is {seconds:g} s but the URL {redact_url(url)} sets "
            f"{parameter}={in_url:g}: give it once"
        )
    return seconds


def resolve_timeouts(
    url: str, connect_timeout: float | None, socket_timeout: float | None
) -> tuple[float, float]:
    """``(connect, socket)`` timeouts in seconds: each from the option if given, else
    from the URL's ``socket_connect_timeout``/``socket_timeout`` query parameters, else
    the defaults (5 s, 10 s).

    Raises:
        ValueError: a timeout is not a number > 0, or the option and the URL disagree.
    """
    return (
        _timeout(url, "connect_timeout", connect_timeout, DEFAULT_CONNECT_TIMEOUT),
        _timeout(url, "socket_timeout", socket_timeout, DEFAULT_SOCKET_TIMEOUT),
    )


def _check_retries(retries: Any) -> int:
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"RedisMapState retries must be an int >= 0, got {retries!r}")
    return retries


def state_label(
    key_prefix: str, context: TopologyContext | None, partition_index: int, num_partitions: int
) -> str:
    """How errors name a state: its key prefix and, in a task, the component and
    partition holding it."""
    component = None if context is None else context.component_id
    if component is None:
        return f"key prefix {key_prefix!r}"
    return (
        f"key prefix {key_prefix!r}, component {component!r} "
        f"partition {partition_index} of {num_partitions}"
    )


def _glob_escape(text: str) -> str:
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)


class RedisMapState(BackingMap):
    """A backing map in a Redis server.

    Runs in the owning task; thread-safe (the client's connection pool opens a connection
    per concurrent caller, and again after a fork). A command whose connection breaks
    is retried ``retries`` times on a new connection, with a short backoff. A server
    that refuses the connection, or does not accept it within ``connect_timeout`` or
    answer within ``socket_timeout`` (frozen, overloaded, cut off), raises
    :class:`StateConnectionError` at once, naming the state and the URL (its password
    hidden): waiting longer than the timeout is the engine's retry back-off's job.
    Writes are durable as far as the server's persistence settings make them.
    """

    def __init__(
        self,
        url: str,
        state_type: StateType = StateType.OPAQUE,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        socket_timeout: float | None = None,
        retries: int = 2,
        connect_timeout: float | None = None,
        label: str | None = None,
    ) -> None:
        """Connect to ``url`` and check the server answers (``PING``).

        Args:
            url: ``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` or
                ``unix://``; its query may set ``socket_timeout`` and
                ``socket_connect_timeout`` (seconds), as redis-py reads them.
            state_type: decides the stored format.
            key_prefix: prepended to every key; give each state of a server its own.
            socket_timeout: seconds to wait for each reply (default: the URL's, else
                10).
            retries: how often a command whose connection broke is retried.
            connect_timeout: seconds to open a connection (default: the URL's, else 5).
            label: how errors name this state (default: its key prefix).

        Raises:
            StateConnectionError: the server cannot be reached.
            ValueError: a timeout or ``retries`` is invalid.
        """
        import redis
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        #: The server's URL.
        self.url = _check_url(url)
        #: Prepended to every key.
        self.key_prefix = key_prefix
        #: Seconds to open a connection and to wait for a reply.
        self.connect_timeout, self.socket_timeout = resolve_timeouts(
            url, connect_timeout, socket_timeout
        )
        #: How errors name this state.
        self.label = label or state_label(key_prefix, None, 0, 1)
        self._serializer = serializer_for(check_state_type(state_type))
        self._timeout_error = redis.TimeoutError
        self._connection_errors = (redis.ConnectionError, redis.TimeoutError)
        self._client: redis.Redis = redis.Redis.from_url(
            url,
            socket_timeout=self.socket_timeout,
            socket_connect_timeout=self.connect_timeout,
            # A broken connection is worth one more try on a new one; a timeout is not
            # (a frozen server would hold the batch for retries x the timeout).
            retry=Retry(
                ExponentialBackoff(cap=1.0, base=0.05),
                _check_retries(retries),
                supported_errors=(redis.ConnectionError,),
            ),
        )
        self._call(self._client.ping)

    @classmethod
    def factory(
        cls,
        url: str,
        state_type: StateType = StateType.OPAQUE,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        cache_size: int = 1000,
        socket_timeout: float | None = None,
        retries: int = 2,
        connect_timeout: float | None = None,
    ) -> RedisMapStateFactory:
        """A factory of map states of ``state_type`` over the Redis server at ``url``.

        Runs where the topology is declared (nothing is connected there).

        Args:
            url: the server, e.g. ``redis://127.0.0.1:6379/0``; the query may set
                ``socket_timeout`` and ``socket_connect_timeout`` in seconds
                (``redis://host:6379/0?socket_timeout=2``) instead of the options.
            state_type: the map state wrapped around the server's keys.
            key_prefix: prepended to every key; give each state of a server its own.
            cache_size: keys of the per-partition :class:`CachedMap` (0: none). The cache
                assumes the partition is the only writer of its keys; use 0 when other
                programs write the same keys.
            socket_timeout: seconds to wait for each reply (default 10).
            retries: how often a command whose connection broke is retried.
            connect_timeout: seconds to open a connection (default 5).

        Raises:
            ValueError: the URL is not a Redis URL, a timeout is not a number > 0 or
                disagrees with the URL's, or ``retries`` is not an int >= 0.
        """
        return RedisMapStateFactory(
            url=url,
            state_type=state_type,
            key_prefix=key_prefix,
            cache_size=cache_size,
            socket_timeout=socket_timeout,
            retries=retries,
            connect_timeout=connect_timeout,
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
            reason = str(error)
            if isinstance(error, self._timeout_error):
                if "connect" in reason.lower():
                    waited = f"no connection within connect_timeout={self.connect_timeout:g} s"
                else:
                    waited = f"no reply within socket_timeout={self.socket_timeout:g} s"
                reason = f"{waited} ({reason})"
            raise StateConnectionError(
                f"RedisMapState cannot reach {redact_url(self.url)} ({self.label}): {reason}"
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
    hides the URL's password. ``SHARED``: every process connects to the same server."""

    url: str
    state_type: StateType = StateType.OPAQUE
    key_prefix: str = DEFAULT_KEY_PREFIX
    cache_size: int = 1000
    #: ``None``: the URL's ``socket_timeout``, else 10 s.
    socket_timeout: float | None = None
    retries: int = 2
    #: ``None``: the URL's ``socket_connect_timeout``, else 5 s.
    connect_timeout: float | None = None

    def __post_init__(self) -> None:
        _check_url(self.url)
        check_state_type(self.state_type)
        check_cache_size(self.cache_size)
        if not isinstance(self.key_prefix, str):
            raise TypeError(f"key_prefix must be a str, got {self.key_prefix!r}")
        resolve_timeouts(self.url, self.connect_timeout, self.socket_timeout)
        _check_retries(self.retries)

    def __repr__(self) -> str:
        connect, socket = resolve_timeouts(self.url, self.connect_timeout, self.socket_timeout)
        return (
            f"RedisMapStateFactory(url={redact_url(self.url)!r}, state_type={self.state_type}, "
            f"key_prefix={self.key_prefix!r}, cache_size={self.cache_size}, "
            f"connect_timeout={connect:g}, socket_timeout={socket:g}, retries={self.retries})"
        )

    def make_backing_map(
        self,
        conf: dict[str, Any],
        context: TopologyContext | None,
        partition_index: int,
        num_partitions: int,
    ) -> RedisMapState:
        """Connect to the server. Runs in the task's process; errors name the task's
        component and partition (``context``, if given) and the key prefix.

        Raises:
            StateConnectionError: the server cannot be reached.
        """
        return RedisMapState(
            self.url,
            state_type=self.state_type,
            key_prefix=self.key_prefix,
            socket_timeout=self.socket_timeout,
            retries=self.retries,
            connect_timeout=self.connect_timeout,
            label=state_label(self.key_prefix, context, partition_index, num_partitions),
        )
