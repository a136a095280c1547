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

from squall.model.components import Bolt
from squall.model.tuple import Tuple, is_tick_tuple

ACKER_COMPONENT = "__acker"
ACK_INIT_STREAM = "__ack_init"
ACK_ACK_STREAM = "__ack_ack"
ACK_FAIL_STREAM = "__ack_fail"
ACK_RESET_TIMEOUT_STREAM = "__ack_reset_timeout"

_VALUE, _SPOUT_TASK, _GENERATION, _FAILED = 0, 1, 2, 3


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
        ACK_ACK_STREAM: ["id"],
        ACK_FAIL_STREAM: ["id"],
        ACK_RESET_TIMEOUT_STREAM: ["id"],
    }

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        #: root id -> [ack value, spout task or None, generation, failed]
        self.pending: dict[int, list[Any]] = {}
        self.generation = 0

    def execute(self, tup: Tuple) -> None:
        stream = tup._info.stream_id
        values = tup.values
        pending = self.pending
        if stream == ACK_INIT_STREAM:
            root = values[0]
            entry = pending.get(root)
            if entry is None:
                entry = pending[root] = [values[1], values[2], self.generation, False]
            else:
                entry[_VALUE] ^= values[1]
                entry[_SPOUT_TASK] = values[2]
        elif stream == ACK_ACK_STREAM:
            root = values[0]
            entry = pending.get(root)
            if entry is None:
                pending[root] = [values[1], None, self.generation, False]
                return
            entry[_VALUE] ^= values[1]
        elif stream == ACK_FAIL_STREAM:
            root = values[0]
            entry = pending.get(root)
            if entry is None:
                entry = pending[root] = [0, None, self.generation, True]
            entry[_FAILED] = True
        elif stream == ACK_RESET_TIMEOUT_STREAM:
            root = values[0]
            entry = pending.pop(root, None)
            if entry is None:
                return
            entry[_GENERATION] = self.generation
            pending[root] = entry
            if entry[_SPOUT_TASK] is not None:
                self.collector.emit_direct(
                    entry[_SPOUT_TASK], [root], stream=ACK_RESET_TIMEOUT_STREAM
                )
            return
        elif is_tick_tuple(tup):
            self._expire()
            return
        else:
            return
        spout_task = entry[_SPOUT_TASK]
        if spout_task is None:
            return
        if entry[_FAILED]:
            del pending[root]
            self.collector.emit_direct(spout_task, [root], stream=ACK_FAIL_STREAM)
        elif entry[_VALUE] == 0:
            del pending[root]
            self.collector.emit_direct(spout_task, [root], stream=ACK_ACK_STREAM)

    def _expire(self) -> None:
        self.generation += 1
        oldest_kept = self.generation - 1
        pending = self.pending
        expired = []
        for root, entry in pending.items():
            if entry[_GENERATION] >= oldest_kept:
                break
            expired.append(root)
        for root in expired:
            del pending[root]
