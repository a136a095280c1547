"""Multiple streams and a direct grouping.

``numbers`` emits the integers 0, 1, 2, ... The ``router`` bolt declares three output
streams: ``"even"`` and ``"odd"`` (ordinary streams) and ``"audit"``, declared
``direct=True``. It sends each number to the stream of its parity and, on the direct
stream, picks the auditor task itself: task ``auditors[number % len(auditors)]``, where
``auditors`` is ``context.get_component_tasks("auditor")``.

Downstream, each bolt subscribes to one stream: ``evens`` squares even numbers, ``odds``
cubes odd ones (both shuffle grouping), and ``auditor`` (three tasks, direct grouping)
emits every number it receives with its own task id.

Run it::

    squall run examples/multi_stream.py --seconds 5

``build_topology(count=100)`` emits 0..99 and stops (used by the tests).
"""

from __future__ import annotations

from typing import Any

from squall import (
    BasicBolt,
    BasicOutputCollector,
    Bolt,
    OutputCollector,
    OutputFieldsDeclarer,
    Spout,
    SpoutOutputCollector,
    StormTopology,
    TopologyBuilder,
    TopologyContext,
    Tuple,
)


class NumberSpout(Spout):
    """Emits 0, 1, 2, ... (``count`` numbers, or forever), each tracked by its value."""

    outputs = ["number"]

    def __init__(self, count: int | None = None) -> None:
        self.count = count

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self.collector = collector
        self.next_number = 0

    def next_tuple(self) -> None:
        if self.count is not None and self.next_number >= self.count:
            return
        number = self.next_number
        self.next_number += 1
        self.collector.emit([number], msg_id=number)


class ParityRouter(Bolt):
    """Routes numbers to the ``"even"``/``"odd"`` streams and to one auditor task."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare_stream("even", ["number"])
        declarer.declare_stream("odd", ["number"])
        declarer.declare_stream("audit", ["number", "parity"], direct=True)

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector
        self.auditors = context.get_component_tasks("auditor")

    def execute(self, tup: Tuple) -> None:
        number = tup["number"]
        parity = "even" if number % 2 == 0 else "odd"
        self.collector.emit([number], anchors=tup, stream=parity)
        auditor = self.auditors[number % len(self.auditors)]
        self.collector.emit_direct(auditor, [number, parity], anchors=tup, stream="audit")
        self.collector.ack(tup)


class Square(BasicBolt):
    """Emits ``[number, number ** 2]``."""

    outputs = ["number", "square"]

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        collector.emit([tup["number"], tup["number"] ** 2])


class Cube(BasicBolt):
    """Emits ``[number, number ** 3]``."""

    outputs = ["number", "cube"]

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        collector.emit([tup["number"], tup["number"] ** 3])


class Auditor(BasicBolt):
    """Emits ``[number, parity, task]``: which auditor task saw which number."""

    outputs = ["number", "parity", "task"]

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        self.task_id = context.task_id

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        collector.emit([tup["number"], tup["parity"], self.task_id])


#: What ``squall run`` shows under its final metrics (as ``--show`` would):
#: the last squares and cubes ``evens`` and ``odds`` emitted.
show = ["evens", "odds"]


def build_topology(count: int | None = None) -> StormTopology:
    """numbers -> router -> {evens on "even", odds on "odd", auditor on direct "audit"}."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", NumberSpout(count)).set_max_spout_pending(1000)
    builder.set_bolt("router", ParityRouter(), 2).shuffle_grouping("numbers")
    builder.set_bolt("evens", Square(), 2).shuffle_grouping("router", "even")
    builder.set_bolt("odds", Cube(), 2).shuffle_grouping("router", "odd")
    builder.set_bolt("auditor", Auditor(), 3).direct_grouping("router", "audit")
    return builder.create_topology()
