"""What the Spark engine runs of a Trident or transactional topology, lowered from the
batch IR the compiled topology carries (``StormTopology.batch_ir``).

A Trident topology's :class:`~squall.trident.ir.TridentIR` (see
``squall.trident.compiler``) and a transactional topology's
:class:`~squall.transactional.ir.TransactionalIR` (see ``squall.transactional.builder``)
describe the batch sources, the segments or batch bolts and the streams between them;
the Spark engine runs those and replaces the batch layer (coordinator spouts, emitter
bolts, ``$batch``/``$coord``/``$commit`` streams) with Spark's micro-batches: one
micro-batch is one transaction (txid = batch id + 1). Task ids are the local engine's
(see ``plan.tasks``).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from squall.model.config import component_config
from squall.model.errors import InvalidTopologyError, TopologyOrderError
from squall.model.fields import Fields
from squall.model.grouping import Grouping, GroupingKind
from squall.model.hooks import ValidatesSubmission, implements
from squall.model.topology import ComponentSpec, StormTopology, Subscription
from squall.runtime.task_metrics import has_metrics_consumers
from squall.spark.plan.pickling import check_picklable
from squall.spark.plan.tasks import TaskLayout
from squall.transactional.ir import TransactionalIR
from squall.trident.ir import TridentIR
from squall.trident.segment import TridentSegment

if TYPE_CHECKING:
    from squall.drpc.local import LocalDRPC
    from squall.transactional.spouts import TransactionalSpout
    from squall.trident.spouts import (
        BatchSpout,
        OpaquePartitionedTridentSpout,
        PartitionedTridentSpout,
    )

    #: The spouts a batch source runs: a Trident spout or a transactional topology's.
    SourceSpout = (
        BatchSpout | PartitionedTridentSpout | OpaquePartitionedTridentSpout | TransactionalSpout
    )

UNSUPPORTED_HINT = "run it on LocalCluster for now"


@dataclass(frozen=True)
class Edge:
    """Tuples of stream ``stream`` of ``source`` go to segment ``target`` (by index) by
    ``grouping`` over that segment's tasks ``task_ids`` (its partitions, in order)."""

    source: str
    stream: str
    target: int
    grouping: Grouping
    task_ids: tuple[int, ...]
    #: The subscribing component (named in routing errors).
    subscriber: str = ""

    @property
    def kind(self) -> GroupingKind:
        """The grouping's kind."""
        return self.grouping.kind

    @property
    def fields(self) -> tuple[str, ...]:
        """The grouping fields (fields and partial-key groupings), else empty."""
        return tuple(self.grouping.fields or ())

    @property
    def tasks(self) -> int:
        """The target's task count (its partitions)."""
        return len(self.task_ids)


@dataclass
class SegmentPlan:
    """One stage: a Trident segment or a transactional topology's batch bolt, its tasks
    (partitions) and where its streams go.

    For batch bolts, ``input_fields`` are the fields of each input stream (attempt
    first), ``output_fields`` those of each output stream without the attempt (what
    rows carry).
    """

    index: int
    component_id: str
    #: A ``TridentSegment`` (detached, see :func:`_detached`) or a batch bolt's
    #: ``BatchBoltIR`` (its ``bolt`` and ``committer``).
    segment: Any
    #: The task ids of the component (as on the local engine); partition ``i`` is task
    #: ``task_ids[i]``.
    task_ids: tuple[int, ...]
    committer: bool
    #: The topology's task ids and its tasks' contexts.
    layout: TaskLayout
    inputs: list[Edge] = field(default_factory=list)
    outputs: dict[str, list[Edge]] = field(default_factory=dict)
    input_fields: dict[tuple[str, str], Fields] = field(default_factory=dict)
    output_fields: dict[str, Fields] = field(default_factory=dict)

    @property
    def tasks(self) -> int:
        """Number of tasks (the stage's partitions)."""
        return len(self.task_ids)


#: Kinds of batch sources: a Trident batch spout, a transactional or an opaque
#: partitioned Trident spout, a DRPC stream (the values of
#: ``squall.trident.ir.SourceKind``), and a transactional topology's spout
#: ("coordinated": its coordinator plans each batch, its emitter tasks emit it).
SourceKind = Literal["batch", "transactional", "opaque", "drpc", "coordinated"]


