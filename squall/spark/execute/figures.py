"""The figures of a Spark topology: what each task reports about a micro-batch, and
what the driver keeps about the micro-batches themselves.

A task's :class:`TaskReport` of one attempt of one micro-batch travels to the driver
in a Spark accumulator (:class:`ReportsParam`), keyed by :class:`ReportKey`: merging
replaces, so a Spark task run twice (a retried task, a recomputed stage) reports once.
Stages that run on the driver add their reports to the same accumulator. The driver
folds the reports of the attempt that succeeded (see ``streaming.driver``).
"""

from __future__ import annotations

import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from pyspark.accumulators import AccumulatorParam

from squall.runtime.engine_figures import BATCH_DURATION_BUCKETS
from squall.runtime.latency import LatencyHistogram
from squall.runtime.metrics import ErrorInfo
from squall.spark.errors import FailureSource, component_failure, failure_in_text
from squall.spark.execute.ledger import LedgerPart

#: Batches whose durations ``get_topology_info`` summarizes (median).
RECENT_BATCHES = 100
#: Errors of failed micro-batches kept (the newest).
KEPT_ERRORS = 10


class ReportKey(NamedTuple):
    """Which task reports on which attempt of which micro-batch."""

    batch_id: int
    attempt: int
    component_id: str
    task_index: int


@dataclass
class TaskFigures:
    """What one task did in one micro-batch, or (summed) over many.

    Every stage fills ``executed`` (tuples in), ``emitted`` (emit calls),
    ``transferred`` (tuples sent to tasks) and ``busy_secs`` (time running the task);
    a core bolt task adds its acking counts, errors, latencies, the counts of each
    output stream and its component's own metrics.
    """

    executed: int = 0
    emitted: int = 0
    transferred: int = 0
    busy_secs: float = 0.0
    acked: int = 0
    failed: int = 0
    errors_total: int = 0
    errors: list[ErrorInfo] = field(default_factory=list)
    process_secs: float = 0.0
    process_count: int = 0
    #: Latencies of the batch (ms) by kind: ``"execute"`` and ``"process"``.
    latencies: dict[str, LatencyHistogram] = field(default_factory=dict)
    #: Output stream -> ``(emitted, transferred)``.
    streams: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: The component's own metrics (its ``metrics()``), as last reported.
    custom: dict[str, float] = field(default_factory=dict)

    def add(self, other: TaskFigures) -> None:
        """Add ``other``'s counts and latencies to these (stage totals on the driver)."""
        self.executed += other.executed
        self.emitted += other.emitted
        self.transferred += other.transferred
        self.busy_secs += other.busy_secs
        for kind, histogram in other.latencies.items():
            mine = self.latencies.get(kind)
            if mine is None:
                self.latencies[kind] = histogram.copy()
            else:
                mine.merge(histogram)


@dataclass
class TaskReport:
    """A task's figures of one attempt of a micro-batch, with its part of the XOR
    ledger when tuple trees are tracked (core bolt tasks)."""

    figures: TaskFigures
    #: Root id -> the XOR of the task's acks for it.
    acks: LedgerPart = field(default_factory=LedgerPart)
    #: Roots the task failed explicitly.
    fails: list[int] = field(default_factory=list)
    #: The form of squall's core the task's process runs (``"compiled"``, ``"pure"``),
    #: for a task run on an executor; ``""`` for one run on the driver.
    core: str = ""


Reports = dict[ReportKey, TaskReport]


class ReportsParam(AccumulatorParam):
    """Task reports by key: merging replaces (a Spark task run twice reports once)."""

    def zero(self, value: Reports) -> Reports:
        return {}

    def addInPlace(self, value1: Reports, value2: Reports) -> Reports:
        value1.update(value2)
        return value1


