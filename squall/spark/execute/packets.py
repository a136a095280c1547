"""Packets: how tuples travel between the stages of a micro-batch, and from the sources.

A row of a micro-batch's frame is a :class:`Packet`: the stage it goes to, the target
task (the partition the grouping chose), the emitting component and stream, the
emitting task and up to ``PACKET_TUPLES`` tuples pickled together, so a micro-batch of
a million tuples is a few hundred rows for Spark to move, not a million. Core and
Trident/transactional topologies use the same rows.

A packet's payload holds the tuples' values and, on a core topology that tracks tuple
trees, their root and edge ids (:func:`pack_trees`, :func:`pack_tuples`); Trident and
transactional tuples are untracked (:func:`pack_values`).

Payloads are pickled with :func:`~squall.runtime.codepickle.dumps_value`: plain pickle,
unless a value's class is one other processes cannot import (a class of the user's
``__main__`` or of a file run by ``squall run``, which travels by value like the
components), when cloudpickle writes the class with the payload.
"""

from __future__ import annotations

import pickle
from array import array
from collections.abc import Callable, Iterator, Sequence
from itertools import repeat
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

from squall.model.tuple import StreamInfo, Tuple
from squall.runtime.codepickle import dumps_value

if TYPE_CHECKING:
    import pyarrow

#: The Arrow schema of packets (Spark DDL), in the order of :class:`Packet`'s fields.
PACKET_SCHEMA = (
    "dest int, target int, source string, stream string, source_task int, size int, tuples binary"
)
#: Tuples per packet at most.
PACKET_TUPLES = 8192
PICKLE = pickle.HIGHEST_PROTOCOL
#: The ``mapInArrow`` function of a stage: its partition's record batches in, its
#: output's out.
ArrowFunction = Callable[[Iterator["pyarrow.RecordBatch"]], Iterator["pyarrow.RecordBatch"]]
#: ``source_task`` of packets with no emitting task (Trident stages, tick tuples).
NO_TASK = -1

#: How a packet holds its tuples' root and edge ids.
_UNTRACKED, _ONE_TREE, _ANY = 0, 1, 2

Values = list[Any]


class Packet(NamedTuple):
    """One row of a micro-batch's frame."""

    #: The stage (its index in the plan) the tuples go to.
    dest: int
    #: The target task's index within its component: the stage's partition.
    target: int
    #: The emitting component.
    source: str
    #: The stream the tuples were emitted on.
    stream: str
    #: The emitting task's id (core topologies), or ``NO_TASK``.
    source_task: int
    #: How many tuples the packet holds.
    size: int
    #: The tuples, pickled (see :func:`pack_trees`, :func:`pack_tuples`, :func:`pack_values`).
    tuples: bytes


def pack_trees(values: Sequence[Sequence[Any]], ids: bytes) -> bytes:
    """Pickle tuples that are each in one tree: their values as a list, their root and
    edge ids as one array of 64-bit integers (``ids``: root, edge, root, edge...), which
    pickles and loads faster than Python ints."""
    return dumps_value((values, _ONE_TREE, ids))


def pack_tuples(values: Sequence[Sequence[Any]], roots: Sequence[Sequence[int] | None]) -> bytes:
    """Pickle tuples with any ids: each tuple's ``(root, edge, root, edge...)`` or None
    when it is not tracked."""
    return dumps_value((values, _ANY, list(roots)))


def pack_values(values: Sequence[Sequence[Any]]) -> bytes:
    """Pickle untracked tuples' values."""
    return dumps_value((values, _UNTRACKED, None))


def unpack(payload: bytes, info: StreamInfo, source_task: int) -> list[Tuple]:
    """The tuples of a packet (made by :func:`pack_trees`, :func:`pack_tuples` or
    :func:`pack_values`)."""
    values, kind, roots = pickle.loads(payload)
    count = len(values)
    infos, tasks = repeat(info, count), repeat(source_task, count)
    if kind == _UNTRACKED:
        return list(map(Tuple, values, infos, tasks))
    if kind == _ONE_TREE:
        ids = array("Q")
        ids.frombytes(roots)
        flat = iter(ids.tolist())
        roots = zip(flat, flat, strict=False)
    return list(map(Tuple, values, infos, tasks, roots))


def unpack_values(payload: bytes) -> list[Values]:
    """The values of a packet's tuples, without their ids."""
    values: list[Values] = pickle.loads(payload)[0]
    return values


def value_packets(
    dest: int, target: int, source: str, stream: str, values: Sequence[Values]
) -> Iterator[Packet]:
    """Untracked tuples in packets of at most ``PACKET_TUPLES``."""
    for start in range(0, len(values), PACKET_TUPLES):
        chunk = list(values[start : start + PACKET_TUPLES])
        yield Packet(dest, target, source, stream, NO_TASK, len(chunk), pack_values(chunk))


def packets_to_arrow(packets: Sequence[Packet], pa: ModuleType) -> pyarrow.RecordBatch:
    """An Arrow record batch of packets (``PACKET_SCHEMA``); ``pa`` is ``pyarrow``,
    imported by the caller (in Spark's Python workers)."""
    return pa.RecordBatch.from_arrays(
        [
            pa.array([p.dest for p in packets], pa.int32()),
            pa.array([p.target for p in packets], pa.int32()),
            pa.array([p.source for p in packets], pa.string()),
            pa.array([p.stream for p in packets], pa.string()),
            pa.array([p.source_task for p in packets], pa.int32()),
            pa.array([p.size for p in packets], pa.int32()),
            pa.array([p.tuples for p in packets], pa.binary()),
        ],
        names=list(Packet._fields),
    )


def packets_from_arrow(batch: pyarrow.RecordBatch) -> Iterator[Packet]:
    """The packets of an Arrow record batch of ``PACKET_SCHEMA``."""
    columns = [batch.column(name).to_pylist() for name in Packet._fields]
    return map(Packet._make, zip(*columns, strict=True))
