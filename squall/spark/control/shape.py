"""What wrote a topology's checkpoint: the shape of the topology, kept with it.

A checkpoint holds what one topology's spout tasks emitted and its bolt tasks'
snapshots (their component objects, pickled), laid out by its components, streams and
tasks. Resuming it with another topology under the same name would restore the wrong
objects into the wrong tasks and replay batches into the wrong stages. So the first
submission writes the topology's shape next to the checkpoint
(``<checkpoint_dir>/<name>/topology.json``), and each later one compares its own shape
with it: the same topology resumes, another one is refused with
:class:`CheckpointMismatchError` naming what differs, unless the submission asks for a
fresh start (the checkpoint is then removed).

The shape of a component: its kind, its class (and the class of the spout or bolt a
squall wrapper runs, e.g. a windowed bolt's; the user's classes by their names alone, so
a renamed file or ``__main__`` makes no difference), its number of tasks, its streams with
their fields, and its inputs with their groupings (a Trident topology's streams between
segments by their place, since their ids are numbered over the whole process). For a
Trident or transactional topology, also the classes of the spouts and batch bolts of
its batch IR. Parallelism hints beyond the task count, the configuration and the code
inside the classes are not part of it: a fixed bug resumes.

Runs on the driver, when a topology is submitted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Set
from typing import Any

from squall.model.errors import SquallError
from squall.model.topology import ComponentSpec, StormTopology, is_control_stream
from squall.model.tuple import DEFAULT_STREAM
from squall.runtime.shipping import user_modules
from squall.spark.control import storage
from squall.spark.control.storage import join

#: The file of a topology's shape, in ``<checkpoint_dir>/<name>/``.
SHAPE_FILE = "topology.json"
#: Bumped if the shape's form changes.
SHAPE_VERSION = 1

Shape = dict[str, dict[str, Any]]


class CheckpointMismatchError(SquallError):
    """A topology submitted under a name whose checkpoint another topology wrote; the
    message names the topology, the checkpoint and what differs."""


def _class_name(obj: object, user_modules: Set[str]) -> str:
    """The class of ``obj``: by its module and name, or by its name alone when it is
    the user's code (a module of ``user_modules`` or ``__main__``), so the same code
    run from a renamed file, or as ``__main__``, has the same shape."""
    kind = type(obj)
    if kind.__module__ == "__main__" or kind.__module__ in user_modules:
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def implementation(component: object, user_modules: Set[str] = frozenset(), depth: int = 0) -> str:
    """The class of ``component``, with the class of the bolt or spout a squall
    wrapper runs (its ``bolt`` or ``spout``), e.g.
    ``squall.windowing.executor.WindowedBoltExecutor(Averages)``; classes of
    ``user_modules`` (see :func:`squall.runtime.shipping.user_modules`) are named
    without their module."""
    name = _class_name(component, user_modules)
    if depth >= 4 or not type(component).__module__.startswith("squall."):
        return name
    for attribute in ("bolt", "spout"):
        inner = getattr(component, attribute, None)
        if inner is not None and not isinstance(inner, type) and hasattr(inner, "__dict__"):
            return f"{name}({implementation(inner, user_modules, depth + 1)})"
    return name


def _component_shape(
    spec: ComponentSpec, user_modules: Set[str], streams: Mapping[tuple[str, str], str]
) -> dict[str, Any]:
    def stream(component_id: str, stream_id: str) -> str:
        return streams.get((component_id, stream_id), stream_id)

    return {
        "kind": spec.kind,
        "class": implementation(spec.component, user_modules),
        "tasks": spec.num_tasks,
        "streams": dict(
            sorted(
                (
                    stream(spec.component_id, stream_id),
                    [*declaration.fields, *(["(direct)"] if declaration.direct else [])],
                )
                for stream_id, declaration in spec.streams.items()
            )
        ),
        "inputs": sorted(
            f"{sub.source}:{stream(sub.source, sub.stream_id)} by {sub.grouping.describe()}"
            for sub in spec.inputs
        ),
    }


def _trident_streams(topology: StormTopology) -> dict[tuple[str, str], str]:
    """``(component, stream id)`` -> the name the shape gives the stream: in a Trident
    topology, the streams between segments have ids numbered over the whole process
    (``s23``), so the shape names each by its place among its component's streams
    (``#1``, ``#2`` ...). Other streams keep their ids."""
    if topology.batch_ir is None or not topology.batch_ir.numbered_streams:
        return {}
    names: dict[tuple[str, str], str] = {}
    for spec in topology:
        generated = [
            stream_id
            for stream_id in spec.streams
            if stream_id != DEFAULT_STREAM and not is_control_stream(stream_id)
        ]
        for place, stream_id in enumerate(generated, start=1):
            names[spec.component_id, stream_id] = f"#{place}"
    return names


def _batch_classes(topology: StormTopology, user_modules: Set[str]) -> dict[str, str]:
    """Component id -> the class of the spout or batch bolt it runs, from the batch IR
    of a Trident or transactional topology (none for a core topology)."""
    if topology.batch_ir is None:
        return {}
    return {
        component_id: implementation(runs, user_modules)
        for component_id, runs in topology.batch_ir.user_components().items()
    }


def shape_of(topology: StormTopology) -> Shape:
    """Component id -> its shape (see the module's description)."""
    user = set(user_modules(topology))
    streams = _trident_streams(topology)
    shape = {spec.component_id: _component_shape(spec, user, streams) for spec in topology}
    for component_id, runs in _batch_classes(topology, user).items():
        if component_id in shape:
            shape[component_id]["runs"] = runs
    return shape


def differences(written: Shape, submitted: Shape) -> list[str]:
    """What differs between the shape that wrote a checkpoint and a submitted one, one
    phrase per component (empty: the same topology)."""
    found: list[str] = []
    for component_id in sorted(written.keys() | submitted.keys()):
        old, new = written.get(component_id), submitted.get(component_id)
        if new is None:
            found.append(f"component {component_id!r} is gone")
            continue
        if old is None:
            found.append(f"component {component_id!r} is new")
            continue
        changes = _changes(old, new)
        if changes:
            found.append(f"component {component_id!r}: {'; '.join(changes)}")
    return found


def _changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    changes: list[str] = []
    for key in ("kind", "class", "runs"):
        if old.get(key) != new.get(key):
            changes.append(f"{key} {new.get(key)}, was {old.get(key)}")
    if old["tasks"] != new["tasks"]:
        changes.append(f"{new['tasks']} tasks, was {old['tasks']}")
    for stream in sorted(old["streams"].keys() | new["streams"].keys()):
        before, after = old["streams"].get(stream), new["streams"].get(stream)
        if before == after:
            continue
        if after is None:
            changes.append(f"no stream {stream}, was {before}")
        elif before is None:
            changes.append(f"new stream {stream} {after}")
        else:
            changes.append(f"stream {stream} {after}, was {before}")
    changes += _input_changes(old["inputs"], new["inputs"])
    return changes


def _input_changes(old: list[str], new: list[str]) -> list[str]:
    """Inputs added, removed or regrouped, e.g. ``input numbers:default by fields(n),
    was shuffle``."""
    before = {entry.partition(" by ")[0]: entry.partition(" by ")[2] for entry in old}
    after = {entry.partition(" by ")[0]: entry.partition(" by ")[2] for entry in new}
    changes: list[str] = []
    for stream in sorted(before.keys() | after.keys()):
        if before.get(stream) == after.get(stream):
            continue
        if stream not in after:
            changes.append(f"no input {stream}, was by {before[stream]}")
        elif stream not in before:
            changes.append(f"new input {stream} by {after[stream]}")
        else:
            changes.append(f"input {stream} by {after[stream]}, was {before[stream]}")
    return changes


def check_shape(directory: str, name: str, topology: StormTopology, fresh: bool) -> None:
    """Make the checkpoint of topology ``name`` (``directory``:
    ``<checkpoint_dir>/<name>``) one ``topology`` may resume: with ``fresh``, remove
    it; without, refuse it if another topology wrote it. Then record ``topology``'s
    shape there (a checkpoint from before shapes were recorded gets its shape now).

    Raises:
        CheckpointMismatchError: the checkpoint holds the shape of another topology;
            the message names ``name``, ``directory`` and what differs.
    """
    submitted = shape_of(topology)
    path = join(directory, SHAPE_FILE)
    if fresh:
        storage.remove_tree(directory)
    elif storage.exists(path):
        written = json.loads(storage.read_text(path)).get("components", {})
        found = differences(written, submitted)
        if found:
            raise CheckpointMismatchError(
                f"topology {name!r} cannot resume from the checkpoint in {directory}: "
                f"another topology wrote it ({'; '.join(found)}). Submit it under another "
                "name or checkpoint directory, or with fresh=True (squall run --fresh) to "
                "discard that checkpoint and start afresh"
            )
        return
    storage.makedirs(directory)
    document = {"version": SHAPE_VERSION, "components": submitted}
    storage.write_bytes(path, json.dumps(document, indent=1, sort_keys=True).encode())


__all__ = [
    "SHAPE_FILE",
    "CheckpointMismatchError",
    "check_shape",
    "differences",
    "implementation",
    "shape_of",
]
