"""Unit tests of the XOR acker bolt and of the ack values the collectors send it."""

from __future__ import annotations

from functools import reduce
from operator import xor

import pytest

from squall import Bolt, Config, Spout, TopologyBuilder, Tuple
from squall.model.clock import ManualClock
from squall.model.fields import Fields
from squall.model.tuple import SYSTEM_TASK_ID, TICK_STREAM_INFO, StreamInfo
from squall.runtime.acker import (
    ACK_ACK_STREAM,
    ACK_BULK_STREAM,
    ACK_DONE_STREAM,
    ACK_FAIL_STREAM,
    ACK_INIT_STREAM,
    ACK_RESET_TIMEOUT_STREAM,
    ACKER_COMPONENT,
    AckerBolt,
)
from squall.runtime.collectors import AckBuffer, BoltCollector, SpoutCollector, TaskWiring
from squall.runtime.context import TaskContext
from squall.runtime.metrics import TaskStats
from squall.runtime.plan import build_plan
from squall.runtime.routing import build_routes
from squall.runtime.system import system_topology

SPOUT_TASK = 5
ROOT = 0x1234_5678_9ABC_DEF0
OTHER_ROOT = 0x0FED_CBA9_8765_4321

INIT_INFO = StreamInfo("spout", ACK_INIT_STREAM, Fields("id", "ack_val", "spout_task"))
ACK_INFO = StreamInfo("bolt", ACK_ACK_STREAM, Fields("id", "ack_val"))
FAIL_INFO = StreamInfo("bolt", ACK_FAIL_STREAM, Fields("id"))
RESET_INFO = StreamInfo("bolt", ACK_RESET_TIMEOUT_STREAM, Fields("id"))


