"""The intermediate representation of a compiled Trident topology, which engines lower from.

``squall.trident.compiler`` cuts a Trident topology into batch sources and segments and
describes them, and the streams between them, in a :class:`TridentIR`;
``squall.trident.lowering`` lowers it to the ``StormTopology`` the local engine runs
(coordinator spouts, emitter bolts, batch bolts), which carries it as ``batch_ir``.
Another engine can lower from the same description without taking the topology's
components apart.

Everything here is frozen and refers to components by their component ids, the ids the
lowered ``StormTopology`` uses. Only the streams that carry tuples are described (the
batch layer's ``$batch``/``$coord``/``$commit`` streams are the lowering's business).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from squall.model.batch_ir import BatchIR
from squall.model.errors import InvalidTopologyError
from squall.model.grouping import GroupingKind
from squall.trident.segment import TridentSegment
from squall.trident.spouts import AnyTridentSpout
from squall.trident.state.base import StateLocality

#: The key of the query group of the regular spouts (a DRPC stream's group is keyed by
#: its emitter's component id).
REGULAR_GROUP_KEY = "spouts"

#: The stream every batch source emits its tuples on.
SOURCE_STREAM = "default"


class SourceKind(enum.Enum):
    """What a batch source is. The values name the kinds as engines report them."""

    #: A :class:`~squall.trident.spouts.BatchSpout`: one emitter task.
    BATCH = "batch"
    #: A :class:`~squall.trident.spouts.PartitionedTridentSpout`: its partitions are
    #: spread over the emitter tasks; a replayed batch is identical.
    TRANSACTIONAL = "transactional"
    #: An :class:`~squall.trident.spouts.OpaquePartitionedTridentSpout`: like a
    #: transactional spout, but a replayed batch may hold other tuples.
    OPAQUE = "opaque"
    #: A DRPC stream (``new_drpc_stream``): each batch is one request, a tuple ``[args]``.
    DRPC = "drpc"


class StateAccess(enum.Enum):
    """How a processor uses a state."""

    #: ``persistent_aggregate``/``partition_persist``: writes the state at the batch's
    #: commit, in transaction order (the segment is a committer).
    UPDATE = "update"
    #: ``state_query``: reads the state once per partition and batch.
    QUERY = "query"


@dataclass(frozen=True)
class DRPCEndpoint:
    """Where a DRPC stream fetches its requests and returns its results.

    Attributes:
        function: the DRPC function name the stream serves.
        drpc: the ``LocalDRPC`` given to ``new_drpc_stream``, or ``None`` for the DRPC
            server named in the configuration (``squall.trident.sources.resolve_drpc``).
    """

    function: str
    drpc: Any


@dataclass(frozen=True)
class SourceIR:
    """One batch source: a Trident spout's emitter, or a DRPC stream's.

    Attributes:
        component_id: the emitter's component id (a spout's stream id, ``drpc-<function>``
            for a DRPC stream); its tuples go out on :data:`SOURCE_STREAM`.
        kind: what the source is.
        fields: the fields of the emitted tuples, without the batch's attempt
            (``("args",)`` for a DRPC stream).
        coordinator_id: the component id of the coordinator spout that starts the
            source's transactions (shared by the regular spouts).
        tasks: the emitter's task count (1 but for a partitioned spout given a
            parallelism hint).
        spout: the user's spout; ``None`` exactly when ``kind`` is ``DRPC``.
        drpc: the DRPC stream's endpoint; set exactly when ``kind`` is ``DRPC``.
    """

    component_id: str
    kind: SourceKind
    fields: tuple[str, ...]
    coordinator_id: str
    tasks: int
    spout: AnyTridentSpout | None = None
    drpc: DRPCEndpoint | None = None


@dataclass(frozen=True)
class StateBinding:
    """A state one processor of a segment updates or queries.

    Attributes:
        processor: the index of the processor in the segment's
            ``TridentSegment.processors`` (and its ``index``).
        access: whether the processor updates or queries the state.
        factory: the factory the processor makes its state with, once per task (for a
            query of a state this topology updates, a copy without a cache).
        locality: whether the factory's states can be used from any process
            (``StateFactory.locality``; ``SHARED`` for a factory that is not a
            ``StateFactory``).
        partitions_of: for a query of an in-process state this topology updates with
            ``persistent_aggregate``: the component id of the segment that updates it.
            The query's tuples are partitioned by the key they read over as many tasks
            as that segment has, each task in the worker of that segment's task of its
            index, so each key is read in the process holding its partition (see
            :mod:`squall.trident.placement`). ``None`` otherwise.
        unrouted_because: for a query of an in-process state that cannot be sent to the
            partition holding its key, why (``partition_persist`` chooses the keys of
            each partition; no stream of the topology updates the state); else "".
    """

    processor: int
    access: StateAccess
    factory: Any
    locality: StateLocality
    partitions_of: str | None = None
    unrouted_because: str = ""


@dataclass(frozen=True)
class SegmentIR:
    """One segment: Trident operations between repartitions, run as one batch bolt.

    Attributes:
        component_id: the bolt's component id (``b<N>-<label>``, see
            :mod:`squall.trident.naming`).
        segment: the segment's processors, wired, with their entries (``(source
            component, stream) -> (processor, side)``) and output streams. The local
            engine runs this object; an engine that ships it elsewhere copies it.
        tasks: its task count (one executor per task).
        committer: whether it updates a state, so finishes each batch at the batch's
            commit, in transaction order (exactly when some binding is an ``UPDATE``).
        coordinator_id: the coordinator spout whose transactions its batches belong to.
        states: every state its processors update or query, in processor order.
        returns_drpc_results: whether it is a DRPC stream's last segment, the one that
            returns each request's result.
        colocated_with: the segment this one runs with: its task of each index runs in
            the worker of that segment's task of the same index, and they have as many
            tasks (a state's segment, for a segment querying it: see
            ``StateBinding.partitions_of``); ``None`` for most segments.
    """

    component_id: str
    segment: TridentSegment
    tasks: int
    committer: bool
    coordinator_id: str
    states: tuple[StateBinding, ...] = ()
    returns_drpc_results: bool = False
    colocated_with: str | None = None

    @property
    def uses_in_process_state(self) -> bool:
        """Whether one of its states keeps its data in each process's own memory."""
        return any(binding.locality is StateLocality.IN_PROCESS for binding in self.states)


