"""Routing: which target tasks receive a tuple, per stream grouping.

One module for both engines, so the same topology assigns the same tuples to the same
task ids everywhere. Routers are built per emitting task (each has its own round-robin
position and load counts, as in Storm) and return a fresh list of task ids per call.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from typing import Any

from mypy_extensions import mypyc_attr

from squall.model.errors import InvalidTopologyError
from squall.model.grouping import GlobalStreamId, Grouping, GroupingKind
from squall.model.topology import StormTopology
from squall.model.tuple import StreamInfo
from squall.runtime.context import TopologyContext
from squall.runtime.hashing import StableHashError, hash_values, stable_hash
from squall.runtime.plan import TaskPlan

Chooser = Callable[[int, Sequence[Any]], list[int]]

_CACHE_LIMIT = 1 << 16


@mypyc_attr(allow_interpreted_subclasses=True)  # pickled: see PICKLED_NATIVE
class Router:
    """Chooses the target tasks of one stream's non-direct emits, for one emitting task.

    Runs in the emitting task. Compiled, the collectors call :meth:`choose` natively; a
    router is also a :data:`Chooser` (calling it chooses).
    """

    def choose(self, task_id: int, values: Sequence[Any]) -> list[int]:
        """The target task ids of a tuple with ``values`` that task ``task_id`` emits."""
        raise NotImplementedError

    def __call__(self, task_id: int, values: Sequence[Any]) -> list[int]:
        return self.choose(task_id, values)


# PICKLED_NATIVE: routers are pickled with a task's snapshot on Spark. Compiled, a class
# is unpickled by calling its __new__ without arguments, which for a native class also
# runs __init__ unless the class allows interpreted subclasses (mypyc's serializable
# option would skip __init__ on every construction); so routers allow them.


@mypyc_attr(allow_interpreted_subclasses=True)  # pickled: see PICKLED_NATIVE
class ShuffleRouter(Router):
    """Round-robin over a shuffled copy of the targets: an exactly even spread.

    The shuffle is seeded by the emitting task id, so assignments are reproducible.
    """

    def __init__(self, targets: list[int], source_task: int) -> None:
        order = list(targets)
        random.Random(source_task).shuffle(order)
        self._order = order
        self._size = len(order)
        self._next = source_task % len(order)

    def choose(self, task_id: int, values: Sequence[Any]) -> list[int]:
        position = self._next
        self._next = position + 1 if position + 1 < self._size else 0
        return [self._order[position]]


#: Key types FieldsRouter caches targets for: immutable, with a Python equality and hash
#: that agree with the stable hash. Other keys (decimals, dataclasses, values that cannot
#: be hashed stably) are hashed on every emit, so an unsupported value always raises; a
#: key equal to a cached one (``Decimal(1)`` and ``1``) finds the equal key's target.
_CACHED_TYPES = frozenset({str, int, float, bool, bytes, type(None)})


@mypyc_attr(allow_interpreted_subclasses=True)  # pickled: see PICKLED_NATIVE
class GroupingKey:
    """Names a fields or partial-key grouping in errors about its key values.

    Args:
        positions: The grouping fields' positions in the emitted values.
        fields: Their names, in the same order (None: named by position).
        site: Who groups what, e.g. ``bolt 'count' groups stream 'default' of 'split'``.
    """

    def __init__(self, positions: Sequence[int], fields: Sequence[str] | None, site: str) -> None:
        if fields is not None and len(fields) != len(positions):
            raise ValueError(f"{site}: {len(fields)} field names for {len(positions)} fields")
        self.names = (
            [repr(name) for name in fields]
            if fields is not None
            else [f"at position {position}" for position in positions]
        )
        self.site = site

    def explain(self, key: Sequence[Any], error: StableHashError) -> StableHashError:
        """``error``, naming the grouping and the first field of ``key`` (the grouping
        fields' values, in order) whose value cannot be hashed stably."""
        for name, value in zip(self.names, key, strict=True):
            try:
                stable_hash(value)
            except StableHashError as found:
                found.context = f"{self.site} by field {name}"
                return found
        error.context = self.site
        return error


@mypyc_attr(allow_interpreted_subclasses=True)  # pickled: see PICKLED_NATIVE
class FieldsRouter(Router):
    """Equal values of the grouping fields always reach the same task (stable hash).

    Runs in the emitting task. Targets are cached per key for the common key types
    (``_CACHED_TYPES``); other keys are hashed on every emit.

    Args:
        targets: The subscriber's task ids.
        positions: The grouping fields' positions in the emitted values.
        fields: The grouping fields' names, for errors (None: named by position).
        site: Who groups what, for errors.
    """

    def __init__(
        self,
        targets: list[int],
        positions: list[int],
        fields: Sequence[str] | None = None,
        site: str = "a fields grouping",
    ) -> None:
        self._targets = list(targets)
        self._count = len(targets)
        self._positions = positions
        self._single = positions[0] if len(positions) == 1 else -1
        self._cache: dict[Any, int] = {}
        self._key = GroupingKey(positions, fields, site)

    def target_for_key(self, key: Any) -> int:
        """The task for a key (a value, or a tuple of values for several fields).

        Raises:
            StableHashError: a value cannot be hashed stably; the message names the
                grouping and the field.
        """
        try:
            if self._single >= 0:
                return self._targets[stable_hash(key) % self._count]
            return self._targets[hash_values(key) % self._count]
        except StableHashError as error:
            raise self._key.explain([key] if self._single >= 0 else key, error) from None

    def choose(self, task_id: int, values: Sequence[Any]) -> list[int]:
        if self._single >= 0:
            key = values[self._single]
        else:
            key = tuple([values[p] for p in self._positions])
        try:
            return [self._cache[key]]
        except KeyError:
            target = self.target_for_key(key)
            if self._cacheable(key):
                if len(self._cache) >= _CACHE_LIMIT:
                    self._cache.clear()
                self._cache[key] = target
            return [target]
        except TypeError:  # unhashable in Python (a list, a dict): no caching
            return [self.target_for_key(key)]

    def _cacheable(self, key: Any) -> bool:
        if self._single >= 0:
            return type(key) in _CACHED_TYPES
        return all(type(value) in _CACHED_TYPES for value in key)


@mypyc_attr(allow_interpreted_subclasses=True)  # pickled: see PICKLED_NATIVE
class PartialKeyRouter(Router):
    """Each key has two candidate tasks; the one this emitter has sent less to wins.

    Runs in the emitting task; arguments as :class:`FieldsRouter`.
    """

    def __init__(
        self,
        targets: list[int],
        positions: list[int],
        fields: Sequence[str] | None = None,
        site: str = "a partial key grouping",
    ) -> None:
        self._targets = list(targets)
        self._count = len(targets)
        self._positions = positions
        self._load = [0] * len(targets)
        self._key = GroupingKey(positions, fields, site)

    def candidates(self, values: Sequence[Any]) -> tuple[int, int]:
        """The two candidate target indexes of a tuple's key.

        Raises:
            StableHashError: a value cannot be hashed stably; the message names the
                grouping and the field.
        """
        key = [values[p] for p in self._positions]
        count = self._count
        try:
            first = hash_values(key) % count
        except StableHashError as error:
            raise self._key.explain(key, error) from None
        if count == 1:
            return first, first
        # The second choice is drawn among the other tasks, so the two always differ.
        second = (first + 1 + hash_values([*key, 0x5EED]) % (count - 1)) % count
        return first, second

    def choose(self, task_id: int, values: Sequence[Any]) -> list[int]:
        first, second = self.candidates(values)
        load = self._load
        chosen = second if load[first] > load[second] else first
        load[chosen] += 1
        return [self._targets[chosen]]


@mypyc_attr(allow_interpreted_subclasses=True)  # pickled: see PICKLED_NATIVE
class AllRouter(Router):
    """Every target task receives the tuple."""

    def __init__(self, targets: list[int]) -> None:
        self._targets = list(targets)

    def choose(self, task_id: int, values: Sequence[Any]) -> list[int]:
        return list(self._targets)


@mypyc_attr(allow_interpreted_subclasses=True)  # pickled: see PICKLED_NATIVE
class GlobalRouter(Router):
    """The whole stream goes to the lowest task id."""

    def __init__(self, targets: list[int]) -> None:
        self._target = min(targets)

    def choose(self, task_id: int, values: Sequence[Any]) -> list[int]:
        return [self._target]


@mypyc_attr(allow_interpreted_subclasses=True)  # pickled: see PICKLED_NATIVE
class CustomRouter(Router):
    """Delegates to the user's ``CustomStreamGrouping`` and checks what it returns."""

    def __init__(self, grouping: Any, targets: list[int], describe: str) -> None:
        self._grouping = grouping
        self._valid = frozenset(targets)
        self._describe = describe

    def choose(self, task_id: int, values: Sequence[Any]) -> list[int]:
        chosen = self._grouping.choose_tasks(task_id, list(values))
        result = list(chosen)
        for target in result:
            if target not in self._valid:
                raise ValueError(
                    f"{self._describe}: choose_tasks returned task {target!r}, which is not "
                    f"one of the subscriber's tasks {sorted(self._valid)}"
                )
        return result


@mypyc_attr(allow_interpreted_subclasses=True)  # pickled: see PICKLED_NATIVE
class NoTargets(Router):
    """A stream nobody subscribes to."""

    def choose(self, task_id: int, values: Sequence[Any]) -> list[int]:
        return []


@mypyc_attr(allow_interpreted_subclasses=True)  # pickled: see PICKLED_NATIVE
class EverySubscriber(Router):
    """A stream with several subscribers: each one's router, in order."""

    def __init__(self, routers: list[Router]) -> None:
        self._routers = routers

    def choose(self, task_id: int, values: Sequence[Any]) -> list[int]:
        result: list[int] = []
        for router in self._routers:
            result.extend(router.choose(task_id, values))
        return result


class StreamRoute:
    """Everything an emitting task needs for one of its output streams.

    ``router.choose(task_id, values)`` returns the target task ids for a non-direct emit
    (``choose`` is the router too).
    ``direct_targets`` holds the tasks allowed for ``emit_direct`` on a direct stream.
    ``emitted``/``transferred`` are this task's counts for the stream (one writer).
    """

    __slots__ = (
        "direct",
        "direct_targets",
        "emitted",
        "info",
        "router",
        "stream_id",
        "transferred",
        "width",
    )

    def __init__(
        self, info: StreamInfo, direct: bool, router: Router, direct_targets: frozenset[int]
    ) -> None:
        self.info = info
        self.stream_id = info.stream_id
        self.width = len(info.fields)
        self.direct = direct
        self.router = router
        self.direct_targets = direct_targets
        self.emitted = 0
        self.transferred = 0

    @property
    def choose(self) -> Router:
        """The stream's router, as a chooser: ``choose(task_id, values)``."""
        return self.router


def make_router(
    grouping: Grouping,
    targets: list[int],
    source_task: int,
    source_fields: Any,
    context: TopologyContext,
    plan: TaskPlan,
    stream: GlobalStreamId,
    subscriber: str,
) -> Router:
    """Build the router for one subscriber of one stream, for one emitting task."""
    kind = grouping.kind
    if kind in (GroupingKind.SHUFFLE, GroupingKind.NONE):
        return ShuffleRouter(targets, source_task)
    if kind in (GroupingKind.FIELDS, GroupingKind.PARTIAL_KEY):
        fields = list(grouping.fields or ())
        positions = [source_fields.index(name) for name in fields]
        site = f"bolt {subscriber!r} groups stream {stream.stream_id!r} of {stream.component_id!r}"
        router = FieldsRouter if kind is GroupingKind.FIELDS else PartialKeyRouter
        return router(targets, positions, fields, site)
    if kind is GroupingKind.ALL:
        return AllRouter(targets)
    if kind is GroupingKind.GLOBAL:
        return GlobalRouter(targets)
    if kind is GroupingKind.LOCAL_OR_SHUFFLE:
        worker = plan.task_worker.get(source_task)
        local = [t for t in targets if plan.task_worker.get(t) == worker]
        return ShuffleRouter(local or targets, source_task)
    if kind is GroupingKind.CUSTOM:
        custom = copy.deepcopy(grouping.custom)
        custom.prepare(context, stream, list(targets))  # type: ignore[union-attr]
        describe = (
            f"custom grouping of bolt {subscriber!r} on {stream.component_id}:{stream.stream_id}"
        )
        return CustomRouter(custom, targets, describe)
    raise InvalidTopologyError(f"unsupported grouping {grouping.describe()}")


def _combine(routers: list[Router]) -> Router:
    if not routers:
        return NoTargets()
    if len(routers) == 1:
        return routers[0]
    return EverySubscriber(routers)


def stream_targets(
    topology: StormTopology, plan: TaskPlan, context: TopologyContext, stream_id: str
) -> tuple[Router, frozenset[int]]:
    """For the context's task and one stream its component declares: the chooser of
    non-direct emits (every subscriber's router, new) and the tasks ``emit_direct`` may
    send to."""
    component_id = context.component_id
    declaration = topology.get_component(component_id).streams[stream_id]
    routers: list[Router] = []
    direct_targets: set[int] = set()
    for subscriber, grouping in topology.subscribers(component_id, stream_id):
        targets = plan.component_tasks[subscriber]
        if not targets:
            continue
        if grouping.kind is GroupingKind.DIRECT:
            direct_targets.update(targets)
            continue
        routers.append(
            make_router(
                grouping,
                targets,
                context.task_id,
                declaration.fields,
                context,
                plan,
                GlobalStreamId(component_id, stream_id),
                subscriber,
            )
        )
    return _combine(routers), frozenset(direct_targets)


def build_routes(
    topology: StormTopology, plan: TaskPlan, context: TopologyContext
) -> dict[str, StreamRoute]:
    """The routes of every stream the context's component declares, for its task."""
    component_id = context.component_id
    spec = topology.get_component(component_id)
    routes: dict[str, StreamRoute] = {}
    for stream_id, declaration in spec.streams.items():
        info = StreamInfo(component_id, stream_id, declaration.fields)
        router, direct_targets = stream_targets(topology, plan, context, stream_id)
        routes[stream_id] = StreamRoute(info, declaration.direct, router, direct_targets)
    return routes
