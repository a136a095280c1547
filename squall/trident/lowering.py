"""Lowers a :class:`~squall.trident.ir.TridentIR` to the ``StormTopology`` the local
engine runs, through the batch layer (``squall.transactional.batch``).

* Each query group gets a coordinator spout (a ``TransactionalSpoutCoordinator``, one
  task) over its sources: a ``SpoutGroupSource`` of the regular spouts, or a
  ``DRPCSource``.
* Each source gets an emitter bolt (``EmitterExecutor``) all-grouped on its
  coordinator's batch stream.
* Each segment runs as a ``BatchBoltExecutor`` around its ``TridentSegment``: it
  subscribes to its edges with their groupings, to the coordination stream of every
  component feeding it and, when it commits, to its coordinator's commit stream; a
  segment placed with a state's segment is colocated with it (``colocate_with``).
"""

from __future__ import annotations

from squall.model.builder import BoltDeclarer, TopologyBuilder
from squall.model.fields import Fields
from squall.model.grouping import GroupingKind
from squall.model.topology import StormTopology
from squall.transactional.batch import (
    BATCH_STREAM,
    COMMIT_STREAM,
    COORD_STREAM,
    BatchBoltExecutor,
    EmitterExecutor,
)
from squall.transactional.coordinator import TransactionalSpoutCoordinator
from squall.trident.ir import EdgeIR, QueryGroupIR, SegmentIR, SourceIR, SourceKind, TridentIR
from squall.trident.sources import (
    DRPCSource,
    DRPCSpoutAdapter,
    SpoutGroupSource,
    TridentSpoutAdapter,
)


def lower(ir: TridentIR) -> StormTopology:
    """The ``StormTopology`` running ``ir`` on the batch layer (see the module docstring):
    the coordinator and emitters of each group in turn, then the segments' bolts.

    Raises:
        InvalidTopologyError: as ``TopologyBuilder.create_topology`` reports.
    """
    builder = TopologyBuilder()
    for group in ir.groups:
        _add_group(builder, group, [ir.source(cid) for cid in group.sources])
    for segment in ir.segments:
        _add_segment(builder, segment, ir.edges_into(segment.component_id))
    return builder.create_topology()


def _add_group(builder: TopologyBuilder, group: QueryGroupIR, sources: list[SourceIR]) -> None:
    drpc = sources[0].drpc
    if drpc is not None:
        coordinated: SpoutGroupSource | DRPCSource = DRPCSource(drpc.function, drpc.drpc)
    else:
        coordinated = SpoutGroupSource({s.component_id: s.spout for s in sources})
    builder.set_spout(
        group.coordinator_id, TransactionalSpoutCoordinator(coordinated, group.namespace), 1
    )
    for source in sources:
        adapter: TridentSpoutAdapter | DRPCSpoutAdapter
        if source.kind is SourceKind.DRPC:
            adapter = DRPCSpoutAdapter()
        else:
            adapter = TridentSpoutAdapter(
                source.component_id, source.spout, Fields(list(source.fields))
            )
        builder.set_bolt(source.component_id, EmitterExecutor(adapter), source.tasks).all_grouping(
            group.coordinator_id, BATCH_STREAM
        )


def _add_segment(builder: TopologyBuilder, segment: SegmentIR, edges: list[EdgeIR]) -> None:
    declarer = builder.set_bolt(
        segment.component_id,
        BatchBoltExecutor(segment.segment, segment.committer),
        segment.tasks,
    )
    if segment.colocated_with is not None:
        declarer.colocate_with(segment.colocated_with)
    feeding: list[str] = []
    for edge in edges:
        _subscribe(declarer, edge)
        if edge.source not in feeding:
            feeding.append(edge.source)
    for source in feeding:
        declarer.direct_grouping(source, COORD_STREAM)
    if segment.committer:
        declarer.all_grouping(segment.coordinator_id, COMMIT_STREAM)


def _subscribe(declarer: BoltDeclarer, edge: EdgeIR) -> None:
    if edge.grouping is GroupingKind.FIELDS:
        declarer.fields_grouping(edge.source, edge.fields, edge.stream)
    elif edge.grouping is GroupingKind.SHUFFLE:
        declarer.shuffle_grouping(edge.source, edge.stream)
    elif edge.grouping is GroupingKind.ALL:
        declarer.all_grouping(edge.source, edge.stream)
    elif edge.grouping is GroupingKind.GLOBAL:
        declarer.global_grouping(edge.source, edge.stream)
    else:  # LOCAL_OR_SHUFFLE, the only other grouping of Trident edges
        declarer.local_or_shuffle_grouping(edge.source, edge.stream)
