"""Reliability of core topologies, on LocalCluster and SparkCluster: XOR acking, failing,
replay, anchoring, at-most-once, and (local engine only) max spout pending.

A test that takes the ``engine`` fixture (see ``tests/conftest.py``) runs once per
engine with the same assertions. On Spark, spouts run in the source's process and bolts
in Spark's Python workers, so the tests observe through ``SharedRecord``s: spouts and
bolts record what they did, and the test reads it. A spout's ``ack``/``fail`` run after
the micro-batch that carried its tuple, and a tuple it emits again goes into a later
batch; the ordering assertions below hold on both engines.

Engine-specific by design:

* a tree that is never completed: on Spark it is failed at the end of its micro-batch
  (trees do not outlive their batch), on the local engine it times out (manual clock);
* local-engine mechanics: the worker thread that calls ``ack``, max spout pending
  (``next_tuple`` calls per ack), and the memory held per pending tree.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from squall import (
    BasicBolt,
    Bolt,
    Config,
    LocalCluster,
    ManualClock,
    Spout,
    TopologyBuilder,
)
from squall.model.topology import StormTopology
from squall.runtime.metrics import TopologyInfo
from squall.testing import FeederSpout, FixedTupleSpout, SharedRecord
from tests.conftest import Engine, Run
from tests.helpers import HoldingBolt, settle, wait_until


def finish(
    run: Run, condition: Callable[[], bool], timeout: float, errors: bool = False
) -> TopologyInfo:
    """Wait for ``condition``, then until the topology is idle (Spark: every batch the
    spouts have is processed and its outcome applied), so counts are final; return the
    topology's metrics. Unless ``errors``, check that no component reported one."""
    run.wait_until(condition, timeout)
    run.wait_idle()
    if not errors:
        assert run.errors() == {}, run.failure()
    return run.info()


class RecordingSpout(Spout):
    """Emits ``count`` tuples per task, msg id ``"<task>-<i>"``, values ``[msg_id, attempt]``.

    Records every call in ``record["events"]`` as ``(event, task, msg_id, thread)``; with
    ``replay`` a failed msg id is emitted again with an attempt number one higher.
    """

    outputs = ["id", "attempt"]

    def __init__(self, count: int, replay: bool = False) -> None:
        self.count = count
        self.replay = replay
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
        self.collector.emit([msg_id, attempt], msg_id=msg_id)

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

    def outcomes(self) -> int:
        """How many ack and fail calls were made."""
        return len(self.events("ack")) + len(self.events("fail"))

    def history(self) -> dict[Any, list[str]]:
        """msg id -> its emit/ack/fail events, in order."""
        result: dict[Any, list[str]] = {}
        for event, _, msg_id, _ in self.record.get("events"):
            if event != "open":
                result.setdefault(msg_id, []).append(event)
        return result


def all_ids(tasks: list[int], count: int) -> list[str]:
    """The msg ids a ``RecordingSpout(count)`` with ``tasks`` emits, sorted."""
    return sorted(f"{task}-{i}" for task in tasks for i in range(count))


class SplitBolt(Bolt):
    """Emits ``fanout`` children anchored to each input, then acks it."""

    outputs = ["id", "part"]

    def __init__(self, fanout: int) -> None:
        self.fanout = fanout

    def execute(self, tup: Any) -> None:
        for part in range(self.fanout):
            self.collector.emit([tup["id"], part], anchors=tup)
        self.collector.ack(tup)


class SinkBolt(Bolt):
    """Records ``(label, None, id, None)`` in ``record["events"]``, then acks the tuple,
    or fails it when the id's index (``"<task>-<index>"``) is in ``fail``."""

    def __init__(
        self, record: SharedRecord, fail: frozenset[int] = frozenset(), label: str = "sink"
    ) -> None:
        self.record = record
        self.fail_indexes = fail
        self.label = label

    def execute(self, tup: Any) -> None:
        self.record.append("events", (self.label, None, tup["id"], None))
        if int(tup["id"].split("-")[1]) in self.fail_indexes:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def tree_topology(
    spout: RecordingSpout, fanout: int, fail: frozenset[int] = frozenset(), audit: bool = False
) -> StormTopology:
    """``src`` (2 tasks) -> ``split`` (2 tasks, ``fanout`` anchored children per input)
    -> ``sink`` (3 tasks, fails the children of the ids whose index is in ``fail``); with
    ``audit``, also ``src`` -> ``audit`` (2 tasks, all grouping: each spout tuple twice,
    acked)."""
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("split", SplitBolt(fanout), 2).shuffle_grouping("src")
    builder.set_bolt("sink", SinkBolt(spout.record, fail), 3).shuffle_grouping("split")
    if audit:
        builder.set_bolt("audit", SinkBolt(spout.record, label="audit"), 2).all_grouping("src")
    return builder.create_topology()


