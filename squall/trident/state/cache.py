"""An LRU cache in front of a backing map (Storm's ``CachedMap``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from squall.trident.state.base import BackingMap, as_keys, private_copy

_ABSENT = object()


class CachedMap(BackingMap):
    """Keeps the ``size`` most recently used stored values of another backing map.

    Reads are served from the cache where possible and read through (one ``multi_get``
    of the missing keys, whose results, absent keys included, are then cached). Writes go
    through to the backing map first and are cached once it accepted them, so the cache
    never holds a value the backing map refused. Values are copied in and out, so callers
    may mutate what they get and what they gave.

    Runs in the task that owns the state; thread-safe. The cache is only coherent while
    this object is the only writer of the keys it caches, which is how Trident uses a map
    state: each key is owned by one partition, and state queries read through the
    partition's own state. Where other objects or processes write the same keys, use no
    cache (``cache_size=0`` on the factories).
    """

    def __init__(self, backing: BackingMap, size: int = 1000) -> None:
        """Wrap ``backing`` with a cache of at most ``size`` keys (``size >= 1``)."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"a CachedMap holds at least 1 key, got size={size!r}")
        #: The map reads and writes go through to.
        self.backing = backing
        #: The most keys the cache holds; the least recently used is evicted first.
        self.size = size
        self._cache: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many keys the cache holds now."""
        return len(self._cache)

    def cached_keys(self) -> list[tuple[Any, ...]]:
        """The cached keys, least recently used first (for tests and debugging)."""
        with self._lock:
            return list(self._cache)

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any | None]:
        """Cached values, the others read through in one ``multi_get``.

        Runs in the owning task. A hit refreshes the key's recency.
        """
        keys = as_keys(keys)
        found: dict[tuple[Any, ...], Any] = {}
        missing: list[tuple[Any, ...]] = []
        with self._lock:
            for key in keys:
                if key in found:
                    continue
                if key in self._cache:
                    self._cache.move_to_end(key)
                    found[key] = self._cache[key]
                elif key not in missing:
                    missing.append(key)
        if missing:
            fetched = self.backing.multi_get(missing)
            with self._lock:
                for key, value in zip(missing, fetched, strict=True):
                    found[key] = _ABSENT if value is None else value
                    self._remember(key, found[key])
        return [None if found[key] is _ABSENT else private_copy(found[key]) for key in keys]

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        """Write through to the backing map, then cache copies of the values.

        Runs in the owning task within a commit. If the backing write raises, the
        written keys are dropped from the cache (their stored values are unknown).
        """
        keys = as_keys(keys)
        try:
            self.backing.multi_put(keys, values)
        except BaseException:
            with self._lock:
                for key in keys:
                    self._cache.pop(key, None)
            raise
        copies = [_ABSENT if value is None else private_copy(value) for value in values]
        with self._lock:
            for key, value in zip(keys, copies, strict=True):
                self._remember(key, value)

    def close(self) -> None:
        """Drop the cache and close the backing map."""
        with self._lock:
            self._cache.clear()
        self.backing.close()

    def _remember(self, key: tuple[Any, ...], value: Any) -> None:
        self._cache[key] = value
        self._cache.move_to_end(key)
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)
