"""Per-partition work of a micro-batch: a Trident segment run on one partition.

Rows between stages carry ``(dest, port, target, values)``: the segment they go to,
the stream they came on (``"component|stream"``), the partition (task index) the
grouping chose and the pickled tuple values. A segment's partition is its task: the
processors of ``squall.trident`` run there unchanged, prepared once per task and
process (kept warm across micro-batches while Spark reuses the Python worker).
"""

from __future__ import annotations

import copy
import pickle
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any, Protocol

from squall.model.fields import Fields
from squall.model.grouping import GroupingKind
from squall.runtime.routing import (
    AllRouter,
    FieldsRouter,
    GlobalRouter,
    PartialKeyRouter,
    ShuffleRouter,
)
from squall.spark.execute.figures import ReportKey, TaskFigures, TaskReport
from squall.spark.plan.batch import Edge, SegmentPlan
from squall.spark.runtime.workerprocess import prepare_process
from squall.transactional.attempt import TransactionAttempt
from squall.trident.processors import BatchRun, Processor

STAGE_SCHEMA = "dest int, port string, target int, values binary, meta string"
PICKLE = pickle.HIGHEST_PROTOCOL

#: Prepared processors per (topology run, segment, partition) in this process.
_PREPARED: dict[tuple[str, int, int], list[Processor]] = {}

Row = tuple[int, str, int, bytes]
Chooser = Callable[[int, Sequence[Any]], list[int]]


class TaskView:
    """The part of ``TopologyContext`` that Trident operations, batch bolts and spout
    emitters use, for one partition. On Spark a task id is the task's index in its
    component (its partition), 0..n-1."""

    def __init__(
        self,
        component_id: str,
        task_index: int,
        tasks: int,
        conf: dict[str, Any],
        component_tasks: dict[str, int] | None = None,
        coordination_store: Any = None,
    ) -> None:
        self.component_id = component_id
        self.task_index = task_index
        self.task_id = task_index
        self.tasks = tasks
        self.conf = conf
        self.component_tasks = component_tasks or {}
        self.coordination_store = coordination_store
        self.clock = None

    def get_component_tasks(self, component_id: str) -> list[int]:
        """Task ids of ``component_id`` (this component's partitions by default)."""
        return list(range(self.component_tasks.get(component_id, self.tasks)))

    def get_this_task_index(self) -> int:
        """This task's index within its component."""
        return self.task_index


def chooser(edge: Edge, fields: Fields, source_partition: int) -> Chooser:
    """The router of ``edge`` for tuples leaving ``source_partition``: the same choice
    the local engine makes, over task indexes."""
    targets = list(range(edge.tasks))
    kind = edge.kind
    if kind in (GroupingKind.FIELDS, GroupingKind.PARTIAL_KEY):
        router = FieldsRouter if kind is GroupingKind.FIELDS else PartialKeyRouter
        positions = [fields.index(f) for f in edge.fields]
        site = f"bolt {edge.subscriber!r} groups stream {edge.stream!r} of {edge.source!r}"
        return router(targets, positions, edge.fields, site).choose
    if kind is GroupingKind.ALL:
        return AllRouter(targets).choose
    if kind is GroupingKind.GLOBAL:
        return GlobalRouter(targets).choose
    # Shuffle, none and local-or-shuffle: a Spark partition has no "worker" to stay in
    # (the local engine with one worker also shuffles local-or-shuffle over all tasks).
    return ShuffleRouter(targets, source_partition).choose


#: Groupings for which any even spread is right.
SPREADING = (GroupingKind.SHUFFLE, GroupingKind.NONE, GroupingKind.LOCAL_OR_SHUFFLE)


def aligned(edge: Edge, slices: int) -> bool:
    """Whether a source read in ``slices`` slices sends slice ``i`` of its batch to
    task ``i`` along ``edge``: a spreading grouping over as many tasks as slices. Slices
    are contiguous parts of the batch of (nearly) equal size, so each task gets an even
    share in emit order, and the stage reading such an edge needs no exchange (see
    ``BatchPipeline``)."""
    return edge.kind in SPREADING and edge.tasks == slices


