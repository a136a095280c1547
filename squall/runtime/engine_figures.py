"""The figures an engine reports about a topology beyond its components' counts:
``TopologyInfo.local`` (``LocalCluster``) and ``TopologyInfo.spark`` (``SparkCluster``).

Plain frozen dataclasses, made by the engines on the thread that calls
``get_topology_info`` and read by anything (the ``squall`` command, the web UI, user
code). ``as_dict()`` gives each as the plain dict ``TopologyInfo.extra`` holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: A recent micro-batch: (batch id, rows, duration in milliseconds, state commits).
RecentBatch = tuple[int, int, float, int]
#: The upper bounds, in seconds, of the buckets micro-batch durations are counted in
#: (``QueryFigures.duration_buckets``).
BATCH_DURATION_BUCKETS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass(frozen=True)
class WorkerProcess:
    """One worker process of a topology on ``LocalCluster``.

    Attributes:
        worker: the worker's index (0 to ``topology.workers`` - 1).
        pid: its process id (None before it started).
        restarts: how many times the supervisor restarted it after it died.
    """

    worker: int
    pid: int | None
    restarts: int = 0


@dataclass(frozen=True)
class LocalFigures:
    """What ``LocalCluster`` says of a topology beyond its components' counts.

    Attributes:
        pending: tuple trees emitted by spouts and not yet acked, failed or timed out.
        queued: tuples waiting in the tasks' input queues.
        task_queued: task id -> tuples waiting in its input queue (a queue holding
            ``topology.executor.receive.buffer.size`` tuples or more is full: its
            producers are held back, see ``squall.local.backpressure``).
        ack_messages: messages the workers' ack buffers sent to the ackers (combined
            spout inits and bolt acks).
        executors: component id -> executors (system components included).
        worker_kind: ``"thread"`` or ``"process"`` (see ``topology.worker.kind``).
        worker_processes: the worker processes (``"process"`` workers only).
        transferred_between_workers: tuples sent from one worker process to another.
        dropped_between_workers: tuples lost between worker processes (a worker
            died or its socket broke); their trees time out.
    """

    pending: int = 0
    queued: int = 0
    task_queued: dict[int, int] = field(default_factory=dict)
    ack_messages: int = 0
    executors: dict[str, int] = field(default_factory=dict)
    worker_kind: str = "thread"
    worker_processes: list[WorkerProcess] = field(default_factory=list)
    transferred_between_workers: int = 0
    dropped_between_workers: int = 0

    def as_dict(self) -> dict[str, Any]:
        """These figures under their ``TopologyInfo.extra`` keys (the worker process
        ones only for ``"process"`` workers)."""
        figures: dict[str, Any] = {
            "pending": self.pending,
            "queued": self.queued,
            "ack_messages": self.ack_messages,
            "executors": dict(self.executors),
        }
        if self.worker_kind == "process":
            figures.update(
                worker_kind=self.worker_kind,
                worker_processes=[
                    {"worker": w.worker, "pid": w.pid, "restarts": w.restarts}
                    for w in self.worker_processes
                ],
                transferred_between_workers=self.transferred_between_workers,
                dropped_between_workers=self.dropped_between_workers,
            )
        return figures


@dataclass(frozen=True)
class QueryFigures:
    """The micro-batches of one streaming query of a topology on ``SparkCluster``.

    Attributes:
        batches: micro-batches run.
        last_batch_id: the newest one's id (None before the first).
        last_batch_rows: the rows (tuples) it read.
        last_batch_ms: its wall time, milliseconds.
        median_batch_ms: the median wall time of the recent micro-batches.
        recent_batches: the recent micro-batches, oldest first.
        rows_total: rows read by every micro-batch.
        retries: failed runs of a micro-batch that were run again.
        errors: the errors of those failed runs (the newest ten).
        resumed_from_batch: the batch the query resumed after, when it started from
            its checkpoint (None: it started afresh).
        duration_ms_total: the wall time of every micro-batch, added up, milliseconds.
        duration_buckets: per bound of :data:`BATCH_DURATION_BUCKETS`, the
            micro-batches that took at most that long (cumulative, as a Prometheus
            histogram counts them); empty when not counted.
    """

    batches: int = 0
    last_batch_id: int | None = None
    last_batch_rows: int = 0
    last_batch_ms: float = 0.0
    median_batch_ms: float = 0.0
    recent_batches: list[RecentBatch] = field(default_factory=list)
    rows_total: int = 0
    retries: int = 0
    errors: list[str] = field(default_factory=list)
    resumed_from_batch: int | None = None
    duration_ms_total: float = 0.0
    duration_buckets: tuple[int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """These figures under their ``TopologyInfo.extra`` keys (``resumed_from_batch``
        only when the query resumed; the duration histogram is not among them)."""
        resumed = self.resumed_from_batch
        return {
            **({} if resumed is None else {"resumed_from_batch": resumed}),
            "batches": self.batches,
            "last_batch_id": self.last_batch_id,
            "last_batch_rows": self.last_batch_rows,
            "last_batch_ms": self.last_batch_ms,
            "median_batch_ms": self.median_batch_ms,
            "recent_batches": list(self.recent_batches),
            "rows_total": self.rows_total,
            "retries": self.retries,
            "errors": list(self.errors),
        }


@dataclass(frozen=True)
class SparkFigures:
    """What ``SparkCluster`` says of a topology beyond its components' counts.

    Attributes:
        queries: query name -> its micro-batches, the spout's query first (a core
            topology runs one query, ``"core"``).
        checkpoint_dir: the cluster's checkpoint directory (the topology's checkpoint is
            ``<checkpoint_dir>/<name>``).
        resources: what the session runs on (``"local[2, 4]: 2 cores"``; ``""`` when
            Spark could not say).
        failure: when a query failed (status ``"FAILED"``), one line: the exception
            Spark's message comes from.
        driver_core: the form of squall's core the driver runs: ``"compiled"`` or
            ``"pure"`` (``SQUALL_PURE_PYTHON=1``, or no compiled core installed).
        executor_core: the form the executors' tasks reported running: ``"compiled"``,
            ``"pure"``, ``"compiled and pure"`` when they differ, ``""`` before a task
            ran on an executor.
    """

    queries: dict[str, QueryFigures]
    checkpoint_dir: str
    resources: str = ""
    failure: str | None = None
    driver_core: str = ""
    executor_core: str = ""

    @property
    def first(self) -> QueryFigures:
        """The micro-batches of the first query (the spout's)."""
        return next(iter(self.queries.values()), QueryFigures())

    def as_dict(self) -> dict[str, Any]:
        """These figures under their ``TopologyInfo.extra`` keys: the first query's at
        the top, every query's under ``"queries"``; ``failure``, ``resources`` and the
        cores' forms only when there is one."""
        figures: dict[str, Any] = {
            **self.first.as_dict(),
            "queries": {key: query.as_dict() for key, query in self.queries.items()},
            "checkpoint_dir": self.checkpoint_dir,
        }
        if self.failure:
            figures["failure"] = self.failure
        if self.resources:
            figures["resources"] = self.resources
        if self.driver_core:
            figures["driver_core"] = self.driver_core
        if self.executor_core:
            figures["executor_core"] = self.executor_core
        return figures


__all__ = [
    "BATCH_DURATION_BUCKETS",
    "LocalFigures",
    "QueryFigures",
    "RecentBatch",
    "SparkFigures",
    "WorkerProcess",
]
