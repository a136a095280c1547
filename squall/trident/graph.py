"""The Trident graph: nodes that ``Stream`` operations add, before compilation.

Every operation adds a :class:`Node` whose ``output_fields`` are all the fields of the
stream after it. Aggregations expand into Storm's plan: a combiner aggregator becomes
a partial combine, a repartition and a final combine; other aggregators a repartition
and an aggregation. Compilation (``squall.trident.compiler``) cuts the graph
(:class:`TridentGraph`) into segments (:class:`Segment`) at repartitions and runs each
segment as a batch bolt.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from squall.model.errors import InvalidTopologyError
from squall.model.fields import Fields

_ids = itertools.count(1)


@dataclass(eq=False)
class Node:
    """One operation of the Trident graph."""

    kind: str
    parents: list[Node]
    output_fields: Fields
    params: dict[str, Any] = field(default_factory=dict)
    parallelism: int | None = None
    name: str | None = None
    id: int = field(default_factory=lambda: next(_ids))

    @property
    def starts_segment(self) -> bool:
        """Whether this node begins a new segment (a new bolt)."""
        if self.kind in ("partition", "merge", "join", "spout", "drpc_spout"):
            return True
        return any(p.kind in ("spout", "drpc_spout") for p in self.parents)

    @property
    def source(self) -> Node:
        """The spout (or DRPC spout) this node's batches come from.

        Raises:
            InvalidTopologyError: the node's inputs come from different batch sources.
        """
        if self.kind in ("spout", "drpc_spout"):
            return self
        sources = {id(p.source): p.source for p in self.parents}
        if len(sources) == 1:
            return next(iter(sources.values()))
        kinds = {s.kind for s in sources.values()}
        if kinds == {"spout"}:
            return min(sources.values(), key=lambda s: s.id)
        raise InvalidTopologyError(
            f"Trident {self.kind} mixes a DRPC stream with other streams: a DRPC stream's "
            "batches are single requests, so it can only be combined with states "
            "(state_query), not merged or joined with other streams"
        )

    def describe(self) -> str:
        """Short text for messages."""
        return f"{self.kind}#{self.id}" + (f" ({self.name})" if self.name else "")


class TridentGraph:
    """The nodes of a Trident topology, in the order the operations added them (what
    compilation reads; :class:`~squall.trident.stream.TridentTopology` is one)."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def add_node(
        self, kind: str, parents: list[Node], output: Fields, params: dict[str, Any]
    ) -> Node:
        """Append a node (used by the stream operations)."""
        node = Node(kind, list(parents), output, dict(params))
        self.nodes.append(node)
        return node


@dataclass(eq=False)
class Segment:
    """Operations run by one bolt (or, for a spout, its emitter)."""

    index: int
    nodes: list[Node] = field(default_factory=list)
    component_id: str = ""
    outputs: dict[str, Fields] = field(default_factory=dict)
    inputs: list[tuple[Segment, str, Node, int]] = field(default_factory=list)
    #: Its task count when it is placed with other segments (a state and its queries,
    #: see :mod:`squall.trident.placement`); ``None``: its parallelism.
    placed_tasks: int | None = None
    #: The segment it runs with: its task of each index in the worker of that segment's
    #: task of the same index.
    colocated_with: str | None = None

    @property
    def head(self) -> Node:
        """The segment's first node."""
        return self.nodes[0]

    @property
    def is_spout(self) -> bool:
        """Whether this is a spout's emitter."""
        return self.head.kind in ("spout", "drpc_spout")

    @property
    def committer(self) -> bool:
        """Whether the segment updates a state (so it commits in transaction order)."""
        return any(node.kind == "persist" for node in self.nodes)

    @property
    def parallelism(self) -> int:
        """The largest parallelism hint of its operations (1 by default)."""
        return max((n.parallelism for n in self.nodes if n.parallelism), default=1)

    @property
    def tasks(self) -> int:
        """Its task count: its parallelism, or the count it shares with the segments it
        is placed with."""
        return self.placed_tasks if self.placed_tasks is not None else self.parallelism


def check_fields(where: str, wanted: Fields, available: Fields) -> None:
    """Raise a clear error if ``wanted`` names a field ``available`` lacks."""
    missing = [name for name in wanted if name not in available]
    if missing:
        raise InvalidTopologyError(
            f"Trident {where}: unknown field(s) {missing}; the stream has {available.to_list()}"
        )


def check_new_fields(where: str, new: Fields, existing: Fields) -> None:
    """Raise if output fields would duplicate existing ones."""
    clash = [name for name in new if name in existing]
    if clash:
        raise InvalidTopologyError(
            f"Trident {where}: output field(s) {clash} already exist in the stream "
            f"{existing.to_list()}; choose new names (or project first)"
        )
