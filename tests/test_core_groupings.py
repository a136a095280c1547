"""Every stream grouping, end to end through LocalCluster: which task got which tuple."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from squall import (
    Bolt,
    Config,
    CustomStreamGrouping,
    Fields,
    GlobalStreamId,
    LocalCluster,
    TopologyBuilder,
)
from squall.runtime.hashing import hash_values, stable_hash
from squall.runtime.routing import FieldsRouter, PartialKeyRouter
from squall.testing import CapturingBolt, FixedTupleSpout, SharedRecord
from tests.helpers import wait_until


def run(
    cluster: LocalCluster,
    name: str,
    builder: TopologyBuilder,
    spout: FixedTupleSpout,
    conf: dict[str, Any] | None = None,
    failed: int = 0,
) -> Any:
    """Submit, wait until every spout tuple is acked or failed and the topology is idle."""
    cluster.submit_topology(name, conf or {}, builder.create_topology())
    total = len(spout.items)
    wait_until(lambda: len(spout.acked) + len(spout.failed) == total)
    assert cluster.wait_idle(name, 5.0)
    assert len(spout.failed) == failed
    return cluster.get_running(name)


def numbers(count: int) -> FixedTupleSpout:
    return FixedTupleSpout([[n] for n in range(count)], ["n"])


# --- shuffle and none ----------------------------------------------------------------


@pytest.mark.parametrize("grouping", ["shuffle_grouping", "none_grouping"])
def test_shuffle_and_none_split_exactly_evenly(cluster: LocalCluster, grouping: str) -> None:
    spout = numbers(40)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    getattr(builder.set_bolt("sink", sink, 4), grouping)("src")
    running = run(cluster, "shuffle", builder, spout)

    tasks = running.plan.component_tasks["sink"]
    by_task = sink.by_task()
    assert sorted(by_task) == tasks
    assert {task: len(values) for task, values in by_task.items()} == dict.fromkeys(tasks, 10)
    assert sorted(v[0] for v in sink.values()) == list(range(40))
    assert sorted(spout.acked) == list(range(40))


def test_shuffle_from_two_spout_tasks_is_even_per_emitter(cluster: LocalCluster) -> None:
    spout = numbers(40)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("sink", sink, 4).shuffle_grouping("src")
    running = run(cluster, "shuffle2", builder, spout)

    per_pair = Counter((r.source_task, r.task_id) for r in sink.received)
    sources = running.plan.component_tasks["src"]
    targets = running.plan.component_tasks["sink"]
    assert per_pair == {(s, t): 5 for s in sources for t in targets}


# --- fields and partial key ----------------------------------------------------------


WORDS = ["apple", "pear", "fig", "kiwi", "plum", "lime", "date", "peach", "melon", "grape"]


def test_fields_grouping_sends_each_key_to_the_hashed_task(cluster: LocalCluster) -> None:
    rows = [[WORDS[i % len(WORDS)], i] for i in range(60)]
    spout = FixedTupleSpout(rows, ["word", "i"])
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("sink", sink, 4).fields_grouping("src", Fields("word"))
    running = run(cluster, "fields", builder, spout)

    targets = running.plan.component_tasks["sink"]
    tasks_of: dict[str, set[int]] = {}
    for item in sink.received:
        tasks_of.setdefault(item.values[0], set()).add(item.task_id)
    router = FieldsRouter(targets, [0])
    for word in WORDS:
        expected = targets[stable_hash(word) % len(targets)]
        assert tasks_of[word] == {expected}
        assert router.target_for_key(word) == expected
    assert len(sink.received) == 60


def test_fields_grouping_on_two_fields(cluster: LocalCluster) -> None:
    rows = [[i % 3, i % 4, i] for i in range(48)]
    spout = FixedTupleSpout(rows, ["a", "b", "i"])
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("sink", sink, 3).fields_grouping("src", ["b", "a"])
    running = run(cluster, "fields2", builder, spout)

    targets = running.plan.component_tasks["sink"]
    for item in sink.received:
        a, b, _ = item.values
        assert item.task_id == targets[hash_values((b, a)) % len(targets)]
    assert len(sink.received) == 48


def test_partial_key_grouping_uses_at_most_two_tasks_per_key(cluster: LocalCluster) -> None:
    # A hot key (half the stream) and a tail of cold keys.
    rows = [["hot" if i % 2 == 0 else f"k{i % 7}", i] for i in range(120)]
    spout = FixedTupleSpout(rows, ["key", "i"])
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("sink", sink, 4).partial_key_grouping("src", Fields("key"))
    running = run(cluster, "pkg", builder, spout)

    targets = running.plan.component_tasks["sink"]
    chooser = PartialKeyRouter(targets, [0])
    tasks_of: dict[str, Counter[int]] = {}
    for item in sink.received:
        tasks_of.setdefault(item.values[0], Counter())[item.task_id] += 1
    for key, tasks in tasks_of.items():
        first, second = chooser.candidates([key])
        assert set(tasks) <= {targets[first], targets[second]}
        assert len(tasks) <= 2
    hot = tasks_of["hot"]
    assert sum(hot.values()) == 60
    first, second = chooser.candidates(["hot"])
    if first != second:  # the hot key is split between its two candidates
        assert len(hot) == 2
        assert max(hot.values()) - min(hot.values()) <= 60 // 2
    assert len(sink.received) == 120


# --- all, global ---------------------------------------------------------------------


def test_all_grouping_delivers_every_tuple_to_every_task(cluster: LocalCluster) -> None:
    spout = numbers(15)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("sink", sink, 3).all_grouping("src")
    running = run(cluster, "all", builder, spout)

    by_task = sink.by_task()
    assert sorted(by_task) == running.plan.component_tasks["sink"]
    for values in by_task.values():
        assert sorted(v[0] for v in values) == list(range(15))
    assert sorted(spout.acked) == list(range(15))


def test_global_grouping_uses_only_the_lowest_task(cluster: LocalCluster) -> None:
    spout = numbers(20)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("sink", sink, 3).global_grouping("src")
    running = run(cluster, "global", builder, spout)

    lowest = min(running.plan.component_tasks["sink"])
    assert list(sink.by_task()) == [lowest]
    assert sorted(v[0] for v in sink.values()) == list(range(20))
    for task in running.plan.component_tasks["sink"]:
        expected = 20 if task == lowest else 0
        assert running.runners[task].stats.executed == expected


# --- direct --------------------------------------------------------------------------


class DirectRouter(Bolt):
    """Sends n to the ``sink`` task at index n % tasks; to ``bad_task_of`` values, emits
    direct to its own task, which does not subscribe to the stream."""

    def __init__(self, bad: tuple[int, ...] = ()) -> None:
        self.bad = bad

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream("routed", ["n"], direct=True)

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.own_task = context.task_id
        self.targets = context.get_component_tasks("sink")

    def execute(self, tup: Any) -> None:
        n = tup["n"]
        target = self.own_task if n in self.bad else self.targets[n % len(self.targets)]
        self.collector.emit_direct(target, [n], anchors=tup, stream="routed")
        self.collector.ack(tup)


def test_direct_grouping_reaches_the_chosen_task(cluster: LocalCluster) -> None:
    spout = numbers(30)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("router", DirectRouter(), 2).shuffle_grouping("src")
    builder.set_bolt("sink", sink, 3).direct_grouping("router", "routed")
    running = run(cluster, "direct", builder, spout)

    targets = running.plan.component_tasks["sink"]
    expected = {t: sorted(n for n in range(30) if targets[n % 3] == t) for t in targets}
    assert {t: sorted(v[0] for v in vals) for t, vals in sink.by_task().items()} == expected
    assert {r.source_stream for r in sink.received} == {"routed"}
    assert sorted(spout.acked) == list(range(30))


def test_emit_direct_to_a_non_subscribed_task_fails_the_tuple(cluster: LocalCluster) -> None:
    spout = numbers(10)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("router", DirectRouter(bad=(3, 7)), 1).shuffle_grouping("src")
    builder.set_bolt("sink", sink, 2).direct_grouping("router", "routed")
    run(cluster, "direct-bad", builder, spout, failed=2)

    assert sorted(spout.failed) == [3, 7]
    assert sorted(spout.acked) == [0, 1, 2, 4, 5, 6, 8, 9]
    assert sorted(v[0] for v in sink.values()) == [0, 1, 2, 4, 5, 6, 8, 9]
    info = cluster.get_topology_info("direct-bad")
    router = info.components["router"]
    assert router.errors_total == 2
    assert len(router.errors) == 2
    for error in router.errors:
        assert error.error.startswith("ValueError: ")
        assert "does not subscribe to the stream with a direct grouping" in error.error
        assert "emitted direct to task" in error.error
        assert error.component_id == "router"
    assert router.failed == 2
    assert router.acked == 8


# --- local or shuffle ----------------------------------------------------------------


def test_local_or_shuffle_prefers_tasks_in_the_emitters_worker(cluster: LocalCluster) -> None:
    spout = numbers(40)
    local = CapturingBolt()
    lonely = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("local", local, 2).local_or_shuffle_grouping("src")
    builder.set_bolt("lonely", lonely, 1).local_or_shuffle_grouping("src")
    running = run(cluster, "los", builder, spout, conf={Config.TOPOLOGY_WORKERS: 2})

    plan = running.plan
    worker = plan.task_worker
    src_tasks = plan.component_tasks["src"]
    local_tasks = plan.component_tasks["local"]
    (lonely_task,) = plan.component_tasks["lonely"]
    # The layout this test relies on: one spout task and one "local" task per worker.
    assert sorted(worker[t] for t in src_tasks) == [0, 1]
    assert sorted(worker[t] for t in local_tasks) == [0, 1]

    for item in local.received:
        assert worker[item.source_task] == worker[item.task_id]
    per_pair = Counter((r.source_task, r.task_id) for r in local.received)
    assert per_pair == {
        (s, t): 20 for s in src_tasks for t in local_tasks if worker[s] == worker[t]
    }
    # No "lonely" task in one of the workers: that emitter falls back to shuffle.
    assert Counter(r.source_task for r in lonely.received) == dict.fromkeys(src_tasks, 20)
    assert {r.task_id for r in lonely.received} == {lonely_task}


# --- custom --------------------------------------------------------------------------


class ModGrouping(CustomStreamGrouping):
    """n goes to target n % k; multiples of 5 also go to the last target."""

    def __init__(self) -> None:
        self.record = SharedRecord()

    def prepare(self, context: Any, stream: GlobalStreamId, target_tasks: list[int]) -> None:
        self.targets = list(target_tasks)
        self.record.append("prepared", (context.task_id, stream, list(target_tasks)))

    def choose_tasks(self, task_id: int, values: list[Any]) -> list[int]:
        n = values[0]
        chosen = [self.targets[n % len(self.targets)]]
        if n % 5 == 0 and chosen[0] != self.targets[-1]:
            chosen.append(self.targets[-1])
        return chosen


def test_custom_grouping_routes_where_choose_tasks_says(cluster: LocalCluster) -> None:
    spout = numbers(20)
    sink = CapturingBolt()
    grouping = ModGrouping()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("sink", sink, 3).custom_grouping("src", grouping)
    running = run(cluster, "custom", builder, spout)

    targets = running.plan.component_tasks["sink"]
    src_tasks = running.plan.component_tasks["src"]
    prepared = sorted(grouping.record.get("prepared"), key=lambda p: p[0])
    assert prepared == [(t, GlobalStreamId("src", "default"), targets) for t in src_tasks]

    expected: dict[int, list[int]] = {t: [] for t in targets}
    for n in range(20):
        expected[targets[n % 3]].append(n)
        if n % 5 == 0 and targets[n % 3] != targets[-1]:
            expected[targets[-1]].append(n)
    got = {t: sorted(v[0] for v in vals) for t, vals in sink.by_task().items()}
    assert got == {t: sorted(v) for t, v in expected.items()}
    info = cluster.get_topology_info("custom")
    assert info.components["src"].emitted == 20
    assert info.components["src"].transferred == 20 + 3  # 0 and 15 go to two tasks
    assert sorted(spout.acked) == list(range(20))


# --- streams and subscribers ---------------------------------------------------------


def test_streams_reach_only_their_subscribers(cluster: LocalCluster) -> None:
    spout = FixedTupleSpout(
        {"odd": [[n] for n in range(1, 20, 2)], "even": [[n] for n in range(0, 20, 2)]},
        ["n"],
    )
    odd_a, odd_b, even, both = CapturingBolt(), CapturingBolt(), CapturingBolt(), CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("odd_a", odd_a, 2).shuffle_grouping("src", "odd")
    builder.set_bolt("odd_b", odd_b, 1).shuffle_grouping("src", "odd")
    builder.set_bolt("even", even, 2).fields_grouping("src", ["n"], stream="even")
    (
        builder.set_bolt("both", both, 1)
        .shuffle_grouping("src", "odd")
        .global_grouping("src", stream="even")
    )
    run(cluster, "streams", builder, spout)

    odds, evens = list(range(1, 20, 2)), list(range(0, 20, 2))
    assert sorted(v[0] for v in odd_a.values()) == odds
    assert sorted(v[0] for v in odd_b.values()) == odds
    assert {r.source_stream for r in odd_a.received + odd_b.received} == {"odd"}
    assert sorted(v[0] for v in even.values()) == evens
    assert {r.source_stream for r in even.received} == {"even"}
    assert sorted(v[0] for v in both.values("odd")) == odds
    assert sorted(v[0] for v in both.values("even")) == evens
    assert len(both.received) == 20
    info = cluster.get_topology_info("streams")
    streams = info.components["src"].streams
    assert streams["odd"] == {"emitted": 10, "transferred": 30}
    assert streams["even"] == {"emitted": 10, "transferred": 20}
    # Each tuple tree spans every subscriber: all of them were acked once.
    assert sorted(spout.acked) == list(range(20))


class InstanceBolt(CapturingBolt):
    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.record.append("instances", (context.task_id, id(self)))


def test_more_tasks_than_executors(cluster: LocalCluster) -> None:
    spout = numbers(40)
    sink = InstanceBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("sink", sink, 2).set_num_tasks(4).shuffle_grouping("src")
    running = run(cluster, "tasks", builder, spout)

    tasks = running.plan.component_tasks["sink"]
    assert len(tasks) == 4
    executors = [e for e in running.plan.executors if e.component_id == "sink"]
    assert sorted(len(e.tasks) for e in executors) == [2, 2]
    instances = dict(sink.record.get("instances"))
    assert sorted(instances) == tasks
    assert len(set(instances.values())) == 4
    assert id(sink) not in instances.values()
    assert {t: id(running.runners[t].component) for t in tasks} == instances
    assert {t: len(v) for t, v in sink.by_task().items()} == dict.fromkeys(tasks, 10)