def test_each_tree_is_acked_once_on_its_emitting_task_after_all_its_leaves(
    engine: Engine,
) -> None:
    spout = RecordingSpout(10)
    with engine.running(tree_topology(spout, 3, audit=True)) as run:
        info = finish(run, lambda: len(spout.events("ack")) == 20, engine.timeout)

    src_tasks = info.components["src"].tasks
    assert len(src_tasks) == 2
    assert sorted(spout.ids("ack")) == all_ids(src_tasks, 10)
    assert spout.events("fail") == []
    emitted_by = {msg_id: task for _, task, msg_id, _ in spout.events("emit")}
    assert len(emitted_by) == 20
    for _, task, msg_id, _ in spout.events("ack"):
        assert emitted_by[msg_id] == task
    # A tree is acked only once all three leaves and both audit copies were processed.
    for msg_id, history in spout.history().items():
        assert (history[0], history[-1]) == ("emit", "ack"), msg_id
        assert Counter(history[1:-1]) == {"sink": 3, "audit": 2}, msg_id
    components = info.components
    assert (components["src"].emitted, components["src"].transferred) == (20, 60)
    assert (components["src"].acked, components["src"].failed) == (20, 0)
    split = components["split"]
    assert (split.executed, split.emitted, split.acked, split.failed) == (20, 60, 20, 0)
    assert (components["sink"].executed, components["sink"].acked) == (60, 60)
    assert (components["audit"].executed, components["audit"].acked) == (40, 40)


def test_spout_ack_runs_on_the_worker_thread_that_opened_the_task(cluster: LocalCluster) -> None:
    """Local engine: each spout task's ack calls run on its worker's thread."""
    spout = RecordingSpout(10)
    cluster.submit_topology("ack", {Config.TOPOLOGY_WORKERS: 2}, tree_topology(spout, 3))
    wait_until(lambda: len(spout.events("ack")) == 20)
    assert cluster.wait_idle("ack", 5.0)

    plan = cluster.get_running("ack").plan
    src_tasks = plan.component_tasks["src"]
    assert {plan.task_worker[t] for t in src_tasks} == {0, 1}
    open_thread = {task: thread for _, task, _, thread in spout.events("open")}
    assert sorted(open_thread) == sorted(src_tasks)
    acks = spout.events("ack")
    assert len(acks) == 20
    for _, task, _, thread in acks:
        assert thread == open_thread[task] == f"squall-ack-worker-{plan.task_worker[task]}"


def test_collector_fail_of_a_leaf_fails_the_spout_tuple_once(engine: Engine) -> None:
    spout = RecordingSpout(8)
    with engine.running(tree_topology(spout, 2, frozenset({1, 4, 6}))) as run:
        info = finish(run, lambda: spout.outcomes() == 16, engine.timeout)

    src_tasks = info.components["src"].tasks
    failing = sorted(f"{t}-{i}" for t in src_tasks for i in (1, 4, 6))
    assert sorted(spout.ids("fail")) == failing
    assert sorted(spout.ids("ack")) == sorted(set(all_ids(src_tasks, 8)) - set(failing))
    emitted_by = {m: task for _, task, m, _ in spout.events("emit")}
    for _, task, msg_id, _ in spout.events("fail"):
        assert emitted_by[msg_id] == task
    for msg_id, history in spout.history().items():
        outcome = "fail" if msg_id in failing else "ack"
        assert Counter(history) == {"emit": 1, "sink": 2, outcome: 1}, msg_id
        assert history[0] == "emit", msg_id
        if outcome == "ack":  # a fail may overtake the tree's other tuples
            assert history[-1] == "ack", msg_id
        else:
            assert history.index("fail") > history.index("sink"), msg_id
    components = info.components
    assert (components["src"].acked, components["src"].failed) == (10, 6)
    assert (components["split"].acked, components["split"].failed) == (16, 0)
    assert (components["sink"].acked, components["sink"].failed) == (20, 12)


