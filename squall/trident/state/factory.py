"""The shared shape of the backends' factories: make the backing map, put a cache in
front of it, wrap it in the map state of the factory's state type."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from squall.model.context import TopologyContext
from squall.model.hooks import CachesState
from squall.trident.state.base import BackingMap, MapState, StateFactory, StateType
from squall.trident.state.cache import CachedMap
from squall.trident.state.maps import map_state_for


def check_state_type(state_type: Any) -> StateType:
    """``state_type`` if it is a :class:`StateType`, else a ``TypeError``."""
    if not isinstance(state_type, StateType):
        raise TypeError(
            f"state_type must be a StateType (NON_TRANSACTIONAL, TRANSACTIONAL, OPAQUE), "
            f"got {state_type!r}"
        )
    return state_type


def check_cache_size(cache_size: Any) -> int:
    """``cache_size`` if it is an int >= 0, else a ``ValueError``."""
    if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
        raise ValueError(f"cache_size must be an int >= 0 (0: no cache), got {cache_size!r}")
    return cache_size


class MapStateFactory(StateFactory, CachesState):
    """A factory of map states over one backend.

    Subclasses are frozen dataclasses (picklable, comparable) with at least the fields
    ``state_type`` and ``cache_size``, and implement :meth:`make_backing_map`.
    """

    state_type: StateType
    cache_size: int

    @abstractmethod
    def make_backing_map(
        self,
        conf: dict[str, Any],
        context: TopologyContext | None,
        partition_index: int,
        num_partitions: int,
    ) -> BackingMap:
        """Open the backend for one partition. Runs where :meth:`make_state` runs."""

    def make_state(
        self,
        conf: dict[str, Any],
        context: TopologyContext | None,
        partition_index: int,
        num_partitions: int,
    ) -> MapState:
        """The partition's map state: ``state_type``'s map over the backing map, with a
        :class:`CachedMap` of ``cache_size`` keys in between when ``cache_size > 0``.

        Runs in the process of the task that owns the partition, once per task.
        """
        backing = self.make_backing_map(conf, context, partition_index, num_partitions)
        if self.cache_size > 0:
            backing = CachedMap(backing, self.cache_size)
        return map_state_for(backing, self.state_type)
