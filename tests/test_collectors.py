"""Unit tests of the collectors: emit checks, returned targets, untracked emits."""

from __future__ import annotations

import pytest

from squall import Bolt, Config, Fields, Spout, TopologyBuilder, Tuple
from squall.model.clock import ManualClock
from squall.runtime.acker import ACK_INIT_STREAM, ACKER_COMPONENT
from squall.runtime.collectors import (
    AckBuffer,
    BasicBoltCollector,
    BoltCollector,
    SpoutCollector,
    TaskWiring,
)
from squall.runtime.context import TaskContext
from squall.runtime.metrics import TaskStats
from squall.runtime.plan import build_plan
from squall.runtime.routing import build_routes
from squall.runtime.system import system_topology


class Source(Spout):
    def declare_output_fields(self, declarer) -> None:
        declarer.declare(["word", "n"])
        declarer.declare_stream("direct", ["word"], direct=True)


class Relay(Bolt):
    def declare_output_fields(self, declarer) -> None:
        declarer.declare(["word", "n"])
        declarer.declare_stream("direct", ["word"], direct=True)

    def execute(self, tup) -> None:
        pass


class Sink(Bolt):
    def execute(self, tup) -> None:
        pass


class Harness:
    """spout "s" and bolt "r" each with a default stream (to "all": all grouping, and
    "one": global grouping) and a direct stream subscribed by "d" only."""

    def __init__(self, ackers: int = 0) -> None:
        builder = TopologyBuilder()
        builder.set_spout("s", Source())
        builder.set_bolt("r", Relay()).shuffle_grouping("s")
        (builder.set_bolt("all", Sink(), 3).all_grouping("s").all_grouping("r"))
        builder.set_bolt("one", Sink(), 2).global_grouping("s").global_grouping("r")
        builder.set_bolt("d", Sink(), 2).direct_grouping("s", "direct").direct_grouping(
            "r", "direct"
        )
        conf = {Config.TOPOLOGY_ACKER_EXECUTORS: ackers}
        topology = system_topology(builder.create_topology(), conf)
        self.plan = plan = build_plan(topology, conf)
        self.outboxes: list[list[Tuple]] = [[] for _ in range(plan.max_task_id + 1)]
        self.acker_tasks = plan.component_tasks.get(ACKER_COMPONENT, [])
        self.buffer = AckBuffer(self.outboxes, self.acker_tasks)
        self.tasks = plan.component_tasks

        def routes(task: int):
            return build_routes(topology, plan, TaskContext(topology, plan, task, conf=conf))

        (s_task,) = plan.component_tasks["s"]
        (r_task,) = plan.component_tasks["r"]
        self.spout = SpoutCollector(
            TaskWiring(
                "s",
                s_task,
                routes(s_task),
                self.outboxes,
                TaskStats("s", s_task),
                self.acker_tasks,
                self.buffer,
            ),
            ManualClock(),
        )
        self.bolt_wiring = TaskWiring(
            "r",
            r_task,
            routes(r_task),
            self.outboxes,
            TaskStats("r", r_task),
            self.acker_tasks,
            self.buffer,
        )
        self.bolt = BoltCollector(self.bolt_wiring)

    def collector(self, kind: str):
        return self.spout if kind == "spout" else self.bolt

    def received(self, component: str) -> dict[int, list[list]]:
        return {t: [list(x.values) for x in self.outboxes[t]] for t in self.tasks[component]}


COMPONENT = {"spout": "'s'", "bolt": "'r'"}

both = pytest.mark.parametrize("kind", ["spout", "bolt"])


def assert_names(error: pytest.ExceptionInfo, kind: str, stream: str) -> str:
    message = str(error.value)
    assert f"component {COMPONENT[kind]}" in message
    assert f"stream {stream!r}" in message
    return message


# -- emit checks -------------------------------------------------------------------------


@both
def test_emit_on_undeclared_stream(kind: str) -> None:
    collector = Harness().collector(kind)
    with pytest.raises(ValueError) as info:
        collector.emit(["x", 1], stream="nope")
    message = assert_names(info, kind, "nope")
    assert "does not declare" in message
    assert "__ack" not in message  # system streams are not listed to users


@both
def test_emit_direct_on_undeclared_stream(kind: str) -> None:
    harness = Harness()
    with pytest.raises(ValueError) as info:
        harness.collector(kind).emit_direct(harness.tasks["d"][0], ["x"], stream="nope")
    assert_names(info, kind, "nope")


