"""A core topology's spout as a Spark streaming source.

The spout's tasks live in the source's driver-side Python process (the process Spark
starts for the source): ``open``, ``activate``/``deactivate``, ``next_tuple``, ``ack``
and ``fail`` all run there, one task after another, as on one local worker. Each time
Spark asks for the latest offset, the source:

1. applies the outcome of every micro-batch that finished since (the driver writes
   which tuple trees failed or did not complete; the others are acked), calling the
   spout's ``ack``/``fail``: a failed tuple the spout emits again goes into a later
   batch;
2. calls ``next_tuple`` on each task until it emits nothing or the batch is full
   (``topology.spark.batch.max.tuples`` per task, and ``topology.max.spout.pending``
   trees in flight), routing each tuple to its bolt tasks as the local engine does;
3. logs the batch (packets, the new trees' root ids and init values, and a snapshot of
   every task taken after it) under the checkpoint directory.

``read`` returns a logged batch's packets, so a micro-batch replays identically after
a crash, and a restarted source resumes its spout tasks from the last snapshot. When
the topology is killed, the cluster creates a close file; at the next trigger each
source deactivates and closes its tasks and says so with a marker file.
"""

from __future__ import annotations

import copy
import os
import pickle
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from squall.local.tasks import SpoutRunner
from squall.model.config import Config
from squall.model.fields import Fields
from squall.model.tuple import StreamInfo, Tuple
from squall.runtime.acker import ACK_ACK_STREAM, ACK_FAIL_STREAM, ACKER_COMPONENT
from squall.runtime.clock import SYSTEM_CLOCK
from squall.runtime.collectors import SpoutOutputCollector
from squall.runtime.metrics import ComponentStats, summarize
from squall.spark.execute.packets import Packet, packets_to_arrow
from squall.spark.execute.taskstate import (
    CoreSetup,
    collection_paused,
    load_setup,
    picklable_state,
    restore_routes,
    restore_state,
    routes_state,
    wire_task,
)
from squall.spark.plan.core import LEDGER_TASK
from squall.spark.runtime.workerprocess import prepare_process
from squall.spark.sources.spoutlog import SpoutLog, write_atomically

#: Tuples a spout task emits into one micro-batch at most (also bounded by
#: ``topology.max.spout.pending`` when acking).
BATCH_MAX_TUPLES_KEY = "topology.spark.batch.max.tuples"
DEFAULT_BATCH_MAX_TUPLES = 10_000

_ACK_INFO = StreamInfo(ACKER_COMPONENT, ACK_ACK_STREAM, Fields("id"))
_FAIL_INFO = StreamInfo(ACKER_COMPONENT, ACK_FAIL_STREAM, Fields("id"))


def outcome_path(log: SpoutLog, index: int) -> str:
    """Where the driver writes the outcome of logged batch ``index``."""
    return os.path.join(log.directory, f"{index:012d}.outcome")


def write_outcome(log: SpoutLog, index: int, failed: set[int]) -> None:
    """Record that the trees of batch ``index`` completed except ``failed`` (driver)."""
    write_atomically(outcome_path(log, index), pickle.dumps(sorted(failed)))


def read_poll(path: str) -> tuple[int, int, int] | None:
    """``(polls, emitted by the last poll, unfinished batches)`` a source last wrote."""
    try:
        with open(path) as handle:
            polls, emitted, unfinished = (int(n) for n in handle.read().split())
    except (OSError, ValueError):
        return None
    return polls, emitted, unfinished


def read_spout_stats(path: str) -> ComponentStats | None:
    """The spout's metrics the source last wrote (None before any)."""
    try:
        with open(path, "rb") as handle:
            stats: ComponentStats = pickle.load(handle)
    except (OSError, EOFError, pickle.UnpicklingError):
        return None
    return stats


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
        self.collector = SpoutOutputCollector(parts.wiring, SYSTEM_CLOCK)
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
        self.limit = int(conf.get(BATCH_MAX_TUPLES_KEY) or DEFAULT_BATCH_MAX_TUPLES)
        self.engine = {"collector": self.collector, "context": self.context}

    def snapshot(self) -> dict[str, Any]:
        component, _ = picklable_state(self.runner.component, self.engine)
        routes = routes_state(self.routes, self.engine)
        return {"component": component, "routes": routes, "pending": self.collector.pending}

    def restore(self, snapshot: dict[str, Any]) -> None:
        runner = self.runner
        runner.component = restore_state(runner.component, snapshot["component"], self.engine)
        restore_routes(self.routes, snapshot["routes"], self.engine)
        self.collector.pending.update(snapshot["pending"])