class FailFirstAttempt(Bolt):
    """Fails the first attempt of every id whose index is a multiple of three; acks the
    rest. Records ``(id, attempt)`` of every tuple in ``record["work"]``."""

    def __init__(self) -> None:
        self.record = SharedRecord()

    def execute(self, tup: Any) -> None:
        self.record.append("work", (tup["id"], tup["attempt"]))
        if tup["attempt"] == 0 and int(tup["id"].split("-")[1]) % 3 == 0:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def test_a_replaying_spout_sees_its_failed_tuples_processed_again_and_acked(
    engine: Engine,
) -> None:
    spout = RecordingSpout(12, replay=True)
    work = FailFirstAttempt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("work", work, 2).shuffle_grouping("src")
    # On Spark, at most 5 emits a micro-batch, replays first: ids 0-4; replays of 0 and
    # 3, ids 5-7; the replay of 6, ids 8-11; the replay of 9. The local engine ignores it.
    conf = {"topology.spark.batch.max.tuples": 5}
    with engine.running(builder.create_topology(), conf) as run:
        info = finish(run, lambda: len(spout.events("ack")) == 12, engine.timeout)
    if engine.is_spark:
        assert info.extra["batches"] == 4

    (task,) = info.components["src"].tasks
    replayed = {f"{task}-{i}" for i in (0, 3, 6, 9)}
    expected = {
        msg_id: ["emit", "fail", "emit", "ack"] if msg_id in replayed else ["emit", "ack"]
        for msg_id in all_ids([task], 12)
    }
    assert spout.history() == expected
    assert Counter(work.record.get("work")) == {
        **{(m, 0): 1 for m in expected},
        **{(m, 1): 1 for m in replayed},
    }
    components = info.components
    assert (components["src"].emitted, components["src"].transferred) == (16, 16)
    assert (components["src"].acked, components["src"].failed) == (12, 4)
    assert (components["work"].executed, components["work"].acked) == (16, 12)
    assert components["work"].failed == 4


class JoinBolt(Bolt):
    """Joins ``left`` and ``right`` stream tuples by key; the output is anchored to both."""

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
        left, right = (tup, other) if tup.source_stream == "left" else (other, tup)
        self.collector.emit([key, left["value"], right["value"]], anchors=[left, right])
        self.collector.ack(left)
        self.collector.ack(right)


class FailKey(Bolt):
    """Records each tuple's values; fails those with key ``key``, acks the others."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.record = SharedRecord()

    def execute(self, tup: Any) -> None:
        self.record.append("seen", list(tup.values))
        if tup["key"] == self.key:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def test_a_multi_anchored_tuple_belongs_to_the_tree_of_each_anchor(engine: Engine) -> None:
    # Msg ids are the indexes: left k1, k2 are 0, 1; right k1, k2 are 2, 3. The join
    # acks both inputs, so each tree's outcome is that of the joined tuple alone.
    spout = FixedTupleSpout(
        {"left": [["k1", "L1"], ["k2", "L2"]], "right": [["k1", "R1"], ["k2", "R2"]]},
        ["key", "value"],
    )
    sink = FailKey("k1")
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    join = builder.set_bolt("join", JoinBolt(), 2)
    join.fields_grouping("src", ["key"], "left").fields_grouping("src", ["key"], "right")
    builder.set_bolt("sink", sink).shuffle_grouping("join")
    with engine.running(builder.create_topology()) as run:
        info = finish(run, lambda: len(spout.acked) + len(spout.failed) == 4, engine.timeout)

    assert sorted(sink.record.get("seen")) == [["k1", "L1", "R1"], ["k2", "L2", "R2"]]
    assert sorted(spout.failed) == [0, 2]
    assert sorted(spout.acked) == [1, 3]
    assert (info.components["join"].acked, info.components["join"].failed) == (4, 0)
    assert (info.components["sink"].acked, info.components["sink"].failed) == (1, 1)


class Relay(Bolt):
    """Emits each input's values again, then acks it. The emit is anchored to the input
    only if the input comes from component ``anchor_from``."""

    outputs = ["id", "attempt"]

    def __init__(self, anchor_from: str) -> None:
        self.anchor_from = anchor_from

    def execute(self, tup: Any) -> None:
        anchored = tup.source_component == self.anchor_from
        self.collector.emit(list(tup.values), anchors=tup if anchored else None)
        self.collector.ack(tup)


class FailAll(Bolt):
    """Records each input's values in ``record["seen"]`` and fails the input."""

    def __init__(self) -> None:
        self.record = SharedRecord()

    def execute(self, tup: Any) -> None:
        self.record.append("seen", list(tup.values))
        self.collector.fail(tup)


