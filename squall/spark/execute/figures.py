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
        self.errors: list[ErrorInfo] = []
        #: Durations of the most recent batches, milliseconds.
        self.recent_ms: deque[float] = deque(maxlen=RECENT_BATCHES)
        #: The most recent batches: (batch id, rows, duration in milliseconds, state
        #: partitions committed).
        self.recent: deque[tuple[int, int, float, int]] = deque(maxlen=RECENT_BATCHES)
        #: The forms of the core the executors' tasks reported running.
        self.executor_cores: set[str] = set()

    def record(self, exc: BaseException) -> None:
        """Keep the error of a failed micro-batch, with its traceback (the newest ten)."""
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.errors.append(
            ErrorInfo(time.time(), "spark", -1, f"{type(exc).__name__}: {exc}", trace)
        )
        del self.errors[:-KEPT_ERRORS]

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
