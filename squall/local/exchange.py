"""Tuples between worker processes: what a worker holds for other workers' tasks, how
it sends it at the end of each loop turn, and how it takes in what its peers sent.

A task emitting to a task of another worker appends to that task's
:class:`RemoteInbox` (a list: the same cost as the in-memory queue of a local task).
At the end of the loop turn the worker encodes, per peer, every tuple it holds for
that peer's tasks into one frame (:mod:`squall.local.codec`) and sends it
(:mod:`squall.local.transport`); the peer decodes the frame into tuples on its tasks'
queues. Tuples from one task to another keep their order.

A frame holds, for each target task, the task's id and then its tuples in five
columns (lists of one entry per tuple): stream numbers, source tasks, anchors, values.
The stream number indexes a :class:`StreamTable` every worker builds alike from the
topology, so the receiving task's tuple has the stream's names and fields as if it had
been emitted in its own process. Columns let both ends work a list at a time (the
receiver builds a task's tuples with one ``map``).

Backpressure: the length of a remote inbox is what the worker holds for the task,
plus the task's queue at its own worker, plus what this worker sent that the task's
worker has not taken in yet (read from the :class:`~squall.local.board.Board`), so
:mod:`squall.local.backpressure` holds producers back across workers as it does
within one.

Used by the worker process's loop thread only.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from mypy_extensions import mypyc_attr

from squall.local.board import Board
from squall.local.codec import UnsendableValueError, decode, encode
from squall.local.transport import Links
from squall.model.topology import StormTopology
from squall.model.tuple import SYSTEM_COMPONENT, StreamInfo, Tuple
from squall.runtime.collectors import ACK_BUFFER_STREAMS
from squall.runtime.metrics import TaskStats
from squall.runtime.plan import TaskPlan

logger = logging.getLogger("squall")

#: Entries per target task in a frame (a flat list): the task id, then its tuples'
#: stream numbers, source tasks, anchors (a list of root and edge ids, or None) and
#: values, each a list with one entry per tuple.
GROUP = 5


class StreamTable:
    """Every stream of a topology by number: ``(component, stream)`` sorted, the
    acker messages' streams (component ``__system``) included."""

    def __init__(self, topology: StormTopology) -> None:
        keys: dict[tuple[str, str], StreamInfo] = {}
        for spec in topology:
            for stream_id, declaration in spec.streams.items():
                keys[(spec.component_id, stream_id)] = StreamInfo(
                    spec.component_id, stream_id, declaration.fields
                )
        for stream_id, fields in ACK_BUFFER_STREAMS.items():
            keys[(SYSTEM_COMPONENT, stream_id)] = StreamInfo(SYSTEM_COMPONENT, stream_id, fields)
        ordered = sorted(keys)
        #: Stream number -> its info (shared by every tuple received on it).
        self.infos = [keys[key] for key in ordered]
        self._numbers = {key: number for number, key in enumerate(ordered)}
        self._by_info: dict[StreamInfo, int] = {}

    def number(self, info: StreamInfo) -> int:
        """The number of the stream ``info`` describes.

        Raises:
            KeyError: the topology declares no such stream.
        """
        number = self._by_info.get(info)
        if number is None:
            number = self._by_info[info] = self._numbers[(info.component_id, info.stream_id)]
        return number


@mypyc_attr(native_class=False)  # a list subclass: an ordinary class when compiled
class RemoteInbox(list[Tuple]):
    """The tuples this worker holds for ``task`` of worker ``worker`` until the end of
    the loop turn. ``len()`` also counts the task's queue at its worker and what is in
    flight to it from here (see the module docstring)."""

    __slots__ = ("_board", "_consumed", "_depth", "_sent", "task", "worker")

    def __init__(self, task: int, worker: int, board: Board, me: int) -> None:
        super().__init__()
        self.task = task
        self.worker = worker
        self._board = board.slots
        self._depth = board.depth_at + task
        self._sent = board.sent_row(me) + task
        self._consumed = board.consumed_row(me) + task

    def __len__(self) -> int:
        slots = self._board
        in_flight = slots[self._sent] - slots[self._consumed]
        return list.__len__(self) + slots[self._depth] + (in_flight if in_flight > 0 else 0)


