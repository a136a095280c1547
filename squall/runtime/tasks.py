"""Task runners: one per task, the engine-neutral execution of spouts and bolts.

A runner owns its component instance, inbox (a ``deque``: appends from any thread,
pops by the owner only), collector and counters. ``run_batch`` processes up to a
bounded number of tuples and returns how many, so its caller can interleave tasks.

Both engines run tasks through these runners, so a spout or bolt behaves the same
everywhere (fail on exception, acking, timeouts, metrics): the local engine's worker
threads (``squall.local.worker``) and, on Spark, the executors' live tasks
(``squall.spark.sources.spouttasks`` for spouts, ``squall.spark.execute.bolttasks`` for bolts). A
runner's methods are only ever called from one thread at a time.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable
from time import perf_counter
from typing import Any, Protocol

from squall.model.components import BasicBolt, Spout
from squall.model.context import TopologyContext
from squall.model.errors import FailedException, ReportedFailedException
from squall.model.metrics import METRICS_STREAM
from squall.model.tuple import Tuple
from squall.runtime.acker import (
    ACK_ACK_STREAM,
    ACK_DONE_STREAM,
    ACK_FAIL_STREAM,
    ACK_RESET_TIMEOUT_STREAM,
)
from squall.runtime.checkpointing import (
    CHECKPOINT_STREAM,
    BoltCheckpointing,
    SpoutCheckpointing,
)
from squall.runtime.collectors import BasicBoltCollector, BoltCollector, SpoutCollector
from squall.runtime.metrics import TaskStats
from squall.runtime.task_metrics import TaskMetrics


class TransferMeter(Protocol):
    """Counts what a task has sent so far (every stream and target)."""

    @property
    def transferred(self) -> int:
        """Tuples transferred by the task so far."""
        ...


class OutputThrottle(Protocol):
    """Holds a task back while a queue it feeds is full.

    Set on a runner by an engine that bounds its queues (the local engine's
    ``squall.local.backpressure.OutputGate``); read only from the task's own thread.
    """

    @property
    def watching(self) -> bool:
        """Whether the task feeds any queue it must wait for."""
        ...

    @property
    def meter(self) -> TransferMeter:
        """What the task has sent so far."""
        ...

    def budget(self) -> int:
        """How many more tuples the task may transfer before asking again; 0 when it
        must not start more work now."""
        ...


class TaskRunner(ABC):
    """What spout and bolt runners share."""

    is_spout = False

    def __init__(
        self,
        component: Any,
        context: TopologyContext,
        conf: dict[str, Any],
        stats: TaskStats,
        inbox: deque[Tuple],
    ) -> None:
        self.component = component
        self.context = context
        self.conf = conf
        self.stats = stats
        #: The task's queue: appended to from any thread, popped by the worker only.
        self.inbox = inbox
        self.task_id = context.task_id
        self.component_id = context.component_id
        #: Set by the engine: holds the task back while a queue it feeds is full.
        self.gate: OutputThrottle | None = None
        #: Set by the engine before ``start`` when the topology has metrics consumers.
        self.metrics: TaskMetrics | None = None

    @abstractmethod
    def start(self) -> None:
        """Call ``open``/``prepare``. Runs on the worker thread, once."""

    def metrics_tick(self, bucket_secs: float) -> None:
        """The time bucket ``bucket_secs`` ended: read the task's metrics of that bucket
        and send their data points, with the :class:`TaskInfo`, on ``__metrics``
        (nothing when no metric has a value). Runs on the task's thread."""
        metrics = self.metrics
        if metrics is None:
            return
        points = metrics.data_points(bucket_secs)
        if not points:
            return
        try:
            self._send_metrics([metrics.task_info(bucket_secs), points])
        except Exception as exc:
            self.stats.record_error(exc)

    @abstractmethod
    def _send_metrics(self, values: list[Any]) -> None:
        """Emit ``values`` untracked on ``__metrics``."""

    @abstractmethod
    def stop(self) -> None:
        """Call ``close``/``cleanup``, reporting (not raising) what they raise."""

    @abstractmethod
    def run_batch(self, limit: int, now_ms: float) -> int:
        """Do up to ``limit`` units of work; return how many were done."""


