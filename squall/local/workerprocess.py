"""A worker process of the local engine: one worker's tasks, run as a worker thread
does, with its peers reached through sockets.

The supervising process (:mod:`squall.local.supervisor`) starts it with the pickled
topology and a control connection, and talks to it in request/reply messages over
that connection:

* the process answers ``("ready",)`` once its tasks are open/prepared (or
  ``("failed", message, cause)`` and exits: ``cause`` is the user's exception, or None
  if it cannot be pickled);
* ``("go", active)``: run (the spouts activated first if ``active``);
* ``("activate", active)``: activate or deactivate the spouts; answered once done;
* ``("info",)``: answered with this worker's :class:`WorkerReport`;
* ``("stop",)``: stop the loop, ``close``/``cleanup`` every task, answer, exit.

The process dies with its supervisor: Linux kills it when the process that forked it
exits (``PR_SET_PDEATHSIG``), and it stops by itself when its control connection ends.
"""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import signal
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from squall.local import heap
from squall.local.board import Board
from squall.local.running import RunningTopology
from squall.local.scope import ProcessScope
from squall.local.transport import Links
from squall.local.worker import Worker
from squall.model.clock import SYSTEM_CLOCK
from squall.model.errors import ComponentError
from squall.model.hooks import ReportsMetrics, implements
from squall.runtime.metrics import TaskStats
from squall.runtime.tasks import SpoutRunner

logger = logging.getLogger("squall")

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class WorkerSpec:
    """What every worker process of a topology is started from (pickled once)."""

    name: str
    conf: dict[str, Any]
    topology: Any
    directory: str
    num_workers: int
    num_slots: int
    #: Worker index -> its task ids.
    worker_tasks: dict[int, list[int]]


@dataclass
class WorkerReport:
    """One worker's figures, as the supervisor aggregates them."""

    stats: dict[int, TaskStats] = field(default_factory=dict)
    custom: dict[int, dict[str, float]] = field(default_factory=dict)
    pending: int = 0
    queued: int = 0
    #: Task id -> tuples waiting in its input queue.
    task_queued: dict[int, int] = field(default_factory=dict)
    ack_messages: int = 0
    sent: int = 0
    received: int = 0
    dropped: int = 0


def _die_with_parent() -> None:
    """Ask Linux to kill this process when the process that started it exits."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the control connection still ends it
        pass


def main(payload: bytes, index: int, control: Connection) -> None:
    """The worker process: runs worker ``index`` of the pickled :class:`WorkerSpec`
    until told to stop (or its supervisor is gone)."""
    _die_with_parent()
    try:
        spec: WorkerSpec = pickle.loads(payload)
        directory = Path(spec.directory)
        board = Board(directory / "board", spec.num_workers, spec.num_slots, create=False)
        board.reset_worker(index, spec.worker_tasks.get(index, []))
        links = Links(directory, index)
        running = RunningTopology(
            spec.name,
            spec.conf,
            spec.topology,
            SYSTEM_CLOCK,
            process=ProcessScope(index, board, links),
        )
    except BaseException as exc:
        control.send(("failed", _describe(exc), _picklable_cause(exc)))
        return
    worker = running.workers[0]
    worker.start()
    worker.ready.wait()
    if worker.start_error is not None:
        worker.release(False)
        worker.join()
        control.send(
            ("failed", _describe(worker.start_error), _picklable_cause(worker.start_error))
        )
        return
    if heap.freeze_wanted(spec.conf, in_process_worker=True):
        heap.freeze_now()  # the process is the engine's: its start-up heap stays
    heap.set_young_threshold(heap.young_threshold_wanted(spec.conf))
    control.send(("ready",))
    _serve(control, running, worker)
    links.close()
    board.close()


def _describe(error: BaseException) -> str:
    """The error's message, with the traceback of its cause (a user's exception)."""
    text = f"{error}" if isinstance(error, ComponentError) else f"{type(error).__name__}: {error}"
    cause = error.__cause__ or error
    trace = "".join(traceback.format_exception(type(cause), cause, cause.__traceback__))
    return f"{text}\n{trace}"


def _picklable_cause(error: BaseException) -> BaseException | None:
    """The user's exception behind ``error``, if it survives pickling (the supervisor
    sets it as the cause of the error it raises)."""
    cause = error.__cause__ or error
    try:
        pickle.loads(pickle.dumps(cause))
    except Exception:
        return None
    return cause


def _activation(worker: Worker, active: bool) -> Callable[[], None]:
    spouts = [r for r in worker.runners if isinstance(r, SpoutRunner)]

    def run() -> None:
        for runner in spouts:
            runner.set_active(active)

    return run


def _serve(control: Connection, running: RunningTopology, worker: Worker) -> None:
    """Answer the supervisor's requests until told to stop or it is gone."""
    while True:
        try:
            message = control.recv()
        except (EOFError, OSError):
            _orphaned(worker)
            return
        kind = message[0]
        if kind == "go":
            if message[1]:
                worker.call(_activation(worker, True))
            worker.release(True)
            control.send(("ok",))
        elif kind == "activate":
            command = worker.call(_activation(worker, bool(message[1])))
            command.done.wait()
            control.send(("ok",))
        elif kind == "info":
            control.send(("info", report(running)))
        elif kind == "stop":
            worker.stop()
            worker.join()
            control.send(("stopped", report(running)))
            return
        else:
            control.send(("error", f"unknown request {kind!r}"))


def _orphaned(worker: Worker) -> None:
    """The supervisor is gone: stop (closing the tasks), and exit whatever happens."""
    logger.warning("worker process %d: its supervisor is gone; stopping", os.getpid())
    worker.stop()
    stopper = threading.Timer(10.0, os._exit, args=(1,))
    stopper.daemon = True
    stopper.start()
    worker.join()


def report(running: RunningTopology) -> WorkerReport:
    """This worker's figures (read from the control thread: a moment stale, never
    torn, as ``get_topology_info`` reads a worker thread's)."""
    result = WorkerReport()
    for task, runner in running.runners.items():
        result.stats[task] = runner.stats.snapshot()
        component = runner.component
        if implements(component, ReportsMetrics):
            try:
                result.custom[task] = dict(component.metrics())
            except Exception as exc:  # a user's metrics() raising must not kill the worker
                result.custom[task] = {}
                logger.error("task %d: metrics() raised %s: %s", task, type(exc).__name__, exc)
        if isinstance(runner, SpoutRunner):
            result.pending += runner.pending_count
        result.queued += len(runner.inbox)
        result.task_queued[task] = len(runner.inbox)
    result.ack_messages = sum(b.messages_sent for b in running.ack_buffers)
    exchange = running.exchange
    if exchange is not None:
        result.sent = exchange.sent
        result.received = exchange.received
        result.dropped = exchange.dropped
    return result


__all__ = ["WorkerReport", "WorkerSpec", "main", "report"]
