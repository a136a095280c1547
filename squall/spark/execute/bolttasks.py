"""Bolt tasks of a core topology on Spark executors.

A stage runs one bolt component for one micro-batch: Spark partition rows are packets
for the component's tasks, and each task in the partition runs its packets' tuples
through the engine-neutral ``BoltRunner`` (the local engine's: the same fail-on-
exception, acking and metrics). A task is prepared once per process and kept warm
between micro-batches while Spark reuses the Python worker; after each batch its state
is snapshotted (see ``squall.spark.execute.taskstate``), so a task that runs a batch again, or
runs in another worker, starts from the state before that batch.

What a task acked (the XOR of its acks per root id) and failed is sent to the driver
with its metrics, keyed by (batch, attempt, component, task) so a re-run Spark task
replaces its report instead of adding to it.
"""

from __future__ import annotations

import copy
import logging
from collections import deque
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from squall.model.clock import SYSTEM_CLOCK
from squall.model.hooks import BeginsBatch, ReportsMetrics, SettlesBatch, implements
from squall.model.metrics import METRICS_TICK_STREAM
from squall.model.tuple import SYSTEM_COMPONENT, TICK_STREAM, TICK_STREAM_INFO, Tuple
from squall.runtime.task_metrics import due_buckets, metrics_schedules
from squall.runtime.tasks import BoltRunner
from squall.spark.control.taskcache import TASKS
from squall.spark.execute.figures import ReportKey, Reports, TaskFigures, TaskReport
from squall.spark.execute.ledger import LedgerPart
from squall.spark.execute.listener import observer
from squall.spark.execute.packets import (
    NO_TASK,
    ArrowFunction,
    Packet,
    pack_values,
    packets_from_arrow,
    packets_to_arrow,
    unpack,
)
from squall.spark.execute.snapshots import (
    Engine,
    SnapshotStore,
    TaskSnapshot,
    picklable_state,
    restore_routes,
    restore_state,
    routes_state,
    task_directory,
)
from squall.spark.execute.taskstate import (
    CoreSetup,
    collection_paused,
    core_setup,
    wire_task,
)
from squall.spark.execute.wire import WireOutputCollector
from squall.spark.launch.coreform import core_form
from squall.spark.launch.processsetup import prepare_process

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.accumulators import Accumulator

logger = logging.getLogger("squall")

#: ``last_batch`` of a task interrupted in a batch: whatever comes next restores.
_PARTIAL = -(2**62)