class SpoutTasks:
    """The tasks of one spout component, in the source's driver-side process."""

    def __init__(self, setup: CoreSetup, component_id: str, log: SpoutLog, stats_path: str):
        self.setup = setup
        self.component_id = component_id
        self.log = log
        self.stats_path = stats_path
        core = setup.core
        self.locations = core.locations
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
        self.last_logged = time.monotonic()
        for task in self.tasks:
            try:
                task.runner.start()  # open: a new life for each task
            except Exception as exc:
                raise RuntimeError(
                    f"spout {component_id!r} task {task.context.task_id}: open raised "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
        if self.size:
            data = log.data(self.size - 1)
            for task, snapshot in zip(self.tasks, data["snapshots"], strict=True):
                task.restore(snapshot)
            self.applied = data["applied"]
        #: Root ids of each logged batch whose outcome is not applied yet.
        self.roots: dict[int, dict[int, int]] = {}
        #: Logged batches holding tuples whose outcome is not applied yet.
        self.unfinished: set[int] = set()
        for index in range(max(self.applied, log.first()), self.size):
            data = log.data(index)
            self.roots[index] = data["roots"]
            if data["packets"]:
                self.unfinished.add(index)
        #: Polls so far and tuples emitted by the last one (see :meth:`write_poll`).
        self.polls = 0
        self.last_emitted = 0

    def apply_outcomes(self) -> bool:
        """Ack or fail the trees of every batch the driver finished; True if any."""
        applied_any = False
        while self.applied < self.size:
            path = outcome_path(self.log, self.applied)
            if not os.path.exists(path):
                break
            with open(path, "rb") as handle:
                failed = set(pickle.load(handle))
            by_task: dict[int, list[Tuple]] = {}
            for root, task_id in self.roots.pop(self.applied, {}).items():
                info = _FAIL_INFO if root in failed else _ACK_INFO
                by_task.setdefault(task_id, []).append(Tuple([root], info, LEDGER_TASK))
            now = SYSTEM_CLOCK.now_ms()
            for task in self.tasks:
                task.runner.inbox.extend(by_task.get(task.context.task_id, ()))
                task.runner.run_batch(0, now)  # ack/fail calls only
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
        with collection_paused():
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
        changed = changed or emitted > 0 or errors != self.errors_written
        due = tick_secs is not None and time.monotonic() - self.last_logged >= tick_secs
        logged = bool(packets or roots or due)
        if logged:
            self.roots[self.size] = roots
            if packets:
                self.unfinished.add(self.size)
            data = {
                "packets": packets,
                "inits": inits,
                "roots": roots,
                "snapshots": [task.snapshot() for task in self.tasks],
                "applied": self.applied,
            }
            self.log.append(self.size, [], None, "", data, count=emitted)
            self.size += 1
            self.last_logged = time.monotonic()
        if changed:
            self.write_stats()
        self.polls += 1
        self.last_emitted = emitted
        return logged

    def write_poll(self, path: str) -> None:
        """Write ``polls emitted unfinished`` to ``path`` for the driver's ``wait_idle``:
        the source is idle once a poll emitted nothing and every batch holding tuples
        has its outcome applied (empty batches that only carry ticks do not count)."""
        line = f"{self.polls} {self.last_emitted} {len(self.unfinished)}"
        write_atomically(path, line.encode(), durable=False)

    def _poll(self, packets: list[Packet], roots: dict[int, int], inits: dict[int, int]) -> int:
        """Run ``next_tuple`` on each task for one batch; collect its packets, the new
        trees' spout tasks (``roots``) and init values. Returns the emit count."""
        emitted = 0
        now = SYSTEM_CLOCK.now_ms()
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

    def write_stats(self) -> None:
        """Write the spout's metrics for the driver."""
        stats = [task.stats for task in self.tasks]
        self.errors_written = sum(task.errors_total for task in stats)
        summary = summarize(self.component_id, "spout", stats, time.monotonic())
        write_atomically(self.stats_path, pickle.dumps(summary))

    def close(self) -> None:
        """Deactivate and close every task (the topology is killed)."""
        self.set_active(False)
        for task in self.tasks:
            task.runner.stop()
        self.write_stats()


class CoreBatchPartition(InputPartition):
    """Part ``part`` of ``parts`` of logged batch ``index`` of a core spout: the packets
    for task index ``part`` of each bolt (see :func:`source_slices`)."""

    def __init__(self, index: int, part: int, parts: int) -> None:
        self.index = index
        self.part = part
        self.parts = parts


def source_slices(setup: CoreSetup, spout_id: str) -> int:
    """How many Spark partitions read a batch of ``spout_id``: the most tasks of a bolt
    subscribing to it. Partition ``i`` holds the packets for task index ``i``, so a bolt
    with that many tasks reading only this spout needs no exchange."""
    return max([1, *(stage.tasks for stage in setup.core.readers(spout_id))])


class CoreSpoutReader(DataSourceStreamReader):
    """The streaming reader of one core spout (see the module docstring). Spark creates
    it in the source's driver-side process and ships a copy to executors for ``read``;
    the spout tasks are made lazily, so the copy stays small."""

    def __init__(self, options: dict[str, str], setup: CoreSetup) -> None:
        prepare_process()
        self.options = dict(options)
        self.log = SpoutLog(options["log"])
        self._setup: CoreSetup | None = setup
        self._tasks: SpoutTasks | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "log": self.log, "_setup": None, "_tasks": None}

    @property
    def tasks(self) -> SpoutTasks:
        """The spout's tasks, made and opened on first use (driver-side process)."""
        if self._tasks is None:
            setup = self._setup or load_setup(self.options["setup"])
            self._tasks = SpoutTasks(setup, self.options["source"], self.log, self.options["stats"])
        return self._tasks

    def initialOffset(self) -> dict[str, Any]:
        return {"source": self.options["source"], "batch": 0}

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        """One batch per micro-batch: one logged before a restart that Spark has not
        read yet, else a new one (unless paused or the spout emitted nothing)."""
        tasks = self.tasks
        position = int(start["batch"])
        if os.path.exists(self.options["close"]):  # the topology is being killed
            if not os.path.exists(self.options["closed"]):
                tasks.close()
                write_atomically(self.options["closed"], b"")
            return {"source": self.options["source"], "batch": position}
        if position < tasks.size:
            tasks.apply_outcomes()
            position += 1
        else:
            paused = os.path.exists(self.options["pause"])
            ticks = self.options.get("ticks")
            if tasks.next_batch(paused, float(ticks) if ticks else None):
                position = tasks.size
            tasks.write_poll(self.options["polls"])
        return {"source": self.options["source"], "batch": position}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        parts = source_slices(self.tasks.setup, self.options["source"])
        return [
            CoreBatchPartition(index, part, parts)
            for index in range(int(start["batch"]), int(end["batch"]))
            for part in range(parts)
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Runs on an executor: the packets of a logged batch for one task index."""
        import pyarrow as pa

        part, parts = partition.part, partition.parts  # type: ignore[attr-defined]
        packets = self.log.data(partition.index)["packets"]  # type: ignore[attr-defined]
        yield packets_to_arrow([p for p in packets if p.target % parts == part], pa)

    def commit(self, end: dict[str, Any]) -> None:
        """Batches before ``end`` are committed: drop their files (keeping the newest
        batch's and any outcome not applied yet)."""
        keep = min(int(end["batch"]) - 1, self.tasks.applied)
        self.log.forget_before(keep)

    def stop(self) -> None:
        """Nothing: the spout tasks are closed when the cluster asks for it (a close
        file, seen at the next trigger) before it stops the query."""
