"""Outboxes that hold a core task's emitted tuples the way they travel between stages.

On Spark every tuple a core task emits leaves its process in a packet (see
``execute.packets``). The outboxes of a task keep, per stream and target task, a
:class:`WireBox`: the tuples' values in a list and, while every tuple there belongs to
one tree (a root and an edge id: the usual case when acking), their ids in an array of
64-bit integers, so a packet is pickled from them without a ``Tuple`` object per tuple.
The engine-neutral collectors deliver every emit to their task's sink
(``squall.runtime.sinks``): :class:`WireSink` writes them straight into the boxes, in
emit order per stream and target. Acker messages appended to ``outboxes[t]`` reach the
same boxes (or the ledger's list).

Runs in the process of the task (a bolt task on an executor, a spout task in its
source's driver-side process), on the task's thread.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import replace
from random import getrandbits
from typing import Any

from squall.model.clock import Clock
from squall.model.tuple import StreamInfo, Tuple
from squall.runtime.acker import ID_BITS
from squall.runtime.collectors import BoltCollector, SpoutCollector, TaskWiring
from squall.runtime.sinks import EmitSink
from squall.spark.execute.packets import (
    PACKET_TUPLES,
    Packet,
    pack_trees,
    pack_tuples,
    pack_values,
)
from squall.spark.plan.core import LEDGER_TASK

#: What a :class:`WireBox` holds: nothing yet, untracked tuples only, tuples in one
#: tree each (ids in ``ids``), or any mix (ids per tuple in ``roots``).
EMPTY, UNTRACKED, TREES, MIXED = 0, 1, 2, 3

Roots = Sequence[int] | None


class WireBox:
    """The tuples one task sent on one stream to one target task since the last drain,
    in emit order."""

    __slots__ = ("ids", "mode", "roots", "values")

    def __init__(self) -> None:
        self.mode = EMPTY
        self.values: list[Sequence[Any]] = []
        #: ``TREES``: root and edge id of each tuple, flat.
        self.ids = array("Q")
        #: ``MIXED``: each tuple's ids (None: untracked).
        self.roots: list[Roots] = []

    def add(self, values: Sequence[Any], roots: Roots) -> None:
        """Add a tuple with its ids (``Tuple.tree_ids``)."""
        mode = self.mode
        if roots is None:
            if mode in (EMPTY, UNTRACKED):
                self.mode = UNTRACKED
                self.values.append(values)
                return
        elif len(roots) == 2 and mode in (EMPTY, TREES):
            self.mode = TREES
            self.values.append(values)
            self.ids.extend(roots)
            return
        if mode != MIXED:
            self.roots = self._roots_so_far()
            self.ids = array("Q")
            self.mode = MIXED
        self.values.append(values)
        self.roots.append(roots)

    def _roots_so_far(self) -> list[Roots]:
        if self.mode == TREES:
            flat = iter(self.ids.tolist())
            return list(zip(flat, flat, strict=False))
        return [None] * len(self.values)

    def payloads(self) -> list[tuple[int, bytes]]:
        """The tuples packed (see ``execute.packets``), ``PACKET_TUPLES`` at most per
        payload, with their counts."""
        values, mode = self.values, self.mode
        found = []
        for start in range(0, len(values), PACKET_TUPLES):
            chunk = values[start : start + PACKET_TUPLES]
            stop = start + len(chunk)
            if mode == TREES:
                payload = pack_trees(chunk, self.ids[2 * start : 2 * stop].tobytes())
            elif mode == MIXED:
                payload = pack_tuples(chunk, self.roots[start:stop])
            else:
                payload = pack_values(chunk)
            found.append((len(chunk), payload))
        return found


class Outboxes(Sequence[Any]):
    """The outboxes of one task, indexed by task id as the engine-neutral collectors
    expect (``outboxes[t].append(tup)``): index ``LEDGER_TASK`` holds its fail messages
    (a list), any other index the task's :class:`WireBox` per stream for that target.

    Args:
        max_task_id: the highest task id of the topology.
        source_task: the task whose outboxes these are.
    """

    def __init__(self, max_task_id: int, source_task: int) -> None:
        self.source_task = source_task
        self.size = max_task_id + 1
        #: Fail messages to the XOR ledger.
        self.ledger: list[Tuple] = []
        #: Stream -> its boxes, indexed by target task id.
        self.rows: dict[StreamInfo, list[WireBox]] = {}
        self._targets = [_TargetOutbox(self, task_id) for task_id in range(self.size)]

    def __getitem__(self, task_id: int) -> Any:  # type: ignore[override]
        return self.ledger if task_id == LEDGER_TASK else self._targets[task_id]

    def __len__(self) -> int:
        return self.size

    def row(self, info: StreamInfo) -> list[WireBox]:
        """The boxes of stream ``info``, indexed by target task id."""
        row = self.rows.get(info)
        if row is None:
            row = self.rows[info] = [WireBox() for _ in range(self.size)]
        return row

    def drain_ledger(self) -> list[int]:
        """Roots failed explicitly since the last call."""
        roots = [tup.values[0] for tup in self.ledger]
        self.ledger.clear()
        return roots

    def drain_packets(self, locations: dict[int, tuple[int, int]]) -> list[Packet]:
        """The tuples sent since the last call, in packets, in emit order per stream and
        target."""
        packets: list[Packet] = []
        source_task = self.source_task
        for info, row in self.rows.items():
            component, stream = info.component_id, info.stream_id
            for task_id, box in enumerate(row):
                if box.mode == EMPTY:
                    continue
                row[task_id] = WireBox()
                dest, index = locations[task_id]
                for size, payload in box.payloads():
                    packet = Packet(dest, index, component, stream, source_task, size, payload)
                    packets.append(packet)
        return packets


class _TargetOutbox:
    """``outboxes[t]`` for a target task ``t``: ``append(tup)`` puts the tuple in its
    stream's box."""

    __slots__ = ("outboxes", "task_id")

    def __init__(self, outboxes: Outboxes, task_id: int) -> None:
        self.outboxes = outboxes
        self.task_id = task_id

    def append(self, tup: Tuple) -> None:
        self.outboxes.row(tup.stream_info)[self.task_id].add(tup.values, tup.tree_ids)


