"""The driver side of a micro-batch: run every stage of the query's plan in order."""

from __future__ import annotations

import time
import traceback
from collections import defaultdict, deque
from functools import reduce
from typing import Any

from squall.runtime.clock import SYSTEM_CLOCK, Clock
from squall.runtime.metrics import ErrorInfo
from squall.spark.control.capacity import CapacityWindow
from squall.spark.execute.batchbolts import BatchBoltStage
from squall.spark.execute.figures import Figures, FiguresParam, zero
from squall.spark.execute.microbatch import plan_without_adaptive_execution, run_for_effects
from squall.spark.execute.retries import BatchRetries
from squall.spark.execute.stages import STAGE_SCHEMA, SegmentStage, aligned, timed_run
from squall.spark.plan.batch import QueryPlan, SegmentPlan
from squall.spark.sources.offsets import OffsetLog
from squall.spark.sources.spoutlog import SpoutLog
from squall.trident.processors import DRPCReturnProcessor, StateProcessor
from squall.trident.segment import TridentSegment
from squall.trident.sources import resolve_drpc
from squall.trident.state.memory_state import MemoryMapStateFactory

#: Batches whose durations ``get_topology_info`` summarizes (median).
RECENT_BATCHES = 100
#: Source kinds whose batches are emitted on executors (while the frame is computed).
EMITTING_ON_EXECUTORS = ("transactional", "opaque", "coordinated")
#: The frame key of a query's sources (one frame: the union of their rows).
SOURCES = "$sources"


def runs_on_driver(segment: SegmentPlan) -> bool:
    """Committers (state updates, applied in txid order), segments using in-process
    memory state and the return step of a DRPC stream run on the driver; the other
    segments run on executors."""
    if segment.committer:
        return True
    if not isinstance(segment.segment, TridentSegment):
        return False
    return any(
        (isinstance(p, StateProcessor) and isinstance(p.factory, MemoryMapStateFactory))
        or isinstance(p, DRPCReturnProcessor)
        for p in segment.segment.processors
    )


def make_stage(
    segment: SegmentPlan, txid: int, conf: dict[str, Any], run_key: str, attempt: int
) -> SegmentStage | BatchBoltStage:
    """The stage running ``segment`` in transaction ``txid``: a Trident segment, or a
    transactional topology's batch bolt (attempt ``attempt`` of the batch)."""
    if isinstance(segment.segment, TridentSegment):
        return SegmentStage(segment, txid, conf, run_key, attempt)
    return BatchBoltStage(segment, txid, conf, run_key, attempt)


class DRPCReturns:
    """Returns a DRPC stream's results from the driver: the request of each
    transaction is the one the source logged with its batch."""

    def __init__(self, drpc: Any, conf: dict[str, Any]) -> None:
        self.drpc = resolve_drpc(drpc, conf)
        self.requests: dict[int, str] = {}

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        """Nothing to open: the driver holds the DRPC connection."""

    def return_result(self, attempt: Any, result: str) -> None:
        request_id = self.requests.pop(attempt.transaction_id, "")
        if request_id:
            self.drpc.result(request_id, result)


class BatchFigures:
    """What ``get_topology_info`` reports about micro-batches."""

    def __init__(self) -> None:
        self.batches = 0
        self.last_batch_id: int | None = None
        self.last_rows = 0
        self.last_duration_ms = 0.0
        self.rows_total = 0
        self.retries = 0
        self.errors: list[ErrorInfo] = []
        #: Durations of the most recent batches, milliseconds.
        self.recent_ms: deque[float] = deque(maxlen=RECENT_BATCHES)

    def record(self, exc: BaseException) -> None:
        """Keep the error of a failed micro-batch, with its traceback (the newest ten)."""
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.errors.append(
            ErrorInfo(time.time(), "spark", -1, f"{type(exc).__name__}: {exc}", trace)
        )
        del self.errors[:-10]

    def finished(self, batch_id: int, rows: int, duration_ms: float) -> None:
        """Count batch ``batch_id`` of ``rows`` tuples, done in ``duration_ms``."""
        self.batches += 1
        self.last_batch_id = batch_id
        self.last_rows = rows
        self.rows_total += rows
        self.last_duration_ms = duration_ms
        self.recent_ms.append(duration_ms)


