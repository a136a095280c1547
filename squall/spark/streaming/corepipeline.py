"""How a core topology's micro-batch runs, on the driver (the pipeline the
``foreachBatch`` driver of ``streaming.driver`` runs it with).

Batch ``batch_id`` runs every bolt once, in topological order, each as a Spark stage:
the packets addressed to the bolt (from the spouts' sources and from earlier stages)
are repartitioned by target task with ``repartitionById`` and run per partition with
``mapInArrow`` (see ``squall.spark.execute.bolttasks``). A bolt fed only by local-or-shuffle
from one bolt with no more tasks than itself needs no exchange: it runs in the same
Spark task as the bolt before it. A stage's output read by several bolts is computed
once (``localCheckpoint``).

At the end of the batch the XOR ledger is aggregated by root id: the spouts' init
values (logged with their batches) and every task's acks. A tree whose value is zero is
complete; one failed explicitly or not complete is failed. The outcome is written for
the spouts' sources, whose tasks call ``ack``/``fail`` before their next batch.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

from squall.model.grouping import GroupingKind
from squall.runtime.metrics import ComponentStats, TaskStats, summarize
from squall.spark.control.capacity import CapacityWindow
from squall.spark.control.rundir import QueryDirectory
from squall.spark.control.taskcache import LIVE_RUNS
from squall.spark.execute.bolttasks import metrics_tick_packets, stage_function, tick_packets
from squall.spark.execute.figures import BatchFigures, Reports, TaskFigures
from squall.spark.execute.ledger import unfinished_trees
from squall.spark.execute.packets import PACKET_SCHEMA
from squall.spark.execute.taskstate import collection_paused
from squall.spark.plan.core import BoltStagePlan, CorePlan
from squall.spark.sources.spoutlog import SpoutLog
from squall.spark.streaming.driver import Ranges, reports_accumulator
from squall.spark.streaming.frames import SOURCES, BatchFrames
from squall.spark.streaming.microbatch import plan_without_adaptive_execution, run_for_effects

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class _StreamCounts:
    """A stream's counts of one task (what ``summarize`` reads of a route)."""

    emitted: int = 0
    transferred: int = 0


def fold_figures(stats: TaskStats, figures: TaskFigures) -> None:
    """Add a task's figures of one batch to its cumulative counters (on the driver)."""
    stats.executed += figures.executed
    stats.acked += figures.acked
    stats.failed += figures.failed
    stats.errors_total += figures.errors_total
    stats.busy_secs += figures.busy_secs
    stats.process_secs += figures.process_secs
    stats.process_count += figures.process_count
    for kind, histogram in figures.latencies.items():
        getattr(stats, f"{kind}_latency").merge(histogram)
    for stream, (emitted, transferred) in figures.streams.items():
        counts = stats.routes.setdefault(stream, _StreamCounts())
        counts.emitted += emitted
        counts.transferred += transferred
    stats.errors.extend(figures.errors)