@both
@pytest.mark.parametrize("values", [["x"], ["x", 1, 2], []])
def test_emit_with_wrong_number_of_values(kind: str, values: list) -> None:
    collector = Harness().collector(kind)
    with pytest.raises(ValueError) as info:
        collector.emit(values)
    message = assert_names(info, kind, "default")
    assert f"emitted {len(values)} value(s)" in message
    assert "2 field(s)" in message


@both
def test_emit_direct_with_wrong_number_of_values(kind: str) -> None:
    harness = Harness()
    with pytest.raises(ValueError) as info:
        harness.collector(kind).emit_direct(harness.tasks["d"][0], ["x", 1], stream="direct")
    message = assert_names(info, kind, "direct")
    assert "emitted 2 value(s)" in message


@both
def test_emit_on_a_direct_stream(kind: str) -> None:
    harness = Harness()
    with pytest.raises(ValueError) as info:
        harness.collector(kind).emit(["x"], stream="direct")
    message = assert_names(info, kind, "direct")
    assert "emit_direct" in message
    assert all(box == [] for box in harness.outboxes)


@both
def test_emit_direct_on_a_non_direct_stream(kind: str) -> None:
    harness = Harness()
    target = harness.tasks["all"][0]  # subscribes to the default stream
    with pytest.raises(ValueError) as info:
        harness.collector(kind).emit_direct(target, ["x", 1])
    message = assert_names(info, kind, "default")
    assert "not declared direct" in message
    assert all(box == [] for box in harness.outboxes)


@both
@pytest.mark.parametrize("target_of", ["all", "one", "unknown"])
def test_emit_direct_to_a_task_that_does_not_subscribe(kind: str, target_of: str) -> None:
    harness = Harness()
    task = harness.tasks[target_of][0] if target_of != "unknown" else 999
    with pytest.raises(ValueError) as info:
        harness.collector(kind).emit_direct(task, ["x"], stream="direct")
    message = assert_names(info, kind, "direct")
    assert f"task {task}" in message
    assert "does not subscribe" in message
    assert all(box == [] for box in harness.outboxes)


# -- where tuples go ---------------------------------------------------------------------


@both
def test_emit_returns_the_target_task_ids(kind: str) -> None:
    harness = Harness()
    targets = harness.collector(kind).emit(["cow", 1])
    expected = [*harness.tasks["all"], min(harness.tasks["one"])]
    if kind == "spout":
        expected = [*harness.tasks["r"], *expected]
    assert sorted(targets) == sorted(expected)
    for task in range(len(harness.outboxes)):
        received = [list(t.values) for t in harness.outboxes[task]]
        assert received == ([["cow", 1]] if task in targets else [])


@both
def test_emitted_tuples_carry_their_source(kind: str) -> None:
    harness = Harness()
    collector = harness.collector(kind)
    (target, *_) = collector.emit(["cow", 1])
    (tup,) = harness.outboxes[target]
    assert tup.source_component == ("s" if kind == "spout" else "r")
    assert tup.source_stream == "default"
    assert tup.source_task == harness.tasks["s" if kind == "spout" else "r"][0]
    assert tup.fields == Fields("word", "n")
    assert tup["word"] == "cow"


@both
def test_emit_direct_reaches_only_that_task(kind: str) -> None:
    harness = Harness()
    target = harness.tasks["d"][1]
    harness.collector(kind).emit_direct(target, ["cow"], stream="direct")
    assert harness.received("d") == {harness.tasks["d"][0]: [], target: [["cow"]]}
    assert sum(len(box) for box in harness.outboxes) == 1
    (tup,) = harness.outboxes[target]
    assert tup.source_stream == "direct"


def test_basic_collector_emits_anchored_to_its_input() -> None:
    harness = Harness(ackers=1)
    harness.spout.emit(["cow", 1], msg_id="m")
    (relay_input,) = harness.outboxes[harness.tasks["r"][0]]
    assert relay_input.tree_ids
    basic = BasicBoltCollector(harness.bolt)
    basic.input = relay_input
    targets = basic.emit(["calf", 2])
    assert sorted(targets) == sorted([*harness.tasks["all"], min(harness.tasks["one"])])
    for target in targets:
        assert harness.outboxes[target][-1].tree_ids
    assert relay_input.ack_val != 0
    target = harness.tasks["d"][0]
    basic.emit_direct(target, ["calf"], stream="direct")
    assert harness.outboxes[target][-1].tree_ids


# -- acking off / untracked emits --------------------------------------------------------


