"""``StormTopology``: the validated, picklable description of a topology."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from squall.model.declarer import StreamDeclaration
from squall.model.fields import Fields
from squall.model.grouping import Grouping


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

    def find_cycle(self) -> list[str] | None:
        """A list of component ids forming a cycle, or ``None`` if the graph is acyclic."""
        graph: dict[str, list[str]] = {cid: [] for cid in self._components}
        for spec in self._components.values():
            for sub in spec.inputs:
                if sub.source in graph:
                    graph[sub.source].append(spec.component_id)
        state: dict[str, int] = {}
        path: list[str] = []

        def visit(node: str) -> list[str] | None:
            state[node] = 1
            path.append(node)
            for nxt in graph[node]:
                if state.get(nxt) == 1:
                    return [*path[path.index(nxt) :], nxt]
                if nxt not in state:
                    found = visit(nxt)
                    if found:
                        return found
            path.pop()
            state[node] = 2
            return None

        for node in graph:
            if node not in state:
                cycle = visit(node)
                if cycle:
                    return cycle
        return None

    def __repr__(self) -> str:
        parts = [
            f"{spec.kind} {cid!r} x{spec.parallelism}" for cid, spec in self._components.items()
        ]
        return f"StormTopology({'; '.join(parts)})"

    #: What a topology that runs on the batch layer was compiled from: a Trident
    #: topology's :class:`squall.trident.ir.TridentIR`, a transactional topology's
    #: :class:`squall.transactional.ir.TransactionalIR` (set by their compilers, kept by
    #: ``system_topology``); ``None`` for every other topology.
    batch_ir: Any = None
