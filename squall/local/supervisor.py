"""A topology whose workers are processes: Storm's supervisor, on one machine.

:class:`ProcessTopology` starts ``topology.workers`` worker processes
(:mod:`squall.local.workerprocess`), each running the tasks the plan deals to its
worker, and supervises them from a thread of the submitting process:

* a worker process that dies (a crash, ``SIGKILL``, the out-of-memory killer) is
  started again with the same tasks, which ``open``/``prepare`` again; the tuple trees
  it held time out at their spouts and are replayed (acked trees are not affected);
* ``kill`` deactivates the spouts, drains, then stops every process (their tasks
  ``close``/``cleanup``) and waits for them;
* the metrics cover the topology's whole life: the supervisor reads every worker
  process's figures every ``METRICS_POLL_SECS``, and what a process that died or
  stopped for a rebalance had counted is added to what its successor counts (see
  :mod:`squall.local.figures`);
* no worker process outlives the submitting process (see
  :mod:`squall.local.workerprocess`).

Processes start from a fork server (``multiprocessing``'s ``forkserver``), a clean
single-threaded process that has imported squall: starting a worker costs tens of
milliseconds, and no lock or thread of the submitting process is inherited.
Components reach the workers pickled (cloudpickle; user modules by value).
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.spawn as spawn
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from squall.drpc.bridge import LocalDRPCBridges, dumps_bridged
from squall.local import workerprocess
from squall.local.board import Board
from squall.local.figures import WorkerFigures
from squall.local.rebalance import RebalanceRequest
from squall.local.running import holds_twice
from squall.local.scratch import owned_directory
from squall.local.submission import SubmittedTopology
from squall.local.workerprocess import WorkerReport, WorkerSpec
from squall.model.config import Config
from squall.model.errors import ComponentError, InvalidTopologyError, SquallError
from squall.model.topology import StormTopology
from squall.runtime.engine_figures import LocalFigures, WorkerProcess
from squall.runtime.metrics import TaskStats, TopologyInfo
from squall.runtime.shipping import check_picklable, pickle_by_value

if TYPE_CHECKING:
    from multiprocessing.context import ForkServerContext

logger = logging.getLogger("squall")

#: Where errors say components are sent.
DESTINATION = "a worker process"
#: Longest wait between two attempts to start a worker that keeps failing to start.
RESTART_BACKOFF_MAX_SECS = 10.0
#: How often the supervisor reads every worker process's figures, so that those of a
#: process that dies are kept (what it counted since the last read is lost).
METRICS_POLL_SECS = 1.0

_context_lock = threading.Lock()
_context: ForkServerContext | None = None
_starting = threading.local()
_preparation_data = spawn.get_preparation_data


def _without_main(name: str) -> dict[str, Any]:
    """``multiprocessing``'s preparation data, without the main module when a worker
    process starts: components travel pickled (user code by value), so a worker has
    no use for the main script, which would otherwise run again in every worker (and
    cannot, for a program read from standard input or a notebook)."""
    data: dict[str, Any] = _preparation_data(name)
    if getattr(_starting, "worker", False):
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
    return data


def process_context() -> ForkServerContext:
    """The ``multiprocessing`` context worker processes start from: a fork server that
    has imported the worker's code."""
    global _context
    with _context_lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["squall.local.workerprocess"])
            spawn.get_preparation_data = _without_main
            _context = context
        return _context


#: The prefix of topology directories (see :func:`_topology_directory`).
DIRECTORY_PREFIX = "squall-workers-"


def _topology_directory() -> Path:
    """A new directory for a topology's sockets and board: in memory (``/dev/shm``)
    where there is one, owned by this process (see :mod:`squall.local.scratch`)."""
    shm = "/dev/shm"
    base = Path(shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else tempfile.gettempdir())
    return owned_directory(DIRECTORY_PREFIX, base)