def route_pickled(
    edges: list[Edge],
    fields: Fields,
    source_partition: int,
    blobs: Iterable[bytes],
    slices: int = 0,
) -> list[Row]:
    """Rows for already pickled tuples of slice ``source_partition`` of ``slices``:
    grouping by fields unpickles them, the others route the bytes as they are."""
    blobs = list(blobs)
    if any(edge.kind in (GroupingKind.FIELDS, GroupingKind.PARTIAL_KEY) for edge in edges):
        values = [pickle.loads(b) for b in blobs]
        return route(edges, fields, source_partition, values, slices)
    rows: list[Row] = []
    choosers = []
    for edge in edges:
        port = f"{edge.source}|{edge.stream}"
        if aligned(edge, slices):
            rows.extend((edge.target, port, source_partition, blob) for blob in blobs)
        else:
            choosers.append((edge, port, chooser(edge, fields, source_partition)))
    for blob in blobs:
        for edge, port, choose in choosers:
            for target in choose(source_partition, ()):
                rows.append((edge.target, port, target, blob))
    return rows


def route(
    edges: list[Edge],
    fields: Fields,
    source_partition: int,
    values_list: Iterable[Sequence[Any]],
    slices: int = 0,
) -> list[Row]:
    """Rows for ``values_list`` sent along ``edges`` from ``source_partition`` (slice
    ``source_partition`` of ``slices`` of a source: aligned edges keep the slice's
    tuples at its task)."""
    keep = [source_partition]
    choosers = [
        (
            edge,
            f"{edge.source}|{edge.stream}",
            (lambda task, values: keep)
            if aligned(edge, slices)
            else chooser(edge, fields, source_partition),
        )
        for edge in edges
    ]
    rows: list[Row] = []
    for values in values_list:
        blob = pickle.dumps(list(values), PICKLE)
        for edge, port, choose in choosers:
            for target in choose(source_partition, values):
                rows.append((edge.target, port, target, blob))
    return rows


#: What a component emitted: ``(stream, values without the attempt, direct task)``.
Emit = tuple[str, list[Any], int | None]


def route_emits(
    edges_by_stream: dict[str, list[Edge]],
    fields_by_stream: dict[str, Fields],
    source_partition: int,
    emits: Iterable[Emit],
) -> list[Row]:
    """Rows for what a task emitted on several streams; a direct emit goes to the task
    it names on the stream's direct subscriptions.

    Raises:
        ValueError: a direct emit names a task the subscriber does not have.
    """
    grouped: dict[str, list[list[Any]]] = {}
    rows: list[Row] = []
    for stream, values, task in emits:
        edges = edges_by_stream.get(stream)
        if not edges:
            continue
        if task is None:
            grouped.setdefault(stream, []).append(values)
            continue
        blob = pickle.dumps(values, PICKLE)
        for edge in edges:
            if edge.kind is GroupingKind.DIRECT:
                if not 0 <= task < edge.tasks:
                    raise ValueError(
                        f"emit_direct to task {task} on stream {stream!r}: the subscriber "
                        f"has tasks 0..{edge.tasks - 1}"
                    )
                rows.append((edge.target, f"{edge.source}|{edge.stream}", task, blob))
    for stream, values_list in grouped.items():
        edges = [e for e in edges_by_stream[stream] if e.kind is not GroupingKind.DIRECT]
        rows.extend(route(edges, fields_by_stream[stream], source_partition, values_list))
    return rows


class _Outputs:
    """Collects what a segment's processors emit on their output streams."""

    def __init__(self) -> None:
        self.items: list[tuple[str, list[Any]]] = []

    def emit(self, values: Sequence[Any], stream: str = "default") -> list[int]:
        self.items.append((stream, list(values[1:])))  # values[0] is the attempt
        return []


