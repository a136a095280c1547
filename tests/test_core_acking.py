"""Reliability through LocalCluster: XOR acking, failing, replay, max spout pending."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from squall import (
    BasicBolt,
    Bolt,
    Config,
    FailedException,
    LocalCluster,
    Spout,
    TopologyBuilder,
)
from squall.testing import CapturingBolt, FeederSpout, SharedRecord
from tests.helpers import HoldingBolt, settle, wait_until


class RecordingSpout(Spout):
    """Emits ``count`` tuples per task, msg id ``"<task>-<i>"``, values ``[msg_id, i]``.

    Records every call in ``record["events"]`` as ``(event, task, msg_id, thread)``; with
    ``replay`` a failed msg id is emitted again with an attempt number one higher.
    """

    outputs = ["id", "attempt"]

    def __init__(self, count: int, replay: bool = False, reliable: bool = True) -> None:
        self.count = count
        self.replay = replay
        self.reliable = reliable
        self.record = SharedRecord()

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.task = context.task_id
        self.next = 0
        self.retry: list[tuple[str, int]] = []
        self.attempts: dict[str, int] = {}
        self._log("open", None)

    def _log(self, event: str, msg_id: Any) -> None:
        self.record.append("events", (event, self.task, msg_id, threading.current_thread().name))

    def next_tuple(self) -> None:
        if self.retry:
            msg_id, attempt = self.retry.pop(0)
        elif self.next < self.count:
            msg_id, attempt = f"{self.task}-{self.next}", 0
            self.next += 1
        else:
            return
        self._log("emit", msg_id)
        self.collector.emit([msg_id, attempt], msg_id=msg_id if self.reliable else None)

    def ack(self, msg_id: Any) -> None:
        self._log("ack", msg_id)

    def fail(self, msg_id: Any) -> None:
        self._log("fail", msg_id)
        if self.replay:
            attempt = self.attempts.get(msg_id, 0) + 1
            self.attempts[msg_id] = attempt
            self.retry.append((msg_id, attempt))

    def events(self, kind: str) -> list[Any]:
        return [e for e in self.record.get("events") if e[0] == kind]

    def ids(self, kind: str) -> list[Any]:
        return [e[2] for e in self.events(kind)]


class SplitBolt(Bolt):
    """Emits ``fanout`` children anchored to each input, then acks it."""

    outputs = ["id", "part"]

    def __init__(self, fanout: int = 3) -> None:
        self.fanout = fanout

    def execute(self, tup: Any) -> None:
        for part in range(self.fanout):
            self.collector.emit([tup["id"], part], anchors=tup)
        self.collector.ack(tup)


class SinkBolt(Bolt):
    """Records ``("sink", id)`` into a shared record, then acks it, or fails it when the
    id's index (``"<task>-<index>"``) is in ``fail``."""

    def __init__(self, record: SharedRecord, fail: frozenset[int] = frozenset()) -> None:
        self.record = record
        self.fail_indexes = fail

    def execute(self, tup: Any) -> None:
        self.record.append("events", ("sink", None, tup["id"], None))
        if int(tup["id"].split("-")[1]) in self.fail_indexes:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def test_ack_runs_once_per_tree_on_the_emitting_task(cluster: LocalCluster) -> None:
    spout = RecordingSpout(10)
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("split", SplitBolt(3), 2).shuffle_grouping("src")
    builder.set_bolt("sink", SinkBolt(spout.record), 3).shuffle_grouping("split")
    cluster.submit_topology("ack", {Config.TOPOLOGY_WORKERS: 2}, builder.create_topology())
    wait_until(lambda: len(spout.events("ack")) == 20)
    assert cluster.wait_idle("ack", 5.0)

    running = cluster.get_running("ack")
    src_tasks = running.plan.component_tasks["src"]
    assert {running.plan.task_worker[t] for t in src_tasks} == {0, 1}
    open_thread = {task: thread for _, task, _, thread in spout.events("open")}
    emitted_by = {msg_id: task for _, task, msg_id, _ in spout.events("emit")}
    acks = spout.events("ack")
    assert sorted(m for _, _, m, _ in acks) == sorted(
        f"{t}-{i}" for t in src_tasks for i in range(10)
    )
    for _, task, msg_id, thread in acks:
        assert emitted_by[msg_id] == task
        assert thread == open_thread[task]
        assert thread == f"squall-ack-worker-{running.plan.task_worker[task]}"
    assert spout.events("fail") == []

    # A tree is acked only once all three of its leaves were processed.
    events = spout.record.get("events")
    for msg_id in emitted_by:
        sink_at = [i for i, e in enumerate(events) if e[0] == "sink" and e[2] == msg_id]
        ack_at = [i for i, e in enumerate(events) if e[0] == "ack" and e[2] == msg_id]
        assert len(sink_at) == 3
        assert len(ack_at) == 1
        assert ack_at[0] > max(sink_at)
    info = cluster.get_topology_info("ack")
    assert info.components["src"].acked == 20
    assert info.components["split"].acked == 20
    assert info.components["sink"].acked == 60


