"""Every stream grouping of a core (spout/bolt) topology, end to end on each engine.

A test that takes the ``engine`` fixture (see ``tests/conftest.py``) runs once on
LocalCluster and once on SparkCluster, with the same assertions: both engines plan the
same task ids (``build_plan`` over the system topology) and route with the same routers
(``squall.runtime.routing``), so a tuple reaches the same task on either. The expected
task of each tuple is derived here from the plan and from those routers, replayed in
each emitter's emit order (a :class:`FixedTupleSpout` task ``i`` of ``n`` emits tuples
``i, i+n, ...``; a bolt emits in the order it received, which :class:`CapturingBolt`
records per task).

The one rule that differs by design is local-or-shuffle's "worker": on LocalCluster a
task's worker from the plan (executors dealt round-robin to ``topology.workers``), on
Spark its partition (the task's index within its component). Its test derives the
exact assignment from each engine's rule with the same code.

Bolts record through ``SharedRecord`` (file-backed once pickled), as Spark runs spouts
and bolts in other processes. The tests that check LocalCluster's own mechanics
(executors and component instances) run on the local engine only.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from squall import (
    Config,
    CustomStreamGrouping,
    Fields,
    GlobalStreamId,
    TopologyBuilder,
)
from squall.model.config import effective_config
from squall.runtime.metrics import TopologyInfo
from squall.runtime.plan import TaskPlan, build_plan
from squall.runtime.routing import FieldsRouter, PartialKeyRouter, ShuffleRouter
from squall.runtime.system import system_topology
from squall.testing import CapturingBolt, FixedTupleSpout, SharedRecord
from tests.conftest import Engine

# --- running a topology to the end ----------------------------------------------------


@dataclass
class Finished:
    """A topology run until every spout tuple was acked or failed and it was idle."""

    #: The task plan both engines use for the topology and configuration.
    plan: TaskPlan
    #: ``get_topology_info`` once idle.
    info: TopologyInfo
    #: LocalCluster's running topology (its executors and tasks); None on Spark.
    running: Any

    def tasks(self, component_id: str) -> list[int]:
        """The task ids of ``component_id``, ascending."""
        return self.plan.component_tasks[component_id]


def run_to_end(
    engine: Engine,
    builder: TopologyBuilder,
    spouts: Sequence[FixedTupleSpout],
    conf: dict[str, Any] | None = None,
    failed: int = 0,
) -> Finished:
    """Run the topology on ``engine`` until each of ``spouts`` has every tuple acked or
    failed and the topology is idle; return its plan and metrics. ``failed`` spout
    tuples must have failed (and, if none, no component reported an error)."""
    topology = builder.create_topology()
    full = effective_config(engine.conf(conf))
    plan = build_plan(system_topology(topology, full), full)

    def done() -> bool:
        return all(len(s.acked) + len(s.failed) == len(s.items) for s in spouts)

    with engine.running(topology, conf) as run:
        run.wait_until(done, engine.timeout)
        run.wait_idle()
        info = run.info()
        if not failed:
            assert run.errors() == {}, run.failure()
        running = None if run.spark else run.cluster.get_running(run.name)
    assert sum(len(s.failed) for s in spouts) == failed
    return Finished(plan, info, running)


def numbers(count: int) -> FixedTupleSpout:
    """A spout emitting ``[0]``, ``[1]``, ... ``[count - 1]`` (field ``n``)."""
    return FixedTupleSpout([[n] for n in range(count)], ["n"])


def emit_order(spout: FixedTupleSpout, tasks: list[int]) -> dict[int, list[list[Any]]]:
    """Spout task id -> the values it emits, in order (task ``i`` of ``n``: tuples
    ``i, i+n, ...``)."""
    return {
        task: [values for _, values in spout.items[index :: len(tasks)]]
        for index, task in enumerate(tasks)
    }


def first_values(received: Iterable[Any]) -> list[Any]:
    """The first value of each received tuple, sorted."""
    return sorted(r.values[0] for r in received)


def task_of_value(sink: CapturingBolt) -> dict[Any, int]:
    """First value -> the task that received it (each value must arrive once)."""
    result: dict[Any, int] = {}
    for item in sink.received:
        assert item.values[0] not in result, f"{item.values} received twice"
        result[item.values[0]] = item.task_id
    return result


def shuffled(targets: list[int], source_task: int, values: list[list[Any]]) -> dict[Any, int]:
    """First value -> task, for ``values`` shuffled in this order by ``source_task``."""
    router = ShuffleRouter(targets, source_task)
    return {row[0]: router.choose(source_task, row)[0] for row in values}


class Relay(CapturingBolt):
    """Records each tuple (as :class:`CapturingBolt`), emits its values anchored to it on
    the default stream, records ``(values, task ids emit returned)`` under ``"sent"``,
    and acks it."""

    def __init__(self, fields: list[str]) -> None:
        super().__init__()
        self.fields = fields

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.fields)

    def execute(self, tup: Any) -> None:
        sent = self.collector.emit(list(tup.values), anchors=tup)
        self.record.append("sent", (tuple(tup.values), sorted(sent)))
        super().execute(tup)


def sent_to(relay: Relay) -> dict[tuple[Any, ...], list[int]]:
    """Values -> the task ids ``emit`` returned for them in ``relay``."""
    return dict(relay.record.get("sent"))


def received_by(*sinks: CapturingBolt) -> dict[tuple[Any, ...], list[int]]:
    """Values -> the tasks of ``sinks`` that received them, sorted."""
    found: dict[tuple[Any, ...], list[int]] = {}
    for sink in sinks:
        for item in sink.received:
            found.setdefault(tuple(item.values), []).append(item.task_id)
    return {values: sorted(tasks) for values, tasks in found.items()}


# --- shuffle and none -----------------------------------------------------------------


#: Spark: at most this many tuples per spout task in one micro-batch.
BATCH_MAX_TUPLES = "topology.spark.batch.max.tuples"


def test_shuffle_and_none_spread_each_emitters_tuples_exactly_evenly(engine: Engine) -> None:
    spout = numbers(40)
    shuffle, none, after = Relay(["n"]), CapturingBolt(), CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("shuffle", shuffle, 4).shuffle_grouping("src")
    # Four tasks on two executors: the grouping spreads over tasks.
    builder.set_bolt("none", none, 2).set_num_tasks(4).none_grouping("src")
    builder.set_bolt("after", after, 2).shuffle_grouping("shuffle")
    # Spark: two micro-batches, so each emitter's round robin goes on across batches.
    done = run_to_end(engine, builder, [spout], {BATCH_MAX_TUPLES: 10})
    if engine.is_spark:
        assert done.info.spark is not None
        assert done.info.spark.first.batches == 2

    sources = done.tasks("src")
    for sink, component in ((shuffle, "shuffle"), (none, "none")):
        targets = done.tasks(component)
        per_pair = Counter((r.source_task, r.task_id) for r in sink.received)
        assert per_pair == {(s, t): 5 for s in sources for t in targets}
        expected: dict[Any, int] = {}
        for source, values in emit_order(spout, sources).items():
            expected |= shuffled(targets, source, values)
        assert task_of_value(sink) == expected

    # From a bolt: each "shuffle" task shuffles its 10 tuples in the order it got them.
    relays, targets = done.tasks("shuffle"), done.tasks("after")
    per_pair = Counter((r.source_task, r.task_id) for r in after.received)
    assert per_pair == {(s, t): 5 for s in relays for t in targets}
    expected = {}
    for relay in relays:
        arrived = [r.values for r in shuffle.received if r.task_id == relay]
        expected |= shuffled(targets, relay, arrived)
    assert task_of_value(after) == expected
    assert sent_to(shuffle) == received_by(after)
    assert sorted(spout.acked) == list(range(40))


# --- fields and partial key -----------------------------------------------------------


WORDS = ["apple", "pear", "fig", "kiwi", "plum", "lime", "date", "peach", "melon", "grape"]


def test_fields_grouping_sends_each_key_to_its_hashed_task(engine: Engine) -> None:
    rows = [[WORDS[i % len(WORDS)], i % 4, i] for i in range(60)]
    spout = FixedTupleSpout(rows, ["word", "k", "i"])
    by_word, by_pair, by_i = CapturingBolt(), CapturingBolt(), CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("by_word", by_word, 4).fields_grouping("src", Fields("word"))
    # From a bolt to two subscribers: two fields (in another order than declared), and
    # the last field.
    relay = Relay(["word", "k", "i"])
    builder.set_bolt("relay", relay, 2).shuffle_grouping("src")
    builder.set_bolt("by_pair", by_pair, 3).fields_grouping("relay", ["k", "word"])
    builder.set_bolt("by_i", by_i, 2).fields_grouping("relay", ["i"])
    done = run_to_end(engine, builder, [spout])

    word_tasks, pair_tasks = done.tasks("by_word"), done.tasks("by_pair")
    by_word_key = FieldsRouter(word_tasks, [0])
    tasks_of_word: dict[str, set[int]] = {}
    for item in by_word.received:
        tasks_of_word.setdefault(item.values[0], set()).add(item.task_id)
    assert tasks_of_word == {word: {by_word_key.target_for_key(word)} for word in WORDS}
    assert len({by_word_key.target_for_key(word) for word in WORDS}) > 1

    by_pair_key = FieldsRouter(pair_tasks, [1, 0])
    got = sorted((r.values[2], r.task_id) for r in by_pair.received)
    assert got == [(i, by_pair_key.choose(0, row)[0]) for i, row in enumerate(rows)]
    assert len({task for _, task in got}) > 1
    by_i_key = FieldsRouter(done.tasks("by_i"), [2])
    assert {r.values[2]: r.task_id for r in by_i.received} == {
        i: by_i_key.choose(0, row)[0] for i, row in enumerate(rows)
    }
    assert sent_to(relay) == received_by(by_pair, by_i)
    assert sorted(spout.acked) == list(range(60))


def test_partial_key_grouping_splits_a_key_between_its_two_candidates(engine: Engine) -> None:
    # A hot key (half the stream) and a tail of cold keys, from two spout tasks.
    rows = [["hot" if i % 2 == 0 else f"k{i % 7}", i] for i in range(120)]
    spout = FixedTupleSpout(rows, ["key", "i"])
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("sink", sink, 4).partial_key_grouping("src", Fields("key"))
    done = run_to_end(engine, builder, [spout])

    targets = done.tasks("sink")
    expected: dict[int, int] = {}
    for source, values in emit_order(spout, done.tasks("src")).items():
        router = PartialKeyRouter(targets, [0])  # one per emitter: its own load counts
        expected |= {row[1]: router.choose(source, row)[0] for row in values}
    assert {r.values[1]: r.task_id for r in sink.received} == expected
    assert len(sink.received) == 120

    candidates = PartialKeyRouter(targets, [0]).candidates
    tasks_of: dict[str, Counter[int]] = {}
    for item in sink.received:
        tasks_of.setdefault(item.values[0], Counter())[item.task_id] += 1
    for key, tasks in tasks_of.items():
        assert set(tasks) <= {targets[index] for index in candidates([key])}
    # The hot key is split evenly between its two candidate tasks.
    assert sorted(tasks_of["hot"].values()) == [30, 30]


def keys_in_every_order(count: int) -> list[list[Any]]:
    """Rows ``[key, i]``: ``count`` distinct dict keys, each built in the 24 insertion
    orders of its 4 items (nested dict and set values), ``i`` the row's index."""
    rows: list[list[Any]] = []
    for k in range(count):
        items = [("user", f"u{k}"), ("n", k), ("nested", {"x": k, "y": -k}), ("s", {k, "s"})]
        for order in itertools.permutations(items):
            rows.append([dict(order), len(rows)])
    return rows


