"""A core topology's spout tasks, in the Python process Spark starts for its source.

The tasks run the local engine's ``SpoutRunner``: ``open``, ``activate``/``deactivate``,
``next_tuple``, ``ack`` and ``fail`` all run here, one task after another, as on one
local worker. A poll applies the outcomes of the micro-batches the driver finished,
then calls ``next_tuple`` on each task until it emits nothing or the batch is full, and
logs the batch (packets, the new trees' root ids and init values, and a snapshot of
every task after it).
"""

from __future__ import annotations

import copy
import time
from collections import deque
from collections.abc import Iterable
from itertools import repeat

from squall.model.clock import SYSTEM_CLOCK
from squall.model.config import Config
from squall.model.hooks import ReportsMetrics, implements
from squall.runtime.metrics import summarize
from squall.runtime.task_metrics import due_buckets, metrics_schedules
from squall.runtime.tasks import SpoutRunner
from squall.spark.control.rundir import Polls, SourceDirectory
from squall.spark.execute.ledger import LedgerPart
from squall.spark.execute.listener import observer
from squall.spark.execute.packets import Packet
from squall.spark.execute.snapshots import (
    Engine,
    picklable_state,
    restore_routes,
    restore_state,
    routes_state,
)
from squall.spark.execute.taskstate import CoreSetup, collection_paused, wire_task
from squall.spark.execute.wire import WireSpoutOutputCollector
from squall.spark.sources.spoutlog import CoreBatch, LoggedBatch, SpoutLog, SpoutTaskSnapshot

#: Tuples a spout task emits into one micro-batch at most (also bounded by
#: ``topology.max.spout.pending`` when acking).
BATCH_MAX_TUPLES_KEY = "topology.spark.batch.max.tuples"
DEFAULT_BATCH_MAX_TUPLES = 10_000


class _SpoutTask:
    """One spout task: the local engine's ``SpoutRunner`` with outboxes for packets."""

    def __init__(self, setup: CoreSetup, component_id: str, task_id: int) -> None:
        core = setup.core
        parts = wire_task(setup, component_id, task_id)
        conf = parts.conf
        self.context = parts.context
        self.routes = parts.routes
        self.stats = parts.stats
        self.outboxes = parts.outboxes
        self.ack_buffer = parts.ack_buffer
        self.collector = WireSpoutOutputCollector(parts.wiring, SYSTEM_CLOCK, parts.outboxes)
        self.collector.set_observer(observer(conf, component_id))
        pending = conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING)
        self.runner = SpoutRunner(
            copy.deepcopy(core.topology.get_component(component_id).component),
            self.context,
            conf,
            self.collector,
            deque(),
            int(pending) if pending and core.tracking else None,
            None,  # trees complete or fail with their micro-batch: no timeouts
        )
        self.runner.metrics = parts.metrics
        self.limit = int(conf.get(BATCH_MAX_TUPLES_KEY) or DEFAULT_BATCH_MAX_TUPLES)
        self.engine: Engine = {"collector": self.collector, "context": self.context}

    def snapshot(self) -> SpoutTaskSnapshot:
        """The task's state now (see ``execute.taskstate``)."""
        component, _ = picklable_state(self.runner.component, self.engine)
        routes = routes_state(self.routes, self.engine)
        return SpoutTaskSnapshot(component, routes, self.collector.pending)

    def restore(self, snapshot: SpoutTaskSnapshot) -> None:
        """Continue from ``snapshot`` (the task was just opened)."""
        runner = self.runner
        runner.component = restore_state(runner.component, snapshot.component, self.engine)
        restore_routes(self.routes, snapshot.routes, self.engine)
        self.collector.pending.update(snapshot.pending)