class _Handle:
    """The supervisor's side of one worker process: requests take turns."""

    def __init__(self, index: int, process: Any, control: Connection) -> None:
        self.index = index
        self.process = process
        self.control = control
        self.lock = threading.Lock()

    def alive(self) -> bool:
        """Whether the process runs."""
        return bool(self.process.is_alive())

    def receive(self) -> tuple[Any, ...] | None:
        """The process's next message; None once it is gone."""
        control = self.control
        try:
            while not control.poll(0.1):
                if not self.process.is_alive() and not control.poll(0):
                    return None
            message: tuple[Any, ...] = control.recv()
            return message
        except (EOFError, OSError):
            return None

    def request(self, message: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """Send ``message`` and wait for the answer; None if the process is gone."""
        with self.lock:
            return self._exchange(message)

    def request_unless_busy(self, message: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """:meth:`request`, unless another request to the process is under way (None
        then, at once)."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            return self._exchange(message)
        finally:
            self.lock.release()

    def _exchange(self, message: tuple[Any, ...]) -> tuple[Any, ...] | None:
        try:
            self.control.send(message)
        except (OSError, ValueError):
            return None
        return self.receive()

    def close(self) -> None:
        """Wait briefly for the process to exit, kill it if it does not, release it.

        Takes the request lock: a request under way on another thread (the figures of a
        process that just died) ends first, so it never reads from a closed connection,
        nor from a new worker's pipe that reused the closed one's descriptor."""
        with self.lock:
            self.process.join(10.0)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
            self.control.close()


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "is gone"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class ProcessTopology(SubmittedTopology):
    """A topology running in worker processes, supervised from this process.

    Offers what :class:`~squall.local.running.RunningTopology` offers the cluster
    (``start``, ``activate``, ``deactivate``, ``rebalance``, ``kill``, ``wait_idle``,
    ``info``); control calls take turns.

    Args:
        name: the topology's name.
        conf: its configuration (squall's defaults under it).
        topology: the submitted topology.
        coordination_dir: where transactional coordination state lives when the
            configuration names no directory (shared by the processes).

    Raises:
        InvalidTopologyError: the topology is invalid, a component cannot be pickled
            (naming it and its attribute), or what it was compiled from refuses worker
            processes (``BatchIR.check_worker_processes``: a Trident query of a state each
            process keeps in memory that cannot be sent to the process holding its key).
    """

    def __init__(
        self,
        name: str,
        conf: dict[str, Any],
        topology: StormTopology,
        coordination_dir: Path,
    ) -> None:
        super().__init__(name, conf, topology)
        if topology.batch_ir is not None:
            topology.batch_ir.check_worker_processes(name)
        for spec in topology:
            check_picklable(spec.component, spec.component_id, DESTINATION)
        pickle_by_value(topology)
        self._coordination_dir = coordination_dir
        self.status = "INACTIVE"
        self.started_at = time.monotonic()
        self._control = threading.Lock()
        self._killed = threading.Event()
        self._stopping = threading.Event()
        self._handles: list[_Handle] = []
        #: Worker index -> how many times its process was started again.
        self.restarts: dict[int, int] = {}
        self._figures: WorkerFigures[_Handle] = WorkerFigures()
        #: How many times the supervisor has read every worker process's figures.
        self.metrics_polls = 0
        self._supervisor: threading.Thread | None = None
        #: The bridges through which worker processes reach a LocalDRPC of this one.
        self._drpc_bridges = LocalDRPCBridges()
        self.directory = _topology_directory()
        self.board = Board(
            self.directory / "board", self.plan.num_workers, self.plan.max_task_id + 1, True
        )
        self._payload = self._pickle()

    def _pickle(self) -> bytes:
        conf = dict(self.conf)
        if not conf.get(Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR):
            conf[Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR] = str(self._coordination_dir)
        worker_tasks: dict[int, list[int]] = {}
        for task, worker in sorted(self.plan.task_worker.items()):
            worker_tasks.setdefault(worker, []).append(task)
        spec = WorkerSpec(
            self.name,
            conf,
            self.user_topology,
            str(self.directory),
            self.plan.num_workers,
            self.plan.max_task_id + 1,
            worker_tasks,
        )
        try:
            return dumps_bridged(spec, self._drpc_bridges)
        except Exception as exc:
            raise InvalidTopologyError(
                f"topology {self.name!r} cannot be sent to its worker processes: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    # Starting --------------------------------------------------------------------------

    def _spawn(self, index: int) -> _Handle:
        context = process_context()
        parent_end, child_end = context.Pipe()
        process = context.Process(
            target=workerprocess.main,
            args=(self._payload, index, child_end),
            name=f"squall-{self.name}-worker-{index}",
            daemon=True,
        )
        _starting.worker = True
        try:
            process.start()
        finally:
            _starting.worker = False
        child_end.close()
        return _Handle(index, process, parent_end)

    @staticmethod
    def _await_ready(handle: _Handle) -> ComponentError | None:
        """None once ``handle``'s tasks are open/prepared, else what went wrong (with
        the user's exception as its cause, when it could be sent)."""
        message = handle.receive()
        if message is None:
            return ComponentError(
                f"worker process {handle.index} {_exit_reason(handle.process.exitcode)} "
                "while starting"
            )
        if message[0] == "ready":
            return None
        error = ComponentError(str(message[1]))
        error.__cause__ = message[2]
        return error

    def start(self, active: bool = True) -> None:
        """Start every worker process; returns once every task is open/prepared and
        running. Raises ``ComponentError`` if any start fails (nothing keeps running)."""
        handles = [self._spawn(index) for index in range(self.plan.num_workers)]
        errors = [self._await_ready(handle) for handle in handles]
        failed = [error for error in errors if error is not None]
        if failed:
            for handle, error in zip(handles, errors, strict=True):
                if error is None:
                    handle.request(("stop",))
                handle.close()
            self._release_resources()
            raise failed[0]
        for handle in handles:
            self._figures.started(handle)
            handle.request(("go", active))
        self._handles = handles
        self.status = "ACTIVE" if active else "INACTIVE"
        self._supervisor = threading.Thread(
            target=self._supervise, name=f"squall-{self.name}-supervisor", daemon=True
        )
        self._supervisor.start()

    # Supervision -----------------------------------------------------------------------

    def _supervise(self) -> None:
        """Start again every worker process that dies, and read every process's
        figures every ``METRICS_POLL_SECS``, until the topology stops."""
        next_poll = time.monotonic() + METRICS_POLL_SECS
        while not self._stopping.is_set():
            handles = {handle.process.sentinel: handle for handle in self._handles}
            for sentinel in wait(list(handles), timeout=0.1):
                if self._stopping.is_set():
                    return
                self._restart(handles[sentinel])
            if time.monotonic() >= next_poll and not self._stopping.is_set():
                self._poll_figures()
                next_poll = time.monotonic() + METRICS_POLL_SECS

    def _poll_figures(self) -> None:
        """Read every running worker process's figures (a process busy answering
        another request is read at the next poll)."""
        for handle in list(self._handles):
            answer = handle.request_unless_busy(("info",))
            if answer is not None and answer[0] == "info":
                self._figures.seen(handle, answer[1])
        self.metrics_polls += 1

    def _restart(self, dead: _Handle) -> None:
        index = dead.index
        logger.warning(
            "topology %r: worker process %d (pid %s) %s; starting it again with its tasks",
            self.name,
            index,
            dead.process.pid,
            _exit_reason(dead.process.exitcode),
        )
        self._figures.ended(dead)
        dead.close()
        backoff = 0.1
        while not self._stopping.is_set():
            handle = self._spawn(index)
            error = self._await_ready(handle)
            if error is None:
                with self._steering_for_restart() as steering:
                    if not steering:
                        handle.request(("stop",))
                        handle.close()
                        return
                    self._figures.started(handle)
                    handle.request(("go", self.status == "ACTIVE"))
                    self._handles[index] = handle
                    self.restarts[index] = self.restarts.get(index, 0) + 1
                return
            handle.close()
            logger.error(
                "topology %r: worker process %d failed to start again: %s",
                self.name,
                index,
                error,
            )
            self._stopping.wait(backoff)
            backoff = min(RESTART_BACKOFF_MAX_SECS, backoff * 2)

    @contextmanager
    def _steering_for_restart(self) -> Iterator[bool]:
        """The control lock, unless the topology is stopping (yields False then)."""
        while not self._control.acquire(timeout=0.05):
            if self._stopping.is_set():
                yield False
                return
        try:
            yield not self._stopping.is_set()
        finally:
            self._control.release()

    # Control ---------------------------------------------------------------------------

    def _set_spouts_active(self, active: bool) -> None:
        for handle in list(self._handles):
            handle.request(("activate", active))

    def activate(self) -> None:
        """Resume ``next_tuple`` calls in every worker process."""
        with self._control:
            self._set_spouts_active(True)
            self.status = "ACTIVE"

    def deactivate(self) -> None:
        """Stop ``next_tuple`` calls; returns once every spout task has stopped."""
        with self._control:
            self._set_spouts_active(False)
            self.status = "INACTIVE"

    def rebalance(self, request: RebalanceRequest) -> None:
        """Run on ``request.num_workers`` worker processes with ``request.executors``
        executors per component, as Storm does: the spouts stop (status
        ``REBALANCING``), the call waits ``request.wait_secs``, every worker process
        stops (its tasks ``close``/``cleanup``) and the new ones start (their tasks
        ``open``/``prepare`` again), then the activation there was comes back. Tuple
        trees still pending when the processes stop end with them: a reliable spout
        replays them from its source when it opens again.

        Raises:
            SquallError: the topology is killed meanwhile, or a task fails to start
                again (the topology is then stopped).
        """
        with self._control:
            if self._killed.is_set():
                raise SquallError(f"topology {self.name!r} is being killed")
            previous = self.status
            self._set_spouts_active(False)
            self.status = "REBALANCING"
            if request.wait_secs > 0 and self._killed.wait(request.wait_secs):
                raise SquallError(f"topology {self.name!r} was killed before its rebalance ran")
            self._stop_processes()
            num_workers = request.num_workers or self.plan.num_workers
            self.plan.change_layout(num_workers, request.executors)
            self._record_layout(num_workers, request.executors)
            self.board.close()
            (self.directory / "board").unlink()
            self.board = Board(
                self.directory / "board", num_workers, self.plan.max_task_id + 1, True
            )
            self._payload = self._pickle()
            self._stopping.clear()
            self.status = "INACTIVE"
            try:
                self.start(active=previous == "ACTIVE")
            except ComponentError as exc:
                self.status = "KILLED"
                raise SquallError(
                    f"topology {self.name!r} could not start again after its rebalance: {exc}"
                ) from exc

    def kill(self, wait_secs: float) -> None:
        """Deactivate, let queued tuples drain (up to ``wait_secs``), then stop every
        worker process (``close``/``cleanup`` run in them) and wait for them."""
        self._killed.set()
        with self._control:
            self.status = "KILLED"
            self._set_spouts_active(False)
            if wait_secs > 0:
                self.wait_idle(wait_secs, pending_too=False)
            self._stop_processes()
            self._release_resources()

    def _stop_processes(self) -> None:
        """Stop supervising, then stop every worker process and wait for it."""
        self._stopping.set()
        if self._supervisor is not None:
            self._supervisor.join()
            self._supervisor = None
        handles, self._handles = self._handles, []
        for handle in handles:
            with handle.lock, suppress(OSError, ValueError):
                handle.control.send(("stop",))
        for handle in handles:
            with handle.lock:
                answer = handle.receive()
            final = answer[1] if answer is not None and answer[0] == "stopped" else None
            self._figures.ended(handle, final)
            handle.close()

    def _release_resources(self) -> None:
        self._drpc_bridges.stop()
        self.board.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # Reading ---------------------------------------------------------------------------

    def threads(self) -> list[threading.Thread]:
        """The supervising thread (for tests that check nothing is left behind)."""
        return [self._supervisor] if self._supervisor is not None else []

    def processes(self) -> list[Any]:
        """The worker processes (``multiprocessing.Process`` objects), by worker index."""
        return [handle.process for handle in self._handles]

    def is_drained(self) -> bool:
        """No tuple queued or in flight anywhere, every worker process idle."""
        return self._settled(spouts=False)

    def is_idle(self) -> bool:
        """Drained, and no tuple tree pending at any spout."""
        return self._settled(spouts=True)

    def _settled(self, spouts: bool) -> bool:
        handles = list(self._handles)
        if len(handles) != self.plan.num_workers or not all(h.alive() for h in handles):
            return False
        spout_tasks = (
            [
                task
                for spec in self.topology
                if spec.is_spout
                for task in self.plan.component_tasks[spec.component_id]
            ]
            if spouts
            else []
        )
        tasks = sorted(self.plan.task_worker)
        return self.board.drained(range(self.plan.num_workers), tasks, spout_tasks)

    def wait_idle(self, timeout_secs: float, pending_too: bool = True) -> bool:
        """Wait until ``is_idle`` (or, without ``pending_too``, ``is_drained``) holds twice
        in a row; False on timeout."""
        return holds_twice(self.is_idle if pending_too else self.is_drained, timeout_secs, 0.005)

    def reports(self) -> dict[_Handle, WorkerReport]:
        """Every running worker process's figures now."""
        reports = {}
        for handle in list(self._handles):
            answer = handle.request(("info",))
            if answer is not None and answer[0] == "info":
                reports[handle] = answer[1]
        return reports

    def info(self) -> TopologyInfo:
        """A metrics snapshot of every component over the topology's whole life: the
        figures of every worker process now, plus those of the processes that ran
        before them (see :mod:`squall.local.figures`)."""
        total = self._figures.combined(self.reports())
        now = time.monotonic()
        stats, custom = total.stats, total.custom
        components = self._summaries(
            lambda component_id, task: stats.get(task) or TaskStats(component_id, task),
            lambda task: custom.get(task, {}),
            now,
        )
        return TopologyInfo(
            name=self.name,
            status=self.status,
            uptime_secs=now - self.started_at,
            workers=self.plan.num_workers,
            components=components,
            local=LocalFigures(
                pending=total.pending,
                queued=total.queued,
                task_queued=dict(total.task_queued),
                ack_messages=total.ack_messages,
                executors=self.plan.component_executors(),
                worker_kind="process",
                worker_processes=[
                    WorkerProcess(
                        handle.index, handle.process.pid, self.restarts.get(handle.index, 0)
                    )
                    for handle in list(self._handles)
                ],
                transferred_between_workers=total.sent,
                dropped_between_workers=total.dropped,
            ),
        )


__all__ = ["ProcessTopology", "process_context"]
