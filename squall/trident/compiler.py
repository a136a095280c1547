"""Compiles a Trident topology onto the core model (through the batch layer).

* The graph is cut into *segments*: a segment starts at every spout, at the operation
  after a spout, and at every repartition, merge and join; the other operations join
  their parent's segment. A segment runs as one batch bolt (``BatchBoltExecutor``
  around a :class:`~squall.trident.segment.TridentSegment`), a committer when it
  updates a state, named ``b<N>-<label>`` after its ``.name()`` or its operations
  (:mod:`squall.trident.naming`).
* The regular spouts share one coordinator spout (``<stream ids>/coordinator``), each
  spout has an emitter bolt named by its stream id; a DRPC stream gets its own
  coordinator and emitter (``drpc-<function>``) and ends in a global step that
  returns each request's result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from squall.model.builder import BoltDeclarer, TopologyBuilder
from squall.model.errors import InvalidTopologyError
from squall.model.fields import Fields
from squall.model.topology import StormTopology
from squall.transactional.batch import (
    BATCH_STREAM,
    COMMIT_STREAM,
    COORD_STREAM,
    BatchBoltExecutor,
    EmitterExecutor,
)
from squall.transactional.coordinator import TransactionalSpoutCoordinator
from squall.trident.graph import Node
from squall.trident.naming import segment_component_id
from squall.trident.processors import PROCESSORS, JoinProcessor, Processor
from squall.trident.segment import TridentSegment
from squall.trident.sources import (
    DRPCResultReturner,
    DRPCSource,
    DRPCSpoutAdapter,
    SpoutGroupSource,
    TridentSpoutAdapter,
)
from squall.trident.spouts import BatchSpout
from squall.trident.stream import TridentTopology


@dataclass(eq=False)
class Segment:
    """Operations run by one bolt (or, for a spout, its emitter)."""

    index: int
    nodes: list[Node] = field(default_factory=list)
    component_id: str = ""
    outputs: dict[str, Fields] = field(default_factory=dict)
    inputs: list[tuple[Segment, str, Node, int]] = field(default_factory=list)

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


def _stream_of(node: Node) -> str:
    return "default" if node.kind in ("spout", "drpc_spout") else f"s{node.id}"


def _add_drpc_returns(topology: TridentTopology) -> None:
    children: dict[int, list[Node]] = {}
    for node in topology.nodes:
        for parent in node.parents:
            children.setdefault(parent.id, []).append(node)
    for spout in [n for n in topology.nodes if n.kind == "drpc_spout"]:
        if any(n.kind == "drpc_return" and n.source is spout for n in topology.nodes):
            continue
        leaves = [
            n
            for n in topology.nodes
            if not children.get(n.id) and n.kind != "drpc_return" and _from(n, spout)
        ]
        function = spout.params["function"]
        if len(leaves) != 1:
            raise InvalidTopologyError(
                f"Trident DRPC stream {function!r} must end in exactly one stream (its "
                f"result), found {len(leaves)} ends: {[n.describe() for n in leaves]}"
            )
        leaf = leaves[0]
        to_one = topology.add_node("partition", [leaf], leaf.output_fields, {"grouping": "global"})
        resolver = DRPCResultReturner(
            f"drpc-{function}/coordinator", function, spout.params["drpc"]
        )
        topology.add_node("drpc_return", [to_one], leaf.output_fields, {"resolver": resolver})


def _from(node: Node, spout: Node) -> bool:
    if node is spout:
        return True
    return any(_from(parent, spout) for parent in node.parents)


def _segments(topology: TridentTopology) -> tuple[list[Segment], dict[int, Segment]]:
    segments: list[Segment] = []
    segment_of: dict[int, Segment] = {}
    for node in topology.nodes:
        node.source  # noqa: B018 - validates that the node's inputs share a batch source
        if node.starts_segment or not node.parents:
            segment = Segment(len(segments))
            segments.append(segment)
        else:
            segment = segment_of[node.parents[0].id]
        segment.nodes.append(node)
        segment_of[node.id] = segment
    bolts = 0
    for segment in segments:
        head = segment.head
        if head.kind == "spout":
            segment.component_id = head.params["stream_id"]
            if isinstance(head.params["spout"], BatchSpout) and segment.parallelism > 1:
                raise InvalidTopologyError(
                    f"Trident stream {segment.component_id!r}: a BatchSpout runs in one task; "
                    "use a partitioned spout for parallel emitters"
                )
        elif head.kind == "drpc_spout":
            segment.component_id = f"drpc-{head.params['function']}"
        else:
            bolts += 1
            segment.component_id = segment_component_id(bolts, segment.nodes)
    return segments, segment_of


def _processors(
    segment: Segment, segment_of: dict[int, Segment]
) -> tuple[list[Processor], dict[tuple[str, str], tuple[int, int]]]:
    processors: dict[int, Processor] = {}
    ordered: list[Processor] = []
    for node in segment.nodes:
        if node.kind == "join":
            processor: Processor = JoinProcessor(node, [p.output_fields for p in node.parents])
        else:
            kind = PROCESSORS.get(node.kind)
            if kind is None:
                raise InvalidTopologyError(f"Trident: unknown operation {node.kind!r}")
            processor = kind(node, node.parents[0].output_fields)
        processor.index = len(ordered)
        processors[node.id] = processor
        ordered.append(processor)
    entries: dict[tuple[str, str], tuple[int, int]] = {}
    for node in segment.nodes:
        for side, parent in enumerate(node.parents):
            source = segment_of[parent.id]
            if source is segment:
                processors[parent.id].children.append((processors[node.id], side))
                continue
            key = (source.component_id, _stream_of(parent))
            if key in entries:
                raise InvalidTopologyError(
                    f"Trident {node.describe()}: the same stream enters it twice (a stream "
                    "joined or merged with itself); branch it with an operation first"
                )
            entries[key] = (processors[node.id].index, side)
            segment.inputs.append((source, _stream_of(parent), node, side))
    return ordered, entries


def _subscribe(declarer: BoltDeclarer, source: str, stream: str, node: Node, side: int) -> None:
    if node.kind == "partition":
        grouping = node.params["grouping"]
        if grouping == "fields":
            declarer.fields_grouping(source, node.params["fields"], stream)
        elif grouping == "shuffle":
            declarer.shuffle_grouping(source, stream)
        elif grouping == "all":
            declarer.all_grouping(source, stream)
        else:
            declarer.global_grouping(source, stream)
    elif node.kind == "join":
        declarer.fields_grouping(source, node.params["keys"][side], stream)
    else:
        declarer.local_or_shuffle_grouping(source, stream)


def compile_topology(topology: TridentTopology) -> StormTopology:
    """Compile ``topology``; see the module docstring.

    Raises:
        InvalidTopologyError: the Trident topology is invalid (the message names the
            operation), or the compiled topology is (as ``create_topology`` reports).
    """
    if not any(n.kind in ("spout", "drpc_spout") for n in topology.nodes):
        raise InvalidTopologyError("a Trident topology needs at least one stream (new_stream)")
    _add_drpc_returns(topology)
    segments, segment_of = _segments(topology)
    wiring = {}
    for segment in segments:
        if not segment.is_spout:
            wiring[segment.index] = _processors(segment, segment_of)
    for segment in segments:
        for source, stream, _, _ in segment.inputs:
            parent_fields = next(n.output_fields for n in source.nodes if _stream_of(n) == stream)
            source.outputs[stream] = parent_fields
    for segment in segments:
        if segment.is_spout:
            continue
        processors, _ = wiring[segment.index]
        for processor in processors:
            stream = _stream_of(processor.node)
            if stream in segment.outputs:
                processor.output_streams.append(stream)

    builder = TopologyBuilder()
    spouts = {s.head.params["stream_id"]: s for s in segments if s.head.kind == "spout"}
    coordinators: dict[int, str] = {}
    if spouts:
        namespace = "+".join(sorted(spouts))
        main = f"{namespace}/coordinator"
        group = SpoutGroupSource({sid: s.head.params["spout"] for sid, s in spouts.items()})
        builder.set_spout(main, TransactionalSpoutCoordinator(group, namespace), 1)
        for segment in spouts.values():
            coordinators[segment.head.id] = main
            adapter = TridentSpoutAdapter(
                segment.component_id, segment.head.params["spout"], segment.head.output_fields
            )
            builder.set_bolt(
                segment.component_id, EmitterExecutor(adapter), segment.parallelism
            ).all_grouping(main, BATCH_STREAM)
    for segment in [s for s in segments if s.head.kind == "drpc_spout"]:
        head = segment.head
        namespace = segment.component_id
        coordinator = f"{namespace}/coordinator"
        coordinators[head.id] = coordinator
        builder.set_spout(
            coordinator,
            TransactionalSpoutCoordinator(
                DRPCSource(head.params["function"], head.params["drpc"]), namespace
            ),
            1,
        )
        builder.set_bolt(namespace, EmitterExecutor(DRPCSpoutAdapter()), 1).all_grouping(
            coordinator, BATCH_STREAM
        )
    for segment in segments:
        if segment.is_spout:
            continue
        processors, entries = wiring[segment.index]
        bolt = TridentSegment(processors, entries, dict(segment.outputs))
        declarer = builder.set_bolt(
            segment.component_id, BatchBoltExecutor(bolt, segment.committer), segment.parallelism
        )
        sources: list[str] = []
        for source, stream, node, side in segment.inputs:
            _subscribe(declarer, source.component_id, stream, node, side)
            if source.component_id not in sources:
                sources.append(source.component_id)
        for source_id in sources:
            declarer.direct_grouping(source_id, COORD_STREAM)
        if segment.committer:
            declarer.all_grouping(coordinators[segment.head.source.id], COMMIT_STREAM)
    return builder.create_topology()


__all__ = ["Segment", "compile_topology"]


def describe(topology: TridentTopology) -> list[dict[str, Any]]:
    """The segments a topology compiles to (for inspection and tests)."""
    segments, _ = _segments(topology)
    return [
        {
            "component": s.component_id,
            "operations": [n.kind for n in s.nodes],
            "parallelism": s.parallelism,
            "committer": s.committer,
        }
        for s in segments
    ]
