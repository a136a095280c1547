"""What a core topology's spout and bolt tasks on Spark share: the run's set-up, the
wiring of a task to the local engine's collectors and routers, and its outboxes.

A task's outboxes are drained into packets (see ``execute.packets``): one per (target
task, stream, emitting task) and up to ``PACKET_TUPLES`` tuples. Snapshots of a task's
state are in ``execute.snapshots``.
"""

from __future__ import annotations

import contextlib
import gc
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from squall.drpc.bridge import LocalDRPCBridges, dumps_bridged
from squall.model.config import Config, component_config
from squall.runtime.collectors import AckBuffer, TaskWiring
from squall.runtime.context import TaskContext
from squall.runtime.metrics import TaskStats
from squall.runtime.routing import StreamRoute, build_routes
from squall.runtime.task_metrics import TaskMetrics, has_metrics_consumers
from squall.spark.control import storage
from squall.spark.control.taskcache import TASKS
from squall.spark.execute.wire import Outboxes
from squall.spark.plan.core import LEDGER_TASK, CorePlan

PICKLE = pickle.HIGHEST_PROTOCOL


@dataclass
class CoreSetup:
    """What spout and bolt tasks need, written once per topology run next to the
    checkpoint and loaded once per process."""

    run_key: str
    core: CorePlan
    #: Where task snapshots go: ``<state_dir>/<component>/<task index>/``.
    state_dir: str


#: Task cache key of a core run's set-up.
SETUP = "setup"


def core_setup(run_key: str, path: str) -> CoreSetup:
    """The set-up of run ``run_key`` in ``path``, read once per process and kept in
    the task cache (until the run is forgotten: see ``bolttasks.forget_finished_runs``)."""
    return TASKS.get(run_key, SETUP, lambda: read_core_setup(path))


def read_core_setup(path: str) -> CoreSetup:
    """The set-up the cluster wrote to ``path``."""
    setup: CoreSetup = pickle.loads(storage.read_bytes(path))
    return setup


def write_setup(path: str, setup: CoreSetup, drpc_bridges: LocalDRPCBridges) -> None:
    """Write ``setup`` for the tasks of a run to load; a ``LocalDRPC`` a component holds
    is written as a client of its bridge in ``drpc_bridges`` (started if needed)."""
    storage.write_bytes(path, dumps_bridged(setup, drpc_bridges))


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a batch runs: a batch makes
    millions of short-lived, acyclic objects (freed by reference counting) and the
    collector's passes over them would cost more than the batch itself (measured: 2.5x
    on word count)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass
class TaskParts:
    """What the engine-neutral collectors and runners of one task are wired to."""

    conf: dict[str, Any]
    context: TaskContext
    routes: dict[str, StreamRoute]
    stats: TaskStats
    outboxes: Outboxes
    ack_buffer: AckBuffer
    wiring: TaskWiring
    #: The task's metrics for the metrics consumers (None without consumers, and for
    #: the consumers' own tasks): set on the runner before it starts.
    metrics: TaskMetrics | None = None


def wire_task(setup: CoreSetup, component_id: str, task_id: int) -> TaskParts:
    """The context, routes (the local engine's routers), counters and outboxes of task
    ``task_id``; its acks and fails go to the ledger (``LEDGER_TASK``) when acking."""
    core = setup.core
    spec = core.topology.get_component(component_id)
    conf = component_config(core.conf, spec.conf)
    context = TaskContext(core.topology, core.plan, task_id, core.name, conf)
    routes = build_routes(core.topology, core.plan, context)
    stats = TaskStats(
        component_id,
        task_id,
        float(conf[Config.TOPOLOGY_ERROR_THROTTLE_INTERVAL_SECS]),
        int(conf[Config.TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL]),
    )
    outboxes = Outboxes(core.plan.max_task_id, task_id)
    acker_tasks = [LEDGER_TASK] if core.tracking else []
    ack_buffer = AckBuffer(outboxes, acker_tasks)
    wiring = TaskWiring(component_id, task_id, routes, outboxes, stats, acker_tasks, ack_buffer)
    metrics = None
    if has_metrics_consumers(core.conf) and not spec.system:
        metrics = TaskMetrics(context, stats, spec.is_spout, core.conf)
    return TaskParts(conf, context, routes, stats, outboxes, ack_buffer, wiring, metrics)
