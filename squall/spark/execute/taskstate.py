"""What spout and bolt tasks on Spark share: their set-up, their outboxes, the packets
their tuples travel in, and snapshots of their state.

A task's outboxes are drained into packets (see ``execute.packets``): one per (target
task, stream, emitting task) and up to ``PACKET_TUPLES`` tuples.

A task's snapshot is its component object pickled after a batch, with the engine's
objects (collector, context) left out as references and re-bound when it is restored,
together with its routers (round-robin positions, partial-key loads), so a restored
task continues exactly where the snapshot was taken.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import pickle
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import cloudpickle

from squall.model.config import Config, component_config
from squall.model.tuple import StreamInfo, Tuple
from squall.runtime.collectors import AckBuffer, TaskWiring
from squall.runtime.context import TopologyContext
from squall.runtime.metrics import TaskStats
from squall.runtime.routing import build_routes
from squall.spark.control.taskcache import TASKS
from squall.spark.execute.packets import PACKET_TUPLES, Packet, pack
from squall.spark.plan.core import LEDGER_TASK, CorePlan

PICKLE = pickle.HIGHEST_PROTOCOL

_SNAPSHOT = re.compile(r"^(-?\d+)\.snapshot$")


@dataclass
class CoreSetup:
    """What spout and bolt tasks need, written once per topology run next to the
    checkpoint and loaded once per process."""

    run_key: str
    core: CorePlan
    #: Where task snapshots go: ``<state_dir>/<component>/<task index>/``.
    state_dir: str


#: Task cache keys of a core run's set-up and of the file it was read from.
SETUP = "setup"
SETUP_PATH = "setup path"


def core_setup(run_key: str, path: str) -> CoreSetup:
    """The set-up of run ``run_key`` in ``path``, read once per process and kept in
    the task cache with its path (see ``bolttasks.forget_finished_runs``)."""
    TASKS.get(run_key, SETUP_PATH, lambda: path)
    return TASKS.get(run_key, SETUP, lambda: read_core_setup(path))


def read_core_setup(path: str) -> CoreSetup:
    """The set-up the cluster wrote to ``path``."""
    with open(path, "rb") as handle:
        setup: CoreSetup = pickle.load(handle)
    return setup


def write_setup(path: str, setup: CoreSetup) -> None:
    """Write ``setup`` for the tasks of a run to load."""
    with open(path, "wb") as handle:
        handle.write(cloudpickle.dumps(setup))


class Outboxes(list[list[Any]]):
    """Per task id, the tuples a task sent there (index ``LEDGER_TASK``: its fail
    messages), as the engine-neutral collectors expect: ``outboxes[t].append(tup)``."""

    def __init__(self, max_task_id: int) -> None:
        super().__init__([] for _ in range(max_task_id + 1))

    def drain_ledger(self) -> list[int]:
        """Roots failed explicitly since the last call."""
        box = self[LEDGER_TASK]
        roots = [tup.values[0] for tup in box]
        box.clear()
        return roots

    def drain_packets(self, locations: dict[int, tuple[int, int]]) -> list[Packet]:
        """The tuples sent since the last call, in packets, in emit order per target."""
        packets: list[Packet] = []
        for task_id in range(1, len(self)):
            box = self[task_id]
            if not box:
                continue
            dest, index = locations[task_id]
            first = box[0]
            groups: dict[tuple[StreamInfo, int], list[Tuple]]
            if all(t._info is first._info and t.source_task == first.source_task for t in box):
                groups = {(first._info, first.source_task): box}  # the usual case
            else:
                groups = {}
                for tup in box:
                    key = (tup._info, tup.source_task)
                    group = groups.get(key)
                    if group is None:
                        group = groups[key] = []
                    group.append(tup)
            for (info, source_task), tuples in groups.items():
                component, stream = info.component_id, info.stream_id
                for start in range(0, len(tuples), PACKET_TUPLES):
                    chunk = tuples[start : start + PACKET_TUPLES]
                    values = [t.values for t in chunk]
                    roots = [t._roots for t in chunk]
                    payload = pack(values, roots)
                    packets.append(
                        Packet(dest, index, component, stream, source_task, len(chunk), payload)
                    )
            self[task_id] = []
        return packets


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
    context: TopologyContext
    routes: dict[str, Any]
    stats: TaskStats
    outboxes: Outboxes
    ack_buffer: AckBuffer
    wiring: TaskWiring


def wire_task(setup: CoreSetup, component_id: str, task_id: int) -> TaskParts:
    """The context, routes (the local engine's routers), counters and outboxes of task
    ``task_id``; its acks and fails go to the ledger (``LEDGER_TASK``) when acking."""
    core = setup.core
    spec = core.topology.get_component(component_id)
    conf = component_config(core.conf, spec.conf)
    context = TopologyContext(core.topology, core.plan, task_id, core.name, conf)
    routes = build_routes(core.topology, core.plan, context)
    stats = TaskStats(
        component_id,
        task_id,
        float(conf[Config.TOPOLOGY_ERROR_THROTTLE_INTERVAL_SECS]),
        int(conf[Config.TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL]),
    )
    outboxes = Outboxes(core.plan.max_task_id)
    acker_tasks = [LEDGER_TASK] if core.tracking else []
    ack_buffer = AckBuffer(outboxes, acker_tasks)
    wiring = TaskWiring(component_id, task_id, routes, outboxes, stats, acker_tasks, ack_buffer)
    return TaskParts(conf, context, routes, stats, outboxes, ack_buffer, wiring)


# -- snapshots ---------------------------------------------------------------------------


def routes_state(routes: dict[str, Any], engine: dict[str, Any]) -> bytes | None:
    """The routers of a task's routes (round-robin positions, partial-key loads), or
    None if one cannot be pickled (a restored task then starts its routers anew)."""
    try:
        return dump_state({stream: route.choose for stream, route in routes.items()}, engine)
    except Exception:
        return None


def restore_routes(routes: dict[str, Any], payload: bytes | None, engine: dict[str, Any]) -> None:
    """Put the routers of :func:`routes_state` back into ``routes``."""
    if payload is not None:
        for stream, choose in load_state(payload, engine).items():
            routes[stream].choose = choose


class _SnapshotPickler(cloudpickle.Pickler):
    """Pickles a task's state, writing the engine's objects as references."""

    def __init__(self, stream: io.BytesIO, engine: dict[int, str]) -> None:
        super().__init__(stream, protocol=PICKLE)
        self._engine = engine

    def persistent_id(self, obj: Any) -> str | None:
        return self._engine.get(id(obj))


class _SnapshotUnpickler(pickle.Unpickler):
    """Loads a task's state, binding references to this task's engine objects."""

    def __init__(self, stream: io.BytesIO, engine: dict[str, Any]) -> None:
        super().__init__(stream)
        self._engine = engine

    def persistent_load(self, pid: Any) -> Any:
        return self._engine[pid]


def dump_state(state: Any, engine: dict[str, Any]) -> bytes:
    """Pickle ``state``; the objects in ``engine`` (by name) are written as references.

    Raises:
        Exception: whatever pickling raises for an attribute that cannot be pickled.
    """
    stream = io.BytesIO()
    _SnapshotPickler(stream, {id(obj): name for name, obj in engine.items()}).dump(state)
    return stream.getvalue()


def load_state(payload: bytes, engine: dict[str, Any]) -> Any:
    """Unpickle what :func:`dump_state` wrote, with this task's engine objects."""
    return _SnapshotUnpickler(io.BytesIO(payload), engine).load()


class SnapshotStore:
    """Snapshots of one task: ``<directory>/<batch id>.snapshot``, written atomically.

    The snapshot of batch ``b`` is the task's state after ``b``; a batch starts from the
    newest snapshot before it, so a batch run again (a retry, a replay after a crash)
    starts from the state before its first run.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    def batches(self) -> list[int]:
        """Batch ids with a snapshot, ascending."""
        return sorted(
            int(match.group(1))
            for match in map(_SNAPSHOT.match, os.listdir(self.directory))
            if match is not None
        )

    def latest_before(self, batch_id: int) -> int | None:
        """The newest snapshot's batch id before ``batch_id`` (None if there is none);
        older ones are removed (their batches were committed)."""
        before = [b for b in self.batches() if b < batch_id]
        for old in before[:-1]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._path(old))
        return before[-1] if before else None

    def _path(self, batch_id: int) -> str:
        return os.path.join(self.directory, f"{batch_id}.snapshot")

    def read(self, batch_id: int) -> bytes:
        """The snapshot taken after ``batch_id``."""
        with open(self._path(batch_id), "rb") as handle:
            return handle.read()

    def write(self, batch_id: int, payload: bytes) -> None:
        """Store the state after ``batch_id``."""
        path = self._path(batch_id)
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "wb") as handle:
            handle.write(payload)
        os.replace(temporary, path)


def picklable_state(component: Any, engine: dict[str, Any]) -> tuple[bytes, list[str]]:
    """The snapshot of ``component`` and the attributes left out because they cannot
    be pickled (connections, locks made in ``prepare``: a restored task keeps its own)."""
    try:
        return dump_state(component, engine), []
    except Exception:
        pass
    attributes = vars(component)
    kept: dict[str, Any] = {}
    skipped: list[str] = []
    for name, value in attributes.items():
        try:
            dump_state(value, engine)
        except Exception:
            skipped.append(name)
            continue
        kept[name] = value
    return dump_state(_Attributes(kept), engine), skipped


class _Attributes:
    """The picklable attributes of a component that cannot be pickled whole."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values


def restore_state(component: Any, payload: bytes, engine: dict[str, Any]) -> Any:
    """``component`` with the state of a snapshot: the snapshot's object, or (for a
    component pickled attribute by attribute) ``component`` with those attributes set."""
    loaded = load_state(payload, engine)
    if isinstance(loaded, _Attributes):
        vars(component).update(loaded.values)
        return component
    return loaded


def task_directory(state_dir: str, component_id: str, task_index: int) -> str:
    """Where the snapshots of a task live."""
    safe = component_id.replace("/", "_")
    return os.path.join(state_dir, safe, str(task_index))