@dataclass
class SourcePlan:
    """One batch source: a spout (its emitter component id) or a DRPC stream.

    ``fields`` are the fields of the emitted tuples (for a coordinated spout, those of
    each stream in ``output_fields``, without the attempt); ``tasks`` the emitter's
    tasks, ``coordinator_id`` the component whose task plans the source's batches (its
    coordinator spout).
    """

    component_id: str
    kind: SourceKind
    spout: SourceSpout | None
    fields: tuple[str, ...]
    outputs: list[Edge]
    coordinator_id: str
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
    #: The topology's task ids and its tasks' contexts.
    layout: TaskLayout

    @property
    def drpc(self) -> SourcePlan | None:
        """The DRPC source of this query, if it is a DRPC stream's."""
        return next((s for s in self.sources if s.kind == "drpc"), None)


def _unsupported(what: str) -> InvalidTopologyError:
    return InvalidTopologyError(f"the Spark engine does not run {what} yet; {UNSUPPORTED_HINT}")


def query_plans(
    topology: StormTopology, conf: dict[str, Any] | None = None, name: str = ""
) -> list[QueryPlan]:
    """The plans of ``topology`` (run as ``name`` with ``conf``), lowered from its
    ``batch_ir``: for a Trident topology, one per query group (its regular spouts',
    then one per DRPC stream); for a transactional topology, one.

    Segments are copies: the Spark run may rewire them (DRPC results) without touching
    the topology object, which ``LocalCluster`` can still run.

    Raises:
        InvalidTopologyError: the topology uses a feature the Spark engine does not run
            (metrics consumers among them; the message names it and suggests
            LocalCluster).
    """
    if has_metrics_consumers(dict(conf or {})):
        raise _unsupported(
            "metrics consumers (topology.metrics.consumer.register) of Trident or "
            "transactional topologies"
        )
    ir = topology.batch_ir
    layout = TaskLayout.of(topology, dict(conf or {}), name)
    if isinstance(ir, TransactionalIR):
        _validate_spout(topology, ir.spout.spout, ir.spout.component_id, conf)
        return [transactional_plan(topology, ir, layout)]
    if not isinstance(ir, TridentIR):
        raise _unsupported("topologies without a Trident or transactional batch layer here")
    _check_described(
        topology,
        {*(g.coordinator_id for g in ir.groups), *(s.component_id for s in ir.sources)},
        {s.component_id for s in ir.segments},
    )
    sources: dict[str, SourcePlan] = {}
    for source in ir.sources:
        if source.spout is not None:
            _validate_spout(topology, source.spout, source.component_id, conf)
            check_picklable(source.spout, source.component_id)
        drpc = source.drpc
        sources[source.component_id] = SourcePlan(
            source.component_id,
            source.kind.value,
            source.spout,
            source.fields,
            [],
            source.coordinator_id,
            drpc.function if drpc is not None else None,
            drpc.drpc if drpc is not None else None,
            len(layout.task_ids(source.component_id)),
        )
    plans: dict[str, SegmentPlan] = {}
    for index, cid in enumerate(_commit_phase_order(ir)):
        segment = ir.segment(cid)
        check_picklable(segment.segment, cid)
        plans[cid] = SegmentPlan(
            index, cid, _detached(segment.segment), layout.task_ids(cid), segment.committer, layout
        )
    for cid, plan in plans.items():
        for link in ir.edges_into(cid):
            grouping = Grouping(link.grouping, Fields(list(link.fields)) if link.fields else None)
            edge = Edge(link.source, link.stream, plan.index, grouping, plan.task_ids, cid)
            plan.inputs.append(edge)
            if link.source in sources:
                sources[link.source].outputs.append(edge)
            else:
                plans[link.source].outputs.setdefault(link.stream, []).append(edge)
    return [
        QueryPlan(
            group.key,
            [sources[s] for s in group.sources],
            [plans[cid] for cid in group.segments],
            layout,
        )
        for group in ir.groups
    ]


def _validate_spout(
    topology: StormTopology, spout: Any, component_id: str, conf: dict[str, Any] | None
) -> None:
    """Run a batch spout's own submit-time checks (``ValidatesSubmission``: a
    connector checks its options), as the local engine does through its emitter."""
    if implements(spout, ValidatesSubmission):
        spec = topology.get_component(component_id)
        spout.validate_submission(component_id, component_config(dict(conf or {}), spec.conf))


