"""Per-partition work of a micro-batch: a Trident segment run on one partition, and
the ``mapInArrow`` function that runs a Trident or transactional stage on executors.

A stage's rows are packets (see ``execute.packets``). A segment's partition is its
task: the processors of ``squall.trident`` run there unchanged, prepared once per task
and process (kept warm across micro-batches while Spark reuses the Python worker).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from squall.model.fields import Fields
from squall.runtime.codepickle import Carried
from squall.runtime.context import TopologyContext
from squall.runtime.emitchecks import check_emit
from squall.runtime.latency import LatencyHistogram
from squall.spark.control.taskcache import TASKS
from squall.spark.errors import ComponentFailure, component_failure, note_component
from squall.spark.execute.figures import ReportKey, Reports, TaskFigures, TaskReport
from squall.spark.execute.packets import (
    ArrowFunction,
    Packet,
    packets_from_arrow,
    packets_to_arrow,
    unpack_values,
)
from squall.spark.execute.routing import route
from squall.spark.launch.coreform import core_form
from squall.spark.launch.processsetup import prepare_process
from squall.spark.plan.batch import SegmentPlan
from squall.spark.plan.tasks import TaskLayout
from squall.transactional.attempt import TransactionAttempt
from squall.trident.processors import BatchRun, DRPCReturnProcessor, PersistProcessor, Processor

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.accumulators import Accumulator


def _cleanup(prepared: tuple[TopologyContext, list[Processor]]) -> None:
    for processor in prepared[1]:
        processor.cleanup()


class _Outputs:
    """Collects what a segment's processors emit on their output streams, each emit
    checked as the local engine's collector checks the segment's emits (against
    ``fields``: the streams the segment's component declares, the attempt first)."""

    def __init__(self, component_id: str, fields: dict[str, Fields]) -> None:
        self.items: list[tuple[str, list[Any]]] = []
        self.component_id = component_id
        self.fields = fields
        self.widths = {stream: len(declared) for stream, declared in fields.items()}

    def emit(self, values: Sequence[Any], stream: str = "default") -> list[int]:
        """Keep ``values`` (the attempt first) emitted on ``stream``.

        Raises:
            ValueError: the stream is not declared, or the number of values differs
                from its fields (see :func:`~squall.runtime.emitchecks.check_emit`).
        """
        if self.widths.get(stream) != len(values):
            check_emit(self.component_id, stream, values, self.fields)
        self.items.append((stream, list(values[1:])))  # values[0] is the attempt
        return []


def declared_fields(layout: TaskLayout, component_id: str) -> dict[str, Fields]:
    """The fields of every stream ``component_id`` declares in ``layout``'s topology
    but the engine's own (``__`` streams), as its collector on the local engine knows
    them."""
    spec = layout.topology.get_component(component_id)
    return {
        stream: declaration.fields
        for stream, declaration in spec.streams.items()
        if not stream.startswith("__")
    }


class SegmentStage:
    """Runs one segment for one micro-batch (transaction ``txid``)."""

    def __init__(
        self,
        plan: SegmentPlan,
        txid: int,
        conf: dict[str, Any],
        run_key: str,
        attempt: int = 0,
        states_per_batch: bool = False,
    ) -> None:
        self.plan = plan
        self.txid = txid
        self.attempt = attempt
        self.conf = conf
        self.run_key = run_key
        #: Whether the states the segment updates last one batch (made before it,
        #: closed after it): on executors, where a task may run in another Python worker
        #: from one batch to the next, a state kept in a worker (its cache) would miss
        #: what the task wrote from another one.
        self.states_per_batch = states_per_batch
        #: The streams the segment declares (worked out once per stage object).
        self._fields: dict[str, Fields] | None = None
        #: Tuples in and emit calls of the last ``run_partition``.
        self.executed = 0
        self.emitted = 0

    def _processors(self, partition: int) -> tuple[TopologyContext, list[Processor]]:
        """The task's context and processors, prepared once per process and kept in the
        task cache (their ``cleanup`` runs when the run is forgotten)."""
        key = ("segment", self.plan.index, partition)
        return TASKS.get(self.run_key, key, lambda: self._prepare(partition), _cleanup)

    def _prepare(self, partition: int) -> tuple[TopologyContext, list[Processor]]:
        # Each task its own processors (as each local task has its own copy of the
        # segment); what the driver wired in (a DRPC result resolver) is shared.
        declared = self.plan.segment.processors
        memo = {id(p.resolver): p.resolver for p in declared if isinstance(p, DRPCReturnProcessor)}
        processors = copy.deepcopy(declared, memo)
        context = self.plan.layout.context(self.plan.component_id, partition, self.conf)
        for processor in processors:
            processor.prepare(self.conf, context)
        return context, processors

    def run_partition(self, partition: int, packets: Iterable[Packet]) -> list[Packet]:
        """Process one partition's tuples as one batch; return the routed output."""
        context, processors = self._processors(partition)
        if not self.states_per_batch:
            return self._run_batch(context, processors, partition, packets)
        updaters = [p for p in processors if isinstance(p, PersistProcessor)]
        for processor in updaters:
            if processor.state is None:  # closed after the task's last batch here
                processor.open_state(self.conf, context)
        try:
            return self._run_batch(context, processors, partition, packets)
        finally:
            for processor in updaters:
                processor.close_state()

    def _run_batch(
        self,
        context: TopologyContext,
        processors: list[Processor],
        partition: int,
        packets: Iterable[Packet],
    ) -> list[Packet]:
        if self._fields is None:
            self._fields = declared_fields(self.plan.layout, self.plan.component_id)
        outputs = _Outputs(self.plan.component_id, self._fields)
        attempt = TransactionAttempt(self.txid, self.attempt)
        run = BatchRun(attempt, outputs, processors, partition)
        entries = self.plan.segment.entries
        states = run.states
        executed = 0
        # (source, stream) -> (bound process of the entry processor, its batch state, side)
        targets: dict[tuple[str, str], tuple[Any, Any, int]] = {}
        for packet in packets:
            port = (packet.source, packet.stream)
            target = targets.get(port)
            if target is None:
                index, side = entries[port]
                target = targets[port] = (processors[index].process, states[index], side)
            process, state, side = target
            executed += packet.size
            for values in unpack_values(packet.tuples):
                process(run, state, values, side)
        for processor in processors:
            processor.finish(run, states[processor.index])
        by_stream: dict[str, list[list[Any]]] = {}
        for stream, values in outputs.items:
            by_stream.setdefault(stream, []).append(values)
        routed: list[Packet] = []
        for stream, values_list in by_stream.items():
            edges = self.plan.outputs.get(stream, [])
            if edges:
                fields = self.plan.segment.output_streams[stream]
                plan = self.plan.layout.plan
                routed.extend(route(edges, fields, context, plan, values_list))
        self.executed = executed
        self.emitted = len(outputs.items)
        return routed

    def report_key(self, partition: int) -> ReportKey:
        """The key of task ``partition``'s report of this micro-batch's attempt."""
        return ReportKey(self.txid - 1, self.attempt, self.plan.component_id, partition)

    def arrow_function(self, reports: Accumulator[Reports]) -> ArrowFunction:
        """The ``mapInArrow`` function running this stage on executors."""
        return arrow_function(self, reports)


class PartitionRunner(Protocol):
    """A stage: runs one task (partition) over its input packets."""

    #: The segment or batch bolt it runs (its component and task ids).
    plan: SegmentPlan
    #: Tuples in and emit calls of the last ``run_partition``.
    executed: int
    emitted: int

    def run_partition(self, partition: int, packets: Iterable[Packet]) -> list[Packet]:
        """Process the packets' tuples as one batch; the routed output."""

    def report_key(self, partition: int) -> ReportKey:
        """The key of task ``partition``'s report of this micro-batch's attempt."""


def timed_run(
    stage: PartitionRunner,
    partition: int,
    packets: list[Packet],
    reports: Accumulator[Reports],
    core: str = "",
) -> list[Packet]:
    """``stage.run_partition``; its counts and time are added to ``reports`` (the
    accumulator of task reports, on an executor or the driver), with ``core``, the
    form of the core an executor runs (``""`` on the driver).

    Raises:
        Exception: what the component's code (or its emits' checks) raised, noted with
            the component and task that raised it (see
            :func:`~squall.spark.errors.note_component`).
    """
    started = time.perf_counter()
    try:
        output = stage.run_partition(partition, packets)
    except Exception as exc:
        note_component(exc, stage.plan.component_id, stage.plan.task_ids[partition])
        raise
    seconds = time.perf_counter() - started
    transferred = sum(packet.size for packet in output)
    figures = TaskFigures(stage.executed, stage.emitted, transferred, seconds)
    if stage.executed:  # the batch's tuples, each at their mean time (as a bolt's batch)
        execute = LatencyHistogram()
        execute.record_many(seconds * 1000.0 / stage.executed, stage.executed)
        figures.latencies["execute"] = execute
    reports.add({stage.report_key(partition): TaskReport(figures, core=core)})
    return output


def arrow_function(stage: PartitionRunner, reports: Accumulator[Reports]) -> ArrowFunction:
    """The ``mapInArrow`` function running ``stage`` on executors: Spark partition
    ``i`` is task ``i``; its report goes to the accumulator ``reports``.

    Raises:
        RuntimeError: a row's target task is not the partition it arrived in (rows
            must reach their task, whether by exchange or aligned from the source).
        ComponentFailure: the component's code raised (the failure names the
            component and task, with the original's line and traceback; the driver
            reports it under the component).
    """

    carried = Carried(stage)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark import TaskContext

        prepare_process()

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        packets: list[Packet] = []
        for batch in batches:
            if not batch.num_rows:
                continue
            if not pc.all(pc.equal(batch.column("target"), partition)).as_py():
                raise RuntimeError(f"rows for other tasks reached task {partition}")
            packets.extend(packets_from_arrow(batch))
        try:
            output = timed_run(carried.value, partition, packets, reports, core_form())
        except Exception as exc:
            failure = component_failure(exc)
            if failure is None:
                raise
            raise ComponentFailure(failure) from None
        yield packets_to_arrow(output, pa)

    return run
