"""A reliable spout that replays failed tuples until they succeed.

``messages`` emits ``message-0``, ``message-1``, ... each with its number as message id,
and keeps every message in ``pending`` until it is acked. ``flaky`` fails each message
the first time it sees it by raising :class:`~squall.FailedException` (a
:class:`~squall.BasicBolt` then fails the input instead of acking it, without reporting
an error). The acker tells the spout, whose ``fail`` queues the message for replay; the
replay succeeds, so in the end every message is acked exactly once after failing exactly
once. The fields grouping on ``"id"`` sends a replay to the task that saw the first try.

The spout records ``acked`` and ``failed`` (message id -> number of calls), which is
what the tests check.

Run it::

    squall run examples/reliable_spout.py --seconds 5

The input is finite (``build_topology(count=10_000)`` by default), so a run ends with
every message acked; the summary shows as many failures as acks on the spout.
"""

from __future__ import annotations

from typing import Any

from squall import (
    BasicBolt,
    BasicOutputCollector,
    FailedException,
    Spout,
    SpoutOutputCollector,
    StormTopology,
    TopologyBuilder,
    TopologyContext,
    Tuple,
)


class ReplayingSpout(Spout):
    """Emits ``count`` numbered messages; replays a message whenever its tree fails."""

    outputs = ["id", "text"]

    def __init__(self, count: int) -> None:
        self.count = count

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self.collector = collector
        self.next_id = 0
        self.pending: dict[int, str] = {}
        self.replay: list[int] = []
        self.acked: dict[int, int] = {}
        self.failed: dict[int, int] = {}

    def next_tuple(self) -> None:
        if self.replay:
            msg_id = self.replay.pop(0)
        elif self.next_id < self.count:
            msg_id = self.next_id
            self.next_id += 1
            self.pending[msg_id] = f"message-{msg_id}"
        else:
            return
        self.collector.emit([msg_id, self.pending[msg_id]], msg_id=msg_id)

    def ack(self, msg_id: Any) -> None:
        del self.pending[msg_id]
        self.acked[msg_id] = self.acked.get(msg_id, 0) + 1

    def fail(self, msg_id: Any) -> None:
        self.failed[msg_id] = self.failed.get(msg_id, 0) + 1
        self.replay.append(msg_id)


class FailFirstTime(BasicBolt):
    """Fails each message id the first time it arrives; passes replays through."""

    outputs = ["id", "text"]

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        self.seen: set[int] = set()

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        msg_id = tup["id"]
        if msg_id not in self.seen:
            self.seen.add(msg_id)
            raise FailedException(f"first try of message {msg_id}")
        self.seen.discard(msg_id)
        collector.emit([msg_id, tup["text"]])


class Sink(BasicBolt):
    """The end of the line: receives the messages that made it (and acks them)."""

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        pass


#: What ``squall run`` shows under its final metrics (as ``--show`` would):
#: how many messages ``flaky`` passed on (each once, on its replay) and the last ones.
show = ["flaky"]


def build_topology(count: int = 10_000) -> StormTopology:
    """messages -> flaky (fields grouping on id) -> sink."""
    builder = TopologyBuilder()
    builder.set_spout("messages", ReplayingSpout(count)).set_max_spout_pending(1000)
    builder.set_bolt("flaky", FailFirstTime(), 2).fields_grouping("messages", ["id"])
    builder.set_bolt("sink", Sink(), 1).shuffle_grouping("flaky")
    return builder.create_topology()