class SpoutTasks:
    """The tasks of one spout component, in the source's driver-side process."""

    def __init__(
        self, setup: CoreSetup, component_id: str, log: SpoutLog, files: SourceDirectory
    ) -> None:
        self.setup = setup
        self.component_id = component_id
        self.log = log
        self.files = files
        core = setup.core
        self.locations = core.locations
        self.slices = core.spout_slices(component_id)
        self.tasks = [
            _SpoutTask(setup, component_id, task_id)
            for task_id in core.plan.component_tasks[component_id]
        ]
        self.size = log.size()
        #: Batches whose outcome was applied: all before ``applied``.
        self.applied = 0
        self.active: bool | None = None
        #: Errors counted in the metrics last written (new ones are written at once).
        self.errors_written = 0
        #: The tasks' own metrics last written (changed ones are written at once).
        self.custom_written: dict[str, float] = {}
        self.last_logged = time.monotonic()
        for task in self.tasks:
            try:
                task.runner.start()  # open: a new life for each task
            except Exception as exc:
                raise RuntimeError(
                    f"spout {component_id!r} task {task.context.task_id}: open raised "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
        #: When the tasks' metrics buckets end (their periods start now).
        self.metrics_schedules = metrics_schedules(
            [task.runner for task in self.tasks], SYSTEM_CLOCK.now_ms()
        )
        last = log.last()
        if last is not None and last.core is not None:
            for task, snapshot in zip(self.tasks, last.core.snapshots, strict=True):
                task.restore(snapshot)
            self.applied = last.core.applied
        #: Root ids of each logged batch whose outcome is not applied yet.
        self.roots: dict[int, dict[int, int]] = {}
        #: Logged batches holding tuples whose outcome is not applied yet.
        self.unfinished: set[int] = set()
        for index in range(max(self.applied, log.first()), self.size):
            batch = log.batch(index).core
            if batch is None:
                continue
            self.roots[index] = batch.roots
            if batch.packets:
                self.unfinished.add(index)
        #: Polls so far and tuples emitted by the last one (see :meth:`write_poll`).
        self.polls = 0
        self.last_emitted = 0

    def apply_outcomes(self) -> bool:
        """Ack or fail the trees of every batch the driver finished; True if any."""
        with collection_paused():
            return self._apply_outcomes()

    def _apply_outcomes(self) -> bool:
        applied_any = False
        while self.applied < self.size:
            failed = self.log.outcome(self.applied)
            if failed is None:
                break
            roots = self.roots.pop(self.applied, {})
            by_task: dict[int, list[int]]
            if len(self.tasks) == 1:
                by_task = {self.tasks[0].context.task_id: list(roots)}
            else:
                by_task = {}
                for root, task_id in roots.items():
                    by_task.setdefault(task_id, []).append(root)
            now = SYSTEM_CLOCK.now_ms()
            for task in self.tasks:
                mine = by_task.get(task.context.task_id, [])
                if failed:
                    outcomes: Iterable[tuple[int, bool]] = [(r, r not in failed) for r in mine]
                else:
                    outcomes = zip(mine, repeat(True))
                task.runner.settle_trees(outcomes, now)
            self.unfinished.discard(self.applied)
            self.applied += 1
            applied_any = True
        return applied_any

    def set_active(self, active: bool) -> None:
        """``activate``/``deactivate`` each task once per change."""
        if self.active is active:
            return
        self.active = active
        for task in self.tasks:
            task.runner.set_active(active)

    def next_batch(self, paused: bool, tick_secs: float | None) -> bool:
        """Log batch ``size`` if the spout emitted tuples (or a tick is due); see the
        module docstring."""
        changed = self.apply_outcomes()
        self.set_active(not paused)
        packets: list[Packet] = []
        roots: dict[int, int] = {}
        inits: dict[int, int] = {}
        emitted = 0
        if not paused:
            with collection_paused():
                emitted = self._poll(packets, roots, inits)
        errors = sum(task.stats.errors_total for task in self.tasks)
        changed = (
            changed
            or emitted > 0
            or errors != self.errors_written
            or self.custom() != self.custom_written
        )
        due = tick_secs is not None and time.monotonic() - self.last_logged >= tick_secs
        logged = bool(packets or roots or due)
        if logged:
            self.roots[self.size] = roots
            if packets:
                self.unfinished.add(self.size)
            snapshots = [task.snapshot() for task in self.tasks]
            batch = CoreBatch(len(packets), roots, snapshots, self.applied)
            self.log.write_slices(self.size, packets, self.slices)
            self.log.write_inits(self.size, LedgerPart.of(inits))
            self.log.append(self.size, LoggedBatch(core=batch, tuples=emitted))
            self.size += 1
            self.last_logged = time.monotonic()
        if changed:
            self.write_stats()
        self.polls += 1
        self.last_emitted = emitted
        return logged

    def write_polls(self) -> None:
        """Say how the polls went, for the driver's ``wait_idle``: the source is idle
        once a poll emitted nothing and every batch holding tuples has its outcome
        applied (empty batches that only carry ticks do not count)."""
        self.files.write_polls(Polls(self.polls, self.last_emitted, len(self.unfinished)))

    def _poll(self, packets: list[Packet], roots: dict[int, int], inits: dict[int, int]) -> int:
        """Run ``next_tuple`` on each task for one batch; collect its packets, the new
        trees' spout tasks (``roots``) and init values. Returns the emit count."""
        emitted = 0
        now = SYSTEM_CLOCK.now_ms()
        for schedule in due_buckets(self.metrics_schedules, now):
            for runner in schedule.tasks:
                runner.metrics_tick(schedule.bucket_secs)
        for task in self.tasks:
            before = task.collector.emit_count
            task.runner.run_batch(task.limit, now)
            emitted += task.collector.emit_count - before
            packets.extend(task.outboxes.drain_packets(self.locations))
            buffer = task.ack_buffer
            acks = buffer.acks
            for root, spout_task in buffer.inits.items():
                roots[root] = spout_task
                inits[root] = acks.get(root, 0)
            buffer.inits.clear()
            acks.clear()
        return emitted

    def custom(self) -> dict[str, float]:
        """The tasks' own metrics (``ReportsMetrics``), summed per name."""
        custom: dict[str, float] = {}
        for task in self.tasks:
            component = task.runner.component
            if implements(component, ReportsMetrics):
                for name, value in component.metrics().items():
                    custom[name] = custom.get(name, 0) + value
        return custom

    def write_stats(self) -> None:
        """Write the spout's metrics for the driver (its tasks' own metrics among
        them)."""
        stats = [task.stats for task in self.tasks]
        self.errors_written = sum(task.errors_total for task in stats)
        summary = summarize(self.component_id, "spout", stats, time.monotonic())
        self.custom_written = summary.custom = self.custom()
        self.files.write_stats(summary)

    def close(self) -> None:
        """Deactivate and close every task (the topology is killed)."""
        self.set_active(False)
        for task in self.tasks:
            task.runner.stop()
        self.write_stats()