def test_acking_off_spout_tuples_are_untracked_and_msg_ids_complete() -> None:
    harness = Harness(ackers=0)
    assert harness.acker_tasks == []
    targets = harness.spout.emit(["cow", 1], msg_id="m1")
    harness.spout.emit_direct(harness.tasks["d"][0], ["cow"], msg_id="m2", stream="direct")
    harness.spout.emit(["calf", 2])
    assert harness.spout.completed == ["m1", "m2"]
    assert harness.spout.pending == {}
    for target in targets:
        assert all(t.tree_ids is None for t in harness.outboxes[target])
    harness.buffer.flush()
    assert harness.buffer.acks == {}


def test_acking_off_bolt_emits_are_untracked_even_when_anchored() -> None:
    harness = Harness(ackers=0)
    harness.spout.emit(["cow", 1], msg_id="m1")
    relay_input = harness.outboxes[harness.tasks["r"][0]].pop()
    assert relay_input.tree_ids is None
    for box in harness.outboxes:
        box.clear()
    targets = harness.bolt.emit(["calf", 2], anchors=relay_input)
    harness.bolt.emit(["calf", 3], anchors=[relay_input, relay_input])
    harness.bolt.emit_direct(harness.tasks["d"][0], ["x"], anchors=relay_input, stream="direct")
    for task in [*targets, harness.tasks["d"][0]]:
        assert harness.outboxes[task]
        assert all(t.tree_ids is None for t in harness.outboxes[task])
    harness.bolt.ack(relay_input)
    harness.bolt.fail(relay_input)
    harness.bolt.flush_acks()
    assert sum(len(box) for box in harness.outboxes) == sum(
        len(harness.outboxes[t]) for t in set(targets) | {harness.tasks["d"][0]}
    )


def test_acking_on_spout_emit_without_msg_id_is_untracked() -> None:
    harness = Harness(ackers=1)
    targets = harness.spout.emit(["cow", 1])
    for target in targets:
        assert all(t.tree_ids is None for t in harness.outboxes[target])
    assert harness.spout.pending == {}
    assert harness.spout.completed == []
    harness.buffer.flush()
    assert harness.outboxes[harness.acker_tasks[0]] == []


def test_acking_on_spout_emit_with_msg_id_is_tracked() -> None:
    harness = Harness(ackers=1)
    targets = harness.spout.emit(["cow", 1], msg_id="m1")
    for target in targets:
        (tup,) = harness.outboxes[target]
        assert tup.tree_ids
    assert harness.spout.completed == []
    assert [entry[0] for entry in harness.spout.pending.values()] == ["m1"]
    harness.buffer.flush()
    (init,) = harness.outboxes[harness.acker_tasks[0]]
    assert init.source_stream == ACK_INIT_STREAM
    root, ack_val, spout_task = init.values
    assert set(harness.spout.pending) == {root}
    assert ack_val != 0
    assert spout_task == harness.tasks["s"][0]


def test_acking_on_emit_reaching_no_task_completes_at_once() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", Source())
    builder.set_bolt("d", Sink()).direct_grouping("s", "direct")
    conf = {Config.TOPOLOGY_ACKER_EXECUTORS: 1}
    topology = system_topology(builder.create_topology(), conf)
    plan = build_plan(topology, conf)
    outboxes: list[list[Tuple]] = [[] for _ in range(plan.max_task_id + 1)]
    (s_task,) = plan.component_tasks["s"]
    ctx = TaskContext(topology, plan, s_task, conf=conf)
    spout = SpoutCollector(
        TaskWiring(
            "s",
            s_task,
            build_routes(topology, plan, ctx),
            outboxes,
            TaskStats("s", s_task),
            plan.component_tasks[ACKER_COMPONENT],
        ),
        ManualClock(),
    )
    assert spout.emit(["cow", 1], msg_id="m1") == []
    assert spout.completed == ["m1"]
    assert spout.pending == {}


def test_emit_counts_are_kept_per_stream() -> None:
    harness = Harness()
    harness.spout.emit(["cow", 1])
    harness.spout.emit(["calf", 2])
    harness.spout.emit_direct(harness.tasks["d"][0], ["x"], stream="direct")
    routes = harness.spout._routes
    fan_out = 1 + len(harness.tasks["all"]) + 1
    assert (routes["default"].emitted, routes["default"].transferred) == (2, 2 * fan_out)
    assert (routes["direct"].emitted, routes["direct"].transferred) == (1, 1)
    assert harness.spout.emit_count == 3


@pytest.mark.parametrize("stream", ["__ack_ack", "__ack_fail", "__tick"])
def test_user_code_cannot_emit_on_system_streams(stream: str) -> None:
    harness = Harness(ackers=1)
    with pytest.raises(ValueError, match="reserved for the engine's system streams"):
        harness.bolt.emit([12345, 1], stream=stream)
    assert not any(harness.outboxes)