class Exchange:
    """Sends what this worker holds for its peers and takes in what they sent.

    Args:
        me: this worker's index.
        plan: the topology's task plan (which worker runs each task).
        table: the topology's streams by number.
        board: the shared counters.
        links: this worker's connections.
        inboxes: indexed by task id: this worker's tasks' queues (the others are
            replaced by :class:`RemoteInbox` es here).
    """

    def __init__(
        self,
        me: int,
        plan: TaskPlan,
        table: StreamTable,
        board: Board,
        links: Links,
        inboxes: list[Any],
    ) -> None:
        self.me = me
        self.table = table
        self.board = board
        self.links = links
        self.inboxes = inboxes
        #: ``report(task, error)``: records an error on a task of this worker (set by
        #: the engine once the tasks exist; until then, errors are logged).
        self.report: Callable[[int, BaseException], None] = report_on({})
        self._slots = board.slots
        self.own_tasks = sorted(t for t, w in plan.task_worker.items() if w == me)
        self._peer_tasks: dict[int, list[int]] = {}
        self._remote: dict[int, list[RemoteInbox]] = {}
        for task, worker in sorted(plan.task_worker.items()):
            if worker == me:
                continue
            inbox = RemoteInbox(task, worker, board, me)
            inboxes[task] = inbox
            self._remote.setdefault(worker, []).append(inbox)
            self._peer_tasks.setdefault(worker, []).append(task)
        self._own_inboxes: list[tuple[int, deque[Tuple]]] = [
            (task, inboxes[task]) for task in self.own_tasks
        ]
        self._connected: set[int] = set()
        #: Spout task -> a callable giving its pending trees (published for the
        #: supervisor's idle check).
        self.pending_of: dict[int, Callable[[], int]] = {}
        #: Tuples dropped because their worker could not be reached.
        self.dropped = 0
        #: Tuples sent to and taken in from other workers.
        self.sent = 0
        self.received = 0

    # The loop's turn -------------------------------------------------------------------

    def turn(self, done: int) -> int:
        """Send what is held for peers, take in what arrived, publish this worker's
        figures. ``done``: the work the turn did. Returns the tuples taken in."""
        slots = self._slots
        board = self.board
        if done:
            slots[self.me] = 0
        for peer, remote in self._remote.items():
            if any(list.__len__(inbox) for inbox in remote):
                self._send(peer, remote)
        self.links.flush()
        frames = self.links.receive()
        for sender in self.links.take_connected():
            row = board.consumed_row(sender)
            for task in self.own_tasks:
                slots[row + task] = 0
        for peer in self.links.take_lost():
            self._lost(peer)
        taken = 0
        if frames:
            slots[self.me] = 0
            counts: dict[tuple[int, int], int] = {}
            for link, frame in frames:
                taken += self._take(link.sender, link.newest, frame, counts)
            depth_at = board.depth_at
            for task, inbox in self._own_inboxes:
                slots[depth_at + task] = len(inbox)
            for (sender, task), count in counts.items():
                slots[board.consumed_row(sender) + task] += count
            self.received += taken
        else:
            depth_at = board.depth_at
            for task, inbox in self._own_inboxes:
                slots[depth_at + task] = len(inbox)
        pending_at = board.pending_at
        for task, pending in self.pending_of.items():
            slots[pending_at + task] = pending()
        return taken

    def idle(self) -> bool:
        """Nothing held for peers and nothing unsent."""
        for remote in self._remote.values():
            for inbox in remote:
                if list.__len__(inbox):
                    return False
        return not self.links.unsent()

    def mark_idle(self, idle: bool) -> None:
        """Publish whether this worker is idle (its last turns found no work)."""
        self._slots[self.me] = 1 if idle else 0

    # Sending ---------------------------------------------------------------------------

    def _send(self, peer: int, remote: list[RemoteInbox]) -> None:
        if not self.links.connect(peer):
            for inbox in remote:
                self.dropped += list.__len__(inbox)
                inbox.clear()
            return
        if peer not in self._connected:
            self._connected.add(peer)
            self._zero_sent(peer)
        number = self.table.number
        entries: list[Any] = []
        counts: list[tuple[int, int]] = []
        for inbox in remote:
            held = list.__len__(inbox)
            if not held:
                continue
            entries += (
                inbox.task,
                [number(tup.stream_info) for tup in inbox],
                [tup.source_task for tup in inbox],
                [
                    [tup.root, tup.edge]
                    if tup.root >= 0
                    else (list(roots) if (roots := tup.tree_list) else None)
                    for tup in inbox
                ],
                [tup.values for tup in inbox],
            )
            counts.append((inbox.task, held))
            inbox.clear()
        try:
            frame = encode(entries)
        except UnsendableValueError:
            frame, counts = self._encode_sendable(entries)
        self.links.send(peer, frame)
        slots = self._slots
        row = self.board.sent_row(self.me)
        for task, count in counts:
            slots[row + task] += count
            self.sent += count

    def _encode_sendable(self, entries: list[Any]) -> tuple[bytes, list[tuple[int, int]]]:
        """Encode the tuples of ``entries`` that can be sent; report each one that
        cannot on the task that emitted it (its tree then times out, and a reliable
        spout replays it)."""
        kept: list[Any] = []
        counts: list[tuple[int, int]] = []
        for at in range(0, len(entries), GROUP):
            task, *columns = entries[at : at + GROUP]
            rows = []
            for row in zip(*columns, strict=True):
                try:
                    encode(row)
                except UnsendableValueError as exc:
                    info = self.table.infos[row[0]]
                    error = UnsendableValueError(
                        f"component {info.component_id!r} emitted on stream "
                        f"{info.stream_id!r} to task {task} of another worker process a "
                        f"tuple that cannot be sent there: {exc}"
                    )
                    self.report(row[1], error)
                    continue
                rows.append(row)
            if rows:
                kept += (task, *(list(column) for column in zip(*rows, strict=True)))
                counts.append((task, len(rows)))
        return encode(kept), counts

    def _zero_sent(self, peer: int) -> None:
        slots = self._slots
        row = self.board.sent_row(self.me)
        for task in self._peer_tasks.get(peer, ()):
            slots[row + task] = 0

    def _lost(self, peer: int) -> None:
        """``peer`` died: what was in flight to it is gone."""
        self._connected.discard(peer)
        self._zero_sent(peer)
        # Debug only: a worker that dies is reported by its supervisor, and workers
        # stopping with their topology end their connections too.
        logger.debug(
            "worker %d: the connection to worker %d ended (it stopped or died); tuples "
            "in flight to it are lost and their trees will time out",
            self.me,
            peer,
        )

    # Receiving -------------------------------------------------------------------------

    def _take(
        self, sender: int, newest: bool, frame: bytes, counts: dict[tuple[int, int], int]
    ) -> int:
        entries: Sequence[Any] = decode(frame)
        inboxes = self.inboxes
        stream_info = self.table.infos.__getitem__
        taken = 0
        for at in range(0, len(entries), GROUP):
            task, numbers, sources, anchors, values = entries[at : at + GROUP]
            inboxes[task].extend(map(Tuple, values, map(stream_info, numbers), sources, anchors))
            held = len(values)
            taken += held
            if newest:
                key = (sender, task)
                counts[key] = counts.get(key, 0) + held
        return taken


def report_on(stats_of: dict[int, TaskStats]) -> Callable[[int, BaseException], None]:
    """A ``report`` for :class:`Exchange`: records the error on the task's counters (or
    logs it, for a task that is not this worker's)."""

    def report(task: int, error: BaseException) -> None:
        stats = stats_of.get(task)
        if stats is None:
            logger.error("task %d: %s", task, error)
        else:
            stats.record_error(error, with_traceback=False)

    return report


__all__ = ["Exchange", "RemoteInbox", "StreamTable", "report_on"]
