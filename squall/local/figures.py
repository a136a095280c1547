"""A process topology's figures over its whole life.

Each worker process counts only what it did itself, so a process started again after
its predecessor died would count from zero. :class:`WorkerFigures` keeps, for each
running worker process, the latest figures read from it (the supervisor reads them
every ``METRICS_POLL_SECS``, a second; every metrics read refreshes them too), and,
once a process has ended, carries those figures (or, when it stopped on request, its
final ones) over: they are added to what the processes running now count. What a
process counted after its figures were last read and before it died is lost.

Where it runs: the supervisor's thread (polls, deaths, restarts, stops) and any thread
reading the topology's metrics; one lock keeps them apart. Nothing here talks to a
process.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from typing import Generic, TypeVar

from squall.local.workerprocess import WorkerReport
from squall.runtime.metrics import TaskStats

#: Counters of a :class:`WorkerReport` that add up over processes (the others are
#: gauges: what the processes hold now).
_REPORT_COUNTERS = ("ack_messages", "sent", "received", "dropped")

#: What a worker process is known by.
P = TypeVar("P", bound=Hashable)


def _add_stats(into: dict[int, TaskStats], stats: Mapping[int, TaskStats]) -> None:
    for task, counters in stats.items():
        earlier = into.get(task)
        into[task] = counters if earlier is None else earlier.plus(counters)


class WorkerFigures(Generic[P]):
    """The figures of the worker processes that ran or run one topology.

    A process is known by a hashable token ``P`` (the supervisor uses its handle on
    the process), from :meth:`started` to :meth:`ended`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Running processes -> the latest figures read from them.
        self._latest: dict[P, WorkerReport] = {}
        #: What the processes that ended counted, per task.
        self._carried_stats: dict[int, TaskStats] = {}
        #: What the processes that ended counted, apart from their tasks.
        self._carried = WorkerReport()

    def started(self, process: P) -> None:
        """``process`` runs: it counts from zero."""
        with self._lock:
            self._latest[process] = WorkerReport()

    def seen(self, process: P, report: WorkerReport) -> None:
        """``report`` was read from ``process`` (ignored once it has ended)."""
        with self._lock:
            if process in self._latest:
                self._latest[process] = report

    def ended(self, process: P, final: WorkerReport | None = None) -> None:
        """``process`` is gone: its ``final`` figures (a process that stopped on
        request reports them) or, without them, the latest read from it are carried
        over. Nothing happens for a process not running."""
        with self._lock:
            latest = self._latest.pop(process, None)
            if latest is None:
                return
            report = latest if final is None else final
            _add_stats(
                self._carried_stats,
                {task: stats.stopped() for task, stats in report.stats.items()},
            )
            for name in _REPORT_COUNTERS:
                setattr(self._carried, name, getattr(self._carried, name) + getattr(report, name))

    def combined(self, fresh: Mapping[P, WorkerReport]) -> WorkerReport:
        """The topology's figures: ``fresh`` reports (just read from running processes)
        are noted, then the counts of every process that ran are added up (the latest
        figures of the running ones, what the ended ones carried over); the gauges
        (``pending``, ``queued``, ``task_queued``) and the components' own metrics (``custom``) are
        those of the ``fresh`` reports only."""
        with self._lock:
            for process, report in fresh.items():
                if process in self._latest:
                    self._latest[process] = report
            total = WorkerReport(stats=dict(self._carried_stats))
            for name in _REPORT_COUNTERS:
                setattr(total, name, getattr(self._carried, name))
            for report in self._latest.values():
                _add_stats(total.stats, report.stats)
                for name in _REPORT_COUNTERS:
                    setattr(total, name, getattr(total, name) + getattr(report, name))
        for report in fresh.values():
            total.custom.update(report.custom)
            total.pending += report.pending
            total.queued += report.queued
            total.task_queued.update(report.task_queued)
        return total


__all__ = ["WorkerFigures"]
