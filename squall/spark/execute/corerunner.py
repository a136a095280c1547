"""The driver side of a core topology's micro-batch (the ``foreachBatch`` function).

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
from dataclasses import dataclass
from functools import reduce
from typing import Any

from squall.model.grouping import GroupingKind
from squall.runtime.clock import SYSTEM_CLOCK, Clock
from squall.runtime.metrics import ComponentStats, TaskStats, summarize
from squall.spark.control.capacity import CapacityWindow
from squall.spark.execute.batchrunner import BatchFigures
from squall.spark.execute.bolttasks import ReportsParam, stage_function, tick_packets
from squall.spark.execute.microbatch import plan_without_adaptive_execution, run_for_effects
from squall.spark.execute.retries import BatchRetries
from squall.spark.execute.taskstate import CORE_SCHEMA, collection_paused
from squall.spark.plan.core import BoltStagePlan, CorePlan
from squall.spark.sources.coresource import read_spout_stats, write_outcome
from squall.spark.sources.offsets import OffsetLog
from squall.spark.sources.spoutlog import SpoutLog

#: The frame key of the spouts' packets (one frame: the union of their sources).
SPOUTS = "$spouts"


@dataclass
class _StreamCounts:
    """A stream's counts of one task (what ``summarize`` reads of a route)."""

    emitted: int = 0
    transferred: int = 0


def fold_report(stats: TaskStats, report: dict[str, Any]) -> None:
    """Add a task's report of one batch to its cumulative counters (on the driver)."""
    stats.executed += report["executed"]
    stats.acked += report["acked"]
    stats.failed += report["failed"]
    stats.errors_total += report["errors_total"]
    stats.busy_secs += report["busy_secs"]
    stats.process_secs += report["process_secs"]
    stats.process_count += report["process_count"]
    for stream, (emitted, transferred) in report["streams"].items():
        counts = stats.routes.setdefault(stream, _StreamCounts())
        counts.emitted += emitted
        counts.transferred += transferred
    stats.errors.extend(report["errors"])


