"""``StormTopology``: the validated, picklable description of a topology."""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from squall.model.batch_ir import BatchIR
from squall.model.declarer import StreamDeclaration
from squall.model.errors import TopologyOrderError
from squall.model.fields import Fields
from squall.model.grouping import Grouping


def is_control_stream(stream_id: str) -> bool:
    """Whether ``stream_id`` is a control stream rather than one of user data: a batch
    coordination stream (``$batch``, ``$commit``, ``$coord``: prefix ``$``) or a system
    stream (acking, ticks, ``__system``: prefix ``__``)."""
    return stream_id.startswith(("$", "__"))


@dataclass(frozen=True)
class Subscription:
    """A bolt's input: stream ``stream_id`` of ``source``, received with ``grouping``."""

    source: str
    stream_id: str
    grouping: Grouping


@dataclass
class ComponentSpec:
    """One spout or bolt of a topology, as declared.

    ``component`` is the user's object; engines give every task its own copy of it.
    ``colocated_with`` names another component whose task of each index runs in the
    same worker as this component's task of that index (they have as many tasks, and
    this component's executors follow that component's): a bolt that reads what the
    other's tasks keep in their worker's memory (a Trident query of an in-process
    state). ``None`` for every other component.
    """

    component_id: str
    component: Any
    kind: Literal["spout", "bolt"]
    parallelism: int
    num_tasks: int
    conf: dict[str, Any] = field(default_factory=dict)
    inputs: list[Subscription] = field(default_factory=list)
    streams: dict[str, StreamDeclaration] = field(default_factory=dict)
    system: bool = False
    colocated_with: str | None = None

    def copy(self) -> ComponentSpec:
        """A copy whose lists and dicts can change without touching this spec (the
        component object itself is shared)."""
        return ComponentSpec(
            self.component_id,
            self.component,
            self.kind,
            self.parallelism,
            self.num_tasks,
            dict(self.conf),
            list(self.inputs),
            dict(self.streams),
            self.system,
            self.colocated_with,
        )

    @property
    def is_spout(self) -> bool:
        """Whether this is a spout."""
        return self.kind == "spout"


