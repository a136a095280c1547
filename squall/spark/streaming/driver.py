"""The ``foreachBatch`` function of every streaming query squall starts.

One :class:`MicroBatchDriver` runs the micro-batches of a query whatever its plan: it
reads which logged spout batches the micro-batch holds, runs attempts until one
succeeds or the retries run out (with the back-off of
:class:`~squall.spark.streaming.retries.BatchRetries`), folds the tasks' reports of the
attempt that succeeded, and keeps the micro-batch figures and capacity. What differs
between a core topology and a Trident or transactional one (the stages, the XOR
ledger and the spouts' outcomes, DRPC returns) is its :class:`Pipeline`.

Runs on the Spark driver, in the thread Spark calls ``foreachBatch`` in.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Protocol

from squall.model.clock import Clock
from squall.runtime.metrics import ComponentStats
from squall.spark.control.capacity import CapacityWindow
from squall.spark.control.rundir import CheckpointDirectory
from squall.spark.execute.figures import BatchFigures, Reports, ReportsParam
from squall.spark.streaming.retries import BatchRetries

if TYPE_CHECKING:
    from pyspark.accumulators import Accumulator
    from pyspark.sql import DataFrame, SparkSession

#: Source id -> the indexes of its logged batches in a micro-batch.
Ranges = dict[str, range]


class Pipeline(Protocol):
    """The per-plan part of running a micro-batch (core, or Trident/transactional).

    Every method runs on the driver, in the ``foreachBatch`` thread, except
    ``component_stats`` (any thread).
    """

    #: The accumulator of :class:`~squall.spark.execute.figures.TaskReport` its tasks
    #: report to (see :func:`reports_accumulator`).
    reports: Accumulator[Reports]

    def admits(self, batch_id: int, ranges: Ranges) -> bool:
        """Whether micro-batch ``batch_id`` is run at all."""

    def run_attempt(self, frame: DataFrame, batch_id: int, ranges: Ranges, attempt: int) -> None:
        """Run every stage of attempt ``attempt`` (from 0) of the micro-batch; its
        tasks add their reports to ``reports``.

        Raises:
            Exception: the attempt failed (it is run again while retries are left).
        """

    def settle(self, batch_id: int, ranges: Ranges, reports: Reports) -> None:
        """The attempt succeeded: fold its tasks' ``reports`` into the figures."""

    def absorbs(self, batch_id: int, error: Exception) -> bool:
        """Every attempt failed with ``error`` at the last: True if the micro-batch
        fails alone and the query goes on, False to stop the query."""

    def finish(self, batch_id: int, ranges: Ranges) -> int:
        """After the micro-batch (settled or absorbed): its tuples, counted."""

    def state_commits(self, batch_id: int) -> int:
        """After :meth:`finish`: the state partitions the micro-batch committed (each
        task of a stage that updates state commits its partition for the batch's
        transaction; 0 for a core topology)."""

    def busy(self) -> dict[Hashable, float]:
        """Busy seconds so far (cumulative) per capacity key."""

    def component_stats(
        self, capacity: CapacityWindow, figures: BatchFigures
    ) -> dict[str, ComponentStats]:
        """The metrics of every component so far."""


class MicroBatchDriver:
    """The ``foreachBatch`` function of one query: ``driver(frame, batch_id)``.

    Micro-batch ``batch_id`` is transaction ``batch_id + 1``. A failed attempt is run
    again under the same id, up to ``topology.spark.batch.retries`` times; killing the
    topology (:meth:`stop`) ends a wait and runs no further attempt.

    Args:
        pipeline: the plan's part of running a micro-batch.
        checkpoint: the query's checkpoint (its offset log).
        conf: the topology's configuration (retry and back-off keys).
        name: the topology's name (in configuration errors).
        clock: what the waits between attempts sleep on.

    Raises:
        InvalidTopologyError: a retry or back-off setting is invalid.
    """

    def __init__(
        self,
        pipeline: Pipeline,
        checkpoint: CheckpointDirectory,
        conf: dict[str, Any],
        name: str,
        clock: Clock,
    ) -> None:
        self.pipeline = pipeline
        self.checkpoint = checkpoint
        self.figures = BatchFigures()
        self.capacity = CapacityWindow()
        self.attempts = BatchRetries(conf, self.figures, clock, f"topology {name!r}")

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        ranges = self.checkpoint.ranges(batch_id)
        if not self.pipeline.admits(batch_id, ranges):
            return

        reports = self.pipeline.reports

        def attempt(number: int) -> None:
            reports.value = {}
            self.pipeline.run_attempt(frame, batch_id, ranges, number)
            produced: Reports = reports.value
            reports.value = {}
            ours = {
                k: r for k, r in produced.items() if (k.batch_id, k.attempt) == (batch_id, number)
            }
            self.pipeline.settle(batch_id, ranges, ours)
            self.figures.executor_cores.update(r.core for r in ours.values() if r.core)

        try:
            self.attempts.run(batch_id, attempt)
        except Exception as exc:
            if self.attempts.stopping or not self.pipeline.absorbs(batch_id, exc):
                raise
        rows = self.pipeline.finish(batch_id, ranges)
        commits = self.pipeline.state_commits(batch_id)
        seconds = time.perf_counter() - started
        self.figures.finished(batch_id, rows, seconds * 1000.0, commits)
        self.capacity.record(seconds, self.pipeline.busy())

    def stop(self) -> None:
        """The topology is being killed: an interrupted micro-batch is not run again."""
        self.attempts.stop()

    def component_stats(self) -> dict[str, ComponentStats]:
        """The metrics of every component of the query so far (any thread)."""
        return self.pipeline.component_stats(self.capacity, self.figures)


def reports_accumulator(spark: SparkSession) -> Accumulator[Reports]:
    """A new accumulator of task reports (on the driver)."""
    return spark.sparkContext.accumulator({}, ReportsParam())
