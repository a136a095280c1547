"""Snapshots of a core topology's tasks on Spark.

A task's snapshot is its component object pickled after a batch, with the engine's
objects (collector, context) left out as references and re-bound when it is restored,
together with its routers (round-robin positions, partial-key loads), so a restored
task continues exactly where the snapshot was taken.

Runs where the task runs: a bolt task on an executor, a spout task in its source's
process.
"""

from __future__ import annotations

import io
import pickle
import re
from typing import Any, NamedTuple

from squall.runtime.codepickle import CodePickler
from squall.runtime.routing import StreamRoute
from squall.spark.control import storage
from squall.spark.control.storage import join

PICKLE = pickle.HIGHEST_PROTOCOL

_SNAPSHOT = re.compile(r"^(-?\d+)\.snapshot$")

#: The engine's objects a component refers to (collector, context), by name: written
#: as references, re-bound on restore.
Engine = dict[str, object]


class TaskSnapshot(NamedTuple):
    """A bolt task's state after a batch."""

    #: The component (see :func:`picklable_state`).
    component: bytes
    #: Its routers' state, or None if they cannot be pickled.
    routes: bytes | None


def routes_state(routes: dict[str, StreamRoute], engine: Engine) -> bytes | None:
    """The routers of a task's routes (round-robin positions, partial-key loads), or
    None if one cannot be pickled (a restored task then starts its routers anew)."""
    try:
        return dump_state({stream: route.router for stream, route in routes.items()}, engine)
    except Exception:
        return None


def restore_routes(routes: dict[str, StreamRoute], payload: bytes | None, engine: Engine) -> None:
    """Put the routers of :func:`routes_state` back into ``routes``."""
    if payload is not None:
        for stream, router in load_state(payload, engine).items():
            routes[stream].router = router


class _SnapshotPickler(CodePickler):
    """Pickles a task's state, writing the engine's objects as references."""

    def __init__(self, stream: io.BytesIO, engine: dict[int, str]) -> None:
        super().__init__(stream, protocol=PICKLE)
        self._engine = engine

    def persistent_id(self, obj: object) -> str | None:
        return self._engine.get(id(obj))


class _SnapshotUnpickler(pickle.Unpickler):
    """Loads a task's state, binding references to this task's engine objects."""

    def __init__(self, stream: io.BytesIO, engine: Engine) -> None:
        super().__init__(stream)
        self._engine = engine

    def persistent_load(self, pid: str) -> object:
        return self._engine[pid]


def dump_state(state: object, engine: Engine) -> bytes:
    """Pickle ``state``; the objects in ``engine`` (by name) are written as references.

    Raises:
        Exception: whatever pickling raises for an attribute that cannot be pickled.
    """
    stream = io.BytesIO()
    _SnapshotPickler(stream, {id(obj): name for name, obj in engine.items()}).dump(state)
    return stream.getvalue()


def load_state(payload: bytes, engine: Engine) -> Any:
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
        storage.makedirs(directory)

    def batches(self) -> list[int]:
        """Batch ids with a snapshot, ascending."""
        return sorted(
            int(match.group(1))
            for match in map(_SNAPSHOT.match, storage.listdir(self.directory))
            if match is not None
        )

    def latest_before(self, batch_id: int) -> int | None:
        """The newest snapshot's batch id before ``batch_id`` (None if there is none);
        older ones are removed (their batches were committed)."""
        before = [b for b in self.batches() if b < batch_id]
        for old in before[:-1]:
            storage.remove(self._path(old))
        return before[-1] if before else None

    def _path(self, batch_id: int) -> str:
        return join(self.directory, f"{batch_id}.snapshot")

    def read(self, batch_id: int) -> TaskSnapshot:
        """The snapshot taken after ``batch_id``."""
        return TaskSnapshot(*pickle.loads(storage.read_bytes(self._path(batch_id))))

    def write(self, batch_id: int, snapshot: TaskSnapshot) -> None:
        """Store the state after ``batch_id``."""
        payload = pickle.dumps(tuple(snapshot), PICKLE)
        storage.write_bytes(self._path(batch_id), payload, durable=False)


def picklable_state(component: object, engine: Engine) -> tuple[bytes, list[str]]:
    """The snapshot of ``component`` and the attributes left out because they cannot
    be pickled (connections, locks made in ``prepare``: a restored task keeps its own)."""
    try:
        return dump_state(component, engine), []
    except Exception:
        pass
    attributes = vars(component)
    kept: dict[str, object] = {}
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

    def __init__(self, values: dict[str, object]) -> None:
        self.values = values


def restore_state(component: object, payload: bytes, engine: Engine) -> Any:
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
    return join(state_dir, safe, str(task_index))
