"""The in-process backend (Storm's ``MemoryMapState``) and static lookup states.

A :class:`MemoryMapStateFactory` names one store by a unique id made when the factory
is. Every state the factory makes in a process, for any partition and task, and in any
copy of the factory (``copy.deepcopy``, pickling within the process) uses that process's
store of that id, kept in a module-level registry. The store is not shared between
processes: a factory unpickled in another process (a Spark executor) starts that
process's own, empty, store. It lives until :meth:`MemoryMapState.clear` or the end of
the process.
"""

from __future__ import annotations

import pickle
import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from squall.model.context import TopologyContext
from squall.runtime.state_errors import ReadOnlyStateError, StateError
from squall.trident.state.base import (
    BackingMap,
    MapState,
    StateFactory,
    StateLocality,
    StateType,
    as_keys,
    current_value,
    private_copy,
)
from squall.trident.state.factory import MapStateFactory, check_cache_size, check_state_type
from squall.trident.state.maps import ReadOnlyMapState


class _Store:
    """One store: pickled stored values by key, under a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.data: dict[tuple[Any, ...], bytes] = {}


_STORES: dict[str, _Store] = {}
_STORES_LOCK = threading.Lock()


def _store(store_id: str) -> _Store:
    with _STORES_LOCK:
        store = _STORES.get(store_id)
        if store is None:
            store = _STORES[store_id] = _Store()
        return store


def _new_store_id() -> str:
    return f"memory-{random.getrandbits(64):016x}"


class MemoryMapState(BackingMap):
    """A backing map in this process's memory, shared by every state of one factory.

    Values are stored pickled, so what is stored shares nothing with what callers hold
    (as with a database) and values must be picklable; tuples stay tuples. Thread-safe:
    each ``multi_get``/``multi_put`` is atomic. Not durable: the store ends with the
    process.
    """

    def __init__(self, store_id: str | None = None) -> None:
        """Use the store named ``store_id`` (a new, empty one when ``None``)."""
        #: The id of the store in this process's registry.
        self.store_id = store_id or _new_store_id()
        self._store = _store(self.store_id)

    @classmethod
    def factory(
        cls, state_type: StateType = StateType.OPAQUE, cache_size: int = 0
    ) -> MemoryMapStateFactory:
        """A factory of map states of ``state_type`` over one new in-memory store.

        Runs where the topology is declared.

        Args:
            state_type: the map state wrapped around the store (Storm's
                ``MemoryMapState`` is opaque).
            cache_size: keys of the :class:`CachedMap` in front of the store; 0 (the
                default) for none, as the store is already in memory.
        """
        return MemoryMapStateFactory(state_type=state_type, cache_size=cache_size)

    @classmethod
    def static_factory(cls, data: Mapping[Any, Any]) -> StaticMapStateFactory:
        """A factory of read-only states answering ``multi_get`` from ``data``, for
        ``TridentTopology.new_static_state`` and ``MapGet``.

        Keys of ``data`` are tuples of the queried values; a key that is not a tuple
        stands for the 1-tuple of it (``{"cow": 3}`` is ``{("cow",): 3}``). The data is
        copied into the factory, which must be picklable.
        """
        return StaticMapStateFactory(
            {key if isinstance(key, tuple) else (key,): value for key, value in data.items()}
        )

    @staticmethod
    def contents(factory: MemoryMapStateFactory, raw: bool = False) -> dict[tuple[Any, ...], Any]:
        """Everything the factory's store holds in this process, for tests and debugging.

        Args:
            factory: a factory made by :meth:`factory`.
            raw: return the stored values (:class:`TransactionalValue`,
                :class:`OpaqueValue`) instead of the current values.
        """
        store = _store(factory.store_id)
        with store.lock:
            items = list(store.data.items())
        return {
            key: pickle.loads(data) if raw else current_value(pickle.loads(data))
            for key, data in items
        }

    @staticmethod
    def clear(factory: MemoryMapStateFactory) -> None:
        """Drop the factory's store in this process (states already made keep using the
        dropped store; new ones start empty)."""
        with _STORES_LOCK:
            _STORES.pop(factory.store_id, None)

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any | None]:
        """The stored values (fresh copies), ``None`` where absent. Runs in the
        owning task; atomic."""
        keys = as_keys(keys)
        data = self._store.data
        with self._store.lock:
            found = [data.get(key) for key in keys]
        return [None if raw is None else pickle.loads(raw) for raw in found]

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        """Store copies of the values. Runs in the owning task; atomic (all or none).

        Raises:
            StateError: a value cannot be pickled.
        """
        keys = as_keys(keys)
        if len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        try:
            pickled = [pickle.dumps(value, pickle.HIGHEST_PROTOCOL) for value in values]
        except Exception as error:
            raise StateError(f"MemoryMapState values must be picklable: {error}") from error
        with self._store.lock:
            self._store.data.update(zip(keys, pickled, strict=True))


@dataclass(frozen=True)
class MemoryMapStateFactory(MapStateFactory):
    """Makes map states over one in-process store (see :class:`MemoryMapState`).

    Picklable. Copies of the factory in one process share the store; equal factories
    (same ``store_id``) too. Another process has its own store (``IN_PROCESS``).
    """

    locality: ClassVar[StateLocality] = StateLocality.IN_PROCESS

    state_type: StateType = StateType.OPAQUE
    cache_size: int = 0
    store_id: str = field(default_factory=_new_store_id)

    def __post_init__(self) -> None:
        check_state_type(self.state_type)
        check_cache_size(self.cache_size)

    def make_backing_map(
        self,
        conf: dict[str, Any],
        context: TopologyContext | None,
        partition_index: int,
        num_partitions: int,
    ) -> BackingMap:
        """The store of ``store_id`` in this process (every partition shares it)."""
        return MemoryMapState(self.store_id)


class StaticBackingMap(BackingMap):
    """A backing map over fixed data; ``multi_put`` raises :class:`ReadOnlyStateError`.

    Runs in the querying task; hands out copies, so the data never changes.
    """

    def __init__(self, data: Mapping[tuple[Any, ...], Any]) -> None:
        self._data = data

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any | None]:
        """The value of each key, ``None`` where absent."""
        return [private_copy(self._data.get(key)) for key in as_keys(keys)]

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        """Always raises :class:`ReadOnlyStateError`."""
        raise ReadOnlyStateError("a static state cannot be written")


@dataclass(frozen=True, eq=False)
class StaticMapStateFactory(StateFactory):
    """Makes read-only states answering ``multi_get`` from ``data`` (see
    :meth:`MemoryMapState.static_factory`). Picklable when the data is; every process
    gets the data with the factory (``SHARED``)."""

    data: Mapping[tuple[Any, ...], Any]

    def make_state(
        self,
        conf: dict[str, Any],
        context: TopologyContext | None,
        partition_index: int,
        num_partitions: int,
    ) -> MapState:
        """A :class:`ReadOnlyMapState` over the data (every partition sees all of it).

        Runs in the querying task's process, once per task.
        """
        return ReadOnlyMapState(StaticBackingMap(self.data))
