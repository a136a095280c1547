"""The board: counters the worker processes of one topology share through memory.

Every worker process writes its own figures on a shared file mapping of 64-bit
integers each loop turn, and reads its peers' ones without asking them: how deep each
task's receive queue is (backpressure across workers), what each worker has sent to
each task and what the task's worker has taken in (tuples in flight), the spout tasks'
pending trees, and whether each worker is idle. The supervising process reads the same
board to tell when the whole topology is drained.

Layout, in slots of 8 bytes: ``idle[W] | depth[T] | pending[T] | sent[W][T] |
consumed[W][T]``, where ``W`` is the number of workers and ``T`` one more than the
highest task id. Each slot has one writer: ``idle[w]`` by worker ``w``; ``depth[t]``,
``pending[t]`` and ``consumed[s][t]`` (tuples for task ``t`` taken in from worker ``s``)
by the worker running task ``t``; ``sent[s][t]`` by worker ``s``. An aligned 8-byte
store is never seen torn, so a reader sees each slot's last value or the one before.

A connection between two workers starts both its counters at zero (the sender zeroes
``sent[s][t]`` for the receiver's tasks as it connects, the receiver zeroes
``consumed[s][t]`` as it accepts), so a worker that dies and comes back leaves no
tuples counted in flight for ever.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path


class Board:
    """A view of the shared counters (see the module docstring).

    Args:
        path: the file backing the mapping (in a directory of the topology's).
        num_workers: ``W``.
        num_slots: ``T``: one more than the highest task id.
        create: make the file (the supervising process, once) rather than open it.
    """

    def __init__(self, path: Path, num_workers: int, num_slots: int, create: bool) -> None:
        self.num_workers = num_workers
        self.num_slots = num_slots
        size = 8 * (num_workers + 2 * num_slots + 2 * num_workers * num_slots)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        descriptor = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(descriptor, size)
            self._map = mmap.mmap(descriptor, size)
        finally:
            os.close(descriptor)
        #: The slots, as 64-bit signed integers.
        self.slots = memoryview(self._map).cast("q")
        self.depth_at = num_workers
        self.pending_at = self.depth_at + num_slots
        self.sent_at = self.pending_at + num_slots
        self.consumed_at = self.sent_at + num_workers * num_slots

    def sent_row(self, worker: int) -> int:
        """Where ``sent[worker][0]`` is."""
        return self.sent_at + worker * self.num_slots

    def consumed_row(self, worker: int) -> int:
        """Where ``consumed[worker][0]`` is."""
        return self.consumed_at + worker * self.num_slots

    def in_flight(self, task: int) -> int:
        """Tuples sent to ``task`` that its worker has not taken in yet (every sender)."""
        slots = self.slots
        total = 0
        for worker in range(self.num_workers):
            sent = slots[self.sent_row(worker) + task]
            consumed = slots[self.consumed_row(worker) + task]
            if sent > consumed:
                total += sent - consumed
        return total

    def drained(self, workers: range | list[int], tasks: list[int], spouts: list[int]) -> bool:
        """No tuple in flight to or queued at ``tasks``, every worker of ``workers``
        idle, and (unless ``spouts`` is empty) no tree pending at those spout tasks.

        Reads the flows first and the idle flags last: a worker that takes tuples in
        clears its idle flag before it counts them (see :class:`Exchange`)."""
        slots = self.slots
        for task in tasks:
            if self.in_flight(task):
                return False
        for task in tasks:
            if slots[self.depth_at + task]:
                return False
        for task in spouts:
            if slots[self.pending_at + task]:
                return False
        return all(slots[worker] for worker in workers)

    def reset_worker(self, worker: int, tasks: list[int]) -> None:
        """A worker starting (again): its flags and its tasks' figures back to zero, and
        what it had sent anywhere forgotten."""
        slots = self.slots
        slots[worker] = 0
        for task in tasks:
            slots[self.depth_at + task] = 0
            slots[self.pending_at + task] = 0
            for sender in range(self.num_workers):
                slots[self.consumed_row(sender) + task] = 0
        row = self.sent_row(worker)
        for task in range(self.num_slots):
            slots[row + task] = 0

    def close(self) -> None:
        """Release the mapping (the view first)."""
        self.slots.release()
        self._map.close()


__all__ = ["Board"]