class BatchFigures:
    """What ``get_topology_info`` reports about a query's micro-batches.

    Written on the driver, by the thread Spark calls ``foreachBatch`` in (and by
    ``wait_idle`` when the query failed); read by ``get_topology_info``.
    """

    def __init__(self) -> None:
        self.batches = 0
        self.last_batch_id: int | None = None
        self.last_rows = 0
        self.last_duration_ms = 0.0
        self.duration_ms_total = 0.0
        #: Per bound of ``BATCH_DURATION_BUCKETS``, the batches that took at most that.
        self.duration_buckets = [0] * len(BATCH_DURATION_BUCKETS)
        self.rows_total = 0
        self.retries = 0
        #: The errors of failed micro-batches (every one, the newest ten).
        self.errors: list[ErrorInfo] = []
        #: Component id -> the errors of failed micro-batches its code raised (the
        #: newest ten), and how many it raised in all.
        self.component_errors: dict[str, list[ErrorInfo]] = {}
        self.component_errors_total: dict[str, int] = {}
        #: The errors of failed micro-batches no component's code raised (an engine or
        #: Spark error; the newest ten), and how many there were in all.
        self.engine_errors: list[ErrorInfo] = []
        self.engine_errors_total = 0
        #: Durations of the most recent batches, milliseconds.
        self.recent_ms: deque[float] = deque(maxlen=RECENT_BATCHES)
        #: The most recent batches: (batch id, rows, duration in milliseconds, state
        #: partitions committed).
        self.recent: deque[tuple[int, int, float, int]] = deque(maxlen=RECENT_BATCHES)
        #: The forms of the core the executors' tasks reported running.
        self.executor_cores: set[str] = set()

    def record(self, exc: BaseException, attribute: bool = True) -> None:
        """Keep the error of a failed micro-batch, with its traceback (the newest ten),
        and, if ``attribute`` and a component's code raised it (see
        :func:`~squall.spark.errors.component_failure`), that component's error: the
        exception's line and the traceback where the task ran, under the component and
        task that raised it, as the local engine reports it (not a ``FailedException``,
        which fails the batch without an error, unless a ``ReportedFailedException``)."""
        now = time.time()
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        error = ErrorInfo(now, "spark", -1, f"{type(exc).__name__}: {exc}", trace)
        self.errors.append(error)
        del self.errors[:-KEPT_ERRORS]
        if not attribute:
            return
        source = component_failure(exc)
        if source is None:
            self._engine_error(error)
        elif source.reported:
            self._component_error(source, now)

    def record_stop(self, error: BaseException | str) -> None:
        """The query stopped with ``error`` (an exception, or Spark's message of the
        query's end): if a component's code raised it, report it in that component's
        errors, unless it is the error of the failed micro-batch that stopped the query,
        reported already (the same component, task, line and traceback as the
        component's newest error). Called once per query."""
        found = failure_in_text(error) if isinstance(error, str) else component_failure(error)
        if found is None or not found.reported:
            return
        kept = self.component_errors.get(found.component_id, [])
        newest = kept[-1] if kept else None
        if newest is not None and (newest.task_id, newest.error, newest.traceback) == (
            found.task_id,
            found.error,
            found.traceback,
        ):
            return
        self._component_error(found, time.time())

    def _engine_error(self, error: ErrorInfo) -> None:
        self.engine_errors.append(error)
        del self.engine_errors[:-KEPT_ERRORS]
        self.engine_errors_total += 1

    def _component_error(self, source: FailureSource, now: float) -> None:
        cid = source.component_id
        kept = self.component_errors.setdefault(cid, [])
        kept.append(ErrorInfo(now, cid, source.task_id, source.error, source.traceback))
        del kept[:-KEPT_ERRORS]
        self.component_errors_total[cid] = self.component_errors_total.get(cid, 0) + 1

    def errors_of(self, component_id: str) -> tuple[list[ErrorInfo], int]:
        """The errors of failed micro-batches ``component_id``'s code raised (the
        newest ten, oldest first), and how many it raised in all."""
        errors = list(self.component_errors.get(component_id, ()))
        return errors, self.component_errors_total.get(component_id, 0)

    def finished(self, batch_id: int, rows: int, duration_ms: float, commits: int = 0) -> None:
        """Count batch ``batch_id`` of ``rows`` tuples, done in ``duration_ms``, which
        committed ``commits`` state partitions."""
        self.batches += 1
        self.last_batch_id = batch_id
        self.last_rows = rows
        self.rows_total += rows
        self.last_duration_ms = duration_ms
        self.duration_ms_total += duration_ms
        for index, bound in enumerate(BATCH_DURATION_BUCKETS):
            if duration_ms <= bound * 1000.0:
                self.duration_buckets[index] += 1
        self.recent_ms.append(duration_ms)
        self.recent.append((batch_id, rows, duration_ms, commits))
