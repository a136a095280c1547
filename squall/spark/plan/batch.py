"""What the Spark engine runs, read from a compiled topology.

A Trident topology compiles to a coordinator spout, an emitter per Trident spout and a
batch bolt per segment (see ``squall.trident.compiler``); a transactional topology to a
coordinator spout, an emitter bolt and its batch bolts (see
``squall.transactional.builder``). The Spark engine takes the spouts and batch bolts
from those components and replaces the batch layer with Spark's micro-batches: one
micro-batch is one transaction (txid = batch id + 1).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from squall.model.errors import InvalidTopologyError, TopologyOrderError
from squall.model.fields import Fields
from squall.model.grouping import GroupingKind
from squall.model.topology import ComponentSpec, StormTopology
from squall.runtime.hooks import FlagsCommitter
from squall.spark.plan.pickling import check_picklable
from squall.trident.segment import TridentSegment
from squall.trident.sources import DRPCSpoutAdapter, TridentSpoutAdapter
from squall.trident.spouts import (
    BatchSpout,
    OpaquePartitionedTridentSpout,
    PartitionedTridentSpout,
)

if TYPE_CHECKING:
    from squall.drpc.local import LocalDRPC
    from squall.transactional.spouts import TransactionalSpout

    #: The spouts a batch source runs: a Trident spout or a transactional topology's.
    SourceSpout = (
        BatchSpout | PartitionedTridentSpout | OpaquePartitionedTridentSpout | TransactionalSpout
    )

UNSUPPORTED_HINT = "run it on LocalCluster for now"


@dataclass(frozen=True)
class Edge:
    """Tuples of stream ``stream`` of ``source`` go to segment ``target`` (by index) by
    ``grouping`` over that segment's ``tasks`` partitions."""

    source: str
    stream: str
    target: int
    kind: GroupingKind
    fields: tuple[str, ...]
    tasks: int
    #: The subscribing component (named in routing errors).
    subscriber: str = ""


@dataclass
class SegmentPlan:
    """One stage: a Trident segment or a transactional topology's batch bolt (its
    ``BatchBoltExecutor``), its tasks (partitions) and where its streams go.

    For batch bolts, ``input_fields`` are the fields of each input stream (attempt
    first), ``output_fields`` those of each output stream without the attempt (what
    rows carry), and ``component_tasks`` every component's task count.
    """

    index: int
    component_id: str
    #: A ``TridentSegment`` or a ``BatchBoltExecutor`` (whose attributes the stages
    #: read and probe directly).
    segment: Any
    tasks: int
    committer: bool
    inputs: list[Edge] = field(default_factory=list)
    outputs: dict[str, list[Edge]] = field(default_factory=dict)
    input_fields: dict[tuple[str, str], Fields] = field(default_factory=dict)
    output_fields: dict[str, Fields] = field(default_factory=dict)
    component_tasks: dict[str, int] = field(default_factory=dict)


#: Kinds of batch sources: a Trident batch spout, a transactional or an opaque
#: partitioned Trident spout, a DRPC stream, and a transactional topology's spout
#: ("coordinated": its coordinator plans each batch, its emitter tasks emit it).
SourceKind = Literal["batch", "transactional", "opaque", "drpc", "coordinated"]


@dataclass
class SourcePlan:
    """One batch source: a spout (its emitter component id) or a DRPC stream.

    ``fields`` are the fields of the emitted tuples (for a coordinated spout, those of
    each stream in ``output_fields``, without the attempt); ``tasks`` the emitter tasks
    of a coordinated spout.
    """

    component_id: str
    kind: SourceKind
    spout: SourceSpout | None
    fields: tuple[str, ...]
    outputs: list[Edge]
    drpc_function: str | None = None
    drpc: LocalDRPC | None = None
    tasks: int = 1
    output_fields: dict[str, Fields] = field(default_factory=dict)


@dataclass
class QueryPlan:
    """The batch sources of one streaming query and the segments they feed, in
    topological order. The regular spouts of a topology share one query (a transaction
    has a batch of each, as under Storm's master batch coordinator); each DRPC stream
    has a query of its own."""

    key: str
    sources: list[SourcePlan]
    segments: list[SegmentPlan]

    @property
    def drpc(self) -> SourcePlan | None:
        """The DRPC source of this query, if it is a DRPC stream's."""
        return next((s for s in self.sources if s.kind == "drpc"), None)


def _unsupported(what: str) -> InvalidTopologyError:
    return InvalidTopologyError(f"the Spark engine does not run {what} yet; {UNSUPPORTED_HINT}")