class SegmentStage:
    """Runs one segment for one micro-batch (transaction ``txid``)."""

    def __init__(
        self, plan: SegmentPlan, txid: int, conf: dict[str, Any], run_key: str, attempt: int = 0
    ) -> None:
        self.plan = plan
        self.txid = txid
        self.attempt = attempt
        self.conf = conf
        self.run_key = run_key
        #: Emit calls of the last ``run_partition``.
        self.emitted = 0

    def _processors(self, partition: int) -> list[Processor]:
        key = (self.run_key, self.plan.index, partition)
        processors = _PREPARED.get(key)
        if processors is None:
            # Each task its own processors (as each local task has its own copy of the
            # segment); what the driver wired in (a DRPC result resolver) is shared.
            declared = self.plan.segment.processors
            memo = {id(p.resolver): p.resolver for p in declared if hasattr(p, "resolver")}
            processors = copy.deepcopy(declared, memo)
            view = TaskView(self.plan.component_id, partition, self.plan.tasks, self.conf)
            for processor in processors:
                processor.prepare(self.conf, view)
            _PREPARED[key] = processors
        return processors

    def run_partition(self, partition: int, rows: Iterable[tuple[str, bytes]]) -> list[Row]:
        """Process one partition's tuples as one batch; return the routed output rows."""
        processors = self._processors(partition)
        outputs = _Outputs()
        attempt = TransactionAttempt(self.txid, self.attempt)
        run = BatchRun(attempt, outputs, processors, partition)
        entries = self.plan.segment.entries
        states = run.states
        loads = pickle.loads
        # port -> (bound process of the entry processor, its batch state, side)
        targets: dict[str, tuple[Any, Any, int]] = {}
        for port, blob in rows:
            target = targets.get(port)
            if target is None:
                source, _, stream = port.partition("|")
                index, side = entries[(source, stream)]
                target = targets[port] = (processors[index].process, states[index], side)
            process, state, side = target
            process(run, state, loads(blob), side)
        for processor in processors:
            processor.finish(run, states[processor.index])
        by_stream: dict[str, list[list[Any]]] = {}
        for stream, values in outputs.items:
            by_stream.setdefault(stream, []).append(values)
        routed: list[Row] = []
        for stream, values_list in by_stream.items():
            edges = self.plan.outputs.get(stream, [])
            if edges:
                fields = self.plan.segment.output_streams[stream]
                routed.extend(route(edges, fields, partition, values_list))
        self.emitted = len(outputs.items)
        return routed

    def report_key(self, partition: int) -> ReportKey:
        """The key of task ``partition``'s report of this micro-batch's attempt."""
        return ReportKey(self.txid - 1, self.attempt, self.plan.component_id, partition)

    def arrow_function(self, reports: Any) -> Callable[[Iterator[Any]], Iterator[Any]]:
        """The ``mapInArrow`` function running this stage on executors."""
        return arrow_function(self, reports)


class PartitionRunner(Protocol):
    """A stage: runs one task (partition) over its input rows."""

    emitted: int

    def run_partition(self, partition: int, rows: Iterable[tuple[str, bytes]]) -> list[Row]:
        """Process ``(port, pickled values)`` rows as one batch; the routed output."""

    def report_key(self, partition: int) -> ReportKey:
        """The key of task ``partition``'s report of this micro-batch's attempt."""


def timed_run(
    stage: PartitionRunner, partition: int, pairs: list[tuple[str, bytes]], reports: Any
) -> list[Row]:
    """``stage.run_partition``; its counts and time are added to ``reports`` (the
    accumulator of task reports, on an executor or the driver)."""
    started = time.perf_counter()
    rows = stage.run_partition(partition, pairs)
    figures = TaskFigures(len(pairs), stage.emitted, len(rows), time.perf_counter() - started)
    reports.add({stage.report_key(partition): TaskReport(figures)})
    return rows


def arrow_function(
    stage: PartitionRunner, reports: Any
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function running ``stage`` on executors: Spark partition
    ``i`` is task ``i``; its report goes to the accumulator ``reports``.

    Raises:
        RuntimeError: a row's target task is not the partition it arrived in (rows
            must reach their task, whether by exchange or aligned from the source).
    """

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark import TaskContext

        prepare_process()

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        pairs: list[tuple[str, bytes]] = []
        for batch in batches:
            if not batch.num_rows:
                continue
            targets = batch.column("target")
            if not pc.all(pc.equal(targets, partition)).as_py():
                raise RuntimeError(f"rows for other tasks reached task {partition}")
            values = batch.column("values").to_pylist()
            ports = pc.unique(batch.column("port"))
            if len(ports) == 1:  # the usual case: one input stream
                pairs.extend(zip(repeat(ports[0].as_py(), len(values)), values, strict=True))
            else:
                pairs.extend(zip(batch.column("port").to_pylist(), values, strict=True))
        yield rows_to_arrow(timed_run(stage, partition, pairs, reports), pa)

    return run


def rows_to_arrow(rows: list[Row], pa: Any, meta: str = "") -> Any:
    """An Arrow record batch of stage rows; ``meta`` (the source's note about its batch,
    e.g. a DRPC request id) is repeated on each row."""
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r[0] for r in rows], pa.int32()),
            pa.array([r[1] for r in rows], pa.string()),
            pa.array([r[2] for r in rows], pa.int32()),
            pa.array([r[3] for r in rows], pa.binary()),
            pa.array([meta] * len(rows), pa.string()),
        ],
        names=["dest", "port", "target", "values", "meta"],
    )


def forget(run_key: str) -> list[Processor]:
    """Drop the prepared processors of a topology run in this process; returns them."""
    dropped: list[Processor] = []
    for key in [k for k in _PREPARED if k[0] == run_key]:
        dropped.extend(_PREPARED.pop(key))
    return dropped