class BoltRunner(TaskRunner):
    """Runs a ``Bolt`` or ``BasicBolt`` task: executes inbox tuples in batches."""

    def __init__(
        self,
        component: Any,
        context: TopologyContext,
        conf: dict[str, Any],
        collector: BoltCollector,
        inbox: deque[Tuple],
    ) -> None:
        super().__init__(component, context, conf, collector.stats, inbox)
        self.collector = collector
        self.basic = isinstance(component, BasicBolt)
        self.basic_collector = BasicBoltCollector(collector)
        #: The component, when it takes part in checkpoints around a basic bolt: the
        #: runner executes that basic bolt itself (its fast path) and hands the
        #: component checkpoint tuples and what it holds back.
        self.checkpointing: BoltCheckpointing | None = None
        self._basic_execute: Any = None
        if isinstance(component, BoltCheckpointing):
            self.checkpointing = component
            if component.basic_bolt is not None:
                self.basic = True
                self._basic_execute = component.basic_bolt.execute
        if self.basic:  # its process latency is its execute time: one histogram for both
            self.stats.process_latency = self.stats.execute_latency

    def start(self) -> None:
        if self.basic and self.checkpointing is None:
            self.component.prepare(self.conf, self.context)
        else:
            self.component.prepare(self.conf, self.context, self.collector)
        self.context.metric_registry.close()

    def _send_metrics(self, values: list[Any]) -> None:
        self.collector.emit_system(METRICS_STREAM, values)

    def stop(self) -> None:
        try:
            self.component.cleanup()
        except Exception as exc:
            self.stats.record_error(exc)

    def run_batch(self, limit: int, now_ms: float) -> int:
        count = len(self.inbox)
        if not count:
            return 0
        if count > limit:
            count = limit
        gate = self.gate
        if gate is None or not gate.watching:
            return self._run(count, None)
        # Held back while a queue this task feeds is full (see squall.local.backpressure).
        meter = gate.meter
        done = 0
        while done < count:
            budget = gate.budget()
            if not budget:
                break
            ran = self._run(count - done, meter, meter.transferred + budget)
            if not ran:
                break
            done += ran
        return done

    def _run(self, count: int, meter: TransferMeter | None = None, stop_at: int = 0) -> int:
        """Execute up to ``count`` inbox tuples. With a ``meter`` (an object whose
        ``transferred`` counts what the task has sent), stop before an execute once it
        reaches ``stop_at``. Returns how many tuples ran."""
        inbox = self.inbox
        popleft = inbox.popleft
        collector = self.collector
        stats = self.stats
        started = perf_counter()
        if self.basic:
            count = self._run_basic(count, popleft, collector, meter, stop_at)
            # A basic bolt acks as execute returns: its process latency is its execute time.
            elapsed = perf_counter() - started
            stats.process_secs += elapsed
            stats.process_count += count
        else:
            # The batch's first tuple is the process-latency sample: its ack ends it.
            collector.sample_tuple = inbox[0]
            collector.sample_start = started
            hook = self.checkpointing
            if hook is not None:  # its loop: no call through the component per tuple
                count = hook.execute_inputs(popleft, count, meter, stop_at, self._failed)
            else:
                execute = self.component.execute
                ran = count
                for index in range(count):
                    if meter is not None and meter.transferred >= stop_at:
                        ran = index
                        break
                    tup = popleft()
                    try:
                        execute(tup)
                    except Exception as exc:
                        self._failed(tup, exc)
                count = ran
            collector.sample_tuple = None
        elapsed = perf_counter() - started
        stats.busy_secs += elapsed
        stats.executed += count
        if count:  # the batch's tuples, each at its mean time (a basic bolt: also process)
            # LatencyHistogram.record_many, inline (once per batch of every bolt task);
            # squall.runtime.latency's unit: 1/1024 µs (UNITS_PER_MS units to a ms).
            histogram = stats.execute_latency
            bucket = int(elapsed * 1_024_000_000.0) // count
            if bucket >= 256:
                shift = bucket.bit_length() - 8
                bucket = (shift << 8) | (bucket >> shift)
            counts = histogram.counts
            counts[bucket] = counts.get(bucket, 0) + count
            histogram.sum += elapsed * 1000.0
        return count

    def _run_basic(
        self,
        count: int,
        popleft: Callable[[], Tuple],
        collector: BoltCollector,
        meter: TransferMeter | None,
        stop_at: int,
    ) -> int:
        basic = self.basic_collector
        hook = self.checkpointing
        execute = self.component.execute if hook is None else self._basic_execute
        pending = collector.pending_acks
        pending_get = pending.get
        #: Tuples this loop does not ack inline: failed, or handled by the checkpoint
        #: component (which acks or fails them through the collector).
        not_acked_here = acked_by_collector = 0
        ran = count
        for index in range(count):
            if meter is not None and meter.transferred >= stop_at:
                ran = index
                break
            tup = popleft()
            if hook is not None and (
                hook.holding or tup.stream_info.stream_id == CHECKPOINT_STREAM
            ):
                hook.take(tup)
                not_acked_here += 1
                continue
            basic.input = tup
            try:
                execute(tup, basic)
            except Exception as exc:
                self._failed(tup, exc)
                if hook is not None:
                    hook.failed(tup)
                not_acked_here += 1
                continue
            # Ack inline (the same XOR as BoltCollector.ack): the hottest loop of the engine.
            root = tup.root
            if root >= 0:  # one tree
                pending[root] = pending_get(root, 0) ^ tup.edge ^ tup.ack_val
            elif tup.tree_list:
                collector.ack(tup)
                acked_by_collector += 1
        basic.input = None
        self.stats.acked += ran - not_acked_here - acked_by_collector
        return ran

    def _failed(self, tup: Tuple, exc: Exception) -> None:
        """A user exception in execute: fail the input; report unless it was a quiet fail."""
        self.collector.fail(tup)
        if not isinstance(exc, FailedException) or isinstance(exc, ReportedFailedException):
            self.stats.record_error(exc)