class LiveBolt:
    """One bolt task in an executor's Python worker."""

    def __init__(self, setup: CoreSetup, component_id: str, task_index: int) -> None:
        self.setup = setup
        self.component_id = component_id
        self.task_index = task_index
        core = setup.core
        self.task_id = core.plan.component_tasks[component_id][task_index]
        self.store = SnapshotStore(task_directory(setup.state_dir, component_id, task_index))
        #: The batch whose end state the task holds (None: just prepared).
        self.last_batch: int | None = None
        self._warned_skipped = False
        self._start()

    def _start(self) -> None:
        """Make the task's component and prepare it (a new task life)."""
        parts = wire_task(self.setup, self.component_id, self.task_id)
        self.routes = parts.routes
        self.outboxes = parts.outboxes
        self.ack_buffer = parts.ack_buffer
        spec = self.setup.core.topology.get_component(self.component_id)
        collector = WireOutputCollector(parts.wiring, parts.outboxes)
        collector.set_observer(observer(parts.conf, self.component_id))
        component = copy.deepcopy(spec.component)
        self.runner = BoltRunner(component, parts.context, parts.conf, collector, deque())
        self.runner.metrics = parts.metrics
        try:
            self.runner.start()
        except Exception as exc:
            raise RuntimeError(
                f"bolt {self.component_id!r} task {self.task_id}: prepare raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        self.engine: Engine = {
            "collector": collector,
            "basic_collector": self.runner.basic_collector,
            "context": parts.context,
        }
        self.last_batch = None
        #: When the task's metrics buckets end (its metrics' periods start now).
        self.metrics_schedules = metrics_schedules([self.runner], SYSTEM_CLOCK.now_ms())

    def _ensure(self, batch_id: int) -> None:
        """Hold the state before ``batch_id``: the newest snapshot before it (or, with
        none, a newly prepared component)."""
        latest = self.store.latest_before(batch_id)
        if latest == self.last_batch:
            return
        if latest is None:
            self.runner.stop()
            self._start()
            return
        snapshot = self.store.read(latest)
        runner = self.runner
        runner.component = restore_state(runner.component, snapshot.component, self.engine)
        restore_routes(self.routes, snapshot.routes, self.engine)
        self.last_batch = latest

    def _snapshot(self, batch_id: int) -> None:
        component, skipped = picklable_state(self.runner.component, self.engine)
        if skipped and not self._warned_skipped:
            self._warned_skipped = True
            logger.warning(
                "bolt %r task %d: attributes %s cannot be pickled and are not in its "
                "snapshot (a restored task keeps those its prepare made)",
                self.component_id,
                self.task_id,
                skipped,
            )
        routes = routes_state(self.routes, self.engine)
        self.store.write(batch_id, TaskSnapshot(component, routes))
        self.last_batch = batch_id

    def run(
        self, batch_id: int, chunks: Iterable[list[Tuple]], metrics_tick: bool = False
    ) -> tuple[list[Packet], TaskReport]:
        """Execute the tuples of ``chunks`` (ticks first), chunk after chunk, as batch
        ``batch_id``; return the packets emitted and the task's report (ledger and
        metrics of this batch). A chunk is made as the one before has run, so a packet's
        tuples are made and executed while they are in the processor's cache. With
        ``metrics_tick``, the metrics buckets that have ended are then sent."""
        self._ensure(batch_id)
        runner = self.runner
        stats = runner.stats
        counters = (stats.executed, stats.acked, stats.failed, stats.errors_total)
        streams = {s: (r.emitted, r.transferred) for s, r in self.routes.items()}
        busy, process_secs, process_count = stats.busy_secs, stats.process_secs, stats.process_count
        execute_latency = stats.execute_latency.copy()
        process_latency = stats.process_latency.copy()
        self.last_batch = _PARTIAL  # until the snapshot: a re-run must restore first
        if implements(runner.component, BeginsBatch):
            runner.component.begin_batch(batch_id, self.setup.state_dir)
        inbox = runner.inbox
        for chunk in chunks:
            inbox.extend(chunk)
            runner.run_batch(len(inbox), SYSTEM_CLOCK.now_ms())
        if implements(runner.component, SettlesBatch):
            runner.component.settle_batch()
        if metrics_tick:
            for schedule in due_buckets(self.metrics_schedules, SYSTEM_CLOCK.now_ms()):
                runner.metrics_tick(schedule.bucket_secs)
        acks = LedgerPart.of(self.ack_buffer.acks)
        self.ack_buffer.acks.clear()
        self.ack_buffer.inits.clear()
        fails = self.outboxes.drain_ledger()
        packets = self.outboxes.drain_packets(self.setup.core.locations)
        self._snapshot(batch_id)
        errors = list(stats.errors)
        stats.errors.clear()
        metrics = runner.component.metrics if implements(runner.component, ReportsMetrics) else None
        figures = TaskFigures(
            executed=stats.executed - counters[0],
            acked=stats.acked - counters[1],
            failed=stats.failed - counters[2],
            errors_total=stats.errors_total - counters[3],
            errors=errors,
            busy_secs=stats.busy_secs - busy,
            process_secs=stats.process_secs - process_secs,
            process_count=stats.process_count - process_count,
            latencies={
                "execute": stats.execute_latency.minus(execute_latency),
                "process": stats.process_latency.minus(process_latency),
            },
            streams={
                s: (r.emitted - streams[s][0], r.transferred - streams[s][1])
                for s, r in self.routes.items()
                if r.emitted != streams[s][0]
            },
            custom=dict(metrics()) if metrics is not None else {},
        )
        return packets, TaskReport(figures, acks, fails, core_form())


