"""Storm's ``org.apache.storm.utils`` helpers that components use: ``Time`` (the
topology's clock), ``RotatingMap`` and ``TimeCacheMap`` (maps whose entries expire).

``Time`` reads the clock of the task running on the calling thread, the clock its engine
runs on: ``LocalCluster(clock=ManualClock())`` drives the time of its components too, as
Storm's simulated time does. ``TimeCacheMap`` expires its entries on that clock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Generic, Protocol, TypeVar

from squall.model.clock import Clock, current_clock

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ExpiredCallback(Protocol[K, V]):  # type: ignore[misc]
    """Storm's ``ExpiredCallback``: an object whose ``expire(key, value)`` hears of each
    entry that expires. A plain function ``fn(key, value)`` does as well."""

    def expire(self, key: K, value: V) -> None:
        """Called once for each entry that expires."""


Callback = Callable[[Any, Any], Any] | ExpiredCallback[Any, Any]


def _expire_function(callback: Callback | None) -> Callable[[Any, Any], Any] | None:
    if callback is None:
        return None
    expire = getattr(callback, "expire", None)
    if callable(expire):
        return expire
    if callable(callback):
        return callback
    raise TypeError(
        f"an expired callback is a function (key, value) or an object with an "
        f"expire(key, value) method, got {type(callback).__name__}"
    )


class Time:
    """Storm's ``Time``: the time of the topology's clock, read from a component.

    Inside a task (any method of a spout or bolt, on either engine) it reads the clock
    the task's engine runs on: the system clock (the wall clock, as Storm's real time),
    or the simulated clock given to ``LocalCluster(clock=...)`` (a ``ManualClock``, as
    Storm's simulated time). Outside a task it reads the system clock. Every method
    runs in the caller's thread.
    """

    @staticmethod
    def current_time_millis() -> int:
        """Milliseconds: since the epoch on the system clock, the clock's own time on a
        simulated clock."""
        return current_clock().current_time_millis()

    @staticmethod
    def current_time_secs() -> int:
        """:meth:`current_time_millis` in whole seconds."""
        return current_clock().current_time_millis() // 1000

    @staticmethod
    def sleep(ms: float) -> None:
        """Wait ``ms`` milliseconds on the topology's clock (a ``ManualClock`` moves its
        time forward at once instead)."""
        current_clock().sleep_ms(ms)

    @staticmethod
    def sleep_secs(secs: float) -> None:
        """Wait ``secs`` seconds on the topology's clock."""
        current_clock().sleep_ms(secs * 1000.0)

    @staticmethod
    def is_simulating() -> bool:
        """Whether the calling task runs on a simulated clock (Storm's
        ``Time.isSimulating()``)."""
        return type(current_clock()).now_ms is not Clock.now_ms


class RotatingMap(Generic[K, V]):
    """Storm's ``RotatingMap``: a map kept in ``num_buckets`` buckets; ``rotate()`` drops
    the oldest bucket and hands each of its entries to the expired callback.

    ``put`` writes into the newest bucket (removing the key from the others), so an
    entry expires after between ``num_buckets - 1`` and ``num_buckets`` rotations since
    it was last put. Every operation takes O(num_buckets). Not thread-safe (as Storm's):
    use it from one task's methods, which the engines never call concurrently.

    Args:
        num_buckets: at least 2 (Storm's default is 3).
        callback: a function ``(key, value)`` or an object with ``expire(key, value)``,
            called by ``rotate`` for each entry it drops.

    Raises:
        ValueError: ``num_buckets`` below 2.
    """

    DEFAULT_NUM_BUCKETS = 3

    def __init__(self, num_buckets: int = DEFAULT_NUM_BUCKETS, callback: Callback | None = None):
        if isinstance(num_buckets, bool) or not isinstance(num_buckets, int) or num_buckets < 2:
            raise ValueError(
                f"RotatingMap: num_buckets must be an integer >= 2, got {num_buckets!r}"
            )
        self._buckets: list[dict[K, V]] = [{} for _ in range(num_buckets)]
        self._expire = _expire_function(callback)

    def rotate(self) -> dict[K, V]:
        """Drop the oldest bucket and start a new, empty one; call the callback for each
        entry dropped (oldest first). Returns the entries dropped."""
        dead = self._buckets.pop()
        self._buckets.insert(0, {})
        if self._expire is not None:
            for key, value in dead.items():
                self._expire(key, value)
        return dead

    def contains_key(self, key: K) -> bool:
        """Whether ``key`` has an entry."""
        return any(key in bucket for bucket in self._buckets)

    def get(self, key: K) -> V | None:
        """The value of ``key``, or None if it has none."""
        for bucket in self._buckets:
            if key in bucket:
                return bucket[key]
        return None

    def put(self, key: K, value: V) -> None:
        """Set ``key`` to ``value`` in the newest bucket (its expiry starts again)."""
        self._buckets[0][key] = value
        for bucket in self._buckets[1:]:
            bucket.pop(key, None)

    def remove(self, key: K) -> V | None:
        """Remove ``key``'s entry (no callback); its value, or None if it had none."""
        for bucket in self._buckets:
            if key in bucket:
                return bucket.pop(key)
        return None

    def size(self) -> int:
        """The number of entries."""
        return sum(len(bucket) for bucket in self._buckets)

    def __len__(self) -> int:
        return self.size()

    def __contains__(self, key: object) -> bool:
        return any(key in bucket for bucket in self._buckets)

    def __iter__(self) -> Iterator[K]:
        for bucket in self._buckets:
            yield from bucket


