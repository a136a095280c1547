"""Compiles a Trident topology onto the core model (through the batch layer).

Compilation builds a :class:`~squall.trident.ir.TridentIR` (``build_ir``: sources,
segments, the streams between them, query groups), then lowers it to the
``StormTopology`` the local engine runs (:mod:`squall.trident.lowering`), which carries
the IR as ``batch_ir``.

* The graph is cut into *segments*: a segment starts at every spout, at the operation
  after a spout, and at every repartition, merge and join; the other operations join
  their parent's segment. A segment runs as one batch bolt (``BatchBoltExecutor``
  around a :class:`~squall.trident.segment.TridentSegment`), a committer when it
  updates a state, named ``b<N>-<label>`` after its ``.name()`` or its operations
  (:mod:`squall.trident.naming`). A segment emits an operation's output on a stream
  (``s<node id>``) where another segment reads it and, for ``persistent_aggregate``
  (and a ``partition_persist`` given output fields), always: the new values the state
  received in each batch (``new_values_stream()``) can be watched (``squall run
  --show``) with no operation reading them.
* A query of a state each process keeps in memory (``MemoryMapState``) that a
  ``persistent_aggregate`` updates is repartitioned by the key it reads and its segment
  colocated with the state's, so it reads the partition holding the key in whatever
  worker holds it (:mod:`squall.trident.placement`).
* The regular spouts share one coordinator spout (``<stream ids>/coordinator``), each
  spout has an emitter bolt named by its stream id; a DRPC stream gets its own
  coordinator and emitter (``drpc-<function>``) and ends in a global step that
  returns each request's result.
"""

from __future__ import annotations

from typing import Any

from squall.model.errors import InvalidTopologyError
from squall.model.grouping import GroupingKind
from squall.model.topology import StormTopology
from squall.trident.graph import Node, Segment, TridentGraph
from squall.trident.ir import (
    REGULAR_GROUP_KEY,
    DRPCEndpoint,
    EdgeIR,
    QueryGroupIR,
    SegmentIR,
    SourceIR,
    SourceKind,
    StateAccess,
    StateBinding,
    TridentIR,
)
from squall.trident.lowering import lower
from squall.trident.naming import segment_component_id
from squall.trident.placement import (
    colocations,
    keyed_update,
    route_state_queries,
    unrouted_reason,
)
from squall.trident.processors import (
    PROCESSORS,
    DRPCReturnProcessor,
    JoinProcessor,
    PersistProcessor,
    Processor,
    StateQueryProcessor,
)
from squall.trident.segment import TridentSegment
from squall.trident.sources import DRPCResultReturner
from squall.trident.spouts import AnyTridentSpout, BatchSpout, OpaquePartitionedTridentSpout
from squall.trident.state.base import locality_of
from squall.trident.windowing.processor import WindowTridentProcessor

#: Every operation's processor (the window operation's lives in its own package).
_ALL_PROCESSORS: dict[str, type[Processor]] = {**PROCESSORS, "window": WindowTridentProcessor}


def _stream_of(node: Node) -> str:
    return "default" if node.kind in ("spout", "drpc_spout") else f"s{node.id}"


def _add_drpc_returns(topology: TridentGraph) -> None:
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


def _segments(topology: TridentGraph) -> tuple[list[Segment], dict[int, Segment]]:
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
            if isinstance(head.params["spout"], BatchSpout):
                # One emitter task whatever the hint, as Storm caps a FixedBatchSpout
                # (topology.max.task.parallelism 1): each task would emit the batch.
                segment.placed_tasks = 1
        elif head.kind == "drpc_spout":
            segment.component_id = f"drpc-{head.params['function']}"
        else:
            bolts += 1
            segment.component_id = segment_component_id(bolts, segment.nodes)
    colocations(segments, segment_of)
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
            kind = _ALL_PROCESSORS.get(node.kind)
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


_PARTITIONS = {"shuffle": GroupingKind.SHUFFLE, "all": GroupingKind.ALL}