def query_plans(topology: StormTopology) -> list[QueryPlan]:
    """The plans of ``topology``: for a Trident topology, one for its regular spouts
    (first) and one per DRPC stream; for a transactional topology, one.

    Segments are copies: the Spark run may rewire them (DRPC results) without touching
    the topology object, which ``LocalCluster`` can still run.

    Raises:
        InvalidTopologyError: the topology uses a feature the Spark engine does not run
            (the message names it and suggests LocalCluster).
    """
    sources: list[SourcePlan] = []
    segments: dict[str, tuple[ComponentSpec, TridentSegment]] = {}
    for spec in topology:
        component = spec.component
        inner = getattr(component, "spout", None)
        bolt = getattr(component, "bolt", None)
        if spec.is_spout:
            if type(component).__name__ != "TransactionalSpoutCoordinator":
                raise _unsupported(
                    f"a core spout beside Trident or transactional spouts ({spec.component_id!r})"
                )
            if type(inner).__name__ not in ("SpoutGroupSource", "DRPCSource"):
                return [transactional_plan(topology, spec.component_id)]
        elif isinstance(inner, TridentSpoutAdapter):
            check_picklable(inner.spout, spec.component_id)
            sources.append(
                SourcePlan(
                    spec.component_id,
                    _spout_kind(inner.spout, spec.component_id),
                    inner.spout,
                    tuple(inner.fields),
                    [],
                )
            )
        elif isinstance(inner, DRPCSpoutAdapter):
            function, drpc = _drpc_source(topology, spec.component_id)
            sources.append(
                SourcePlan(spec.component_id, "drpc", None, ("args",), [], function, drpc)
            )
        elif isinstance(bolt, TridentSegment):
            check_picklable(component, spec.component_id)
            segments[spec.component_id] = (spec, _detached(bolt))
        else:
            raise _unsupported(f"component {spec.component_id!r} ({type(component).__name__})")
    by_id = {source.component_id: source for source in sources}
    ordered = _committers_last(topology, _topological(topology, list(segments), set(by_id)))
    plans = {
        cid: SegmentPlan(
            index,
            cid,
            segments[cid][1],
            topology.get_component(cid).num_tasks,
            _is_committer(topology.get_component(cid).component),
        )
        for index, cid in enumerate(ordered)
    }
    for cid in ordered:
        spec = topology.get_component(cid)
        for sub in spec.inputs:
            if sub.stream_id.startswith(("$", "__")):
                continue
            edge = Edge(
                sub.source,
                sub.stream_id,
                plans[cid].index,
                sub.grouping.kind,
                tuple(sub.grouping.fields or ()),
                spec.num_tasks,
                cid,
            )
            plans[cid].inputs.append(edge)
            if sub.source in by_id:
                by_id[sub.source].outputs.append(edge)
            else:
                plans[sub.source].outputs.setdefault(sub.stream_id, []).append(edge)
    regular = [source for source in sources if source.kind != "drpc"]
    groups = ([regular] if regular else []) + [[s] for s in sources if s.kind == "drpc"]
    result = []
    for group in groups:
        reached = topology.reachable_from(
            [source.component_id for source in group],
            include_control_streams=False,
            within=set(segments),
        )
        members = [plans[cid] for cid in ordered if cid in reached]
        key = group[0].component_id if group[0].kind == "drpc" else "spouts"
        result.append(QueryPlan(key, group, members))
    return result