class WireSink(EmitSink):
    """A task's emits written straight into its :class:`WireBox` es: the values, and
    the ids of each tuple's trees, without a ``Tuple`` per tuple.

    Args:
        outboxes: the task's outboxes.
    """

    __slots__ = ("_outboxes", "_rows")

    def __init__(self, outboxes: Outboxes) -> None:
        self._outboxes = outboxes
        self._rows = outboxes.rows

    def send(
        self, info: StreamInfo, source: int, targets: list[int], values: Sequence[Any]
    ) -> None:
        """See :meth:`EmitSink.send`."""
        row = self._rows.get(info) or self._outboxes.row(info)
        for target in targets:
            box = row[target]
            if box.mode <= UNTRACKED:
                box.mode = UNTRACKED
                box.values.append(values)
            else:
                box.add(values, None)

    def send_tree(
        self,
        info: StreamInfo,
        source: int,
        targets: list[int],
        values: Sequence[Any],
        root: int,
    ) -> int:
        """See :meth:`EmitSink.send_tree`."""
        row = self._rows.get(info) or self._outboxes.row(info)
        ack_val = 0
        for target in targets:
            edge = getrandbits(ID_BITS)
            ack_val ^= edge
            box = row[target]
            if box.mode == TREES or box.mode == EMPTY:
                box.mode = TREES
                box.values.append(values)
                ids = box.ids
                ids.append(root)
                ids.append(edge)
            else:
                box.add(values, (root, edge))
        return ack_val

    def send_to(
        self,
        info: StreamInfo,
        source: int,
        target: int,
        values: Sequence[Any],
        tree_ids: tuple[int, ...] | None,
    ) -> None:
        """See :meth:`EmitSink.send_to`."""
        self._outboxes.row(info)[target].add(values, tree_ids)


class WireOutputCollector(BoltCollector):
    """A bolt task's collector on Spark: the engine-neutral one, delivering into the
    task's :class:`WireBox` es through a :class:`WireSink`."""

    def __init__(self, wiring: TaskWiring, outboxes: Outboxes) -> None:
        super().__init__(replace(wiring, sink=WireSink(outboxes)))


class WireSpoutOutputCollector(SpoutCollector):
    """A spout task's collector on Spark: the engine-neutral one, delivering into the
    task's :class:`WireBox` es through a :class:`WireSink`."""

    def __init__(self, wiring: TaskWiring, clock: Clock, outboxes: Outboxes) -> None:
        super().__init__(replace(wiring, sink=WireSink(outboxes)), clock)