def test_dict_keys_built_in_any_order_reach_one_task_each(engine: Engine) -> None:
    rows = keys_in_every_order(6)
    spout = FixedTupleSpout(rows, ["key", "i"])
    by_key, split = CapturingBolt(), CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("by_key", by_key, 4).fields_grouping("src", Fields("key"))
    builder.set_bolt("split", split, 4).partial_key_grouping("src", Fields("key"))
    done = run_to_end(engine, builder, [spout])

    # Fields: all 24 orders of a key at the one task the stable hash picks.
    router = FieldsRouter(done.tasks("by_key"), [0])
    tasks_of_user: dict[str, set[int]] = {}
    for item in by_key.received:
        tasks_of_user.setdefault(item.values[0]["user"], set()).add(item.task_id)
    expected = {f"u{k}": {router.target_for_key(rows[24 * k][0])} for k in range(6)}
    assert tasks_of_user == expected
    assert len({task for tasks in expected.values() for task in tasks}) > 1
    assert sorted(r.values[1] for r in by_key.received) == list(range(144))

    # Partial key: each emitter's choice, replayed in its emit order; a key's tuples
    # reach only its two candidates, whatever the order its dict was built in.
    targets = done.tasks("split")
    chosen: dict[int, int] = {}
    for source, values in emit_order(spout, done.tasks("src")).items():
        emitter = PartialKeyRouter(targets, [0])  # one per emitter: its own load counts
        chosen |= {row[1]: emitter.choose(source, row)[0] for row in values}
    assert {r.values[1]: r.task_id for r in split.received} == chosen
    candidates = PartialKeyRouter(targets, [0]).candidates
    for k in range(6):
        pairs = {candidates([row[0]]) for row in rows[24 * k : 24 * (k + 1)]}
        assert len(pairs) == 1
        reached = {chosen[row[1]] for row in rows[24 * k : 24 * (k + 1)]}
        assert reached == {targets[index] for index in pairs.pop()}
    assert sorted(spout.acked) == list(range(144))