def transactional_plan(topology: StormTopology, coordinator_id: str) -> QueryPlan:
    """The plan of a transactional topology (``TransactionalTopologyBuilder``): its
    spout's coordinator and emitter tasks as the source, its batch bolts as stages.

    Raises:
        InvalidTopologyError: a custom grouping (not run on Spark yet), or a cycle.
    """
    emitter_id = next(
        spec.component_id
        for spec in topology
        if any(s.source == coordinator_id and s.stream_id == "$batch" for s in spec.inputs)
    )
    emitter = topology.get_component(emitter_id)
    bolts = [
        spec.component_id
        for spec in topology
        if not spec.is_spout and spec.component_id != emitter_id and not spec.system
    ]
    for cid in bolts:  # committers run on the driver: they need not be picklable
        if not topology.get_component(cid).component.committer:
            check_picklable(topology.get_component(cid).component, cid)
    check_picklable(emitter.component.spout, emitter_id)
    tasks = {spec.component_id: spec.num_tasks for spec in topology}

    def stripped(spec: ComponentSpec) -> dict[str, Fields]:
        return {
            stream: Fields(list(declaration.fields)[1:])
            for stream, declaration in spec.streams.items()
            if not stream.startswith(("$", "__"))
        }

    ordered = _committers_last(topology, _topological(topology, bolts, {emitter_id}))
    plans = {
        cid: SegmentPlan(
            index,
            cid,
            topology.get_component(cid).component,
            tasks[cid],
            bool(topology.get_component(cid).component.committer),
            output_fields=stripped(topology.get_component(cid)),
            component_tasks=tasks,
        )
        for index, cid in enumerate(ordered)
    }
    source = SourcePlan(
        emitter_id,
        "coordinated",
        emitter.component.spout,
        (),
        [],
        tasks=emitter.num_tasks,
        output_fields=stripped(emitter),
    )
    for cid in ordered:
        spec = topology.get_component(cid)
        for sub in spec.inputs:
            if sub.stream_id.startswith(("$", "__")):
                continue
            if sub.grouping.kind is GroupingKind.CUSTOM:
                raise _unsupported(f"custom groupings (bolt {cid!r} from {sub.source!r})")
            edge = Edge(
                sub.source,
                sub.stream_id,
                plans[cid].index,
                sub.grouping.kind,
                tuple(sub.grouping.fields or ()),
                spec.num_tasks,
                cid,
            )
            plans[cid].inputs.append(edge)
            declared = topology.get_component(sub.source).streams[sub.stream_id].fields
            plans[cid].input_fields[(sub.source, sub.stream_id)] = Fields(list(declared))
            producer = source.outputs if sub.source == emitter_id else None
            if producer is not None:
                producer.append(edge)
            else:
                plans[sub.source].outputs.setdefault(sub.stream_id, []).append(edge)
    return QueryPlan(emitter_id, [source], [plans[cid] for cid in ordered])


def _spout_kind(spout: object, component_id: str) -> SourceKind:
    if isinstance(spout, BatchSpout):
        return "batch"
    if isinstance(spout, PartitionedTridentSpout):
        return "transactional"
    if isinstance(spout, OpaquePartitionedTridentSpout):
        return "opaque"
    raise _unsupported(f"Trident spouts of type {type(spout).__name__} ({component_id!r})")


def _detached(segment: TridentSegment) -> TridentSegment:
    """A copy of ``segment`` whose processors keep only their own graph node: a node
    refers to its parents (and a queried state to its topology), and through them to
    the whole upstream graph (spouts, a ``LocalDRPC``), which must not travel to
    executors."""
    copied = copy.deepcopy(segment)
    for processor in copied.processors:
        # A queried state refers to its topology too; the processor has taken what it
        # needs from it (its factory) when it was made.
        params = {k: v for k, v in processor.node.params.items() if k != "state"}
        processor.node = dataclasses.replace(processor.node, parents=[], params=params)
    return copied


def _drpc_source(topology: StormTopology, emitter_id: str) -> tuple[str, LocalDRPC | None]:
    """``(function, drpc)`` of the DRPC stream whose emitter is ``emitter_id``."""
    coordinator = next(
        s.source for s in topology.get_component(emitter_id).inputs if s.stream_id == "$batch"
    )
    source = topology.get_component(coordinator).component.spout
    return source.function, source.drpc


def _is_committer(component: Any) -> bool:
    return isinstance(component, FlagsCommitter) and bool(component.committer)


def _committers_last(topology: StormTopology, ordered: list[str]) -> list[str]:
    """``ordered`` with the committers and everything downstream of them moved after
    the other stages (still a topological order): a batch's processing is complete
    before any of its state is committed, as under Storm's commit phase."""
    committers = [cid for cid in ordered if _is_committer(topology.get_component(cid).component)]
    after = set(committers) | topology.reachable_from(
        committers, include_control_streams=False, within=set(ordered)
    )
    return [c for c in ordered if c not in after] + [c for c in ordered if c in after]


def _topological(topology: StormTopology, segments: list[str], sources: set[str]) -> list[str]:
    """``segments`` in stage order: ``StormTopology.topological_order``'s passes over
    them, data streams only, ``sources`` upstream."""
    try:
        return topology.topological_order(
            segments, upstream=sources, ties="passes", include_control_streams=False
        )
    except TopologyOrderError as error:
        raise InvalidTopologyError(
            f"the Spark engine cannot run cycles (components {error.components}); use LocalCluster"
        ) from None
