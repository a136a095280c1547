"""The Spark engine's wire outboxes: a core task's emits become the same tuples, in the
same order per stream and target, as the engine-neutral collector makes of them."""

from __future__ import annotations

import random
import tempfile
from typing import Any

from squall import Bolt, Config, Fields, Spout, TopologyBuilder, Tuple
from squall.model.clock import ManualClock
from squall.model.tuple import StreamInfo
from squall.runtime.collectors import BoltCollector, SpoutCollector
from squall.spark.execute.packets import unpack
from squall.spark.execute.taskstate import CoreSetup, wire_task
from squall.spark.execute.wire import (
    MIXED,
    TREES,
    UNTRACKED,
    WireBox,
    WireOutputCollector,
    WireSpoutOutputCollector,
)
from squall.spark.plan.core import core_plan

INFO = StreamInfo("b", "default", Fields("w"))


class DirectWords(Spout):
    outputs = ["w"]

    def declare_output_fields(self, declarer: Any) -> None:
        super().declare_output_fields(declarer)
        declarer.declare_stream("direct", ["w"], direct=True)

    def next_tuple(self) -> None:
        pass


class Relay(Bolt):
    outputs = {"default": ["w"], "other": ["w", "n"]}

    def declare_output_fields(self, declarer: Any) -> None:
        super().declare_output_fields(declarer)
        declarer.declare_stream("direct", ["w"], direct=True)

    def execute(self, tup: Any) -> None:
        pass


class Sink(Bolt):
    def execute(self, tup: Any) -> None:
        pass


def _setup(acking: bool) -> CoreSetup:
    builder = TopologyBuilder()
    builder.set_spout("s", DirectWords())
    builder.set_bolt("b", Relay()).shuffle_grouping("s")
    builder.set_bolt("e", Sink(), 2).all_grouping("s").direct_grouping("s", "direct")
    sink = builder.set_bolt("c", Sink(), 3)
    sink.fields_grouping("b", Fields("w")).all_grouping("b", "other")
    sink.direct_grouping("b", "direct")
    conf = Config().set_num_ackers(1 if acking else 0)
    core = core_plan("wire", builder.create_topology(), dict(conf))
    return CoreSetup("run", core, tempfile.mkdtemp())


def _tuple(roots: tuple[int, ...] | None, value: str = "x") -> Tuple:
    return Tuple([value], INFO, 5, roots)


def _packed(box: WireBox) -> list[tuple[list[Any], tuple[int, ...] | None]]:
    found = []
    for _, payload in box.payloads():
        found.extend((t.values, t.tree_ids) for t in unpack(payload, INFO, 5))
    return found


def test_a_box_keeps_ids_per_tuple_whatever_it_holds() -> None:
    trees = WireBox()
    for n in range(3):
        trees.add([f"t{n}"], (n, n + 100))
    assert trees.mode == TREES
    assert _packed(trees) == [([f"t{n}"], (n, n + 100)) for n in range(3)]
    untracked = WireBox()
    untracked.add(["u"], None)
    assert untracked.mode == UNTRACKED
    assert _packed(untracked) == [(["u"], None)]
    mixed = WireBox()
    entries = [(["a"], (1, 2)), (["b"], None), (["c"], (3, 4, 5, 6)), (["d"], (7, 8))]
    for values, roots in entries:
        mixed.add(values, roots)
    assert mixed.mode == MIXED
    assert _packed(mixed) == entries
    later = WireBox()
    later.add(["a"], None)
    later.add(["b"], (1, 2))
    assert _packed(later) == [(["a"], None), (["b"], (1, 2))]


def test_a_box_packs_in_packets_of_bounded_size() -> None:
    box = WireBox()
    for n in range(20_000):
        box.add([n], (n, n))
    sizes = [size for size, _ in box.payloads()]
    assert sizes == [8192, 8192, 3616]
    assert [t[0][0] for t in _packed(box)] == list(range(20_000))


def _emit_all(collector: BoltCollector, anchors: list[Tuple], targets_of_c: list[int]) -> None:
    """Every kind of emit, interleaved: one tree, untracked, several anchors, several
    trees in one anchor, direct, two streams."""
    one, two, many = anchors
    for n in range(30):
        collector.emit([f"w{n % 7}"], one)
        collector.emit([f"u{n}"])
        collector.emit([f"o{n}", n], one, "other")
        if n % 5 == 0:
            collector.emit([f"m{n}"], [one, two])
            collector.emit([f"t{n}"], many)
            collector.emit_direct(targets_of_c[n % 3], [f"d{n}"], one, "direct")


def _anchors() -> list[Tuple]:
    info = StreamInfo("s", "default", Fields("w"))
    return [
        Tuple(["a"], info, 1, (11, 12)),
        Tuple(["b"], info, 1, (21, 22)),
        Tuple(["c"], info, 1, (31, 32, 41, 42)),
    ]


