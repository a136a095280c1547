"""How a Trident or transactional query's micro-batch runs: the driver runs every stage
of the query's plan in order (the pipeline the ``foreachBatch`` driver of
``streaming.driver`` runs it with), most of them on executors."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from squall.runtime.latency import LatencyHistogram
from squall.runtime.metrics import ComponentStats
from squall.spark.control.capacity import CapacityWindow
from squall.spark.errors import component_failure
from squall.spark.execute.batchbolts import BatchBoltStage
from squall.spark.execute.figures import KEPT_ERRORS, BatchFigures, Reports, TaskFigures
from squall.spark.execute.packets import PACKET_SCHEMA, Packet
from squall.spark.execute.routing import aligned
from squall.spark.execute.stages import SegmentStage, timed_run
from squall.spark.plan.batch import QueryPlan, SegmentPlan
from squall.spark.sources.batchreaders import READERS
from squall.spark.sources.spoutlog import SpoutLog
from squall.spark.streaming.driver import Ranges, reports_accumulator
from squall.spark.streaming.frames import SOURCES, BatchFrames
from squall.spark.streaming.microbatch import plan_without_adaptive_execution, run_for_effects
from squall.trident.processors import DRPCReturnProcessor, StateProcessor
from squall.trident.segment import TridentSegment
from squall.trident.sources import resolve_drpc
from squall.trident.state.base import StateLocality, locality_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from squall.drpc.local import LocalDRPC
    from squall.transactional.attempt import TransactionAttempt


def runs_on_driver(segment: SegmentPlan) -> bool:
    """Whether ``segment``'s stage runs on the driver: a transactional topology's
    committer batch bolts (they may hold in-process objects: they are not pickled), the
    return step of a DRPC stream (the driver holds the DRPC connection), a segment
    keeping data across batches in its tasks' memory (a Trident window:
    ``Processor.spans_batches``) and a segment using a state executors cannot reach
    (see :func:`executors_reach`). Every other stage runs on executors, state updates
    included: each partition task updates its own keys, batches one at a time in txid
    order."""
    if not isinstance(segment.segment, TridentSegment):
        return segment.committer
    return any(
        isinstance(p, DRPCReturnProcessor)
        or p.spans_batches
        or (isinstance(p, StateProcessor) and not executors_reach(p.factory))
        for p in segment.segment.processors
    )


def executors_reach(factory: object) -> bool:
    """Whether tasks on executors may update and query the states of ``factory``: only
    if its locality is ``StateLocality.SHARED``. Not if its states live in each process
    (``IN_PROCESS``: the driver's store is the one the topology's users read), nor if
    they live in a one-writer file on the driver's machine (``ONE_WRITER_FILE``,
    SQLite: executors of a cluster would open another file; those of a local master
    could share it, but would only wait for each other). A factory that declares no
    locality is ``SHARED``."""
    return locality_of(factory) is StateLocality.SHARED


def make_stage(
    segment: SegmentPlan, txid: int, conf: dict[str, Any], run_key: str, attempt: int
) -> SegmentStage | BatchBoltStage:
    """The stage running ``segment`` in transaction ``txid``: a Trident segment, or a
    transactional topology's batch bolt (attempt ``attempt`` of the batch). A Trident
    committer on executors makes its states for each batch (see
    ``SegmentStage.states_per_batch``)."""
    if isinstance(segment.segment, TridentSegment):
        per_batch = segment.committer and not runs_on_driver(segment)
        return SegmentStage(segment, txid, conf, run_key, attempt, states_per_batch=per_batch)
    return BatchBoltStage(segment, txid, conf, run_key, attempt)


class DRPCReturns:
    """Returns a DRPC stream's results from the driver: the request of each
    transaction is the one the source logged with its batch."""

    def __init__(self, drpc: LocalDRPC | None, conf: dict[str, Any]) -> None:
        self.drpc = resolve_drpc(drpc, conf)
        self.requests: dict[int, str] = {}

    def prepare(self, conf: dict[str, Any], context: object) -> None:
        """Nothing to open: the driver holds the DRPC connection."""

    def return_result(self, attempt: TransactionAttempt, result: str) -> None:
        request_id = self.requests.pop(attempt.transaction_id, "")
        if request_id:
            self.drpc.result(request_id, result)


class BatchPipeline:
    """How a micro-batch of a Trident or transactional query runs, on the driver (the
    ``Pipeline`` of its :class:`~squall.spark.streaming.driver.MicroBatchDriver`).

    Batch ``batch_id`` is transaction ``batch_id + 1``; an attempt run again keeps the
    txid (transactional and opaque state apply it once). A DRPC stream's micro-batch
    holds one request: one whose attempts all fail is failed alone (its client gets the
    error) and the stream goes on.
    """

    def __init__(
        self,
        plan: QueryPlan,
        conf: dict[str, Any],
        run_key: str,
        spark: SparkSession,
        logs: dict[str, SpoutLog],
    ) -> None:
        self.plan = plan
        self.logs = logs
        self.conf = conf
        self.run_key = run_key
        self.spark = spark
        self.reports = reports_accumulator(spark)
        self.emitted: dict[str, int] = {source.component_id: 0 for source in plan.sources}
        #: Per stage: the figures of its tasks, summed over tasks and micro-batches.
        self.totals: dict[str, TaskFigures] = {s.component_id: TaskFigures() for s in plan.segments}
        #: The DRPC request of each micro-batch being run (a DRPC stream's query).
        self.requests: dict[int, str] = {}
        #: Per settled micro-batch: the state partitions it committed (its committer
        #: stages' tasks that reported).
        self.commits: dict[int, int] = {}
        self._committers = {s.component_id for s in plan.segments if s.committer}
        self.returns: DRPCReturns | None = None
        drpc = plan.drpc
        if drpc is not None:
            self.returns = DRPCReturns(drpc.drpc, conf)
            for segment in plan.segments:
                for processor in segment.segment.processors:
                    if isinstance(processor, DRPCReturnProcessor):
                        processor.resolver = self.returns

    def admits(self, batch_id: int, ranges: Ranges) -> bool:
        """Every micro-batch runs, except a DRPC stream's without a request."""
        drpc = self.plan.drpc
        if self.returns is None or drpc is None:
            return True
        indexes = ranges.get(drpc.component_id, range(0))
        if not indexes:
            return False
        self.requests[batch_id] = self.logs[drpc.component_id].request_id(indexes[-1]) or ""
        return True

    def run_attempt(self, frame: DataFrame, batch_id: int, ranges: Ranges, attempt: int) -> None:
        """Note the attempt for the emitters on executors, then run every stage."""
        if self.returns is not None:
            self.returns.requests[batch_id + 1] = self.requests.get(batch_id, "")
        for source in self.plan.sources:  # emitters on executors read it
            for index in ranges.get(source.component_id, range(0)):
                self.logs[source.component_id].set_attempt(index, attempt)
        self._run(frame, batch_id, ranges, attempt)

    def settle(self, batch_id: int, ranges: Ranges, reports: Reports) -> None:
        """Add the stages' reports to their totals; count the state partitions the
        batch committed."""
        for key, report in reports.items():
            self.totals[key.component_id].add(report.figures)
        self.commits[batch_id] = sum(1 for key in reports if key.component_id in self._committers)

    def absorbs(self, batch_id: int, error: Exception) -> bool:
        """A DRPC request fails alone: its client gets the error, the stream goes on
        with the next request. Any other query stops."""
        if self.returns is None:
            return False
        self.returns.requests.pop(batch_id + 1, None)
        request_id = self.requests.get(batch_id, "")
        self.returns.drpc.fail_request(request_id, drpc_failure_message(error))
        return True

    def finish(self, batch_id: int, ranges: Ranges) -> int:
        """The tuples the sources emitted in this batch (added to ``emitted``)."""
        self.requests.pop(batch_id, None)
        return self._count(ranges)

    def state_commits(self, batch_id: int) -> int:
        """The state partitions micro-batch ``batch_id`` committed (0 if it failed)."""
        return self.commits.pop(batch_id, 0)

    def busy(self) -> dict[Hashable, float]:
        """Busy seconds so far per stage (its tasks' summed)."""
        return {cid: totals.busy_secs for cid, totals in self.totals.items()}

    def component_stats(
        self, capacity: CapacityWindow, figures: BatchFigures
    ) -> dict[str, ComponentStats]:
        """The sources' emitted tuples and every stage's figures and capacity (its
        tasks' time over the recent micro-batches' time multiplied by its tasks), each
        with the errors of failed micro-batches its code raised (a source: its
        emitters'), as the local engine reports them; the sources also list the errors
        of failed micro-batches no component's code raised (an engine or Spark error)."""
        components: dict[str, ComponentStats] = {}
        for source in self.plan.sources:
            own, total = figures.errors_of(source.component_id)
            errors = sorted([*figures.engine_errors, *own], key=lambda error: error.time)
            components[source.component_id] = ComponentStats(
                source.component_id,
                "spout",
                list(self.plan.layout.task_ids(source.component_id)),
                emitted=self.emitted[source.component_id],
                errors=errors[-KEPT_ERRORS:],
                errors_total=figures.engine_errors_total + total,
            )
        for segment in self.plan.segments:
            totals = self.totals[segment.component_id]
            executed = totals.executed
            errors, total = figures.errors_of(segment.component_id)
            stats = ComponentStats(
                segment.component_id,
                "bolt",
                list(segment.task_ids),
                emitted=totals.emitted,
                transferred=totals.transferred,
                executed=executed,
                execute_latency_ms=totals.busy_secs * 1000.0 / executed if executed else 0.0,
                capacity=capacity.capacity(segment.component_id, segment.tasks),
                errors=errors,
                errors_total=total,
            )
            # A stage's task runs its micro-batch as one batch: its tuples count at the
            # batch's mean time, as a bolt's batch does on the local engine.
            execute = totals.latencies.get("execute")
            stats.with_histograms({"execute": execute.copy() if execute else LatencyHistogram()})
            components[segment.component_id] = stats
        return components

    def _count(self, ranges: dict[str, range]) -> int:
        """Tuples the sources emitted in this batch (added to ``emitted``)."""
        total = 0
        for source in self.plan.sources:
            log = self.logs[source.component_id]
            count = sum(log.emitted(index) for index in ranges.get(source.component_id, ()))
            self.emitted[source.component_id] += count
            total += count
        return total

    def _producer(self, component_id: str) -> str:
        """The frame a component's output is in: the sources share one."""
        return SOURCES if component_id in self.emitted else component_id

    def _readers(self) -> dict[str, int]:
        """How many segments read each frame (the sources' and segments')."""
        readers: dict[str, set[int]] = {}
        for segment in self.plan.segments:
            for edge in segment.inputs:
                readers.setdefault(self._producer(edge.source), set()).add(segment.index)
        return {producer: len(indexes) for producer, indexes in readers.items()}

    def _aligned(self, segment: SegmentPlan, ranges: dict[str, range]) -> bool:
        """Whether ``segment``'s input is already in its partitions: it reads only one
        batch spout, over one aligned edge (see ``routing.aligned``), and this
        micro-batch holds one batch of it, so Spark partition ``i`` of the source is
        task ``i``'s input and no exchange is needed."""
        if len(self.plan.sources) != 1 or len(segment.inputs) != 1:
            return False
        source = self.plan.sources[0]
        edge = segment.inputs[0]
        if not READERS[source.kind].aligns_slices or edge.source != source.component_id:
            return False
        slices = max([1, *(e.tasks for e in source.outputs)])
        return aligned(edge, slices) and len(ranges.get(source.component_id, ())) == 1

    def _run(
        self, frame: DataFrame, batch_id: int, ranges: dict[str, range], attempt: int = 0
    ) -> None:
        txid = batch_id + 1
        plan = self.plan
        plan_without_adaptive_execution(frame)
        frames = BatchFrames(frame, self._readers())
        if any(READERS[source.kind].emits_on_executors for source in plan.sources):
            frames.materialize(SOURCES)  # these spouts emit while the frame is computed
        for segment in plan.segments:
            producers = list(dict.fromkeys(self._producer(e.source) for e in segment.inputs))
            if len(producers) > 1:
                # A stage computed inside a union's tasks would see the union's partition
                # ids: run each producing stage in a job of its own first (the sources'
                # partitions carry what they read).
                for producer in producers:
                    if producer != SOURCES:
                        frames.materialize(producer)
            inputs = frames.input_of(segment.index, producers)
            assert inputs is not None  # a segment reads at least one edge
            stage = make_stage(segment, txid, self.conf, self.run_key, attempt)
            if runs_on_driver(segment):
                by_partition: dict[int, list[Packet]] = defaultdict(list)
                for row in inputs.collect():  # on the driver
                    packet = Packet(*row)
                    by_partition[packet.target].append(packet)
                produced: list[Packet] = []
                for partition in range(segment.tasks):
                    packets = by_partition.get(partition, [])
                    produced.extend(timed_run(stage, partition, packets, self.reports))
                if segment.outputs:
                    output = self.spark.createDataFrame(produced, PACKET_SCHEMA)
                    frames.put(segment.component_id, output, computed=True)
                continue
            if not self._aligned(segment, ranges):
                inputs = inputs.repartitionById(segment.tasks, "target")
            elif segment.committer:
                # No exchange ends the batch's processing before its state is updated:
                # read the input in a job of its own first.
                inputs = inputs.localCheckpoint(eager=True)
            output = inputs.mapInArrow(stage.arrow_function(self.reports), PACKET_SCHEMA)
            if segment.outputs:
                frames.put(segment.component_id, output)
            else:
                run_for_effects(output)  # runs the segment (its effects: peeks, functions)


def drpc_failure_message(error: Exception) -> str:
    """What a DRPC client is told of a request whose micro-batch failed: the component
    and task whose code raised, with the exception's line (``component 'b1-each(Boom)'
    task 3: ValueError: ...``), or, where no component's code raised, the error itself.
    Runs on the driver."""
    source = component_failure(error)
    if source is None:
        return f"{type(error).__name__}: {error}"
    return f"component {source.component_id!r} task {source.task_id}: {source.error}"