def transactional_plan(
    topology: StormTopology, ir: TransactionalIR, layout: TaskLayout
) -> QueryPlan:
    """The plan of a transactional topology (``TransactionalTopologyBuilder``), lowered
    from its ``TransactionalIR``: its spout's coordinator and emitter tasks as the
    source, its batch bolts as stages (in passes of a topological order, committers and
    what follows them last).

    Raises:
        InvalidTopologyError: a cycle, or a component the IR does not describe.
    """
    spout = ir.spout
    emitter_id = spout.component_id
    _check_described(
        topology, {spout.coordinator_id, emitter_id}, {bolt.component_id for bolt in ir.bolts}
    )
    for bolt in ir.bolts:  # committers run on the driver: they need not be picklable
        if not bolt.committer:
            check_picklable(bolt.bolt, bolt.component_id)
    check_picklable(spout.spout, emitter_id)
    streams = {emitter_id: spout.streams, **{bolt.component_id: bolt.streams for bolt in ir.bolts}}

    def stripped(component_id: str) -> dict[str, Fields]:
        return {
            stream: Fields(list(declaration.fields)[1:])
            for stream, declaration in streams[component_id].items()
        }

    plans = {
        cid: SegmentPlan(
            index,
            cid,
            ir.bolt(cid),
            layout.task_ids(cid),
            ir.bolt(cid).committer,
            layout,
            output_fields=stripped(cid),
        )
        for index, cid in enumerate(_transactional_order(ir))
    }
    source = SourcePlan(
        emitter_id,
        "coordinated",
        spout.spout,
        (),
        [],
        spout.coordinator_id,
        tasks=len(layout.task_ids(emitter_id)),
        output_fields=stripped(emitter_id),
    )
    for cid, plan in plans.items():
        for link in ir.edges_into(cid):
            edge = Edge(link.source, link.stream, plan.index, link.grouping, plan.task_ids, cid)
            plan.inputs.append(edge)
            declared = streams[link.source][link.stream].fields
            plan.input_fields[(link.source, link.stream)] = Fields(list(declared))
            if link.source == emitter_id:
                source.outputs.append(edge)
            else:
                plans[link.source].outputs.setdefault(link.stream, []).append(edge)
    return QueryPlan(emitter_id, [source], list(plans.values()), layout)


def _check_described(topology: StormTopology, sources: set[str], stages: set[str]) -> None:
    """Raise if ``topology`` has a component its batch IR does not describe (a core
    spout or bolt added beside the batch layer's): the Spark engine runs only what the
    IR describes."""
    for spec in topology:
        cid = spec.component_id
        if spec.system or cid in sources or cid in stages:
            continue
        if spec.is_spout:
            raise _unsupported(f"a core spout beside Trident or transactional spouts ({cid!r})")
        raise _unsupported(f"component {cid!r} ({type(spec.component).__name__})")


def _commit_phase_order(ir: TridentIR) -> list[str]:
    """Every segment in stage order: compilation order (topological), with the
    committers and every segment downstream of one after the others, as each query
    group orders its own (a stage's index is its position here, unique in the
    topology)."""
    late: set[str] = set()
    for segment in ir.segments:
        fed_late = any(edge.source in late for edge in ir.edges_into(segment.component_id))
        if segment.committer or fed_late:
            late.add(segment.component_id)
    ids = [segment.component_id for segment in ir.segments]
    return [c for c in ids if c not in late] + [c for c in ids if c in late]


def _transactional_order(ir: TransactionalIR) -> list[str]:
    """The batch bolts in stage order: ``StormTopology.topological_order``'s passes
    over them in declaration order (the spout's emitter upstream), then the committers
    and everything downstream of them moved after the others (still a topological
    order): a batch's processing is complete before any of its state is committed, as
    under Storm's commit phase.

    Raises:
        InvalidTopologyError: the bolts' streams form a cycle.
    """
    bolts = [bolt.component_id for bolt in ir.bolts]
    graph = StormTopology(
        {
            cid: ComponentSpec(
                cid,
                None,
                "bolt",
                1,
                1,
                inputs=[Subscription(e.source, e.stream, e.grouping) for e in ir.edges_into(cid)],
            )
            for cid in bolts
        }
    )
    try:
        ordered = graph.topological_order(
            bolts, upstream={ir.spout.component_id}, ties="passes", include_control_streams=False
        )
    except TopologyOrderError as error:
        raise InvalidTopologyError(
            f"the Spark engine cannot run cycles (components {error.components}); use LocalCluster"
        ) from None
    committers = [cid for cid in ordered if ir.bolt(cid).committer]
    after = set(committers) | graph.reachable_from(committers, include_control_streams=False)
    return [c for c in ordered if c not in after] + [c for c in ordered if c in after]


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