def test_collector_fail_of_a_leaf_fails_the_spout_tuple_once(cluster: LocalCluster) -> None:
    spout = RecordingSpout(8)
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("split", SplitBolt(2), 2).shuffle_grouping("src")
    sink = SinkBolt(spout.record, frozenset({1, 4, 6}))
    builder.set_bolt("sink", sink, 2).shuffle_grouping("split")
    cluster.submit_topology("fail", {}, builder.create_topology())
    src_tasks = cluster.get_running("fail").plan.component_tasks["src"]
    failing = {f"{t}-{i}" for t in src_tasks for i in (1, 4, 6)}
    wait_until(lambda: len(spout.events("ack")) + len(spout.events("fail")) == 16)
    assert cluster.wait_idle("fail", 5.0)

    assert sorted(spout.ids("fail")) == sorted(failing)
    assert sorted(spout.ids("ack")) == sorted(
        f"{t}-{i}" for t in src_tasks for i in range(8) if f"{t}-{i}" not in failing
    )
    emitted_by = {m: task for _, task, m, _ in spout.events("emit")}
    for _, task, msg_id, _ in spout.events("fail"):
        assert emitted_by[msg_id] == task
    info = cluster.get_topology_info("fail")
    assert info.components["src"].failed == 6
    assert info.components["src"].acked == 10
    assert info.components["sink"].failed == 12  # both leaves of each failing tree
    assert info.components["sink"].acked == 20


class BasicFailer(BasicBolt):
    outputs = ["id"]

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup["id"]])
        if tup["id"].endswith(("-0", "-3")):
            if self.mode == "failed":
                raise FailedException("not this one")
            raise KeyError("user bug")


class BoltRaiser(Bolt):
    def execute(self, tup: Any) -> None:
        if tup["id"].endswith(("-0", "-3")):
            raise ZeroDivisionError("user bug")
        self.collector.ack(tup)


@pytest.mark.parametrize(
    ("bolt", "reported"),
    [
        (BasicFailer("failed"), 0),
        (BasicFailer("exception"), 2),
        (BoltRaiser(), 2),
    ],
    ids=["basic-failed-exception", "basic-user-exception", "bolt-user-exception"],
)
def test_exceptions_fail_the_spout_tuple_once(
    cluster: LocalCluster, bolt: Any, reported: int
) -> None:
    spout = RecordingSpout(5)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("work", bolt, 2).shuffle_grouping("src")
    if isinstance(bolt, BasicFailer):
        builder.set_bolt("sink", sink).shuffle_grouping("work")
    cluster.submit_topology("raise", {}, builder.create_topology())
    wait_until(lambda: len(spout.events("ack")) + len(spout.events("fail")) == 5)
    assert cluster.wait_idle("raise", 5.0)

    (task,) = cluster.get_running("raise").plan.component_tasks["src"]
    assert sorted(spout.ids("fail")) == [f"{task}-0", f"{task}-3"]
    assert sorted(spout.ids("ack")) == [f"{task}-1", f"{task}-2", f"{task}-4"]
    work = cluster.get_topology_info("raise").components["work"]
    assert work.failed == 2
    assert work.acked == 3
    assert work.errors_total == reported


