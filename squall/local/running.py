"""A topology running on the local engine: its tasks, workers and metrics."""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from squall.local import heap
from squall.local.backpressure import SPOUT_QUEUE_LIMIT, build_gates
from squall.local.exchange import Exchange, report_on
from squall.local.rebalance import (
    RebalanceRequest,
    refresh_local_routes,
    task_collectors,
    tick_dues,
)
from squall.local.scope import ProcessScope
from squall.local.submission import SubmittedTopology
from squall.local.worker import TickSchedule, Worker
from squall.model.clock import Clock
from squall.model.config import Config, component_config
from squall.model.errors import InvalidTopologyError, SquallError
from squall.model.hooks import ReportsMetrics, implements
from squall.model.topology import StormTopology
from squall.model.tuple import Tuple
from squall.runtime.acker import ACKER_COMPONENT
from squall.runtime.collectors import (
    AckBuffer,
    BoltCollector,
    SpoutCollector,
    TaskWiring,
)
from squall.runtime.context import TaskContext
from squall.runtime.engine_figures import LocalFigures
from squall.runtime.metrics import TaskStats, TopologyInfo
from squall.runtime.routing import build_routes
from squall.runtime.task_metrics import TaskMetrics, has_metrics_consumers
from squall.runtime.tasks import BoltRunner, SpoutRunner, TaskRunner
from squall.state.wiring import spout_checkpointing

logger = logging.getLogger("squall")

EmitListener = Callable[[str, str, int, Sequence[Any], list[int]], None]
"""``listener(component_id, stream_id, task_id, values, targets)`` after each user emit."""


def _instance_for_task(spec_component: Any, component_id: str) -> Any:
    try:
        return copy.deepcopy(spec_component)
    except Exception as exc:
        raise InvalidTopologyError(
            f"component {component_id!r}: cannot make a copy of "
            f"{type(spec_component).__name__} for each task ({type(exc).__name__}: {exc}); "
            "create unshareable resources (connections, files, locks) in open/prepare"
        ) from exc


def _execution_order(topology: StormTopology, runners: list[TaskRunner]) -> list[TaskRunner]:
    """Spouts first, then bolts by their depth from the spouts (bolts no spout reaches
    after those), the acker last; tasks of the same depth by task id."""
    depth = topology.depths_from_spouts()
    last = len(depth) + 1

    def key(runner: TaskRunner) -> tuple[int, int]:
        if runner.component_id == ACKER_COMPONENT:
            return (last + 1, runner.task_id)
        return (depth.get(runner.component_id, last), runner.task_id)

    return sorted(runners, key=key)