class StormTopology:
    """A topology: spouts, bolts, their streams and subscriptions.

    Built by ``TopologyBuilder.create_topology()`` (validated there) and submitted to a
    cluster. It is pure data: picklable when the user's components are, and never
    modified by the engines (they build their runtime from it).
    """

    def __init__(self, components: dict[str, ComponentSpec]) -> None:
        self._components = dict(components)

    @property
    def spouts(self) -> dict[str, ComponentSpec]:
        """The spouts by id."""
        return {cid: spec for cid, spec in self._components.items() if spec.is_spout}

    @property
    def bolts(self) -> dict[str, ComponentSpec]:
        """The bolts by id."""
        return {cid: spec for cid, spec in self._components.items() if not spec.is_spout}

    def component_ids(self) -> list[str]:
        """All component ids, in declaration order."""
        return list(self._components)

    def __iter__(self) -> Iterator[ComponentSpec]:
        return iter(self._components.values())

    def __contains__(self, component_id: object) -> bool:
        return component_id in self._components

    def get_component(self, component_id: str) -> ComponentSpec:
        """The spec of ``component_id``.

        Raises:
            KeyError: no such component (the message lists the ids there are).
        """
        try:
            return self._components[component_id]
        except KeyError:
            raise KeyError(
                f"topology has no component {component_id!r}; "
                f"components are {sorted(self._components)}"
            ) from None

    def output_fields(self, component_id: str, stream_id: str) -> Fields:
        """Fields of a declared stream."""
        return self.get_component(component_id).streams[stream_id].fields

    def subscribers(self, component_id: str, stream_id: str) -> list[tuple[str, Grouping]]:
        """``(bolt id, grouping)`` for every bolt subscribed to the stream, in order."""
        found = []
        for spec in self._components.values():
            for sub in spec.inputs:
                if sub.source == component_id and sub.stream_id == stream_id:
                    found.append((spec.component_id, sub.grouping))
        return found

    def _subscribers_graph(self, include_control_streams: bool) -> dict[str, list[str]]:
        """Component id -> the components subscribing to any of its streams, each once, in
        declaration order (subscriptions to unknown components are left out)."""
        graph: dict[str, list[str]] = {cid: [] for cid in self._components}
        for spec in self._components.values():
            for source in dict.fromkeys(
                sub.source
                for sub in spec.inputs
                if include_control_streams or not is_control_stream(sub.stream_id)
            ):
                if source in graph:
                    graph[source].append(spec.component_id)
        return graph

    def find_cycle(self) -> list[str] | None:
        """A cycle of subscriptions (on any stream), or ``None`` if there is none.

        The cycle is a list of component ids that starts and ends with the same id,
        each subscribing to the one before it: the first cycle a depth-first search finds,
        starting from the components in declaration order. Linear in the topology's size.
        """
        graph = self._subscribers_graph(include_control_streams=True)
        done: set[str] = set()
        for root in graph:
            if root in done:
                continue
            path = [root]
            on_path = {root: 0}
            pending = [iter(graph[root])]
            while pending:
                for node in pending[-1]:
                    if node in on_path:
                        return [*path[on_path[node] :], node]
                    if node not in done:
                        on_path[node] = len(path)
                        path.append(node)
                        pending.append(iter(graph[node]))
                        break
                else:
                    pending.pop()
                    finished = path.pop()
                    del on_path[finished]
                    done.add(finished)
        return None

    def topological_order(
        self,
        component_ids: Sequence[str],
        *,
        upstream: Collection[str],
        ties: Literal["passes", "earliest"],
        include_control_streams: bool,
    ) -> list[str]:
        """``component_ids`` reordered so that each comes after every one of them it
        subscribes to.

        Args:
            component_ids: the components to order; where the order leaves a choice, it
                follows this sequence by one of two rules.
            upstream: components whose streams are available before any of
                ``component_ids`` runs (spouts, sources the caller orders itself):
                subscriptions to them are satisfied. A subscription to a component neither
                here nor in ``component_ids`` never is.
            ties: ``"passes"``: pass over the sequence again and again, taking every
                component whose inputs are all taken already, earlier in this pass
                included (Kahn's algorithm in rounds, in sequence order). ``"earliest"``:
                always take the earliest component in the sequence whose inputs are all
                taken.
            include_control_streams: whether subscriptions to control streams (see
                :func:`is_control_stream`) count; when not, they are satisfied.

        Returns:
            The components in topological order; O(n log n) in their number plus their
            subscriptions.

        Raises:
            TopologyOrderError: some components are on a cycle, downstream of one, or
                subscribe to a component that is neither given nor upstream; it names
                every component that could not be ordered.
        """
        position = {cid: index for index, cid in enumerate(component_ids)}
        feeders: dict[str, set[str]] = {cid: set() for cid in position}
        subscribers: dict[str, list[str]] = {cid: [] for cid in position}
        waiting = dict.fromkeys(position, 0)
        for cid in position:
            sources = dict.fromkeys(
                sub.source
                for sub in self.get_component(cid).inputs
                if include_control_streams or not is_control_stream(sub.stream_id)
            )
            for source in sources:
                if source in position:
                    feeders[cid].add(source)
                    subscribers[source].append(cid)
                    waiting[cid] += 1
                elif source not in upstream:
                    waiting[cid] += 1  # never satisfied
        ready = [position[cid] for cid, count in waiting.items() if not count]
        heapq.heapify(ready)
        order: list[str] = []
        while ready:
            cid = component_ids[heapq.heappop(ready)]
            order.append(cid)
            for subscriber in subscribers[cid]:
                waiting[subscriber] -= 1
                if not waiting[subscriber]:
                    heapq.heappush(ready, position[subscriber])
        if len(order) < len(position):
            raise TopologyOrderError(sorted(set(position) - set(order)))
        if ties == "earliest":
            return order
        # The pass that takes a component: the last of its feeders' passes, or the one
        # after it when that feeder comes later in the sequence (it is taken after this
        # component is looked at in that pass).
        passes: dict[str, int] = {}
        for cid in order:
            passes[cid] = max(
                (passes[f] + (position[f] > position[cid]) for f in feeders[cid]), default=1
            )
        return sorted(order, key=lambda cid: (passes[cid], position[cid]))

    def reachable_from(
        self,
        sources: Iterable[str],
        *,
        include_control_streams: bool,
        within: Collection[str] | None = None,
    ) -> set[str]:
        """The components that subscribe, directly or through others, to any of
        ``sources``. Linear in the topology's size.

        A source is in the result only if it is itself reached from a source (a cycle).

        Args:
            sources: where to start.
            include_control_streams: whether subscriptions to control streams (see
                :func:`is_control_stream`) count.
            within: if given, only these components are reached, and only through them.
        """
        graph = self._subscribers_graph(include_control_streams)
        reached: set[str] = set()
        frontier = [source for source in sources if source in graph]
        while frontier:
            for subscriber in graph[frontier.pop()]:
                if subscriber not in reached and (within is None or subscriber in within):
                    reached.add(subscriber)
                    frontier.append(subscriber)
        return reached

    def depths_from_spouts(self) -> dict[str, int]:
        """How far each component is from the spouts: component id -> the fewest
        subscriptions (on any stream) from a spout down to it.

        Spouts have depth 0. Components no spout reaches are left out, and so are system
        components (such as the acker), which are not gone through either. Linear in the
        topology's size.
        """
        graph = self._subscribers_graph(include_control_streams=True)
        depth = {cid: 0 for cid, spec in self._components.items() if spec.is_spout}
        frontier = list(depth)
        while frontier:
            reached = []
            for source in frontier:
                for subscriber in graph[source]:
                    if subscriber not in depth and not self._components[subscriber].system:
                        depth[subscriber] = depth[source] + 1
                        reached.append(subscriber)
            frontier = reached
        return depth

    def __repr__(self) -> str:
        parts = [
            f"{spec.kind} {cid!r} x{spec.parallelism}" for cid, spec in self._components.items()
        ]
        return f"StormTopology({'; '.join(parts)})"

    #: What a topology that runs on the batch layer was compiled from: a Trident
    #: topology's :class:`squall.trident.ir.TridentIR`, a transactional topology's
    #: :class:`squall.transactional.ir.TransactionalIR` (set by their compilers, kept by
    #: ``system_topology``); ``None`` for every other topology.
    batch_ir: BatchIR | None = None