class Opaque:
    """Compares by identity: no stable hash."""


IDENTITY = (
    "it compares by identity, which differs in every process; group by a field that "
    "identifies it, or give the class a stable_hash_key() method returning a supported "
    "value that identifies it"
)


class Tagger(CapturingBolt):
    """Emits ``[n, payload]`` anchored to each ``[n]``: ``payload`` a dict, or for the
    ``opaque`` numbers an :class:`Opaque`; then acks (as :class:`CapturingBolt`)."""

    def __init__(self, opaque: tuple[int, ...]) -> None:
        super().__init__()
        self.opaque = opaque

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n", "payload"])

    def execute(self, tup: Any) -> None:
        n = tup.values[0]
        payload = Opaque() if n in self.opaque else {"n": n, "half": n // 2}
        self.collector.emit([n, payload], anchors=tup)
        super().execute(tup)


@pytest.mark.parametrize("method", ["fields_grouping", "partial_key_grouping"])
def test_a_bolt_emitting_a_key_without_stable_hash_fails_its_input(
    engine: Engine, method: str
) -> None:
    spout = numbers(10)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("tag", Tagger(opaque=(3, 7)), 1).shuffle_grouping("src")
    getattr(builder.set_bolt("count", sink, 2), method)("tag", ["payload"])
    done = run_to_end(engine, builder, [spout], failed=2)

    assert sorted(spout.failed) == [3, 7]
    assert sorted(spout.acked) == [0, 1, 2, 4, 5, 6, 8, 9]
    assert first_values(sink.received) == [0, 1, 2, 4, 5, 6, 8, 9]
    tag = done.info.components["tag"]
    assert (tag.errors_total, tag.failed, tag.acked) == (2, 2, 8)
    assert [e.error for e in tag.errors] == [
        "StableHashError: bolt 'count' groups stream 'default' of 'tag' by field 'payload': "
        f"value of type Opaque cannot be hashed stably ({IDENTITY})"
    ] * 2
    assert done.info.components["count"].errors_total == 0


def test_a_spout_emitting_a_key_without_stable_hash_reports_the_error(engine: Engine) -> None:
    rows: list[list[Any]] = [[{"n": n}, n] for n in range(6)]
    rows[2] = [{"n": Opaque()}, 2]
    spout = FixedTupleSpout(rows, ["key", "n"])
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("count", sink, 2).fields_grouping("src", ["key"])
    with engine.running(builder.create_topology()) as run:
        run.wait_until(lambda: len(spout.acked) == 5 and "src" in run.errors(), engine.timeout)
        run.wait_idle()
        errors = run.errors()
        info = run.info()
    assert sorted(spout.acked) == [0, 1, 3, 4, 5]
    assert spout.failed == []
    assert sorted(r.values[1] for r in sink.received) == [0, 1, 3, 4, 5]
    assert list(errors) == ["src"]
    assert [e.error for e in errors["src"]] == [
        "StableHashError: bolt 'count' groups stream 'default' of 'src' by field 'key': "
        f"value of type Opaque at ['n'] cannot be hashed stably ({IDENTITY})"
    ]
    assert info.components["src"].streams["default"] == {"emitted": 5, "transferred": 5}


# --- all, global ----------------------------------------------------------------------


def test_all_reaches_every_task_and_global_only_the_lowest_task_id(engine: Engine) -> None:
    spout = numbers(20)
    every, lowest_only = CapturingBolt(), CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("every", every, 3).all_grouping("src")
    builder.set_bolt("lowest_only", lowest_only, 3).global_grouping("src")
    done = run_to_end(engine, builder, [spout])

    every_tasks = done.tasks("every")
    got = {task: sorted(v[0] for v in values) for task, values in every.by_task().items()}
    assert got == {task: list(range(20)) for task in every_tasks}

    targets = done.tasks("lowest_only")
    lowest = min(targets)
    assert {task: len(values) for task, values in lowest_only.by_task().items()} == {lowest: 20}
    assert first_values(lowest_only.received) == list(range(20))
    stats = done.info.components["lowest_only"].task_stats
    assert {t: s["executed"] for t, s in stats.items()} == {
        t: 20 if t == lowest else 0 for t in targets
    }
    assert done.info.components["src"].transferred == 20 * (3 + 1)
    assert sorted(spout.acked) == list(range(20))


# --- direct ---------------------------------------------------------------------------


class DirectSpout(FixedTupleSpout):
    """Emits ``[n]`` for n in ``range(count)`` (msg id n) direct to the ``router`` task at
    index n % tasks, on direct stream ``to_router``."""

    def __init__(self, count: int) -> None:
        super().__init__({"to_router": [[n] for n in range(count)]}, ["n"])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream("to_router", ["n"], direct=True)

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().open(conf, context, collector)
        self.router_tasks = context.get_component_tasks("router")
        spout_tasks = len(context.get_component_tasks(context.component_id))
        self.left = list(range(context.task_index, len(self.items), spout_tasks))

    def next_tuple(self) -> None:
        if not self.left:
            return
        n = self.left.pop(0)
        target = self.router_tasks[n % len(self.router_tasks)]
        self.collector.emit_direct(target, [n], msg_id=n, stream="to_router")


class DirectRouter(CapturingBolt):
    """Records each tuple (as :class:`CapturingBolt`) and sends n direct to the ``sink``
    task at index n % tasks, on direct stream ``routed``; ``bad`` values it sends direct
    to its own task, which does not subscribe to the stream."""

    def __init__(self, bad: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.bad = bad

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream("routed", ["n"], direct=True)

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.targets = context.get_component_tasks("sink")

    def execute(self, tup: Any) -> None:
        n = tup["n"]
        target = self.task_id if n in self.bad else self.targets[n % len(self.targets)]
        self.collector.emit_direct(target, [n], anchors=tup, stream="routed")
        super().execute(tup)


def test_emit_direct_reaches_exactly_the_chosen_task(engine: Engine) -> None:
    spout = DirectSpout(30)
    router, sink = DirectRouter(), CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("router", router, 2).direct_grouping("src", "to_router")
    builder.set_bolt("sink", sink, 3).direct_grouping("router", "routed")
    done = run_to_end(engine, builder, [spout])

    routers, targets = done.tasks("router"), done.tasks("sink")
    assert task_of_value(router) == {n: routers[n % 2] for n in range(30)}
    assert task_of_value(sink) == {n: targets[n % 3] for n in range(30)}
    assert {(r.source_component, r.source_stream) for r in router.received} == {
        ("src", "to_router")
    }
    assert {(r.source_component, r.source_stream) for r in sink.received} == {("router", "routed")}
    streams = done.info.components["src"].streams, done.info.components["router"].streams
    assert streams[0]["to_router"] == streams[1]["routed"] == {"emitted": 30, "transferred": 30}
    assert sorted(spout.acked) == list(range(30))


def test_emit_direct_to_a_non_subscribed_task_fails_the_tuple(engine: Engine) -> None:
    spout = numbers(10)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("router", DirectRouter(bad=(3, 7)), 1).shuffle_grouping("src")
    builder.set_bolt("sink", sink, 2).direct_grouping("router", "routed")
    done = run_to_end(engine, builder, [spout], failed=2)

    assert sorted(spout.failed) == [3, 7]
    assert sorted(spout.acked) == [0, 1, 2, 4, 5, 6, 8, 9]
    assert first_values(sink.received) == [0, 1, 2, 4, 5, 6, 8, 9]
    router = done.info.components["router"]
    (router_task,) = done.tasks("router")
    assert (router.errors_total, router.failed, router.acked) == (2, 2, 8)
    assert [(e.component_id, e.task_id) for e in router.errors] == [("router", router_task)] * 2
    assert [e.error for e in router.errors] == [
        f"ValueError: component 'router' emitted direct to task {router_task} on stream "
        "'routed', but that task does not subscribe to the stream with a direct grouping "
        f"(subscribed tasks: {done.tasks('sink')})"
    ] * 2


# --- local or shuffle -----------------------------------------------------------------


def worker_of(engine: Engine, plan: TaskPlan) -> dict[int, int]:
    """What local-or-shuffle counts as each task's worker: LocalCluster, the plan's
    worker; Spark, the task's partition (its index within its component)."""
    if engine.is_spark:
        return {task: plan.task_index(task) for task in plan.task_component}
    return dict(plan.task_worker)


def local_targets(targets: list[int], source: int, worker: dict[int, int]) -> list[int]:
    """The targets local-or-shuffle picks from: those in the emitter's worker, else all."""
    return [t for t in targets if worker[t] == worker[source]] or targets


@pytest.mark.parametrize(
    ("engine", "workers"), [("local", 1), ("local", 2), ("spark", 2)], indirect=["engine"]
)
def test_local_or_shuffle_shuffles_within_the_emitters_worker(engine: Engine, workers: int) -> None:
    spout = numbers(40)
    near, after, lonely = Relay(["n"]), CapturingBolt(), CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("near", near, 2).local_or_shuffle_grouping("src")
    builder.set_bolt("after", after, 3).local_or_shuffle_grouping("near")
    builder.set_bolt("lonely", lonely, 1).local_or_shuffle_grouping("src")
    done = run_to_end(engine, builder, [spout], {Config.TOPOLOGY_WORKERS: workers})

    # Both engines: every tuple reaches each subscriber once.
    for sink in (near, after, lonely):
        assert first_values(sink.received) == list(range(40))
    assert sent_to(near) == received_by(after)
    assert sorted(spout.acked) == list(range(40))

    # Each engine: shuffled over the subscriber's tasks in the emitter's worker (its
    # own rule for "worker"), or over all of them if none is there.
    worker = worker_of(engine, done.plan)
    expected: dict[str, dict[Any, int]] = {"near": {}, "lonely": {}, "after": {}}
    for source, values in emit_order(spout, done.tasks("src")).items():
        for component in ("near", "lonely"):
            targets = local_targets(done.tasks(component), source, worker)
            expected[component] |= shuffled(targets, source, values)
    for source in done.tasks("near"):
        arrived = [r.values for r in near.received if r.task_id == source]
        targets = local_targets(done.tasks("after"), source, worker)
        expected["after"] |= shuffled(targets, source, arrived)
    for sink, component in ((near, "near"), (after, "after"), (lonely, "lonely")):
        assert task_of_value(sink) == expected[component], component

    # The layouts this test relies on.
    if workers == 1:  # one worker: each emitter shuffles over all tasks
        for sink, source, target in ((near, "src", "near"), (after, "near", "after")):
            pairs = {(r.source_task, r.task_id) for r in sink.received}
            assert pairs == {(s, t) for s in done.tasks(source) for t in done.tasks(target)}
    else:  # each spout and "near" task kept in its own worker; "lonely" in only one
        spread = {
            c: {(worker[r.source_task], worker[r.task_id]) for r in sink.received}
            for sink, c in ((near, "near"), (after, "after"), (lonely, "lonely"))
        }
        assert spread["near"] == spread["after"] == {(0, 0), (1, 1)}
        assert {source == target for source, target in spread["lonely"]} == {True, False}


# --- custom ---------------------------------------------------------------------------


def mod_choice(targets: list[int], n: int) -> list[int]:
    """n goes to target n % k; multiples of 5 also go to the last target."""
    chosen = [targets[n % len(targets)]]
    if n % 5 == 0 and chosen[0] != targets[-1]:
        chosen.append(targets[-1])
    return chosen


class ModGrouping(CustomStreamGrouping):
    """Routes by :func:`mod_choice`; records each ``prepare``."""

    def __init__(self) -> None:
        self.record = SharedRecord()

    def prepare(self, context: Any, stream: GlobalStreamId, target_tasks: list[int]) -> None:
        self.targets = list(target_tasks)
        self.record.append("prepared", (context.task_id, stream, list(target_tasks)))

    def choose_tasks(self, task_id: int, values: list[Any]) -> list[int]:
        return mod_choice(self.targets, values[0])


def test_custom_grouping_routes_where_choose_tasks_says(engine: Engine) -> None:
    spout = numbers(20)
    sink = CapturingBolt()
    grouping = ModGrouping()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("sink", sink, 3).custom_grouping("src", grouping)
    done = run_to_end(engine, builder, [spout])

    targets, sources = done.tasks("sink"), done.tasks("src")
    prepared = sorted(grouping.record.get("prepared"), key=lambda p: p[0])
    assert prepared == [(t, GlobalStreamId("src", "default"), targets) for t in sources]

    got = sorted((r.values[0], r.task_id) for r in sink.received)
    assert got == sorted((n, task) for n in range(20) for task in mod_choice(targets, n))
    src = done.info.components["src"]
    assert (src.emitted, src.transferred) == (20, len(got))
    assert len(got) == 23  # 0, 10 and 15 also go to the last task (5 goes there only)
    assert sorted(spout.acked) == list(range(20))


# --- streams and subscribers ----------------------------------------------------------


def test_each_stream_reaches_only_its_subscribers_each_subscriber_all_of_it(
    engine: Engine,
) -> None:
    odds, evens = list(range(1, 20, 2)), list(range(0, 20, 2))
    spout = FixedTupleSpout({"odd": [[n] for n in odds], "even": [[n] for n in evens]}, ["n"])
    odd_a, odd_b, even, both = CapturingBolt(), CapturingBolt(), CapturingBolt(), CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("odd_a", odd_a, 2).shuffle_grouping("src", "odd")
    builder.set_bolt("odd_b", odd_b, 1).shuffle_grouping("src", "odd")
    builder.set_bolt("even", even, 2).fields_grouping("src", ["n"], stream="even")
    (
        builder.set_bolt("both", both, 2)
        .shuffle_grouping("src", "odd")
        .global_grouping("src", stream="even")
    )
    done = run_to_end(engine, builder, [spout])

    def streams(sink: CapturingBolt) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for item in sink.received:
            assert item.source_component == "src"
            found.setdefault(item.source_stream, []).append(item.values[0])
        return {stream: sorted(values) for stream, values in found.items()}

    assert streams(odd_a) == streams(odd_b) == {"odd": odds}
    assert streams(even) == {"even": evens}
    assert streams(both) == {"odd": odds, "even": evens}
    (source,) = done.tasks("src")
    odd_rows = [row for row in emit_order(spout, [source])[source] if row[0] % 2]
    assert task_of_value(odd_a) == shuffled(done.tasks("odd_a"), source, odd_rows)
    even_key = FieldsRouter(done.tasks("even"), [0])
    assert task_of_value(even) == {n: even_key.target_for_key(n) for n in evens}
    both_tasks = done.tasks("both")
    assert task_of_value(both) == {
        **shuffled(both_tasks, source, odd_rows),
        **dict.fromkeys(evens, min(both_tasks)),
    }
    src = done.info.components["src"]
    assert src.streams["odd"] == {"emitted": 10, "transferred": 30}
    assert src.streams["even"] == {"emitted": 10, "transferred": 20}
    # Each tuple tree spans every subscriber: each was acked once, when all had acked.
    assert sorted(spout.acked) == list(range(20))


# --- several tasks per executor (LocalCluster only) -----------------------------------


class InstanceBolt(CapturingBolt):
    """Records ``(task id, id(self))`` in ``prepare``."""

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.record.append("instances", (context.task_id, id(self)))


@pytest.mark.parametrize("engine", ["local"], indirect=True)
def test_more_tasks_than_executors_gives_each_task_its_own_instance(engine: Engine) -> None:
    """LocalCluster mechanics: executors run several tasks, each task a deep copy of the
    component (on Spark each task is a partition; there are no executors to count)."""
    spout = numbers(40)
    sink = InstanceBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("sink", sink, 2).set_num_tasks(4).shuffle_grouping("src")
    done = run_to_end(engine, builder, [spout])

    tasks = done.tasks("sink")
    assert len(tasks) == 4
    assert done.running.plan.component_tasks == done.plan.component_tasks
    executors = [e.tasks for e in done.running.plan.executors if e.component_id == "sink"]
    assert executors == [tuple(tasks[:2]), tuple(tasks[2:])]
    instances = dict(sink.record.get("instances"))
    assert sorted(instances) == tasks
    assert len(set(instances.values())) == 4
    assert id(sink) not in instances.values()
    assert {t: id(done.running.runners[t].component) for t in tasks} == instances
    assert {t: len(v) for t, v in sink.by_task().items()} == dict.fromkeys(tasks, 10)
