"""Trident state: map states that make persistent aggregates exactly-once.

A state factory (picklable, part of the topology) makes the state of each partition
where the partition runs. A map state stores one value per key (a tuple of group-by
values; ``()`` for a global aggregate) in a backing map, wrapped according to its
:class:`StateType`: :class:`NonTransactionalMap` (plain values, over-counts on replay),
:class:`TransactionalMap` (``(txid, value)``, skips a batch it already holds) or
:class:`OpaqueMap` (``(txid, curr, prev)``, recomputes a replayed batch from ``prev``).
Backends: :class:`MemoryMapState` (in-process), :class:`SqliteMapState` (a durable
file), :class:`RedisMapState` (a Redis server); :class:`CachedMap` puts an LRU cache in
front of any of them.
"""

from squall.trident.state.base import (
    GLOBAL_KEY,
    BackingMap,
    MapState,
    NotInCommitError,
    OpaqueValue,
    ReadOnlyStateError,
    State,
    StateConnectionError,
    StateError,
    StateFactory,
    StateLocality,
    StateType,
    TransactionalValue,
    Updater,
)
from squall.trident.state.cache import CachedMap
from squall.trident.state.factory import MapStateFactory
from squall.trident.state.maps import (
    NonTransactionalMap,
    OpaqueMap,
    ReadOnlyMapState,
    TransactionalMap,
    map_state_for,
)
from squall.trident.state.memory_state import (
    MemoryMapState,
    MemoryMapStateFactory,
    StaticBackingMap,
    StaticMapStateFactory,
)
from squall.trident.state.redis_state import RedisMapState, RedisMapStateFactory
from squall.trident.state.serialization import (
    JsonNonTransactionalSerializer,
    JsonOpaqueSerializer,
    JsonTransactionalSerializer,
    ValueSerializer,
    serializer_for,
)
from squall.trident.state.sqlite_state import SqliteMapState, SqliteMapStateFactory

__all__ = [
    "GLOBAL_KEY",
    "BackingMap",
    "CachedMap",
    "JsonNonTransactionalSerializer",
    "JsonOpaqueSerializer",
    "JsonTransactionalSerializer",
    "MapState",
    "MapStateFactory",
    "MemoryMapState",
    "MemoryMapStateFactory",
    "NonTransactionalMap",
    "NotInCommitError",
    "OpaqueMap",
    "OpaqueValue",
    "ReadOnlyMapState",
    "ReadOnlyStateError",
    "RedisMapState",
    "RedisMapStateFactory",
    "SqliteMapState",
    "SqliteMapStateFactory",
    "State",
    "StateConnectionError",
    "StateError",
    "StateFactory",
    "StateLocality",
    "StateType",
    "StaticBackingMap",
    "StaticMapStateFactory",
    "TransactionalMap",
    "TransactionalValue",
    "Updater",
    "ValueSerializer",
    "map_state_for",
    "serializer_for",
]