class TimeCacheMap(Generic[K, V]):
    """Storm's ``TimeCacheMap``: a map whose entries expire ``expiration_secs`` after
    they were last put, on the topology's clock.

    A :class:`RotatingMap` of ``num_buckets`` buckets, rotated every ``expiration_secs /
    (num_buckets - 1)`` seconds of the clock, so an entry expires between
    ``expiration_secs`` and ``expiration_secs * (1 + 1 / (num_buckets - 1))`` seconds
    after its last ``put``, as in Storm. Where Storm rotates on a thread of its own,
    this map rotates when it is used: each method first makes the rotations that fell
    due since the last one (all of them, at the times they were due), calling the
    callback in the calling thread for each entry that expired. So the callback runs in
    the task's own thread, between its other methods; an entry whose time is up but
    which the task does not touch expires at the next call (a bolt that must hear of
    expiries without other traffic calls ``size()`` on its tick tuples).

    The clock is the calling task's (see :class:`Time`), read when the map is made:
    make it in ``open``/``prepare``. Thread-safe (one lock, as Storm's). It pickles and
    copies (a Spark task's state snapshot) with its entries and schedule; the copy reads
    the clock of the task that loads it.

    Args:
        expiration_secs: seconds after which an entry expires (> 0).
        num_buckets: at least 2 (default 3: entries expire at most 50% late).
        callback: a function ``(key, value)`` or an object with ``expire(key, value)``,
            called once for each entry that expires (not for ``remove``).
        clock: the clock to expire on instead of the task's.

    Raises:
        ValueError: ``expiration_secs`` not positive or ``num_buckets`` below 2.
    """

    def __init__(
        self,
        expiration_secs: float,
        num_buckets: int = RotatingMap.DEFAULT_NUM_BUCKETS,
        callback: Callback | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        if isinstance(expiration_secs, bool) or not (
            isinstance(expiration_secs, int | float) and expiration_secs > 0
        ):
            raise ValueError(
                f"TimeCacheMap: expiration_secs must be a number > 0, got {expiration_secs!r}"
            )
        self._map: RotatingMap[K, V] = RotatingMap(num_buckets)
        self._num_buckets = num_buckets
        self._expire = _expire_function(callback)
        self._clock = clock if clock is not None else current_clock()
        self._period_ms = expiration_secs * 1000.0 / (num_buckets - 1)
        self._next_rotation_ms = self._clock.now_ms() + self._period_ms
        self._stopped = False
        self._lock = threading.Lock()

    def _rotate_due(self) -> None:
        """Make the rotations due by now, then call the callback for what they dropped
        (outside the lock, so the callback may use the map)."""
        dead: list[tuple[K, V]] = []
        with self._lock:
            now = self._clock.now_ms()
            if self._stopped or now < self._next_rotation_ms:
                return
            due = int((now - self._next_rotation_ms) // self._period_ms) + 1
            self._next_rotation_ms += due * self._period_ms
            for _ in range(min(due, self._num_buckets)):
                dead.extend(self._map.rotate().items())
        if self._expire is not None:
            for key, value in dead:
                self._expire(key, value)

    def contains_key(self, key: K) -> bool:
        """Whether ``key`` has an unexpired entry."""
        self._rotate_due()
        with self._lock:
            return self._map.contains_key(key)

    def get(self, key: K) -> V | None:
        """The value of ``key``, or None if it has none (or it expired)."""
        self._rotate_due()
        with self._lock:
            return self._map.get(key)

    def put(self, key: K, value: V) -> None:
        """Set ``key`` to ``value``; it expires ``expiration_secs`` from now."""
        self._rotate_due()
        with self._lock:
            self._map.put(key, value)

    def remove(self, key: K) -> V | None:
        """Remove ``key``'s entry (no callback); its value, or None if it had none."""
        self._rotate_due()
        with self._lock:
            return self._map.remove(key)

    def size(self) -> int:
        """The number of unexpired entries."""
        self._rotate_due()
        with self._lock:
            return self._map.size()

    def __len__(self) -> int:
        return self.size()

    def __contains__(self, key: object) -> bool:
        return self.contains_key(key)  # type: ignore[arg-type]

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a task's state snapshot, a copy) without its lock and clock: a copy
        expires on the clock of the task that loads it, on the same schedule."""
        with self._lock:
            state = dict(self.__dict__)
        del state["_lock"]
        state["_clock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._clock = current_clock()
        self._lock = threading.Lock()

    def cleanup(self) -> None:
        """Stop expiring entries (Storm's ``cleanup()`` stops its expiry thread): the
        entries stay until removed."""
        with self._lock:
            self._stopped = True


__all__ = ["ExpiredCallback", "RotatingMap", "Time", "TimeCacheMap"]