def forget_finished_runs(current: str, live_runs: frozenset[str]) -> None:
    """Drop what the runs that are no longer live keep in this process (their live
    tasks, after their ``cleanup``): ``live_runs`` are the driver's runs when the stage
    was made; a run killed since is forgotten by a later stage."""
    for run_key in TASKS.runs():
        if run_key != current and run_key not in live_runs:
            TASKS.forget(run_key)


def live_bolt(setup: CoreSetup, component_id: str, task_index: int) -> LiveBolt:
    """The task's live bolt in this process (made and prepared on first use; stopped,
    after its ``cleanup``, when the run is forgotten)."""
    return TASKS.get(
        setup.run_key,
        ("bolt", component_id, task_index),
        lambda: LiveBolt(setup, component_id, task_index),
        lambda live: live.runner.stop(),
    )


def stage_function(
    run_key: str,
    setup_path: str,
    component_id: str,
    batch_id: int,
    attempt: int,
    reports: Accumulator[Reports],
    live_runs: frozenset[str],
) -> ArrowFunction:
    """The ``mapInArrow`` function running bolt ``component_id`` in batch ``batch_id``:
    each task whose packets are in the partition runs them (tick packets first); what
    the worker keeps for runs not in ``live_runs`` is dropped first."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_process()
        with collection_paused():
            output = run_stage(batches)
        yield output

    def run_stage(batches: Iterator[pa.RecordBatch]) -> pa.RecordBatch:
        import pyarrow as pa

        setup = core_setup(run_key, setup_path)
        forget_finished_runs(run_key, live_runs)
        infos = setup.core.infos
        by_task: dict[int, list[Packet]] = {}
        for batch in batches:
            if not batch.num_rows:
                continue
            for packet in packets_from_arrow(batch):
                entries = by_task.get(packet.target)
                if entries is None:
                    entries = by_task[packet.target] = []
                entries.append(packet)
        packets: list[Packet] = []
        produced: Reports = {}
        for target in sorted(by_task):
            entries = sorted(by_task[target], key=lambda p: p.stream != TICK_STREAM)
            metrics_tick = any(packet.stream == METRICS_TICK_STREAM for packet in entries)
            if metrics_tick:
                entries = [p for p in entries if p.stream != METRICS_TICK_STREAM]
            chunks = (
                unpack(
                    packet.tuples,
                    TICK_STREAM_INFO
                    if packet.stream == TICK_STREAM
                    else infos[(packet.source, packet.stream)],
                    packet.source_task,
                )
                for packet in entries
            )
            emitted, report = live_bolt(setup, component_id, target).run(
                batch_id, chunks, metrics_tick
            )
            packets.extend(emitted)
            produced[ReportKey(batch_id, attempt, component_id, target)] = report
        if produced:
            reports.add(produced)
        return packets_to_arrow(packets, pa)

    return run


def metrics_tick_packets(stage_index: int, tasks: int) -> list[Packet]:
    """A packet for each task of a stage that wakes it to send the metrics buckets that
    have ended (it holds no tuple)."""
    return [
        Packet(stage_index, task, SYSTEM_COMPONENT, METRICS_TICK_STREAM, NO_TASK, 0, b"")
        for task in range(tasks)
    ]


def tick_packets(stage_index: int, tasks: int, rate_secs: float) -> list[Packet]:
    """A tick tuple for each task of a stage, as packets."""
    blob = pack_values([[rate_secs]])
    return [
        Packet(stage_index, task, SYSTEM_COMPONENT, TICK_STREAM, NO_TASK, 1, blob)
        for task in range(tasks)
    ]


__all__ = ["LiveBolt", "metrics_tick_packets", "stage_function", "tick_packets"]
