"""A worker of the local engine: one thread running its tasks cooperatively.

Storm runs each executor on a thread; in CPython the GIL makes that slower, not faster,
for CPU-bound tuples (measured: thread hand-offs cost more than the work). So a worker
runs its executors' tasks in one loop, a bounded batch each in turn, and a topology
gets parallel threads by asking for more workers (``topology.workers``). A task's
methods are therefore never called concurrently, and always from its worker's thread.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from squall.local.exchange import Exchange
from squall.model.clock import Clock, set_current_clock
from squall.model.errors import ComponentError
from squall.model.tuple import SYSTEM_TASK_ID, TICK_STREAM_INFO, Tuple
from squall.runtime.collectors import AckBuffer
from squall.runtime.task_metrics import MetricsSchedule, due_buckets, metrics_schedules
from squall.runtime.tasks import TaskRunner

SPIN_ROUNDS = 16
BOLT_BATCH = 2048
SPOUT_BATCH = 128


@dataclass
class TickSchedule:
    """Tick tuples every ``period_ms`` into ``inboxes`` (the tasks of one frequency),
    the next one at ``next_due`` (clock milliseconds; set when the worker starts, unless
    it adopts running tasks)."""

    period_ms: float
    rate_secs: Any
    inboxes: list[deque[Tuple]]
    next_due: float = 0.0


@dataclass
class _Command:
    action: Callable[[], Any]
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class Worker:
    """Runs a list of task runners on one thread until stopped.

    Lifecycle: ``start()`` opens/prepares every task on the new thread and reports through
    ``ready``; the thread then waits for ``release(go)`` (all workers of a topology start
    together, or none does). ``stop()`` ends the loop; ``close``/``cleanup`` run on the
    worker thread before it exits.

    A rebalance moves tasks between workers without closing them: ``hand_over()`` ends
    the loop between two rounds and leaves the tasks open, and a worker built with
    ``adopted=True`` runs tasks that are open already (it neither opens nor restarts
    their tick periods) and closes them when it stops.
    """

    def __init__(
        self,
        name: str,
        runners: list[TaskRunner],
        clock: Clock,
        ticks: list[TickSchedule],
        idle_sleep_secs: float,
        ack_buffer: AckBuffer,
        adopted: bool = False,
        exchange: Exchange | None = None,
    ) -> None:
        self.name = name
        self.runners = runners
        self.clock = clock
        self.ticks = ticks
        self.idle_sleep_secs = idle_sleep_secs
        self.ack_buffer = ack_buffer
        self.ready = threading.Event()
        self.start_error: ComponentError | None = None
        self.idle_rounds = 0
        self._go = threading.Event()
        self._proceed = False
        self._stop_requested = False
        self._handing_over = False
        self._adopted = adopted
        #: In a worker process: how tuples reach other workers' tasks, and come in.
        self.exchange = exchange
        self._commands: deque[_Command] = deque()
        self._started: list[TaskRunner] = []
        #: The time buckets of the tasks' metrics (when the topology has consumers).
        self._metrics: list[MetricsSchedule] = []
        self._loop_thread = threading.Thread(target=self._main, name=name, daemon=True)

    @property
    def thread(self) -> threading.Thread:
        """The worker's thread."""
        return self._loop_thread

    def start(self) -> None:
        """Start the thread; it opens/prepares the tasks, then waits for ``release``."""
        self._loop_thread.start()

    def release(self, proceed: bool) -> None:
        """Let the worker run (``proceed``) or shut it down after start-up."""
        self._proceed = proceed
        self._go.set()

    def call(self, action: Callable[[], Any]) -> _Command:
        """Run ``action`` on the worker thread at its next loop turn; wait on ``.done``."""
        command = _Command(action)
        if not self._loop_thread.is_alive():
            command.done.set()
            return command
        self._commands.append(command)
        return command

    def stop(self) -> None:
        """Ask the loop to end (non-blocking); ``join`` waits for the thread."""
        self._stop_requested = True
        self._go.set()

    def hand_over(self) -> None:
        """Ask the loop to end after its current round, leaving every task open (they
        move to other workers). Non-blocking; ``join`` waits for the thread, which runs
        the commands queued and flushes its ack buffer before it exits."""
        self._handing_over = True
        self._stop_requested = True
        self._go.set()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to finish."""
        self._loop_thread.join(timeout)

    def is_idle(self) -> bool:
        """True when the last two loop turns found no work and every inbox is empty."""
        if self.idle_rounds < 2:
            return False
        return not any(runner.inbox for runner in self.runners)

    def _main(self) -> None:
        # The tasks' code reads the topology's clock through squall.utils.Time.
        set_current_clock(self.clock)
        try:
            if self._adopted:
                self._started = list(self.runners)
            else:
                self._start_tasks()
            # Buckets end every period from now (after a rebalance: from the move).
            self._metrics = metrics_schedules(self._started, self.clock.now_ms())
            self.ready.set()
            self._go.wait()
            if self._proceed and not self._stop_requested and self.start_error is None:
                self._loop()
        finally:
            self._run_commands()
            self.ack_buffer.flush()
            if self.exchange is not None:
                self.exchange.turn(0)
            if not self._handing_over:
                for runner in self._started:
                    runner.stop()
            self.ready.set()

    def _start_tasks(self) -> None:
        for runner in self.runners:
            try:
                runner.start()
            except Exception as exc:
                kind = "open" if runner.is_spout else "prepare"
                error = ComponentError(
                    f"component {runner.component_id!r} task {runner.task_id}: {kind} "
                    f"raised {type(exc).__name__}: {exc}"
                )
                error.__cause__ = exc
                runner.stats.record_error(exc)
                self.start_error = error
                break
            self._started.append(runner)
        # Tick periods start now, before submit returns, not when the loop starts.
        now = self.clock.now_ms()
        for schedule in self.ticks:
            schedule.next_due = now + schedule.period_ms

    def _loop(self) -> None:
        clock = self.clock
        runners = self.runners
        limits = [SPOUT_BATCH if r.is_spout else BOLT_BATCH for r in runners]
        pairs = list(zip(runners, limits, strict=True))
        flush_acks = self.ack_buffer.flush
        exchange = self.exchange
        next_sample = 0.0
        while not self._stop_requested:
            if self._commands:
                self._run_commands()
            now = clock.now_ms()
            if self.ticks:
                self._deliver_ticks(now)
            if self._metrics:
                for schedule in due_buckets(self._metrics, now):
                    for runner in schedule.tasks:
                        runner.metrics_tick(schedule.bucket_secs)
            done = 0
            for runner, limit in pairs:
                done += runner.run_batch(limit, now)
            flush_acks()
            if exchange is not None:
                done += exchange.turn(done)
            wall = time.monotonic()
            if wall >= next_sample:
                next_sample = wall + 1.0
                for runner in runners:
                    runner.stats.sample_capacity(wall)
            if done:
                self.idle_rounds = 0
                continue
            self.idle_rounds += 1
            if self.idle_rounds < SPIN_ROUNDS:
                time.sleep(0)
            elif exchange is None:
                time.sleep(self.idle_sleep_secs)
            else:
                # Idle: say so on the board, and wake as soon as a peer sends.
                exchange.mark_idle(self.is_idle() and exchange.idle())
                exchange.links.wait(self.idle_sleep_secs)

    def _deliver_ticks(self, now: float) -> None:
        for schedule in self.ticks:
            if now < schedule.next_due:
                continue
            tick = Tuple([schedule.rate_secs], TICK_STREAM_INFO, SYSTEM_TASK_ID)
            for inbox in schedule.inboxes:
                inbox.append(tick)
            while schedule.next_due <= now:
                schedule.next_due += schedule.period_ms

    def _run_commands(self) -> None:
        while self._commands:
            command = self._commands.popleft()
            try:
                command.action()
            except BaseException as exc:
                command.error = exc
            finally:
                command.done.set()