class BatchRunner:
    """The ``foreachBatch`` function of a query (Trident or transactional) on Spark.

    Batch ``batch_id`` is transaction ``batch_id + 1``. A failed batch is run again, up
    to ``topology.spark.batch.retries`` times, under the same txid (transactional and
    opaque state apply it once), each time after the back-off of
    :class:`~squall.spark.retries.BatchRetries` on ``clock``.
    """

    def __init__(
        self,
        plan: QueryPlan,
        conf: dict[str, Any],
        run_key: str,
        spark: Any,
        logs: dict[str, SpoutLog],
        offsets: OffsetLog,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.plan = plan
        self.logs = logs
        self.offsets = offsets
        self.conf = conf
        self.run_key = run_key
        self.spark = spark
        self.figures = BatchFigures()
        self.emitted: dict[str, int] = {source.component_id: 0 for source in plan.sources}
        #: Per stage: an accumulator its executor tasks add to, and the driver's figures
        #: (driver-side stages add there; accumulated values are added after a batch).
        self.accumulators = {
            s.component_id: spark.sparkContext.accumulator(zero(), FiguresParam())
            for s in plan.segments
        }
        self.stage_figures: dict[str, Figures] = {s.component_id: zero() for s in plan.segments}
        #: Per stage: its tasks' seconds (summed) over the recent batches' wall time.
        self.capacity = CapacityWindow()
        topology = run_key.rsplit("-", 1)[0]  # the run key is "<topology name>-<uuid>"
        self.attempts = BatchRetries(conf, self.figures, clock, f"topology {topology!r}")
        self.returns: DRPCReturns | None = None
        drpc = plan.drpc
        if drpc is not None:
            self.returns = DRPCReturns(drpc.drpc, conf)
            for segment in plan.segments:
                for processor in segment.segment.processors:
                    if isinstance(processor, DRPCReturnProcessor):
                        processor.resolver = self.returns

    def __call__(self, frame: Any, batch_id: int) -> None:
        started = time.perf_counter()
        ranges = self.offsets.ranges(batch_id)
        request_id = ""
        drpc = self.plan.drpc
        if self.returns is not None and drpc is not None:  # a DRPC batch: one request
            indexes = ranges.get(drpc.component_id, range(0))
            if not indexes:
                return
            request_id = self.logs[drpc.component_id].meta(indexes[-1])

        def attempt(number: int) -> None:
            if self.returns is not None:
                self.returns.requests[batch_id + 1] = request_id
            for source in self.plan.sources:  # emitters on executors read it
                for index in ranges.get(source.component_id, range(0)):
                    self.logs[source.component_id].set_attempt(index, number)
            self._run(frame, batch_id, ranges, number)

        try:
            self.attempts.run(batch_id, attempt)
        except Exception as exc:
            if self.returns is None or self.attempts.stopping:
                raise
            # A DRPC request fails alone: its client gets the error, the stream goes on
            # with the next request.
            self.returns.requests.pop(batch_id + 1, None)
            self.returns.drpc.fail_request(request_id, f"{type(exc).__name__}: {exc}")
        rows = self._count(ranges)
        seconds = time.perf_counter() - started
        self.figures.finished(batch_id, rows, seconds * 1000.0)
        self.capacity.record(
            seconds, {cid: self.component_figures(cid)[3] for cid in self.stage_figures}
        )

    def component_figures(self, component_id: str) -> Figures:
        """``[executed, emitted, transferred, seconds]`` of a stage so far."""
        on_driver = self.stage_figures[component_id]
        on_executors = self.accumulators[component_id].value
        return [a + b for a, b in zip(on_driver, on_executors, strict=True)]

    def _count(self, ranges: dict[str, range]) -> int:
        """Tuples the sources emitted in this batch (added to ``emitted``)."""
        total = 0
        for source in self.plan.sources:
            log = self.logs[source.component_id]
            count = 0
            for index in ranges.get(source.component_id, range(0)):
                if source.kind in EMITTING_ON_EXECUTORS:
                    count += log.partition_total(index, int(log.meta(index) or 0)) or 0
                else:
                    count += log.count(index)
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
        batch spout, over one aligned edge (see ``stages.aligned``), and this
        micro-batch holds one batch of it, so Spark partition ``i`` of the source is
        task ``i``'s input and no exchange is needed."""
        if len(self.plan.sources) != 1 or len(segment.inputs) != 1:
            return False
        source = self.plan.sources[0]
        edge = segment.inputs[0]
        if source.kind != "batch" or edge.source != source.component_id:
            return False
        slices = max([1, *(e.tasks for e in source.outputs)])
        return aligned(edge, slices) and len(ranges.get(source.component_id, ())) == 1

    def _run(self, frame: Any, batch_id: int, ranges: dict[str, range], attempt: int = 0) -> None:
        from pyspark.sql import DataFrame
        from pyspark.sql.functions import col

        txid = batch_id + 1
        plan = self.plan
        readers = self._readers()
        plan_without_adaptive_execution(frame)

        def shared(producer: str, output: Any) -> Any:
            # Materialize an output once only if several segments read it; a single
            # reader pulls it through in its own job (no extra Spark job per stage).
            return output.localCheckpoint(eager=True) if readers.get(producer, 0) > 1 else output

        if any(source.kind in EMITTING_ON_EXECUTORS for source in plan.sources):
            # These spouts emit while the frame is computed: once per batch.
            frames = {SOURCES: frame.localCheckpoint(eager=True)}
        else:
            frames = {SOURCES: shared(SOURCES, frame)}
        materialized = {SOURCES}
        for segment in plan.segments:
            producers = dict.fromkeys(self._producer(edge.source) for edge in segment.inputs)
            if len(producers) > 1:
                # A stage computed inside a union's tasks would see the union's partition
                # ids: run each producing stage in a job of its own first.
                for producer in producers:
                    if producer not in materialized:
                        frames[producer] = frames[producer].localCheckpoint(eager=True)
                        materialized.add(producer)
            inputs = reduce(
                DataFrame.unionAll,
                [frames[p].filter(col("dest") == segment.index) for p in producers],
            )
            stage = make_stage(segment, txid, self.conf, self.run_key, attempt)
            if runs_on_driver(segment):
                by_partition: dict[int, list[tuple[str, bytes]]] = defaultdict(list)
                for row in inputs.select("port", "target", "values").collect():  # driver
                    by_partition[row["target"]].append((row["port"], row["values"]))
                produced = []
                figures = self.stage_figures[segment.component_id]
                for partition in range(segment.tasks):
                    pairs = by_partition.get(partition, [])
                    produced.extend(timed_run(stage, partition, pairs, figures))
                if segment.outputs:
                    frames[segment.component_id] = self.spark.createDataFrame(
                        [(*row, "") for row in produced], STAGE_SCHEMA
                    )
                continue
            if not self._aligned(segment, ranges):
                inputs = inputs.repartitionById(segment.tasks, "target")
            accumulator = self.accumulators[segment.component_id]
            output = inputs.mapInArrow(stage.arrow_function(accumulator), STAGE_SCHEMA)
            if segment.outputs:
                frames[segment.component_id] = shared(segment.component_id, output)
            else:
                run_for_effects(output)  # runs the segment (its effects: peeks, functions)