class CorePipeline:
    """How a micro-batch of a core topology runs (the ``Pipeline`` of its
    :class:`~squall.spark.streaming.driver.MicroBatchDriver`).

    A failed attempt (an engine or Spark error: a user exception only fails its tuple)
    is run again by the driver; bolt tasks start it again from their snapshots, so
    state is applied once. Runs on the driver.
    """

    def __init__(
        self,
        core: CorePlan,
        run_key: str,
        setup_path: str,
        spark: SparkSession,
        logs: dict[str, SpoutLog],
        directory: QueryDirectory,
    ) -> None:
        self.core = core
        self.run_key = run_key
        self.setup_path = setup_path
        self.spark = spark
        self.logs = logs
        self.directory = directory
        self.reports = reports_accumulator(spark)
        #: Per bolt task: its counters, and its component's own metrics (last report).
        self.bolts: dict[tuple[str, int], TaskStats] = {
            (stage.component_id, index): TaskStats(stage.component_id, task_id)
            for stage in core.stages
            for index, task_id in enumerate(stage.task_ids)
        }
        self.custom: dict[tuple[str, int], dict[str, float]] = {}
        self.last_tick: dict[str, float] = {}
        #: The roots of the trees that failed or did not complete, per settled batch
        #: whose outcome is not written yet.
        self.failed: dict[int, set[int]] = {}

    def admits(self, batch_id: int, ranges: Ranges) -> bool:
        """Every micro-batch runs."""
        return True

    def absorbs(self, batch_id: int, error: Exception) -> bool:
        """A micro-batch that fails every attempt stops the query."""
        return False

    def finish(self, batch_id: int, ranges: Ranges) -> int:
        """Write the batch's outcome for each spout's source (its trees acked, except
        the failed ones); returns the tuples the spouts emitted into it."""
        failed = self.failed.pop(batch_id, set())
        rows = 0
        for component_id, log in self.logs.items():
            for index in ranges.get(component_id, range(0)):
                log.write_outcome(index, failed)
                rows += log.emitted(index)
        return rows

    def state_commits(self, batch_id: int) -> int:
        """A core topology commits no Trident or transactional state: 0."""
        return 0

    def busy(self) -> dict[Hashable, float]:
        """Busy seconds so far per bolt task (``(component, task index)``)."""
        return {key: stats.busy_secs for key, stats in self.bolts.items()}

    def _ticks(self) -> dict[str, float]:
        """The bolts due a tick tuple at the start of this batch, with their rates."""
        now = time.monotonic()
        due = {}
        for stage in self.core.stages:
            if stage.tick_secs is None:
                continue
            last = self.last_tick.setdefault(stage.component_id, now)
            if now - last >= stage.tick_secs:
                due[stage.component_id] = stage.tick_secs
                self.last_tick[stage.component_id] = now
        return due

    def _producers(self, stage: BoltStagePlan) -> list[str]:
        """The frames ``stage`` reads: the spouts' and earlier stages'."""
        spouts = self.core.spouts
        found = (SOURCES if source in spouts else source for source, _, _ in stage.inputs)
        return list(dict.fromkeys(found))

    def _aligned(self, stage: BoltStagePlan, ticked: bool, ranges: dict[str, range]) -> bool:
        """Whether ``stage`` runs where its input is (no exchange): partition ``i`` of
        its input holds only packets for its task ``i``. So it is when it reads only

        * one spout, the only one, with as many tasks as that spout's batch is read in
          slices, and this micro-batch holds one batch of it (see ``CorePlan.spout_slices``);
        * or local-or-shuffle streams of one bolt with no more tasks than itself
          (partition ``i`` of that bolt sends only to task ``i``).
        """
        if ticked or not stage.inputs:
            return False
        sources = {source for source, _, _ in stage.inputs}
        if len(sources) != 1:
            return False
        source = next(iter(sources))
        if source in self.core.spouts:
            return (
                len(self.core.spouts) == 1
                and len(ranges.get(source, ())) == 1
                and stage.tasks == max(s.tasks for s in self.core.readers(source))
            )
        if any(kind is not GroupingKind.LOCAL_OR_SHUFFLE for _, _, kind in stage.inputs):
            return False
        producer = self.core.stage(next(iter(sources)))
        return producer.tasks <= stage.tasks

    def run_attempt(self, frame: DataFrame, batch_id: int, ranges: Ranges, attempt: int) -> None:
        """Run every bolt's stage of the micro-batch, in topological order."""
        core = self.core
        plan_without_adaptive_execution(frame)
        readers: dict[str, int] = {}
        for stage in core.stages:
            for producer in self._producers(stage):
                readers[producer] = readers.get(producer, 0) + 1
        frames = BatchFrames(frame, readers)
        ticks = self._ticks()
        terminal: list[DataFrame] = []
        for stage in core.stages:
            rate = ticks.get(stage.component_id)
            packets = [] if rate is None else tick_packets(stage.index, stage.tasks, rate)
            if core.sends_metrics(stage):  # every task sends the buckets that ended
                packets.extend(metrics_tick_packets(stage.index, stage.tasks))
            extra = [self.spark.createDataFrame(packets, PACKET_SCHEMA)] if packets else []
            inputs = frames.input_of(stage.index, self._producers(stage), extra)
            if inputs is None:
                continue
            if not self._aligned(stage, bool(packets), ranges):
                inputs = inputs.repartitionById(stage.tasks, "target")
            function = stage_function(
                self.run_key,
                self.setup_path,
                stage.component_id,
                batch_id,
                attempt,
                self.reports,
                LIVE_RUNS.snapshot(),
            )
            output = inputs.mapInArrow(function, PACKET_SCHEMA)
            if readers.get(stage.component_id, 0):
                frames.put(stage.component_id, output)
            else:
                terminal.append(output)
        for output in terminal:
            run_for_effects(output)
        if not core.stages:
            run_for_effects(frame)

    def settle(self, batch_id: int, ranges: Ranges, reports: Reports) -> None:
        """Aggregate the batch's XOR ledger by root id (the spouts' init values and the
        tasks' acks) and fold the task reports into the metrics; the trees that failed
        or did not complete are kept for :meth:`finish`."""
        with collection_paused():
            inits = [
                log.inits(index)
                for component_id, log in self.logs.items()
                for index in ranges.get(component_id, range(0))
            ]
            for report_key, report in reports.items():
                figures = report.figures
                key = (report_key.component_id, report_key.task_index)
                fold_figures(self.bolts[key], figures)
                self.custom[key] = figures.custom
            acks = [report.acks for report in reports.values()]
            fails = chain.from_iterable(report.fails for report in reports.values())
            self.failed[batch_id] = unfinished_trees(inits, acks, fails)

    def component_stats(
        self, capacity: CapacityWindow, figures: BatchFigures
    ) -> dict[str, ComponentStats]:
        """Metrics of every spout and bolt so far; a bolt's capacity is its busiest
        task's (see :mod:`squall.spark.control.capacity`)."""
        core = self.core
        components: dict[str, ComponentStats] = {}
        for component_id in core.spouts:
            stats = self.directory.source(component_id).read_stats()
            if stats is None:
                tasks = core.plan.component_tasks[component_id]
                stats = ComponentStats(component_id, "spout", list(tasks))
            components[component_id] = stats
        now = time.monotonic()
        for stage in core.stages:
            keys = [(stage.component_id, index) for index in range(stage.tasks)]
            summary = summarize(stage.component_id, "bolt", [self.bolts[k] for k in keys], now)
            summary.capacity = max(capacity.capacity(key) for key in keys)
            for key in keys:
                for name, value in self.custom.get(key, {}).items():
                    summary.custom[name] = summary.custom.get(name, 0) + value
            components[stage.component_id] = summary
        return components