class RunningTopology(SubmittedTopology):
    """Builds live tasks from a topology and runs them on worker threads.

    Control calls (``activate``, ``deactivate``, ``rebalance``, ``kill``) take turns:
    each waits for the one running to end (``kill`` cuts a rebalance's wait short).
    """

    def __init__(
        self,
        name: str,
        conf: dict[str, Any],
        topology: StormTopology,
        clock: Clock,
        emit_listener: EmitListener | None = None,
        coordination_store: Any = None,
        process: ProcessScope | None = None,
    ) -> None:
        super().__init__(name, conf, topology)
        self.clock = clock
        self.coordination_store = coordination_store
        self.started_at = time.monotonic()
        self.status = "INACTIVE"
        self.inboxes: list[deque[Tuple]] = [deque() for _ in range(self.plan.max_task_id + 1)]
        self.runners: dict[int, TaskRunner] = {}
        self._control = threading.Lock()
        #: Set while a rebalance holds the control lock (see ``_steering``).
        self._rebalancing = threading.Event()
        self._killed = threading.Event()
        #: Acker messages sent by the ack buffers of workers a rebalance removed.
        self._retired_ack_messages = 0
        #: In a worker process: the worker it runs, and how it reaches the others.
        self.process = process
        #: Whether the heap is frozen for this topology (see squall.local.heap).
        self._holds_heap = False
        self.exchange: Exchange | None = None
        if process is not None:
            self.exchange = process.exchange(self.topology, self.plan, self.inboxes)
        self._build_runners(emit_listener)
        self._wire_backpressure()
        if self.exchange is not None:
            self.exchange.report = report_on({t: r.stats for t, r in self.runners.items()})
            self.exchange.pending_of = {
                task: _pending_of(runner)
                for task, runner in self.runners.items()
                if isinstance(runner, SpoutRunner)
            }
        self.workers = self._build_workers()

    def _runs_here(self, task_id: int) -> bool:
        """Whether this process runs ``task_id`` (every task, unless it is a worker
        process)."""
        return self.process is None or self.plan.task_worker[task_id] == self.process.index

    def _build_runners(self, emit_listener: EmitListener | None) -> None:
        conf = self.conf
        acker_tasks = self.plan.component_tasks.get(ACKER_COMPONENT, [])
        tracking = bool(acker_tasks)
        timeouts = tracking and bool(conf[Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS])
        timeout_ms = (
            float(conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS]) * 1000.0 if timeouts else None
        )
        # In a worker process, the ackers of other workers take bulk messages.
        remote_ackers = frozenset(task for task in acker_tasks if not self._runs_here(task))
        self.ack_buffers = [
            AckBuffer(self.inboxes, acker_tasks, remote_ackers)
            for _ in range(self.plan.num_workers)
        ]
        throttle = float(conf[Config.TOPOLOGY_ERROR_THROTTLE_INTERVAL_SECS])
        max_errors = int(conf[Config.TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL])
        metrics = has_metrics_consumers(conf)
        for spec in self.topology:
            task_conf = component_config(conf, spec.conf)
            debug = bool(task_conf.get(Config.TOPOLOGY_DEBUG))
            for task_id in self.plan.component_tasks[spec.component_id]:
                if not self._runs_here(task_id):
                    continue
                component = _instance_for_task(spec.component, spec.component_id)
                context = TaskContext(
                    self.topology,
                    self.plan,
                    task_id,
                    self.name,
                    task_conf,
                    self.clock,
                    self.coordination_store,
                )
                routes = build_routes(self.topology, self.plan, context)
                stats = TaskStats(spec.component_id, task_id, throttle, max_errors)
                inbox = self.inboxes[task_id]
                wiring = TaskWiring(
                    spec.component_id,
                    task_id,
                    routes,
                    self.inboxes,
                    stats,
                    acker_tasks,
                    self.ack_buffers[self.plan.task_worker[task_id]],
                )
                runner: SpoutRunner | BoltRunner
                if spec.is_spout:
                    max_pending = task_conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING)
                    runner = SpoutRunner(
                        component,
                        context,
                        task_conf,
                        SpoutCollector(wiring, self.clock),
                        inbox,
                        int(max_pending) if max_pending and tracking else None,
                        timeout_ms,
                    )
                    if remote_ackers:  # a worker process: its trees' ackers in it
                        runner.collector.prefer_ackers(set(acker_tasks) - remote_ackers)
                    runner.checkpointing = spout_checkpointing(
                        self.topology, spec, component, runner.collector, wiring, context, conf
                    )
                else:
                    runner = BoltRunner(component, context, task_conf, BoltCollector(wiring), inbox)
                if not spec.system:
                    observer = self._observer(spec.component_id, emit_listener, debug)
                    runner.collector.set_observer(observer)
                    if metrics:
                        runner.metrics = TaskMetrics(context, stats, spec.is_spout, conf)
                self.runners[task_id] = runner

    def _observer(
        self, component_id: str, listener: EmitListener | None, debug: bool
    ) -> Callable[[str, int, Sequence[Any], list[int]], None] | None:
        if listener is None and not debug:
            return None

        def observe(stream: str, task: int, values: Sequence[Any], targets: list[int]) -> None:
            if debug:
                logger.info(
                    "Emitting: %s:%d %s %s -> %s", component_id, task, stream, list(values), targets
                )
            if listener is not None:
                listener(component_id, stream, task, values, targets)

        return observe

    def _wire_backpressure(self) -> None:
        """Give every task its output gate and every spout the bolts' queues to watch
        (both depend on tasks only, not on which worker runs them)."""
        high_water = int(self.conf[Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE])
        bolt_inboxes = [
            self.inboxes[task]
            for spec in self.topology
            if not spec.is_spout
            for task in self.plan.component_tasks[spec.component_id]
        ]

        # Spouts wait for short queues (see squall.local.backpressure).
        spout_limit = min(high_water, SPOUT_QUEUE_LIMIT)

        def backpressure() -> bool:
            return max(map(len, bolt_inboxes), default=0) > spout_limit

        gates = build_gates(
            self.topology,
            self.plan,
            self.inboxes,
            {task: runner.stats.routes for task, runner in self.runners.items()},
            high_water,
        )
        for task, runner in self.runners.items():
            runner.gate = gates[task]
            if isinstance(runner, SpoutRunner):
                runner.backpressure = backpressure

    def _build_workers(
        self, adopted: bool = False, dues: Mapping[int, float] | None = None
    ) -> list[Worker]:
        """A worker per the plan's workers, with its tasks and tick schedules.

        Args:
            adopted: the tasks are open already (a rebalance moves them).
            dues: task id -> when its next tick is due (kept across a rebalance).
        """
        idle_sleep = float(self.conf[Config.TOPOLOGY_SLEEP_SPOUT_WAIT_STRATEGY_TIME_MS]) / 1000.0
        workers = []
        for index in range(self.plan.num_workers):
            if self.process is not None and index != self.process.index:
                continue
            runners = [r for t, r in self.runners.items() if self.plan.task_worker[t] == index]
            schedules: dict[tuple[float, float], TickSchedule] = {}
            for runner in runners:
                freq = runner.conf.get(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS)
                if runner.is_spout or not freq:
                    continue
                period = round(float(freq) * 1000.0, 3)  # whole microseconds: 2.007 s -> 2007 ms
                due = (dues or {}).get(runner.task_id, 0.0)
                key = (period, due)
                if key not in schedules:
                    schedules[key] = TickSchedule(period, freq, [], due)
                schedules[key].inboxes.append(runner.inbox)
            workers.append(
                Worker(
                    f"squall-{self.name}-worker-{index}",
                    _execution_order(self.topology, runners),
                    self.clock,
                    list(schedules.values()),
                    idle_sleep,
                    self.ack_buffers[index],
                    adopted,
                    self.exchange,
                )
            )
        return workers

    def start(self, active: bool = True) -> None:
        """Open/prepare every task, then run. Raises ``ComponentError`` if any start fails,
        ``InvalidTopologyError`` (before any task opens) for a bad
        ``topology.worker.gc.freeze`` or ``topology.worker.gc.threshold``."""
        freeze = heap.freeze_wanted(self.conf, in_process_worker=self.process is not None)
        young_threshold = heap.young_threshold_wanted(self.conf)
        for worker in self.workers:
            worker.start()
        for worker in self.workers:
            worker.ready.wait()
        errors = [w.start_error for w in self.workers if w.start_error is not None]
        if errors:
            for worker in self.workers:
                worker.release(False)
            for worker in self.workers:
                worker.join()
            raise errors[0]
        if active:
            self._set_spouts_active(True, before_release=True)
        if self.process is None and freeze:
            heap.hold(self)
            self._holds_heap = True
        if self.process is None:
            heap.raise_threshold(self, young_threshold)
        for worker in self.workers:
            worker.release(True)
        self.status = "ACTIVE" if active else "INACTIVE"

    def _spout_runners(self, worker: Worker) -> list[SpoutRunner]:
        return [r for r in worker.runners if isinstance(r, SpoutRunner)]

    def _set_spouts_active(self, active: bool, before_release: bool = False) -> None:
        commands = []
        for worker in self.workers:
            spouts = self._spout_runners(worker)
            commands.append(worker.call(_activation_all(spouts, active)))
        if before_release:
            return  # the workers are parked before their loops: the calls run at start
        for command in commands:
            command.done.wait()

    @contextmanager
    def _steering(self, action: str) -> Iterator[None]:
        """Hold the control lock for ``action``: as in Storm, a topology being
        rebalanced takes no other change until the rebalance is done (the call raises
        at once instead of waiting out the rebalance's wait).

        Raises:
            SquallError: a rebalance holds the lock.
        """
        while not self._control.acquire(timeout=0.05):
            if self._rebalancing.is_set():
                raise SquallError(
                    f"topology {self.name!r} is rebalancing: it cannot {action} until the "
                    "rebalance is done (a kill can)"
                )
        try:
            yield
        finally:
            self._control.release()

    def activate(self) -> None:
        """Resume ``next_tuple`` calls (spouts' ``activate`` runs on their threads).

        Raises:
            SquallError: the topology is being rebalanced.
        """
        with self._steering("be activated"):
            self._set_spouts_active(True)
            self.status = "ACTIVE"

    def deactivate(self) -> None:
        """Stop ``next_tuple`` calls; returns once every spout task has stopped.

        Raises:
            SquallError: the topology is being rebalanced.
        """
        with self._steering("be deactivated"):
            self._set_spouts_active(False)
            self.status = "INACTIVE"

    def rebalance(self, request: RebalanceRequest) -> None:
        """Run the topology on ``request.num_workers`` workers with
        ``request.executors`` executors per component (see :mod:`squall.local.rebalance`).

        Runs on the caller's thread: deactivates the spouts (status ``REBALANCING``),
        waits ``request.wait_secs``, moves every task to its new worker between two of
        its batches, then restores the activation there was. Returns once the new
        workers run. No task is closed or opened again, and no tuple, ack, pending
        tree or tick is lost or repeated.

        Raises:
            SquallError: the topology is killed (before the call, or during the wait:
                the layout is then left as it was), or another rebalance runs.
        """
        with self._steering("be rebalanced again"):
            if self._killed.is_set():
                raise SquallError(f"topology {self.name!r} is being killed")
            previous = self.status
            self._rebalancing.set()
            self._set_spouts_active(False)
            self.status = "REBALANCING"
            try:
                if request.wait_secs > 0 and self._killed.wait(request.wait_secs):
                    raise SquallError(f"topology {self.name!r} was killed before its rebalance ran")
                num_workers = request.num_workers or self.plan.num_workers
                self._move_tasks(num_workers, request.executors)
            finally:
                if not self._killed.is_set():
                    # The status first: while it says REBALANCING, no spout emits.
                    self.status = previous
                    if previous == "ACTIVE":
                        self._set_spouts_active(True)
                self._rebalancing.clear()

    def _move_tasks(self, num_workers: int, executors: Mapping[str, int]) -> None:
        """Hand every task over from the workers there are to new ones dealt for
        ``num_workers`` workers and ``executors``; returns once each new worker has run
        a loop turn. Call with the control lock held."""
        old = self.workers
        for worker in old:
            worker.hand_over()
        for worker in old:
            worker.join()
        dues = tick_dues(old)
        self.plan.change_layout(num_workers, executors)
        self._resize_ack_buffers(num_workers)
        for task, runner in self.runners.items():
            buffer = self.ack_buffers[self.plan.task_worker[task]]
            for collector in task_collectors(runner):
                collector.use_ack_buffer(buffer)
        refresh_local_routes(self.topology, self.plan, self.runners.values())
        self._record_layout(num_workers, executors)
        workers = self._build_workers(adopted=True, dues=dues)
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.release(True)
        self.workers = workers
        turns = [worker.call(_no_action) for worker in workers]
        for turn in turns:
            turn.done.wait()

    def _resize_ack_buffers(self, num_workers: int) -> None:
        """One ack buffer per worker: the first ones kept, extra ones retired (all are
        empty: their workers flushed them as they stopped)."""
        buffers = self.ack_buffers
        acker_tasks = self.plan.component_tasks.get(ACKER_COMPONENT, [])
        for retired in buffers[num_workers:]:
            self._retired_ack_messages += retired.messages_sent
        kept = buffers[:num_workers]
        kept.extend(AckBuffer(self.inboxes, acker_tasks) for _ in range(num_workers - len(kept)))
        self.ack_buffers = kept

    def is_drained(self) -> bool:
        """No tuple queued anywhere, no ack buffered, every worker idle."""
        if any(self.inboxes) or any(b.acks for b in self.ack_buffers):
            return False
        return all(w.is_idle() for w in self.workers)

    def is_idle(self) -> bool:
        """Drained, and no tuple tree pending at any spout."""
        if not self.is_drained():
            return False
        for runner in self.runners.values():
            if isinstance(runner, SpoutRunner) and (
                runner.collector.pending or runner.collector.completed
            ):
                return False
        return True

    def wait_idle(self, timeout_secs: float, pending_too: bool = True) -> bool:
        """Wait until ``is_idle`` (or, without ``pending_too``, ``is_drained``) holds twice
        in a row; False on timeout."""
        return holds_twice(self.is_idle if pending_too else self.is_drained, timeout_secs, 0.002)

    def kill(self, wait_secs: float) -> None:
        """Deactivate, let queued tuples drain (up to ``wait_secs``), then stop every
        worker; ``close``/``cleanup`` run on the workers' threads; all threads are joined.

        Draining processes what is queued, acks included; it does not wait for trees
        held by a bolt that never acks them (those would only time out). A rebalance
        waiting its ``wait_secs`` stops waiting (and raises) so the kill can proceed.
        """
        self._killed.set()
        with self._control:
            self.status = "KILLED"
            self._set_spouts_active(False)
            if wait_secs > 0:
                self.wait_idle(wait_secs, pending_too=False)
            for worker in self.workers:
                worker.stop()
            for worker in self.workers:
                worker.join()
            if self._holds_heap:
                self._holds_heap = False
                heap.release(self)
            heap.restore_threshold(self)

    def threads(self) -> list[Any]:
        """The worker threads (for tests that check nothing is left behind)."""
        return [w.thread for w in self.workers]

    def info(self) -> TopologyInfo:
        """A metrics snapshot of every component."""
        now = time.monotonic()
        runners = self.runners

        def custom_of(task: int) -> Mapping[str, float]:
            component = runners[task].component
            return component.metrics() if implements(component, ReportsMetrics) else {}

        components = self._summaries(lambda _, task: runners[task].stats, custom_of, now)
        return TopologyInfo(
            name=self.name,
            status=self.status,
            uptime_secs=now - self.started_at,
            workers=self.plan.num_workers,
            components=components,
            local=LocalFigures(
                pending=sum(
                    r.pending_count for r in self.runners.values() if isinstance(r, SpoutRunner)
                ),
                queued=sum(len(q) for q in self.inboxes),
                task_queued={task: len(runner.inbox) for task, runner in runners.items()},
                ack_messages=self._retired_ack_messages
                + sum(b.messages_sent for b in self.ack_buffers),
                executors=self.plan.component_executors(),
            ),
        )


def holds_twice(check: Callable[[], bool], timeout_secs: float, pause_secs: float) -> bool:
    """Poll ``check`` every ``pause_secs`` until it holds twice in a row (True), or
    ``timeout_secs`` pass (False)."""
    deadline = time.monotonic() + timeout_secs
    while time.monotonic() < deadline:
        if check():
            time.sleep(pause_secs)
            if check():
                return True
        time.sleep(pause_secs)
    return False


def _pending_of(runner: SpoutRunner) -> Callable[[], int]:
    collector = runner.collector

    def pending() -> int:
        return len(collector.pending) + len(collector.completed)

    return pending


def _no_action() -> None:
    """A command that does nothing: waiting for it waits for a worker's loop turn."""


def _activation_all(runners: list[SpoutRunner], active: bool) -> Callable[[], None]:
    def run() -> None:
        for runner in runners:
            runner.set_active(active)

    return run


__all__ = ["EmitListener", "RunningTopology"]
