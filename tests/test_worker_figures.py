"""A task's counters over several runs (``TaskStats.plus``) and a process topology's
figures over its worker processes' lives (``WorkerFigures``), without processes."""

from __future__ import annotations

from squall.local.figures import WorkerFigures
from squall.local.workerprocess import WorkerReport
from squall.runtime.metrics import RouteCounts, TaskStats, summarize


def run_of(task: int, executed: int, busy: float, emitted: int, error: str = "") -> TaskStats:
    stats = TaskStats("bolt", task)
    stats.executed = stats.acked = executed
    stats.busy_secs = busy
    stats.routes = {"default": RouteCounts(emitted, 2 * emitted)}
    if error:
        stats.record_error(error)
    return stats.snapshot()


def test_plus_adds_counts_and_streams_merges_errors_and_keeps_the_later_capacity() -> None:
    earlier = run_of(1, executed=10, busy=4.0, emitted=7, error="first")
    later = run_of(1, executed=3, busy=1.0, emitted=2, error="second")
    later.routes["other"] = RouteCounts(1, 1)
    later._capacity_samples.extend([(100.0, 0.0), (110.0, 0.5)])
    total = earlier.plus(later)
    assert (total.executed, total.acked, total.busy_secs, total.errors_total) == (13, 13, 5.0, 2)
    assert {s: (r.emitted, r.transferred) for s, r in total.routes.items()} == {
        "default": (9, 18),
        "other": (1, 1),
    }
    assert [e.error for e in total.errors] == ["first", "second"]
    # later was busy 1.0 s of the 10 s since its first sample: the earlier run's busy
    # time does not count in it
    assert total.capacity(110.0) == later.capacity(110.0) == 0.1
    assert (earlier.executed, later.executed) == (10, 3)  # neither changed
    assert earlier.stopped().capacity(110.0) == 0.0


def test_worker_figures_carry_what_an_ended_process_counted() -> None:
    figures = WorkerFigures()
    first, second, successor = object(), object(), object()
    figures.started(first)
    figures.started(second)
    figures.seen(first, WorkerReport(stats={1: run_of(1, 5, 0.0, 5)}, ack_messages=4, pending=2))
    figures.seen(second, WorkerReport(stats={2: run_of(2, 8, 0.0, 8)}, ack_messages=1))
    figures.ended(first)  # died: its latest figures are carried
    figures.seen(first, WorkerReport(stats={1: run_of(1, 99, 0.0, 99)}))  # too late: ignored
    figures.started(successor)
    total = figures.combined({successor: WorkerReport(stats={1: run_of(1, 2, 0.0, 2)}, pending=3)})
    assert {task: stats.executed for task, stats in total.stats.items()} == {1: 7, 2: 8}
    assert (total.ack_messages, total.pending) == (5, 3)  # pending: fresh reports only
    component = summarize("bolt", "bolt", [total.stats[1], total.stats[2]], 0.0)
    assert (component.emitted, component.transferred) == (15, 30)
    figures.ended(second, WorkerReport(stats={2: run_of(2, 9, 0.0, 9)}))  # its final figures
    figures.ended(second)  # not running any more: nothing happens
    total = figures.combined({})
    assert {task: stats.executed for task, stats in total.stats.items()} == {1: 7, 2: 9}