class RecordingCollector:
    """Stands in for the acker's OutputCollector: records every emit_direct."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, list, str]] = []

    def emit_direct(self, task_id, values, anchors=None, stream="default") -> None:
        self.sent.append((task_id, list(values), stream))

    def emit(self, *args, **kwargs):  # pragma: no cover - the acker must not use it
        raise AssertionError("the acker only answers with emit_direct")


@pytest.fixture
def acker() -> tuple[AckerBolt, RecordingCollector]:
    bolt = AckerBolt()
    collector = RecordingCollector()
    bolt.prepare({}, None, collector)
    return bolt, collector


def init(root: int, value: int, spout_task: int = SPOUT_TASK) -> Tuple:
    return Tuple([root, value, spout_task], INIT_INFO, spout_task)


def ack(root: int, value: int) -> Tuple:
    return Tuple([root, value], ACK_INFO, 7)


def fail(root: int) -> Tuple:
    return Tuple([root], FAIL_INFO, 7)


def reset(root: int) -> Tuple:
    return Tuple([root], RESET_INFO, 7)


def tick() -> Tuple:
    return Tuple([30], TICK_STREAM_INFO, SYSTEM_TASK_ID)


# -- the acker bolt ----------------------------------------------------------------------


def test_acker_declares_direct_answer_streams() -> None:
    builder = TopologyBuilder()

    class S(Spout):
        outputs = ["x"]

    class B(Bolt):
        def execute(self, tup) -> None:
            pass

    builder.set_spout("s", S())
    builder.set_bolt("b", B()).shuffle_grouping("s")
    conf = {Config.TOPOLOGY_ACKER_EXECUTORS: 1}
    acker_spec = system_topology(builder.create_topology(), conf).get_component(ACKER_COMPONENT)
    assert {s: (d.fields, d.direct) for s, d in acker_spec.streams.items()} == {
        ACK_ACK_STREAM: (Fields("id"), True),
        ACK_FAIL_STREAM: (Fields("id"), True),
        ACK_RESET_TIMEOUT_STREAM: (Fields("id"), True),
        ACK_DONE_STREAM: (Fields("ids"), True),
    }


def test_init_then_acks_xoring_to_zero_acks_the_spout_task(acker) -> None:
    bolt, out = acker
    e1, e2, e3 = 0x1111, 0x2222, 0x4444
    bolt.execute(init(ROOT, e1 ^ e2))
    assert out.sent == []
    bolt.execute(ack(ROOT, e1 ^ e3))  # first child acked, it emitted e3
    assert out.sent == []
    bolt.execute(ack(ROOT, e2))
    assert out.sent == []
    bolt.execute(ack(ROOT, e3))
    assert out.sent == [(SPOUT_TASK, [ROOT], ACK_ACK_STREAM)]
    assert bolt.pending == {}


def test_init_with_zero_value_acks_at_once(acker) -> None:
    bolt, out = acker
    bolt.execute(init(ROOT, 0))
    assert out.sent == [(SPOUT_TASK, [ROOT], ACK_ACK_STREAM)]
    assert bolt.pending == {}


def test_ack_arriving_before_init(acker) -> None:
    bolt, out = acker
    bolt.execute(ack(ROOT, 0xABC))
    assert out.sent == []
    bolt.execute(ack(ROOT, 0x00F))
    assert out.sent == []
    bolt.execute(init(ROOT, 0xABC ^ 0x00F))
    assert out.sent == [(SPOUT_TASK, [ROOT], ACK_ACK_STREAM)]
    assert bolt.pending == {}


def test_ack_before_init_incomplete_after_init(acker) -> None:
    bolt, out = acker
    bolt.execute(ack(ROOT, 0x10))
    bolt.execute(init(ROOT, 0x10 ^ 0x20))
    assert out.sent == []
    bolt.execute(ack(ROOT, 0x20))
    assert out.sent == [(SPOUT_TASK, [ROOT], ACK_ACK_STREAM)]


def test_fail_after_init_fails_the_spout_task(acker) -> None:
    bolt, out = acker
    bolt.execute(init(ROOT, 0x99))
    bolt.execute(fail(ROOT))
    assert out.sent == [(SPOUT_TASK, [ROOT], ACK_FAIL_STREAM)]
    assert bolt.pending == {}


def test_fail_before_init_fails_once_init_arrives(acker) -> None:
    bolt, out = acker
    bolt.execute(fail(ROOT))
    assert out.sent == []
    bolt.execute(init(ROOT, 0x99))
    assert out.sent == [(SPOUT_TASK, [ROOT], ACK_FAIL_STREAM)]
    assert bolt.pending == {}


def test_fail_wins_over_a_value_reaching_zero(acker) -> None:
    bolt, out = acker
    bolt.execute(ack(ROOT, 0x5))
    bolt.execute(fail(ROOT))
    bolt.execute(init(ROOT, 0x5))
    assert out.sent == [(SPOUT_TASK, [ROOT], ACK_FAIL_STREAM)]


def test_answers_go_to_the_task_named_in_the_init(acker) -> None:
    bolt, out = acker
    bolt.execute(init(ROOT, 0x1, spout_task=3))
    bolt.execute(init(OTHER_ROOT, 0x2, spout_task=9))
    bolt.execute(fail(OTHER_ROOT))
    bolt.execute(ack(ROOT, 0x1))
    assert out.sent == [
        (9, [OTHER_ROOT], ACK_FAIL_STREAM),
        (3, [ROOT], ACK_ACK_STREAM),
    ]


def test_trees_are_independent(acker) -> None:
    bolt, out = acker
    bolt.execute(init(ROOT, 0x7))
    bolt.execute(init(OTHER_ROOT, 0x7))
    bolt.execute(ack(OTHER_ROOT, 0x7))
    assert out.sent == [(SPOUT_TASK, [OTHER_ROOT], ACK_ACK_STREAM)]
    assert set(bolt.pending) == {ROOT}


def test_reset_timeout_is_forwarded_to_the_spout_task(acker) -> None:
    bolt, out = acker
    bolt.execute(init(ROOT, 0x3))
    bolt.execute(reset(ROOT))
    assert out.sent == [(SPOUT_TASK, [ROOT], ACK_RESET_TIMEOUT_STREAM)]
    assert ROOT in bolt.pending  # the tree is still pending
    bolt.execute(ack(ROOT, 0x3))
    assert out.sent[-1] == (SPOUT_TASK, [ROOT], ACK_ACK_STREAM)


def test_reset_timeout_of_unknown_tree_is_ignored(acker) -> None:
    bolt, out = acker
    bolt.execute(reset(ROOT))
    assert out.sent == []
    assert bolt.pending == {}


def test_reset_timeout_before_init_is_not_forwarded(acker) -> None:
    bolt, out = acker
    bolt.execute(ack(ROOT, 0x3))
    bolt.execute(reset(ROOT))
    assert out.sent == []
    bolt.execute(init(ROOT, 0x3))
    assert out.sent == [(SPOUT_TASK, [ROOT], ACK_ACK_STREAM)]


def test_incomplete_trees_produce_no_message(acker) -> None:
    bolt, out = acker
    bolt.execute(init(ROOT, 0x1 ^ 0x2))
    bolt.execute(ack(ROOT, 0x1))
    bolt.execute(ack(OTHER_ROOT, 0x8))  # ack without init: never answered
    bolt.execute(ack(OTHER_ROOT, 0x8))  # back to zero, but still no init
    assert out.sent == []
    assert set(bolt.pending) == {ROOT, OTHER_ROOT}


def test_entries_expire_silently_after_two_ticks(acker) -> None:
    bolt, out = acker
    bolt.execute(init(ROOT, 0x1))
    bolt.execute(ack(OTHER_ROOT, 0x2))
    bolt.execute(tick())
    assert set(bolt.pending) == {ROOT, OTHER_ROOT}
    bolt.execute(tick())
    assert bolt.pending == {}
    assert out.sent == []
    # A late ack recreates an entry but is never answered.
    bolt.execute(ack(ROOT, 0x1))
    assert out.sent == []


def test_entries_created_after_a_tick_survive_the_next_one(acker) -> None:
    bolt, out = acker
    bolt.execute(init(ROOT, 0x1))
    bolt.execute(tick())
    bolt.execute(init(OTHER_ROOT, 0x2))
    bolt.execute(tick())
    assert set(bolt.pending) == {OTHER_ROOT}
    bolt.execute(ack(OTHER_ROOT, 0x2))
    assert out.sent == [(SPOUT_TASK, [OTHER_ROOT], ACK_ACK_STREAM)]


def test_reset_timeout_restarts_expiry(acker) -> None:
    bolt, out = acker
    bolt.execute(init(ROOT, 0x1))
    bolt.execute(init(OTHER_ROOT, 0x2))
    bolt.execute(tick())
    bolt.execute(reset(ROOT))
    bolt.execute(tick())
    assert set(bolt.pending) == {ROOT}
    bolt.execute(tick())
    assert bolt.pending == {}
    assert out.sent == [(SPOUT_TASK, [ROOT], ACK_RESET_TIMEOUT_STREAM)]


# -- the values the collectors send to the acker -----------------------------------------


class Words(Spout):
    outputs = ["sentence"]


class Split(Bolt):
    outputs = ["word"]

    def execute(self, tup) -> None:
        pass


class Sink(Bolt):
    def execute(self, tup) -> None:
        pass


class Tree:
    """spout "s" -> bolt "a" -> bolt "b" -> bolt "c", with real routes, collectors and
    one ack buffer, as a worker has."""

    def __init__(self, bulk_to: str = "none") -> None:
        builder = TopologyBuilder()
        builder.set_spout("s", Words())
        builder.set_bolt("a", Split()).shuffle_grouping("s")
        builder.set_bolt("b", Split()).shuffle_grouping("a")
        builder.set_bolt("c", Sink()).shuffle_grouping("b")
        conf = {Config.TOPOLOGY_ACKER_EXECUTORS: 2}
        topology = system_topology(builder.create_topology(), conf)
        plan = build_plan(topology, conf)
        self.outboxes: list[list[Tuple]] = [[] for _ in range(plan.max_task_id + 1)]
        self.acker_tasks = plan.component_tasks[ACKER_COMPONENT]
        bulk = {"none": [], "first": self.acker_tasks[:1], "all": self.acker_tasks}[bulk_to]
        self.buffer = AckBuffer(self.outboxes, self.acker_tasks, frozenset(bulk))
        (self.s_task,) = plan.component_tasks["s"]
        (self.a_task,) = plan.component_tasks["a"]
        (self.b_task,) = plan.component_tasks["b"]
        (self.c_task,) = plan.component_tasks["c"]

        def routes(task: int):
            return build_routes(topology, plan, TaskContext(topology, plan, task, conf=conf))

        self.spout = SpoutCollector(
            TaskWiring(
                "s",
                self.s_task,
                routes(self.s_task),
                self.outboxes,
                TaskStats("s", self.s_task),
                self.acker_tasks,
                self.buffer,
            ),
            ManualClock(),
        )
        self.bolt_a = BoltCollector(
            TaskWiring(
                "a",
                self.a_task,
                routes(self.a_task),
                self.outboxes,
                TaskStats("a", self.a_task),
                self.acker_tasks,
                self.buffer,
            )
        )
        self.bolt_b = BoltCollector(
            TaskWiring(
                "b",
                self.b_task,
                routes(self.b_task),
                self.outboxes,
                TaskStats("b", self.b_task),
                self.acker_tasks,
                self.buffer,
            )
        )
        self.bolt_c = BoltCollector(
            TaskWiring(
                "c",
                self.c_task,
                routes(self.c_task),
                self.outboxes,
                TaskStats("c", self.c_task),
                self.acker_tasks,
                self.buffer,
            )
        )

    def take(self, task: int) -> list[Tuple]:
        taken = list(self.outboxes[task])
        self.outboxes[task].clear()
        return taken

    def acker_messages(self) -> list[Tuple]:
        self.buffer.flush()
        return [t for task in self.acker_tasks for t in self.take(task)]


def root_ids(tup: Tuple) -> set[int]:
    """The root ids of the trees a tracked tuple belongs to (private engine data, either
    a ``{root: edge}`` mapping or a flat ``(root, edge, root, edge, ...)`` tuple)."""
    roots = tup.tree_ids
    if not roots:
        return set()
    if isinstance(roots, dict):
        return set(roots)
    return set(roots[::2])


def per_root(messages: list[Tuple]) -> list[tuple[int, int, int | None]]:
    """``(root, value, spout task of an init or None)`` of every message, a bulk
    message's roots one by one."""
    items: list[tuple[int, int, int | None]] = []
    for message in messages:
        if message.source_stream == ACK_BULK_STREAM:
            acks, inits = message.values
            items += [(root, value, inits.get(root)) for root, value in acks.items()]
        elif message.source_stream == ACK_INIT_STREAM:
            items.append((message.values[0], message.values[1], message.values[2]))
        else:
            assert message.source_stream == ACK_ACK_STREAM
            items.append((message.values[0], message.values[1], None))
    return items