def _grouping(node: Node, side: int) -> tuple[GroupingKind, tuple[str, ...]]:
    """How the segment starting at ``node`` receives input ``side`` of it."""
    if node.kind == "partition":
        grouping = node.params["grouping"]
        if grouping == "fields":
            return GroupingKind.FIELDS, tuple(node.params["fields"])
        return _PARTITIONS.get(grouping, GroupingKind.GLOBAL), ()
    if node.kind == "join":
        return GroupingKind.FIELDS, tuple(node.params["keys"][side])
    return GroupingKind.LOCAL_OR_SHUFFLE, ()


def _state_bindings(
    processors: list[Processor], segment_of: dict[int, Segment]
) -> tuple[StateBinding, ...]:
    bindings = []
    for processor in processors:
        partitions_of, unrouted = None, ""
        if isinstance(processor, PersistProcessor):
            access = StateAccess.UPDATE
        elif isinstance(processor, StateQueryProcessor):
            access = StateAccess.QUERY
            update = keyed_update(processor.node, segment_of)
            if update is not None:
                partitions_of = segment_of[update.id].component_id
            unrouted = unrouted_reason(processor.node, segment_of)
        else:
            continue
        factory = processor.factory
        bindings.append(
            StateBinding(
                processor.index, access, factory, locality_of(factory), partitions_of, unrouted
            )
        )
    return tuple(bindings)


def _regular_namespace(stream_ids: list[str]) -> str:
    return "+".join(sorted(stream_ids))


def _coordinator_id(namespace: str) -> str:
    return f"{namespace}/coordinator"


def _sources(segments: list[Segment]) -> list[SourceIR]:
    """The regular spouts, then the DRPC streams, in declaration order."""
    spouts = [s for s in segments if s.head.kind == "spout"]
    regular = _coordinator_id(_regular_namespace([s.component_id for s in spouts]))
    sources = []
    for segment in spouts:
        spout = segment.head.params["spout"]
        fields = tuple(segment.head.output_fields)
        kind = _spout_kind(spout)
        sources.append(SourceIR(segment.component_id, kind, fields, regular, segment.tasks, spout))
    for segment in segments:
        head = segment.head
        if head.kind == "drpc_spout":
            endpoint = DRPCEndpoint(head.params["function"], head.params["drpc"])
            coordinator = _coordinator_id(segment.component_id)
            fields = tuple(head.output_fields)
            sources.append(
                SourceIR(
                    segment.component_id, SourceKind.DRPC, fields, coordinator, 1, drpc=endpoint
                )
            )
    return sources


def _spout_kind(spout: AnyTridentSpout) -> SourceKind:
    if isinstance(spout, BatchSpout):
        return SourceKind.BATCH
    if isinstance(spout, OpaquePartitionedTridentSpout):
        return SourceKind.OPAQUE
    return SourceKind.TRANSACTIONAL


def _groups(
    sources: list[SourceIR], stages: list[SegmentIR], edges: list[EdgeIR]
) -> list[QueryGroupIR]:
    """The regular spouts' group, then each DRPC stream's."""
    regular = [s for s in sources if s.kind is not SourceKind.DRPC]
    drpc = [s for s in sources if s.kind is SourceKind.DRPC]
    members = [(s.component_id, s.component_id, [s]) for s in drpc]
    if regular:
        namespace = _regular_namespace([s.component_id for s in regular])
        members.insert(0, (REGULAR_GROUP_KEY, namespace, regular))
    groups = []
    for key, namespace, group in members:
        coordinator = group[0].coordinator_id
        fed = [s for s in stages if s.coordinator_id == coordinator]
        ids = tuple(s.component_id for s in group)
        groups.append(
            QueryGroupIR(key, namespace, coordinator, ids, _commit_phase_order(fed, edges))
        )
    return groups


def _commit_phase_order(segments: list[SegmentIR], edges: list[EdgeIR]) -> tuple[str, ...]:
    """``segments`` (in a topological order) with the committers and every segment
    downstream of one moved after the others, keeping their order otherwise."""
    late: set[str] = set()
    for segment in segments:
        fed_late = any(e.source in late for e in edges if e.target == segment.component_id)
        if segment.committer or fed_late:
            late.add(segment.component_id)
    ids = [segment.component_id for segment in segments]
    return tuple([c for c in ids if c not in late] + [c for c in ids if c in late])