def test_the_wire_collector_sends_what_the_engine_neutral_one_does() -> None:
    for acking in (True, False):
        setup = _setup(acking)
        core = setup.core
        task = core.plan.component_tasks["b"][0]
        sinks = list(core.plan.component_tasks["c"])
        plain = wire_task(setup, "b", task)
        expected: list[list[Tuple]] = [[] for _ in range(core.plan.max_task_id + 1)]
        plain.wiring.outboxes = expected
        plain.wiring.ack_buffer = None
        reference = BoltCollector(plain.wiring)
        wired = wire_task(setup, "b", task)
        collector = WireOutputCollector(wired.wiring, wired.outboxes)
        reference_anchors, wire_anchors = _anchors(), _anchors()
        random.seed(3)
        _emit_all(reference, reference_anchors, sinks)
        random.seed(3)
        _emit_all(collector, wire_anchors, sinks)
        assert [a.ack_val for a in wire_anchors] == [a.ack_val for a in reference_anchors]
        received: dict[tuple[int, str], list[tuple[Any, Any]]] = {}
        for packet in wired.outboxes.drain_packets(core.locations):
            assert packet.source == "b" and packet.source_task == task
            target = sinks[packet.target]
            info = core.infos[("b", packet.stream)]
            tuples = unpack(packet.tuples, info, packet.source_task)
            received.setdefault((target, packet.stream), []).extend(
                (t.values, t.tree_ids) for t in tuples
            )
        wanted: dict[tuple[int, str], list[tuple[Any, Any]]] = {}
        for target in sinks:
            for tup in expected[target]:
                wanted.setdefault((target, tup.source_stream), []).append(
                    (list(tup.values), tup.tree_ids)
                )
        assert received == wanted
        assert sum(map(len, wanted.values())) == 30 * 2 + 30 * 3 + 6 * 2 + 6
        assert wired.outboxes.drain_packets(core.locations) == []


def test_the_wire_spout_collector_sends_and_tracks_what_the_engine_neutral_one_does() -> None:
    setup = _setup(acking=True)
    core = setup.core
    task = core.plan.component_tasks["s"][0]
    sinks = {c: list(core.plan.component_tasks[c]) for c in ("b", "e")}
    plain = wire_task(setup, "s", task)
    expected: list[list[Tuple]] = [[] for _ in range(core.plan.max_task_id + 1)]
    plain.wiring.outboxes = expected
    plain.wiring.ack_buffer = None
    clock = ManualClock(1000)
    reference = SpoutCollector(plain.wiring, clock)
    wired = wire_task(setup, "s", task)
    collector = WireSpoutOutputCollector(wired.wiring, clock, wired.outboxes)
    for emitting in (reference, collector):
        random.seed(5)
        for n in range(40):
            emitting.emit([f"w{n}"], n if n % 4 else None)
            if n % 10 == 0:
                emitting.emit_direct(sinks["e"][1], [f"d{n}"], f"direct-{n}", "direct")
    assert collector.pending == reference.pending
    assert collector.completed == reference.completed
    assert wired.ack_buffer.acks == reference._ack_buffer.acks
    assert wired.ack_buffer.inits == reference._ack_buffer.inits
    received: dict[tuple[int, str], list[tuple[Any, Any]]] = {}
    for packet in wired.outboxes.drain_packets(core.locations):
        dest = core.stages[packet.dest].component_id
        info = core.infos[("s", packet.stream)]
        tuples = unpack(packet.tuples, info, packet.source_task)
        received.setdefault((sinks[dest][packet.target], packet.stream), []).extend(
            (t.values, t.tree_ids) for t in tuples
        )
    wanted: dict[tuple[int, str], list[tuple[Any, Any]]] = {}
    for target, box in enumerate(expected):
        for tup in box:
            wanted.setdefault((target, tup.source_stream), []).append((tup.values, tup.tree_ids))
    assert received == wanted
    assert len(collector.pending) == 30 + 4


class Recording(Spout):
    outputs = ["w"]

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        self.n += 1
        self.collector.emit([f"w{self.n}"], f"m{self.n}")

    def ack(self, msg_id: Any) -> None:
        self.calls.append(("ack", msg_id))

    def fail(self, msg_id: Any) -> None:
        self.calls.append(("fail", msg_id))


def test_a_spout_runner_settles_trees_in_bulk_as_acker_messages_would() -> None:
    from collections import deque

    from squall.runtime.tasks import SpoutRunner

    setup = _setup(acking=True)
    task = setup.core.plan.component_tasks["s"][0]
    parts = wire_task(setup, "s", task)
    clock = ManualClock(1000)
    collector = WireSpoutOutputCollector(parts.wiring, clock, parts.outboxes)
    spout = Recording()
    runner = SpoutRunner(spout, parts.context, parts.conf, collector, deque(), None, None)
    runner.start()
    runner.set_active(True)
    runner.run_batch(4, clock.now_ms())
    roots = list(collector.pending)
    assert [entry[0] for entry in collector.pending.values()] == ["m1", "m2", "m3", "m4"]
    clock.advance(250)
    outcomes = [(roots[0], True), (roots[2], False), (roots[1], True), (12345, True)]
    assert runner.settle_trees(outcomes, clock.now_ms()) == 3
    assert spout.calls == [("ack", "m1"), ("fail", "m3"), ("ack", "m2")]
    assert list(collector.pending) == [roots[3]]
    stats = runner.stats
    assert (stats.acked, stats.failed, stats.complete_count, stats.complete_ms) == (2, 1, 2, 500)
    assert runner.settle_trees([(roots[0], False)], clock.now_ms()) == 0  # settled already