def xor_per_root(messages: list[Tuple]) -> dict[int, int]:
    values: dict[int, list[int]] = {}
    for root, value, _ in per_root(messages):
        values.setdefault(root, []).append(value)
    return {root: reduce(xor, vals, 0) for root, vals in values.items()}


def run_tree(
    tree: Tree, skip_ack: str | None = None
) -> tuple[dict[int, int], list[Tuple], list[int]]:
    """Two spout tuples; bolt A emits 3 children of the first and one child anchored
    to both inputs; B emits a grandchild anchored to that multi-anchored child, C acks
    the grandchild, B acks the children, A acks its inputs. ``skip_ack`` leaves one
    tuple un-acked: "child", "multi", "grandchild", "input1" or "input2". Returns the XOR per root,
    the messages sent to the ackers and the two root ids (of "one", then "two")."""
    messages: list[Tuple] = []
    tree.spout.emit(["one"], msg_id="m1")
    tree.spout.emit(["two"], msg_id="m2")
    messages += tree.acker_messages()

    in1, in2 = tree.take(tree.a_task)
    assert in1.values == ["one"]
    assert in2.values == ["two"]
    (root1,) = root_ids(in1)
    (root2,) = root_ids(in2)
    assert root1 != root2
    for i in range(3):
        tree.bolt_a.emit([f"child-{i}"], anchors=in1)
    tree.bolt_a.emit(["both"], anchors=[in1, in2])
    messages += tree.acker_messages()

    children = tree.take(tree.b_task)
    assert [c.values[0] for c in children] == ["child-0", "child-1", "child-2", "both"]
    assert all(root_ids(c) == {root1} for c in children[:3])
    assert root_ids(children[3]) == {root1, root2}
    tree.bolt_b.emit(["grandchild"], anchors=children[3])
    (grandchild,) = tree.take(tree.c_task)
    assert root_ids(grandchild) == {root1, root2}
    if skip_ack != "grandchild":
        tree.bolt_c.ack(grandchild)
    messages += tree.acker_messages()
    for child in children:
        if (skip_ack == "child" and child is children[0]) or (
            skip_ack == "multi" and child is children[3]
        ):
            continue
        tree.bolt_b.ack(child)
    messages += tree.acker_messages()

    if skip_ack != "input1":
        tree.bolt_a.ack(in1)
    if skip_ack != "input2":
        tree.bolt_a.ack(in2)
    messages += tree.acker_messages()
    inits = sorted(root for root, _, spout_task in per_root(messages) if spout_task is not None)
    assert inits == sorted([root1, root2])
    return {root1: 0, root2: 0} | xor_per_root(messages), messages, [root1, root2]