def _wire(
    segments: list[Segment], segment_of: dict[int, Segment]
) -> dict[int, tuple[list[Processor], dict[tuple[str, str], tuple[int, int]]]]:
    """Each bolt segment's processors (their children and output streams set) and
    entries, by segment index; sets every segment's outputs and inputs."""
    wiring = {}
    for segment in segments:
        if not segment.is_spout:
            wiring[segment.index] = _processors(segment, segment_of)
    for segment in segments:
        for source, stream, _, _ in segment.inputs:
            parent_fields = next(n.output_fields for n in source.nodes if _stream_of(n) == stream)
            source.outputs[stream] = parent_fields
    for segment in segments:
        # What a state received (its new values), even where no segment reads it; a
        # partition_persist given no output fields has none.
        for node in segment.nodes:
            if node.kind == "persist" and len(node.output_fields) > 0:
                segment.outputs[_stream_of(node)] = node.output_fields
    for segment in segments:
        if segment.is_spout:
            continue
        processors, _ = wiring[segment.index]
        for processor in processors:
            stream = _stream_of(processor.node)
            if stream in segment.outputs:
                processor.output_streams.append(stream)
    return wiring


def build_ir(topology: TridentGraph) -> TridentIR:
    """Cut ``topology`` into sources and segments and describe them (see the module
    docstring and :mod:`squall.trident.ir`). Adds the DRPC streams' return steps to
    ``topology`` (once).

    Raises:
        InvalidTopologyError: the Trident topology is invalid (the message names the
            operation).
    """
    if not any(n.kind in ("spout", "drpc_spout") for n in topology.nodes):
        raise InvalidTopologyError("a Trident topology needs at least one stream (new_stream)")
    _add_drpc_returns(topology)
    route_state_queries(topology)
    segments, segment_of = _segments(topology)
    wiring = _wire(segments, segment_of)
    sources = _sources(segments)
    coordinators = {source.component_id: source.coordinator_id for source in sources}
    coordinator_of = {s.head.id: coordinators[s.component_id] for s in segments if s.is_spout}
    stages: list[SegmentIR] = []
    edges: list[EdgeIR] = []
    for segment in segments:
        if segment.is_spout:
            continue
        processors, entries = wiring[segment.index]
        stages.append(
            SegmentIR(
                segment.component_id,
                TridentSegment(processors, entries, dict(segment.outputs)),
                segment.tasks,
                segment.committer,
                coordinator_of[segment.head.source.id],
                _state_bindings(processors, segment_of),
                any(isinstance(p, DRPCReturnProcessor) for p in processors),
                segment.colocated_with,
            )
        )
        for source, stream, node, side in segment.inputs:
            grouping, fields = _grouping(node, side)
            target = segment.component_id
            edges.append(EdgeIR(source.component_id, stream, target, grouping, fields))
    groups = _groups(sources, stages, edges)
    return TridentIR(tuple(sources), tuple(stages), tuple(edges), tuple(groups))


def compile_topology(topology: TridentGraph) -> StormTopology:
    """Compile ``topology``: build its :class:`~squall.trident.ir.TridentIR` and lower it
    (see the module docstring); the result carries the IR as ``batch_ir``.

    Raises:
        InvalidTopologyError: the Trident topology is invalid (the message names the
            operation), or the compiled topology is (as ``create_topology`` reports).
    """
    ir = build_ir(topology)
    compiled = lower(ir)
    compiled.batch_ir = ir
    return compiled


__all__ = ["Segment", "build_ir", "compile_topology"]


def describe(topology: TridentGraph) -> list[dict[str, Any]]:
    """The segments a topology compiles to (for inspection and tests). Adds the
    repartitions that send state queries to their state's partitions (as ``build``)."""
    route_state_queries(topology)
    segments, _ = _segments(topology)
    return [
        {
            "component": s.component_id,
            "operations": [n.kind for n in s.nodes],
            "parallelism": s.tasks,
            "committer": s.committer,
        }
        for s in segments
    ]