def test_only_anchored_emits_extend_the_tree(engine: Engine) -> None:
    """The sink fails every relayed tuple: that fails the spout tuples of ``tracked``,
    which the relay anchors its emits to, but not those of ``loose``, which it does not
    (their trees complete when the relay acks)."""
    tracked, loose = RecordingSpout(5), RecordingSpout(5)
    builder = TopologyBuilder()
    builder.set_spout("tracked", tracked)
    builder.set_spout("loose", loose)
    relay = builder.set_bolt("relay", Relay(anchor_from="tracked"))
    relay.shuffle_grouping("tracked").shuffle_grouping("loose")
    builder.set_bolt("sink", FailAll()).shuffle_grouping("relay")
    with engine.running(builder.create_topology()) as run:
        info = finish(
            run,
            lambda: len(tracked.events("fail")) == 5 and len(loose.events("ack")) == 5,
            engine.timeout,
        )

    (tracked_task,) = info.components["tracked"].tasks
    (loose_task,) = info.components["loose"].tasks
    assert tracked.history() == {m: ["emit", "fail"] for m in all_ids([tracked_task], 5)}
    assert loose.history() == {m: ["emit", "ack"] for m in all_ids([loose_task], 5)}
    components = info.components
    assert (components["tracked"].acked, components["tracked"].failed) == (0, 5)
    assert (components["loose"].acked, components["loose"].failed) == (5, 0)
    assert (components["relay"].executed, components["relay"].acked) == (10, 10)
    assert (components["sink"].executed, components["sink"].failed) == (10, 10)


class MixedSpout(RecordingSpout):
    """Emits ``m0``..``m<count-1>``, the first five with their msg id, the rest without."""

    def next_tuple(self) -> None:
        if self.next >= self.count:
            return
        i = self.next
        self.next += 1
        msg_id = f"m{i}"
        self._log("emit", msg_id)
        self.collector.emit([msg_id, 0], msg_id=msg_id if i < 5 else None)


def test_at_most_once_acks_right_after_emit_and_never_fails(engine: Engine) -> None:
    spout = MixedSpout(10)
    fail_all = FailAll()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("fail_all", fail_all, 2).shuffle_grouping("src")
    with engine.running(builder.create_topology(), Config().set_num_ackers(0)) as run:
        info = finish(run, lambda: len(fail_all.record.get("seen")) == 10, engine.timeout)

    sequence = [(e[0], e[2]) for e in spout.record.get("events") if e[0] != "open"]
    expected = []
    for i in range(10):
        expected.append(("emit", f"m{i}"))
        if i < 5:
            expected.append(("ack", f"m{i}"))
    assert sequence == expected
    # Each tuple was processed once; failing it neither failed nor replayed anything.
    assert sorted(fail_all.record.get("seen")) == sorted([f"m{i}", 0] for i in range(10))
    components = info.components
    assert (components["src"].acked, components["src"].failed) == (5, 0)
    assert (components["fail_all"].executed, components["fail_all"].failed) == (10, 10)


class FanOut(BasicBolt):
    """Emits ``[n, part]`` for each of ``width`` parts of its input (anchored: a basic
    bolt anchors every emit to its input and acks the input when ``execute`` returns)."""

    outputs = ["n", "part"]

    def __init__(self, width: int) -> None:
        self.width = width

    def execute(self, tup: Any, collector: Any) -> None:
        for part in range(self.width):
            collector.emit([tup[0], part])