def test_xor_per_root_is_zero_when_every_tuple_is_acked() -> None:
    tree = Tree()
    per_root, messages, _ = run_tree(tree)
    assert len(per_root) == 2
    assert all(value == 0 for value in per_root.values())
    inits = [m for m in messages if m.source_stream == ACK_INIT_STREAM]
    assert sorted(m.values[2] for m in inits) == [tree.s_task, tree.s_task]
    assert set(tree.spout.pending) == set(per_root)
    assert sorted(entry[0] for entry in tree.spout.pending.values()) == ["m1", "m2"]


@pytest.mark.parametrize(
    ("skipped", "incomplete"),
    [
        ("child", {0}),
        ("multi", {0, 1}),
        ("grandchild", {0, 1}),
        ("input1", {0}),
        ("input2", {1}),
    ],
)
def test_xor_per_root_is_non_zero_when_a_tuple_is_not_acked(skipped: str, incomplete) -> None:
    tree = Tree()
    per_root, _, roots = run_tree(tree, skip_ack=skipped)
    for position, root in enumerate(roots):
        if position in incomplete:
            assert per_root[root] != 0
        else:
            assert per_root[root] == 0


def test_messages_go_to_the_acker_task_chosen_by_root() -> None:
    tree = Tree()
    tree.spout.emit(["one"], msg_id="m1")
    tree.buffer.flush()
    for index, task in enumerate(tree.acker_tasks):
        for message in tree.outboxes[task]:
            assert message.values[0] % len(tree.acker_tasks) == index