def test_replaying_spout_ends_with_every_id_acked(cluster: LocalCluster) -> None:
    class FailFirstAttempt(Bolt):
        def execute(self, tup: Any) -> None:
            if tup["attempt"] == 0 and int(tup["id"].split("-")[1]) % 3 == 0:
                self.collector.fail(tup)
            else:
                self.collector.ack(tup)

    spout = RecordingSpout(12, replay=True)
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("work", FailFirstAttempt(), 2).shuffle_grouping("src")
    cluster.submit_topology("replay", {}, builder.create_topology())
    wait_until(lambda: len(spout.events("ack")) == 12)
    assert cluster.wait_idle("replay", 5.0)

    (task,) = cluster.get_running("replay").plan.component_tasks["src"]
    all_ids = [f"{task}-{i}" for i in range(12)]
    assert sorted(spout.ids("ack")) == sorted(all_ids)
    assert sorted(spout.ids("fail")) == sorted(f"{task}-{i}" for i in (0, 3, 6, 9))
    assert Counter(spout.ids("emit")) == {m: 2 if int(m[2:]) % 3 == 0 else 1 for m in all_ids}


# --- multi-anchoring -----------------------------------------------------------------


class JoinBolt(Bolt):
    """Joins ``left`` and ``right`` tuples by key; the output is anchored to both."""

    outputs = ["key", "left", "right"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.waiting: dict[Any, Any] = {}

    def execute(self, tup: Any) -> None:
        key = tup["key"]
        other = self.waiting.pop(key, None)
        if other is None:
            self.waiting[key] = tup
            return
        left, right = (tup, other) if tup.source_component == "left" else (other, tup)
        self.collector.emit([key, left["value"], right["value"]], anchors=[left, right])
        self.collector.ack(left)
        self.collector.ack(right)


def join_topology(sink: HoldingBolt) -> tuple[Any, FeederSpout, FeederSpout, FeederSpout]:
    left, right = FeederSpout(["key", "value"]), FeederSpout(["key", "value"])
    control = FeederSpout(["command", "count"])
    builder = TopologyBuilder()
    builder.set_spout("left", left)
    builder.set_spout("right", right)
    builder.set_spout("control", control)
    builder.set_bolt("join", JoinBolt(), 2).fields_grouping("left", ["key"]).fields_grouping(
        "right", ["key"]
    )
    builder.set_bolt("sink", sink).shuffle_grouping("join").all_grouping("control")
    return builder.create_topology(), left, right, control


@pytest.mark.parametrize("command", ["ack", "fail"])
def test_multi_anchored_tuple_completes_both_trees(cluster: LocalCluster, command: str) -> None:
    sink = HoldingBolt()
    topology, left, right, control = join_topology(sink)
    cluster.submit_topology("join", {}, topology)
    left.feed(["k1", "L1"], msg_id="l1")
    left.feed(["k2", "L2"], msg_id="l2")
    right.feed(["k1", "R1"], msg_id="r1")
    right.feed(["k2", "R2"], msg_id="r2")
    wait_until(lambda: len(sink.record.get("held")) == 2)
    assert sorted(sink.record.get("held")) == [["k1", "L1", "R1"], ["k2", "L2", "R2"]]

    # Both inputs of the join were acked, but the joined tuples are not: nothing completes.
    settle(cluster, "join")
    assert cluster.get_topology_info("join").components["join"].acked == 4
    assert (left.acked, right.acked, left.failed, right.failed) == ([], [], [], [])

    control.feed([command, 1])  # the oldest joined tuple only
    wait_until(lambda: len(sink.record.get("done")) == 1)
    first_left, first_right = (
        ("l1", "r1") if sink.record.get("held")[0][0] == "k1" else ("l2", "r2")
    )
    outcome = (lambda s: s.acked) if command == "ack" else (lambda s: s.failed)
    wait_until(lambda: outcome(left) == [first_left] and outcome(right) == [first_right])
    settle(cluster, "join")
    assert (left.acked + left.failed, right.acked + right.failed) == ([first_left], [first_right])

    control.feed(["ack", 0])
    wait_until(lambda: len(left.acked) + len(left.failed) == 2)
    wait_until(lambda: len(right.acked) + len(right.failed) == 2)
    assert cluster.wait_idle("join", 5.0)
    second_left = ({"l1", "l2"} - {first_left}).pop()
    second_right = ({"r1", "r2"} - {first_right}).pop()
    if command == "ack":
        assert (left.acked, left.failed) == ([first_left, second_left], [])
        assert (right.acked, right.failed) == ([first_right, second_right], [])
    else:
        assert (left.acked, left.failed) == ([second_left], [first_left])
        assert (right.acked, right.failed) == ([second_right], [first_right])


@pytest.mark.parametrize("anchored", [True, False])
def test_only_anchored_emits_extend_the_tree(cluster: LocalCluster, anchored: bool) -> None:
    class Relay(Bolt):
        outputs = ["id", "attempt"]

        def execute(self, tup: Any) -> None:
            self.collector.emit(list(tup.values), anchors=tup if anchored else None)
            self.collector.ack(tup)

    spout = RecordingSpout(5)
    sink = HoldingBolt()
    control = FeederSpout(["command", "count"])
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_spout("control", control)
    builder.set_bolt("relay", Relay()).shuffle_grouping("src")
    builder.set_bolt("sink", sink).shuffle_grouping("relay").all_grouping("control")
    cluster.submit_topology("anchor", {}, builder.create_topology())
    wait_until(lambda: len(sink.record.get("held")) == 5)

    if anchored:
        settle(cluster, "anchor")
        assert spout.events("ack") == []
        control.feed(["ack", 0])
    wait_until(lambda: len(spout.events("ack")) == 5)
    assert cluster.wait_idle("anchor", 5.0)
    assert spout.events("fail") == []
    assert sorted(spout.ids("ack")) == sorted(spout.ids("emit"))


# --- acking off ----------------------------------------------------------------------


def test_at_most_once_acks_right_after_emit_and_never_fails(cluster: LocalCluster) -> None:
    class MixedSpout(RecordingSpout):
        def next_tuple(self) -> None:
            if self.next >= self.count:
                return
            i = self.next
            self.next += 1
            msg_id = f"m{i}"
            self._log("emit", msg_id)
            self.collector.emit([msg_id, 0], msg_id=msg_id if i < 5 else None)

    class FailAll(Bolt):
        def execute(self, tup: Any) -> None:
            self.collector.fail(tup)

    spout = MixedSpout(10)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("fail_all", FailAll(), 2).shuffle_grouping("src")
    builder.set_bolt("sink", sink).shuffle_grouping("src")
    cluster.submit_topology("amo", {Config.TOPOLOGY_ACKER_EXECUTORS: 0}, builder.create_topology())
    wait_until(lambda: len(sink.received) == 10)
    assert cluster.wait_idle("amo", 5.0)

    sequence = [(e[0], e[2]) for e in spout.record.get("events") if e[0] != "open"]
    expected = []
    for i in range(10):
        expected.append(("emit", f"m{i}"))
        if i < 5:
            expected.append(("ack", f"m{i}"))
    assert sequence == expected
    info = cluster.get_topology_info("amo")
    assert "__acker" not in info.components
    assert info.components["src"].acked == 5
    assert info.components["src"].failed == 0
    assert info.components["fail_all"].failed == 10


# --- max spout pending ---------------------------------------------------------------


class EndlessSpout(Spout):
    """Emits a new tracked tuple on every ``next_tuple`` call and counts the calls."""

    outputs = ["n"]

    def __init__(self) -> None:
        self.record = SharedRecord()

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        self.record.append("calls", self.n)
        self.collector.emit([self.n], msg_id=self.n)
        self.n += 1

    def ack(self, msg_id: Any) -> None:
        self.record.append("acked", msg_id)

    def calls(self) -> int:
        return len(self.record.get("calls"))


def pending_topology(spout_pending: int | None) -> tuple[Any, EndlessSpout, HoldingBolt, Any]:
    spout = EndlessSpout()
    sink = HoldingBolt()
    control = FeederSpout(["command", "count"])
    builder = TopologyBuilder()
    declarer = builder.set_spout("src", spout)
    if spout_pending is not None:
        declarer.set_max_spout_pending(spout_pending)
    builder.set_spout("control", control)
    builder.set_bolt("sink", sink, 2).shuffle_grouping("src").all_grouping("control")
    return builder.create_topology(), spout, sink, control


@pytest.mark.parametrize(
    ("conf", "spout_pending", "bound"),
    [
        ({Config.TOPOLOGY_MAX_SPOUT_PENDING: 5}, None, 5),
        ({}, 4, 4),
        ({Config.TOPOLOGY_MAX_SPOUT_PENDING: 100}, 3, 3),
    ],
    ids=["topology-level", "spout-level", "spout-overrides-topology"],
)
def test_max_spout_pending_stops_next_tuple_until_acks(
    cluster: LocalCluster, conf: dict[str, Any], spout_pending: int | None, bound: int
) -> None:
    topology, spout, sink, control = pending_topology(spout_pending)
    cluster.submit_topology("pending", conf, topology)
    wait_until(lambda: len(sink.record.get("held")) == bound)
    settle(cluster, "pending", rounds=20)
    assert spout.calls() == bound
    assert len(sink.record.get("held")) == bound

    # Ack two held tuples (one per sink task): exactly two more next_tuple calls.
    control.feed(["ack", 1])
    wait_until(lambda: len(spout.record.get("acked")) == 2)
    wait_until(lambda: spout.calls() == bound + 2)
    settle(cluster, "pending", rounds=20)
    assert spout.calls() == bound + 2
    assert len(sink.record.get("held")) == bound + 2
    cluster.kill_topology("pending", wait_secs=0)


def test_max_spout_pending_is_per_spout_task(cluster: LocalCluster) -> None:
    class TaskCountingSpout(EndlessSpout):
        def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
            super().open(conf, context, collector)
            self.task = context.task_id

        def next_tuple(self) -> None:
            self.record.append("task_calls", self.task)
            super().next_tuple()

    spout = TaskCountingSpout()
    sink = HoldingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2).set_max_spout_pending(3)
    builder.set_bolt("sink", sink, 2).shuffle_grouping("src")
    cluster.submit_topology("per-task", {Config.TOPOLOGY_WORKERS: 2}, builder.create_topology())
    wait_until(lambda: len(sink.record.get("held")) == 6)
    settle(cluster, "per-task", rounds=20)
    src_tasks = cluster.get_running("per-task").plan.component_tasks["src"]
    assert Counter(spout.record.get("task_calls")) == dict.fromkeys(src_tasks, 3)
    assert cluster.get_topology_info("per-task").extra["pending"] == 6
    cluster.kill_topology("per-task", wait_secs=0)