class FailOne(Bolt):
    """Fails the tuple ``[4, 1]``, acks the others."""

    def execute(self, tup: Any) -> None:
        if list(tup.values) == [4, 1]:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def test_a_basic_bolt_anchors_its_emits_and_acks_its_input(engine: Engine) -> None:
    spout = FixedTupleSpout([[n] for n in range(6)], ["n"])
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("fan", FanOut(2), 2).shuffle_grouping("src")
    builder.set_bolt("sink", FailOne(), 2).shuffle_grouping("fan")
    with engine.running(builder.create_topology()) as run:
        info = finish(run, lambda: len(spout.acked) + len(spout.failed) == 6, engine.timeout)

    assert sorted(spout.acked) == [0, 1, 2, 3, 5]
    assert spout.failed == [4]
    fan, sink = info.components["fan"], info.components["sink"]
    assert (fan.executed, fan.emitted, fan.acked, fan.failed) == (6, 12, 6, 0)
    assert (sink.executed, sink.acked, sink.failed) == (12, 11, 1)


# --- trees that never complete: engine-specific ----------------------------------------


class NeverAcks(Bolt):
    """Records each input and neither acks nor fails it."""

    def __init__(self) -> None:
        self.record = SharedRecord()

    def execute(self, tup: Any) -> None:
        self.record.append("held", tup[0])


def never_acked_topology() -> tuple[StormTopology, FixedTupleSpout, NeverAcks]:
    spout = FixedTupleSpout([["a"], ["b"], ["c"]], ["letter"])
    stuck = NeverAcks()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("stuck", stuck).shuffle_grouping("src")
    return builder.create_topology(), spout, stuck


@pytest.mark.parametrize("engine", ["spark"], indirect=True)
def test_on_spark_a_tree_not_complete_fails_at_the_end_of_its_micro_batch(
    engine: Engine,
) -> None:
    """Spark: trees do not outlive their micro-batch. No message timeout is involved
    (it is 30 s by default): the trees fail as soon as their batch ends."""
    topology, spout, stuck = never_acked_topology()
    with engine.running(topology) as run:
        info = finish(run, lambda: len(spout.failed) == 3, engine.timeout)

    assert info.extra["batches"] == 1
    assert sorted(stuck.record.get("held")) == ["a", "b", "c"]
    assert sorted(spout.failed) == [0, 1, 2]
    assert spout.acked == []
    src = info.components["src"]
    assert (src.acked, src.failed, src.timed_out) == (0, 3, 0)
    assert (info.components["stuck"].acked, info.components["stuck"].failed) == (0, 0)


def test_on_local_a_tree_not_complete_times_out(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    """Local engine: an incomplete tree stays pending until the message timeout."""
    topology, spout, stuck = never_acked_topology()
    manual_cluster.submit_topology("stuck", Config().set_message_timeout_secs(5), topology)
    wait_until(lambda: len(stuck.record.get("held")) == 3)
    settle(manual_cluster, "stuck")
    assert (spout.acked, spout.failed) == ([], [])

    clock.advance_secs(5)
    wait_until(lambda: len(spout.failed) == 3)
    settle(manual_cluster, "stuck")
    assert sorted(spout.failed) == [0, 1, 2]
    assert spout.acked == []
    src = manual_cluster.get_topology_info("stuck").components["src"]
    assert (src.acked, src.failed, src.timed_out) == (0, 3, 3)


# --- max spout pending and tracking memory: local-engine mechanics ----------------------


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
    cluster.submit_topology(
        "per-task",
        {Config.TOPOLOGY_WORKER_KIND: "thread", Config.TOPOLOGY_WORKERS: 2},
        builder.create_topology(),
    )
    wait_until(lambda: len(sink.record.get("held")) == 6)
    settle(cluster, "per-task", rounds=20)
    src_tasks = cluster.get_running("per-task").plan.component_tasks["src"]
    assert Counter(spout.record.get("task_calls")) == dict.fromkeys(src_tasks, 3)
    assert cluster.get_topology_info("per-task").extra["pending"] == 6
    cluster.kill_topology("per-task", wait_secs=0)


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