@dataclass(frozen=True)
class EdgeIR:
    """Tuples of stream ``stream`` of ``source`` go to segment ``target`` by ``grouping``.

    Attributes:
        source: the component id of a source (stream :data:`SOURCE_STREAM`) or a segment
            (stream ``s<node id>``).
        stream: the stream id, as the lowered topology declares it; never one of the
            batch layer's streams.
        target: the receiving segment's component id.
        grouping: how the tuples spread over the target's tasks: ``LOCAL_OR_SHUFFLE``
            where a segment continues a stream without repartitioning, ``FIELDS`` for
            ``partition_by``/``group_by`` and the sides of a join, ``SHUFFLE``, ``ALL``
            (``broadcast``) or ``GLOBAL``.
        fields: the grouping fields (for ``FIELDS``), else empty.
    """

    source: str
    stream: str
    target: str
    grouping: GroupingKind
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class QueryGroupIR:
    """Batch sources that share transactions, and the segments their batches reach.

    The regular spouts share one group (a transaction has a batch from each, as under
    Storm's master batch coordinator); each DRPC stream has a group of its own. Every
    segment is in exactly one group.

    Attributes:
        key: :data:`REGULAR_GROUP_KEY` for the regular spouts, the emitter's component id
            for a DRPC stream.
        namespace: names the group's transactions and metadata in the coordination store
            (the regular spouts' stream ids joined by ``+``, sorted; ``drpc-<function>``).
        coordinator_id: its coordinator spout's component id (``<namespace>/coordinator``).
        sources: the component ids of its sources, in declaration order.
        segments: the component ids of its segments, in a topological order (a segment
            after every segment that feeds it) in which the committers and every segment
            downstream of one come last (a batch is processed before any of its state
            commits, as in Storm's commit phase); otherwise in compilation order.
    """

    key: str
    namespace: str
    coordinator_id: str
    sources: tuple[str, ...]
    segments: tuple[str, ...]


