"""Storm's XOR acker as an ordinary system bolt.

Every tracked spout tuple starts a tuple tree identified by a random 64-bit root id.
Each copy of a tuple sent to a task carries a random 64-bit edge id per root. The acker
keeps one 64-bit *ack value* per pending root: the XOR of every edge id it has been told
about. A spout emit reports the XOR of the edge ids it sent (``__ack_init``); a bolt's
ack reports its input's edge id XOR the edge ids of the tuples it emitted anchored to
that input (``__ack_ack``). Each edge id is thus XORed in exactly twice, once when the
tuple is created and once when it is acked, so the value returns to zero exactly when
every tuple of the tree is acked (up to a 2^-64 chance of an early zero).

Memory is one small entry per *pending tree*, whatever the number of tuples in it.
"""

from __future__ import annotations

from typing import Any

from squall.model.collectors import OutputCollector
from squall.model.components import Bolt
from squall.model.context import TopologyContext
from squall.model.tuple import Tuple, is_tick_tuple

ACKER_COMPONENT = "__acker"
ACK_INIT_STREAM = "__ack_init"
ACK_ACK_STREAM = "__ack_ack"
ACK_FAIL_STREAM = "__ack_fail"
ACK_RESET_TIMEOUT_STREAM = "__ack_reset_timeout"
#: Many acks and inits in one message, ``[{root: value}, {root: spout task}]`` (a
#: stateful bolt's acks released at a commit; a worker's acks and inits for an acker in
#: another worker process), and the roots of the trees they completed,
#: ``[[root, ...]]`` (direct to the spout task).
ACK_BULK_STREAM = "__ack_bulk"
ACK_DONE_STREAM = "__ack_done"

#: The bits of the random root and edge ids: 62, so that an id and the XOR of ids fit a
#: machine word in the compiled core (a tree's ack value reaches 0 by chance with
#: probability 2**-62 per ack).
ID_BITS = 62


class AckerBolt(Bolt):
    """Tracks pending tuple trees by root id; tells the spout task when one completes.

    Inputs, routed by root id (task ``root % number of acker tasks``, so every message of
    a tree reaches the same acker task; root ids are uniformly random, so this spreads
    trees evenly, as Storm's fields grouping on the id does):
    ``__ack_init [root, value, spout_task]`` from spouts, ``__ack_ack [root, value]``,
    ``__ack_fail [root]`` and ``__ack_reset_timeout [root]`` from bolts. Outputs, direct
    to the spout task: ``__ack_ack [root]``, ``__ack_fail [root]``,
    ``__ack_reset_timeout [root]``.

    Messages may arrive in any order (a bolt's ack can overtake the spout's init); a tree
    completes once the init has arrived and the value is zero. Entries not completed
    within two tick periods (ticks come every message timeout) are dropped silently: the
    spout times the tuple out on its own.
    """

    outputs = {
        ACK_DONE_STREAM: ["ids"],
        ACK_ACK_STREAM: ["id"],
        ACK_FAIL_STREAM: ["id"],
        ACK_RESET_TIMEOUT_STREAM: ["id"],
    }

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector
        #: root id -> (ack value, spout task or None, generation, failed). Tuples, which
        #: the garbage collector stops tracking: a topology may have hundreds of
        #: thousands of trees in flight (one with stateful bolts holds acks until its
        #: commit), and lists would make every collection walk them.
        self.pending: dict[int, tuple[int, int | None, int, bool]] = {}
        self.generation = 0

    def execute(self, tup: Tuple) -> None:
        stream = tup.stream_info.stream_id
        values = tup.values
        pending = self.pending
        root = values[0]
        value: int
        spout_task: int | None
        generation: int
        failed: bool
        if stream == ACK_ACK_STREAM:
            entry = pending.get(root)
            if entry is None:
                pending[root] = (values[1], None, self.generation, False)
                return
            value, spout_task, generation, failed = entry
            value ^= values[1]
        elif stream == ACK_INIT_STREAM:
            entry = pending.get(root)
            if entry is None:
                value, spout_task, generation, failed = values[1], values[2], self.generation, False
            else:
                value, _, generation, failed = entry
                value ^= values[1]
                spout_task = values[2]
        elif stream == ACK_FAIL_STREAM:
            entry = pending.get(root)
            if entry is None:
                value, spout_task, generation = 0, None, self.generation
            else:
                value, spout_task, generation, _ = entry
            failed = True
        elif stream == ACK_RESET_TIMEOUT_STREAM:
            entry = pending.pop(root, None)
            if entry is None:
                return
            pending[root] = (entry[0], entry[1], self.generation, entry[3])
            if entry[1] is not None:
                self.collector.emit_direct(entry[1], [root], stream=ACK_RESET_TIMEOUT_STREAM)
            return
        elif stream == ACK_BULK_STREAM:
            self._bulk(values[0], values[1])
            return
        elif is_tick_tuple(tup):
            self._expire()
            return
        else:
            return
        if spout_task is None:
            pending[root] = (value, spout_task, generation, failed)
        elif failed:
            pending.pop(root, None)
            self.collector.emit_direct(spout_task, [root], stream=ACK_FAIL_STREAM)
        elif value == 0:
            pending.pop(root, None)
            self.collector.emit_direct(spout_task, [root], stream=ACK_ACK_STREAM)
        else:
            pending[root] = (value, spout_task, generation, failed)

    def _bulk(self, acks: dict[int, int], inits: dict[int, int]) -> None:
        """Apply many acks and inits (``inits``: root -> spout task, for roots whose
        init's value is in ``acks``); tell each spout task in one message which trees
        completed."""
        pending = self.pending
        done: dict[int, list[int]] = {}
        spout_task: int | None
        for root, acked in acks.items():
            entry = pending.get(root)
            init_task = inits.get(root) if inits else None
            if entry is None:
                if init_task is None:
                    pending[root] = (acked, None, self.generation, False)
                    continue
                value, spout_task, generation, failed = acked, init_task, self.generation, False
            else:
                value, spout_task, generation, failed = entry
                value ^= acked
                if init_task is not None:
                    spout_task = init_task
            if spout_task is None:
                pending[root] = (value, spout_task, generation, failed)
            elif failed:
                pending.pop(root, None)
                self.collector.emit_direct(spout_task, [root], stream=ACK_FAIL_STREAM)
            elif value == 0:
                pending.pop(root, None)
                roots = done.get(spout_task)
                if roots is None:
                    done[spout_task] = [root]
                else:
                    roots.append(root)
            else:
                pending[root] = (value, spout_task, generation, failed)
        for spout_task, roots in done.items():
            self.collector.emit_direct(spout_task, [roots], stream=ACK_DONE_STREAM)

    def _expire(self) -> None:
        self.generation += 1
        oldest_kept = self.generation - 1
        pending = self.pending
        expired = []
        for root, entry in pending.items():
            if entry[2] >= oldest_kept:  # its generation
                break
            expired.append(root)
        for root in expired:
            del pending[root]