class FanOut(BasicBolt):
    """Emits ``width`` anchored children per input."""

    outputs = ["child"]

    def __init__(self, width: int) -> None:
        self.width = width

    def execute(self, tup: Any, collector: Any) -> None:
        for index in range(self.width):
            collector.emit([index])


def test_tracking_memory_is_per_pending_tree_not_per_tuple(cluster: LocalCluster) -> None:
    # 50 trees of 1 + 20 + 20 tuples each are held open by the sink: the acker and the
    # spout keep one entry per tree, whatever the number of tuples in it.
    spout = FeederSpout(["v"])
    control = FeederSpout(["command", "count"])
    sink = HoldingBolt()
    builder = TopologyBuilder()
    builder.set_spout("spout", spout)
    builder.set_spout("control", control)
    builder.set_bolt("fan", FanOut(20)).shuffle_grouping("spout")
    builder.set_bolt("sink", sink).shuffle_grouping("fan").all_grouping("control")
    cluster.submit_topology("trees", {}, builder.create_topology())
    spout.feed_many([[i] for i in range(50)], msg_ids=range(50))
    wait_until(lambda: len(sink.record.get("held")) == 50 * 20)
    running = cluster.get_running("trees")
    (acker_task,) = running.plan.component_tasks["__acker"]
    (spout_task,) = running.plan.component_tasks["spout"]
    settle(cluster, "trees")
    assert len(running.runners[acker_task].component.pending) == 50
    assert len(running.runners[spout_task].collector.pending) == 50
    control.feed(["ack", 0])
    wait_until(lambda: len(spout.acked) == 50)
    settle(cluster, "trees")
    assert running.runners[acker_task].component.pending == {}
    assert running.runners[spout_task].collector.pending == {}