@pytest.mark.parametrize("bulk", [False, True], ids=["per-root", "bulk"])
@pytest.mark.parametrize("skipped", [None, "child", "multi", "grandchild", "input1", "input2"])
def test_acker_fed_with_collector_messages_acks_exactly_complete_trees(skipped, bulk) -> None:
    """Also when the ackers take a bulk message per flush (ackers in another worker
    process): they answer trees completed by one with one ``__ack_done`` message."""
    tree = Tree(bulk_to="all" if bulk else "none")
    _, messages, roots = run_tree(tree, skip_ack=skipped)
    streams = {m.source_stream for m in messages}
    assert streams == ({ACK_BULK_STREAM} if bulk else {ACK_INIT_STREAM, ACK_ACK_STREAM})
    bolt, out = AckerBolt(), RecordingCollector()
    bolt.prepare({}, None, out)
    for message in messages:
        bolt.execute(message)
    out.sent = [
        (task, [root], ACK_ACK_STREAM)
        for task, values, stream in out.sent
        for root in (values[0] if stream == ACK_DONE_STREAM else values)
    ]
    complete = {
        None: roots,
        "child": roots[1:],
        "multi": [],
        "grandchild": [],
        "input1": roots[1:],
        "input2": roots[:1],
    }[skipped]
    assert sorted(out.sent) == sorted((tree.s_task, [r], ACK_ACK_STREAM) for r in complete)


def test_a_flush_sends_one_bulk_message_per_acker_that_takes_them() -> None:
    tree = Tree(bulk_to="first")
    for index in range(40):
        tree.spout.emit([f"s{index}"], msg_id=index)
    tree.buffer.flush()
    bulk_acker, other_acker = tree.acker_tasks
    [bulk] = tree.outboxes[bulk_acker]
    acks, inits = bulk.values
    assert bulk.source_stream == ACK_BULK_STREAM
    assert set(acks) == set(inits) and all(root % 2 == 0 for root in acks)
    assert set(inits.values()) == {tree.s_task}
    singles = tree.outboxes[other_acker]
    assert {m.source_stream for m in singles} == {ACK_INIT_STREAM}
    assert len(acks) + len(singles) == 40
    assert tree.buffer.messages_sent == 1 + len(singles)


def test_a_spout_preferring_an_acker_chooses_roots_it_tracks() -> None:
    tree = Tree()
    preferred = tree.acker_tasks[1]
    tree.spout.prefer_ackers([preferred])
    for index in range(50):
        tree.spout.emit([f"s{index}"], msg_id=index)
    tree.buffer.flush()
    assert tree.outboxes[tree.acker_tasks[0]] == []
    assert len(tree.outboxes[preferred]) == 50
    roots = [m.values[0] for m in tree.outboxes[preferred]]
    assert len(set(roots)) == 50 and all(0 <= root < 2**64 for root in roots)


def test_bolt_fail_sends_a_fail_per_root_to_the_acker() -> None:
    tree = Tree()
    tree.spout.emit(["one"], msg_id="m1")
    tree.spout.emit(["two"], msg_id="m2")
    inits = tree.acker_messages()
    in1, in2 = tree.take(tree.a_task)
    tree.bolt_a.emit(["both"], anchors=[in1, in2])
    (child,) = tree.take(tree.b_task)
    tree.bolt_b.fail(child)
    fails = [t for task in tree.acker_tasks for t in tree.take(task)]
    assert sorted(m.values[0] for m in fails) == sorted(m.values[0] for m in inits)
    assert {m.source_stream for m in fails} == {ACK_FAIL_STREAM}
    bolt, out = AckerBolt(), RecordingCollector()
    bolt.prepare({}, None, out)
    for message in inits + fails:
        bolt.execute(message)
    assert sorted(out.sent) == sorted((tree.s_task, [m.values[0]], ACK_FAIL_STREAM) for m in inits)