class CoreRunner:
    """The ``foreachBatch`` function of a core topology on Spark.

    A failed batch (an engine or Spark error: a user exception only fails its tuple) is
    run again, up to ``topology.spark.batch.retries`` times, each time after the
    back-off of :class:`~squall.spark.retries.BatchRetries` on ``clock``; bolt tasks
    start it again from their snapshots, so state is applied once.
    """

    def __init__(
        self,
        core: CorePlan,
        setup_path: str,
        spark: Any,
        logs: dict[str, SpoutLog],
        offsets: OffsetLog,
        stats_paths: dict[str, str],
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.core = core
        self.setup_path = setup_path
        self.spark = spark
        self.logs = logs
        self.offsets = offsets
        self.stats_paths = stats_paths
        self.reports = spark.sparkContext.accumulator({}, ReportsParam())
        self.figures = BatchFigures()
        self.attempts = BatchRetries(core.conf, self.figures, clock, f"topology {core.name!r}")
        #: Per bolt task: its counters, and its component's own metrics (last report).
        self.bolts: dict[tuple[str, int], TaskStats] = {
            (stage.component_id, index): TaskStats(stage.component_id, task_id)
            for stage in core.stages
            for index, task_id in enumerate(stage.task_ids)
        }
        self.custom: dict[tuple[str, int], dict[str, float]] = {}
        #: Per bolt task: its busy seconds over the recent batches' wall time.
        self.capacity = CapacityWindow()
        self.last_tick: dict[str, float] = {}

    def __call__(self, frame: Any, batch_id: int) -> None:
        started = time.perf_counter()
        ranges = self.offsets.ranges(batch_id)
        failed = self.attempts.run(batch_id, lambda attempt: self._run(frame, batch_id, attempt))
        rows = 0
        for component_id, log in self.logs.items():
            for index in ranges.get(component_id, range(0)):
                write_outcome(log, index, failed)
                rows += log.count(index)
        seconds = time.perf_counter() - started
        self.figures.finished(batch_id, rows, seconds * 1000.0)
        self.capacity.record(seconds, {key: stats.busy_secs for key, stats in self.bolts.items()})

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
        found = (SPOUTS if source in spouts else source for source, _, _ in stage.inputs)
        return list(dict.fromkeys(found))

    def _aligned(self, stage: BoltStagePlan, ticked: bool, ranges: dict[str, range]) -> bool:
        """Whether ``stage`` runs where its input is (no exchange): partition ``i`` of
        its input holds only packets for its task ``i``. So it is when it reads only

        * one spout, the only one, with as many tasks as that spout's batch is read in
          slices, and this micro-batch holds one batch of it (see ``source_slices``);
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

    def _run(self, frame: Any, batch_id: int, attempt: int) -> set[int]:
        from pyspark.sql import DataFrame
        from pyspark.sql.functions import col

        core = self.core
        plan_without_adaptive_execution(frame)
        ranges = self.offsets.ranges(batch_id)
        self.reports.value = {}
        readers: dict[str, int] = {}
        for stage in core.stages:
            for producer in self._producers(stage):
                readers[producer] = readers.get(producer, 0) + 1
        frames: dict[str, Any] = {SPOUTS: frame}
        if readers.get(SPOUTS, 0) > 1:
            frames[SPOUTS] = frame.localCheckpoint(eager=True)
        ticks = self._ticks()
        terminal: list[Any] = []
        for stage in core.stages:
            parts = [frames[p].filter(col("dest") == stage.index) for p in self._producers(stage)]
            rate = ticks.get(stage.component_id)
            if rate is not None:
                packets = tick_packets(stage.index, stage.tasks, rate)
                parts.append(self.spark.createDataFrame(packets, CORE_SCHEMA))
            if not parts:
                continue
            inputs = reduce(DataFrame.unionAll, parts)
            if not self._aligned(stage, rate is not None, ranges):
                inputs = inputs.repartitionById(stage.tasks, "target")
            function = stage_function(
                self.setup_path, stage.component_id, batch_id, attempt, self.reports
            )
            output = inputs.mapInArrow(function, CORE_SCHEMA)
            count = readers.get(stage.component_id, 0)
            if count == 0:
                terminal.append(output)
            elif count > 1:
                frames[stage.component_id] = output.localCheckpoint(eager=True)
            else:
                frames[stage.component_id] = output
        for output in terminal:
            run_for_effects(output)
        if not terminal and SPOUTS in frames and not core.stages:
            run_for_effects(frames[SPOUTS])
        with collection_paused():
            return self._ledger(batch_id, attempt)

    def _ledger(self, batch_id: int, attempt: int) -> set[int]:
        """Aggregate the batch's XOR ledger by root id; fold the task reports into the
        metrics. Returns the roots of trees that failed or did not complete."""
        ranges = self.offsets.ranges(batch_id)
        values: dict[int, int] = {}
        for component_id, log in self.logs.items():
            for index in ranges.get(component_id, range(0)):
                values.update(log.data(index)["inits"])
        failed: set[int] = set()
        reports = self.reports.value
        for (batch, run, component_id, task), report in reports.items():
            if batch != batch_id or run != attempt:
                continue
            fold_report(self.bolts[(component_id, task)], report)
            self.custom[(component_id, task)] = report["custom"]
            for root, value in report["acks"].items():
                current = values.get(root)
                if current is not None:
                    values[root] = current ^ value
            failed.update(report["fails"])
        self.reports.value = {}
        incomplete = {root for root, value in values.items() if value}
        return incomplete | (failed & values.keys())

    def component_stats(self) -> dict[str, ComponentStats]:
        """Metrics of every spout and bolt so far; a bolt's capacity is its busiest
        task's (see :mod:`squall.spark.control.capacity`)."""
        core = self.core
        components: dict[str, ComponentStats] = {}
        for component_id in core.spouts:
            stats = read_spout_stats(self.stats_paths[component_id])
            if stats is None:
                tasks = core.plan.component_tasks[component_id]
                stats = ComponentStats(component_id, "spout", list(tasks))
            components[component_id] = stats
        now = time.monotonic()
        for stage in core.stages:
            keys = [(stage.component_id, index) for index in range(stage.tasks)]
            summary = summarize(stage.component_id, "bolt", [self.bolts[k] for k in keys], now)
            summary.capacity = max(self.capacity.capacity(key) for key in keys)
            for key in keys:
                for name, value in self.custom.get(key, {}).items():
                    summary.custom[name] = summary.custom.get(name, 0) + value
            components[stage.component_id] = summary
        return components