@dataclass(frozen=True)
class NamedOperation:
    """An operation given a name with ``.name(...)`` (``Stream.name``), and where its
    tuples can be seen in the lowered topology.

    Attributes:
        name: the name, as given.
        component_id: the component id of the segment running the operation.
        stream: the stream the segment emits the operation's output on (``s<node id>``),
            or ``None`` when its output only goes on to the next operations of its own
            segment (and so is emitted on no stream).
        fields: the fields of the operation's output (without the batch's attempt).
    """

    name: str
    component_id: str
    stream: str | None
    fields: tuple[str, ...]


@dataclass(frozen=True)
class TridentIR(BatchIR):
    """A compiled Trident topology: batch sources, segments, the streams between them and
    the query groups.

    Attributes:
        sources: the regular spouts in declaration order, then the DRPC streams.
        segments: every segment in compilation order, which is topological; their
            component ids are unique and differ from the sources'.
        edges: every stream a segment receives: the segments in order, each one's
            inputs in the order it subscribes to them.
        groups: the regular spouts' group (if the topology has regular spouts), then a
            group per DRPC stream, in the order of ``sources``.
    """

    sources: tuple[SourceIR, ...]
    segments: tuple[SegmentIR, ...]
    edges: tuple[EdgeIR, ...]
    groups: tuple[QueryGroupIR, ...]

    #: Segments' streams have ids numbered over the whole process (``s23``).
    numbered_streams = True

    def user_components(self) -> dict[str, object]:
        """The regular spouts, by their emitters' component ids (segments run the
        user's operations inside the compiler's bolts)."""
        return {s.component_id: s.spout for s in self.sources if s.spout is not None}

    def source(self, component_id: str) -> SourceIR:
        """The source whose emitter is ``component_id``.

        Raises:
            KeyError: no such source.
        """
        for source in self.sources:
            if source.component_id == component_id:
                return source
        raise KeyError(f"no Trident source {component_id!r}")

    def segment(self, component_id: str) -> SegmentIR:
        """The segment whose bolt is ``component_id``.

        Raises:
            KeyError: no such segment.
        """
        for segment in self.segments:
            if segment.component_id == component_id:
                return segment
        raise KeyError(f"no Trident segment {component_id!r}")

    def named_operations(self) -> list[NamedOperation]:
        """Every operation of the segments given a name with ``.name(...)``, in
        compilation order (runs where it is called; reads the compiled segments only).

        A persistent aggregate's output (its ``new_values_stream()``) is always emitted,
        so naming that stream (``state.new_values_stream().name("counts")``) names what
        the state received in each batch."""
        named = []
        for segment in self.segments:
            for processor in segment.segment.processors:
                node = processor.node
                if node.name:
                    stream = processor.output_streams[0] if processor.output_streams else None
                    fields = tuple(node.output_fields)
                    named.append(NamedOperation(node.name, segment.component_id, stream, fields))
        return named

    def edges_into(self, component_id: str) -> list[EdgeIR]:
        """The streams segment ``component_id`` receives, in subscription order."""
        return [edge for edge in self.edges if edge.target == component_id]

    def edges_from(self, component_id: str) -> list[EdgeIR]:
        """The edges leaving source or segment ``component_id``, in ``edges`` order."""
        return [edge for edge in self.edges if edge.source == component_id]

    def check_worker_processes(self, topology_name: str) -> None:
        """Refuse to run in worker processes a state query
        that would read another store than the one holding its keys: a query of an
        in-process state that cannot be sent to its key's partition
        (``StateBinding.unrouted_because``). Each worker process has a store of its own,
        so the query would read an empty or partial one.

        Runs in the submitting process, before any worker starts.

        Raises:
            InvalidTopologyError: naming the topology, the querying segment, the state's
                factory and why.
        """
        for segment in self.segments:
            for binding in segment.states:
                if binding.access is StateAccess.QUERY and binding.unrouted_because:
                    factory = type(binding.factory).__name__
                    raise InvalidTopologyError(
                        f"topology {topology_name!r} cannot run in worker processes: "
                        f"{segment.component_id!r} queries a state made by {factory}, "
                        "which each process keeps in its own memory, and "
                        f"{binding.unrouted_because}, so its queries cannot be sent to the "
                        "process holding each key: each would read only its own "
                        "process's store. Run it on worker threads "
                        '(topology.worker.kind = "thread") or keep the state in a store '
                        "every process reaches (SqliteMapState, RedisMapState)"
                    )