class SpoutRunner(TaskRunner):
    """Runs a spout task: acker messages, timeouts, then ``next_tuple`` calls."""

    is_spout = True

    def __init__(
        self,
        component: Spout,
        context: TopologyContext,
        conf: dict[str, Any],
        collector: SpoutCollector,
        inbox: deque[Tuple],
        max_pending: int | None,
        timeout_ms: float | None,
    ) -> None:
        super().__init__(component, context, conf, collector.stats, inbox)
        self.collector = collector
        self.max_pending = max_pending or 0
        self.timeout_ms = timeout_ms
        self.active = False
        #: Set by the engine: a callable telling whether any bolt's queue is full.
        self.backpressure: Callable[[], bool] | None = None
        #: Set by the engine in a topology with stateful bolts: the task's part in the
        #: checkpoint protocol (``next_tuple`` waits for its recovery).
        self.checkpointing: SpoutCheckpointing | None = None

    @property
    def pending_count(self) -> int:
        """Tuple trees emitted by this task and not yet acked, failed or timed out."""
        return len(self.collector.pending)

    def start(self) -> None:
        self.component.open(self.conf, self.context, self.collector)
        self.context.metric_registry.close()
        if self.checkpointing is not None:
            self.checkpointing.start()

    def _send_metrics(self, values: list[Any]) -> None:
        self.collector.emit_system(METRICS_STREAM, values)

    def stop(self) -> None:
        try:
            self.component.close()
        except Exception as exc:
            self.stats.record_error(exc)
        if self.checkpointing is not None:
            try:
                self.checkpointing.close()
            except Exception as exc:
                self.stats.record_error(exc)

    def set_active(self, active: bool) -> None:
        """Activate or deactivate on the worker thread; calls the spout's hook once."""
        if active == self.active:
            return
        self.active = active
        try:
            if active:
                self.component.activate()
            else:
                self.component.deactivate()
        except Exception as exc:
            self.stats.record_error(exc)

    def run_batch(self, limit: int, now_ms: float) -> int:
        done = 0
        if self.inbox:
            done += self._handle_acker_messages(now_ms)
        collector = self.collector
        if collector.completed:
            done += self._ack_completed()
        if self.timeout_ms is not None and collector.pending:
            done += self._expire(now_ms)
        if not self.active:
            return done
        if self.checkpointing is not None and not self.checkpointing.initialized:
            return done
        if self.backpressure is not None and self.backpressure():
            return done
        # Held back while a queue this task feeds is full (see squall.local.backpressure).
        gate = self.gate
        meter: TransferMeter | None = None
        stop_at = 0
        if gate is not None and gate.watching:
            budget = gate.budget()
            if not budget:
                return done
            meter = gate.meter
            stop_at = meter.transferred + budget
        pending = collector.pending
        max_pending = self.max_pending
        next_tuple = self.component.next_tuple
        started = perf_counter()
        for _ in range(limit):
            if max_pending and len(pending) >= max_pending:
                break
            if meter is not None and meter.transferred >= stop_at:
                budget = gate.budget()  # type: ignore[union-attr]
                if not budget:
                    break
                stop_at = meter.transferred + budget
            before = collector.emit_count
            try:
                next_tuple()
            except Exception as exc:
                self.stats.record_error(exc)
                break
            if collector.completed:
                self._ack_completed()
            if collector.emit_count == before:
                break
            done += 1
        self.stats.busy_secs += perf_counter() - started
        return done

    def _ack_completed(self) -> int:
        completed = self.collector.completed
        self.collector.completed = []
        ack = self.component.ack
        for msg_id in completed:
            self.stats.acked += 1
            self.stats.complete_count += 1
            self.stats.complete_latency.record(0.0)
            try:
                ack(msg_id)
            except Exception as exc:
                self.stats.record_error(exc)
        return len(completed)

    def _handle_acker_messages(self, now_ms: float) -> int:
        inbox = self.inbox
        pending = self.collector.pending
        stats = self.stats
        spout = self.component
        handled = 0
        while inbox:
            tup = inbox.popleft()
            handled += 1
            stream = tup.stream_info.stream_id
            if stream == CHECKPOINT_STREAM:
                if self.checkpointing is not None:
                    self.checkpointing.on_checkpoint(tup)
                continue
            if stream == ACK_DONE_STREAM:
                self._trees_done(tup.values[0], now_ms)
                continue
            root = tup.values[0]
            if stream == ACK_RESET_TIMEOUT_STREAM:
                entry = pending.pop(root, None)
                if entry is not None:
                    pending[root] = (entry[0], now_ms)
                continue
            entry = pending.pop(root, None)
            if entry is None:  # already timed out: Storm ignores a late ack or fail
                continue
            try:
                if stream == ACK_ACK_STREAM:
                    stats.acked += 1
                    stats.complete_count += 1
                    stats.complete_ms += now_ms - entry[1]
                    stats.complete_latency.record(now_ms - entry[1])
                    spout.ack(entry[0])
                elif stream == ACK_FAIL_STREAM:
                    stats.failed += 1
                    spout.fail(entry[0])
            except Exception as exc:
                stats.record_error(exc)
        return handled

    def _trees_done(self, roots: list[int], now_ms: float) -> None:
        """The trees of ``roots`` completed (one acker message for many)."""
        pending = self.collector.pending
        stats = self.stats
        ack = self.component.ack
        histogram = stats.complete_latency
        counts = histogram.counts
        for root in roots:
            entry = pending.pop(root, None)
            if entry is None:  # already timed out
                continue
            latency = now_ms - entry[1]
            stats.acked += 1
            stats.complete_count += 1
            stats.complete_ms += latency
            # LatencyHistogram.record, inline (once per tree: the spout's hottest path).
            bucket = int(latency * 1_024_000.0)
            if bucket >= 256:
                shift = bucket.bit_length() - 8
                bucket = (shift << 8) | (bucket >> shift)
            elif bucket < 0:
                bucket, latency = 0, 0.0
            counts[bucket] = counts.get(bucket, 0) + 1
            histogram.sum += latency
            try:
                ack(entry[0])
            except Exception as exc:
                stats.record_error(exc)

    def settle_trees(self, outcomes: Iterable[tuple[int, bool]], now_ms: float) -> int:
        """Ack (True) or fail (False) the trees ``outcomes`` names by root id, as their
        acker messages would: for an engine that learns the outcome of many trees at
        once (a Spark micro-batch's). A tree no longer pending is skipped. Runs on the
        task's thread; returns the trees settled."""
        pending = self.collector.pending
        stats = self.stats
        ack, fail = self.component.ack, self.component.fail
        settled = 0
        for root, completed in outcomes:
            entry = pending.pop(root, None)
            if entry is None:
                continue
            settled += 1
            try:
                if completed:
                    stats.acked += 1
                    stats.complete_count += 1
                    stats.complete_ms += now_ms - entry[1]
                    stats.complete_latency.record(now_ms - entry[1])
                    ack(entry[0])
                else:
                    stats.failed += 1
                    fail(entry[0])
            except Exception as exc:
                stats.record_error(exc)
        return settled

    def _expire(self, now_ms: float) -> int:
        deadline = now_ms - self.timeout_ms  # type: ignore[operator]
        pending = self.collector.pending
        expired = []
        for root, entry in pending.items():
            if entry[1] > deadline:
                break
            expired.append(root)
        for root in expired:
            msg_id = pending.pop(root)[0]
            self.stats.failed += 1
            self.stats.timed_out += 1
            try:
                self.component.fail(msg_id)
            except Exception as exc:
                self.stats.record_error(exc)
        return len(expired)
