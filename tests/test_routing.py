"""Unit tests of routing: each grouping's choice of target tasks."""

from __future__ import annotations

import itertools
from collections import Counter
from decimal import Decimal
from fractions import Fraction

import pytest

from squall import Bolt, Config, CustomStreamGrouping, Fields, Spout, TopologyBuilder
from squall.model.grouping import GlobalStreamId
from squall.runtime.context import TaskContext
from squall.runtime.hashing import StableHashError
from squall.runtime.plan import build_plan
from squall.runtime.routing import FieldsRouter, PartialKeyRouter, ShuffleRouter, build_routes


class KeySpout(Spout):
    outputs = {"default": ["key", "other", "n"], "direct": ["key"]}

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(["key", "other", "n"])
        declarer.declare_stream("direct", ["key"], direct=True)


class Sink(Bolt):
    def execute(self, tup) -> None:
        pass


def build(wire, spout_parallelism: int = 1, conf: dict | None = None):
    """A topology with spout "s" and the bolts ``wire(builder)`` declares."""
    builder = TopologyBuilder()
    builder.set_spout("s", KeySpout(), spout_parallelism)
    wire(builder)
    topology = builder.create_topology()
    conf = conf or {}
    return topology, build_plan(topology, conf), conf


def routes_of(topology, plan, conf, task_id: int):
    ctx = TaskContext(topology, plan, task_id, conf=conf)
    return build_routes(topology, plan, ctx)


def chooser(topology, plan, conf, task_id: int, stream: str = "default"):
    return routes_of(topology, plan, conf, task_id)[stream].choose


def single_bolt(method: str, parallelism: int, *args, spout_parallelism: int = 1):
    def wire(builder: TopologyBuilder) -> None:
        getattr(builder.set_bolt("b", Sink(), parallelism), method)("s", *args)

    return build(wire, spout_parallelism)


def spout_tasks(plan) -> list[int]:
    return plan.component_tasks["s"]


# -- shuffle -----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["shuffle_grouping", "none_grouping"])
def test_shuffle_spreads_exactly_evenly(method: str) -> None:
    topology, plan, conf = single_bolt(method, 5, spout_parallelism=3)
    targets = plan.component_tasks["b"]
    for source in spout_tasks(plan):
        choose = chooser(topology, plan, conf, source)
        for rounds in (1, 2, 7):
            counts = Counter()
            for i in range(len(targets) * rounds):
                chosen = choose(source, ["k", i, i])
                assert len(chosen) == 1
                counts[chosen[0]] += 1
            assert counts == dict.fromkeys(targets, rounds)


@pytest.mark.parametrize("method", ["shuffle_grouping", "none_grouping"])
def test_shuffle_is_deterministic_per_source_task(method: str) -> None:
    topology, plan, conf = single_bolt(method, 4, spout_parallelism=2)
    for source in spout_tasks(plan):
        first = chooser(topology, plan, conf, source)
        second = chooser(topology, plan, conf, source)
        a = [first(source, ["k", i, i])[0] for i in range(40)]
        b = [second(source, ["k", i, i])[0] for i in range(40)]
        assert a == b


def test_shuffle_partial_round_never_repeats_a_task() -> None:
    topology, plan, conf = single_bolt("shuffle_grouping", 6)
    source = spout_tasks(plan)[0]
    choose = chooser(topology, plan, conf, source)
    first_round = [choose(source, ["k", 0, 0])[0] for _ in range(6)]
    assert sorted(first_round) == plan.component_tasks["b"]


# -- fields ------------------------------------------------------------------------------


def test_fields_same_value_same_task_from_every_source() -> None:
    topology, plan, conf = single_bolt("fields_grouping", 4, Fields("key"), spout_parallelism=3)
    sources = spout_tasks(plan)
    choosers = {s: chooser(topology, plan, conf, s) for s in sources}
    for word in ["cow", "moon", "jumped", "the", "over", 7, None, 2.5]:
        chosen = {
            tuple(choosers[s](s, [word, other, n]))
            for s in sources
            for other in ("x", "y")
            for n in range(3)
        }
        assert len(chosen) == 1
        (only,) = chosen
        assert len(only) == 1
        assert only[0] in plan.component_tasks["b"]


def test_fields_ignores_other_fields_and_treats_equal_numbers_alike() -> None:
    topology, plan, conf = single_bolt("fields_grouping", 5, ["key"])
    source = spout_tasks(plan)[0]
    choose = chooser(topology, plan, conf, source)
    for key in range(30):
        expected = choose(source, [key, "a", 0])
        assert choose(source, [float(key), "b", 1]) == expected
    assert choose(source, [True, "", 0]) == choose(source, [1, "", 0])


def test_fields_distributes_keys_over_all_tasks() -> None:
    topology, plan, conf = single_bolt("fields_grouping", 4, ["key"])
    source = spout_tasks(plan)[0]
    choose = chooser(topology, plan, conf, source)
    counts = Counter(choose(source, [f"word-{i}", 0, 0])[0] for i in range(400))
    assert set(counts) == set(plan.component_tasks["b"])
    assert min(counts.values()) >= 50  # 100 expected per task


def test_fields_multi_field_keys() -> None:
    topology, plan, conf = single_bolt("fields_grouping", 4, ["key", "other"])
    source = spout_tasks(plan)[0]
    choose = chooser(topology, plan, conf, source)
    seen: dict[tuple, list[int]] = {}
    for key in range(20):
        for other in ("a", "b", "c"):
            target = choose(source, [key, other, key * 100])
            assert choose(source, [key, other, -1]) == target
            seen[(key, other)] = target
    # The second field matters: some keys go elsewhere when only it changes.
    assert any(seen[(k, "a")] != seen[(k, "b")] for k in range(20))
    assert len({t[0] for t in seen.values()}) == 4


def test_fields_order_of_grouping_fields_is_part_of_the_key() -> None:
    topology, plan, conf = single_bolt("fields_grouping", 8, ["key", "other"])
    source = spout_tasks(plan)[0]
    choose = chooser(topology, plan, conf, source)
    swapped = [
        choose(source, [a, b, 0]) != choose(source, [b, a, 0])
        for a, b in [("x", "y"), ("p", "q"), ("u", "v"), ("m", "n")]
    ]
    assert any(swapped)


def test_fields_unhashable_values_are_routed_stably() -> None:
    topology, plan, conf = single_bolt("fields_grouping", 4, ["key"], spout_parallelism=2)
    first, second = spout_tasks(plan)
    choose_a = chooser(topology, plan, conf, first)
    choose_b = chooser(topology, plan, conf, second)
    targets = set()
    for i in range(40):
        key = [i, "x", [i]]
        chosen = choose_a(first, [key, 0, 0])
        assert len(chosen) == 1
        assert chosen == choose_a(first, [list(key), 1, 1])
        assert chosen == choose_b(second, [list(key), 2, 2])
        targets.add(chosen[0])
    assert targets == set(plan.component_tasks["b"])


def test_fields_unhashable_values_in_multi_field_keys() -> None:
    topology, plan, conf = single_bolt("fields_grouping", 4, ["key", "other"])
    source = spout_tasks(plan)[0]
    choose = chooser(topology, plan, conf, source)
    assert choose(source, [[1, 2], [3], 0]) == choose(source, [[1, 2], [3], 9])


def test_fields_routing_is_the_same_in_a_fresh_plan() -> None:
    def keys(topology, plan, conf):
        source = spout_tasks(plan)[0]
        choose = chooser(topology, plan, conf, source)
        return [choose(source, [f"k{i}", 0, 0])[0] for i in range(100)]

    assert keys(*single_bolt("fields_grouping", 6, ["key"])) == keys(
        *single_bolt("fields_grouping", 6, ["key"])
    )


# -- partial key -------------------------------------------------------------------------


def test_partial_key_each_key_reaches_at_most_two_tasks() -> None:
    topology, plan, conf = single_bolt("partial_key_grouping", 6, ["key"], spout_parallelism=2)
    sources = spout_tasks(plan)
    choosers = {s: chooser(topology, plan, conf, s) for s in sources}
    reached: dict[str, set[int]] = {}
    for round_ in range(50):
        for key in [f"k{i}" for i in range(12)] + ["hot"] * 5:
            for s in sources:
                (target,) = choosers[s](s, [key, round_, 0])
                reached.setdefault(key, set()).add(target)
    assert all(1 <= len(tasks) <= 2 for tasks in reached.values())
    assert len(reached["hot"]) == 2
    assert set().union(*reached.values()) <= set(plan.component_tasks["b"])


@pytest.mark.parametrize("parallelism", [2, 4, 8])
def test_partial_key_candidates_are_two_distinct_tasks(parallelism: int) -> None:
    # Storm 2.x (RandomTwoTaskAssignmentCreator) makes the two choices distinct, so a
    # key emitted twice in a row by one emitter lands on two different tasks.
    topology, plan, conf = single_bolt("partial_key_grouping", parallelism, ["key"])
    source = spout_tasks(plan)[0]
    single_task_keys = []
    for i in range(100):
        key = f"key-{i}"
        choose = chooser(topology, plan, conf, source)  # fresh load counts per key
        first = choose(source, [key, 0, 0])
        second = choose(source, [key, 1, 0])
        if first == second:
            single_task_keys.append(key)
    assert single_task_keys == []


def test_partial_key_balances_a_skewed_key_better_than_fields() -> None:
    # 60% of the tuples carry one hot key, the rest spread over 40 cold keys.
    keys = ["hot" if i % 5 < 3 else f"cold-{i % 40}" for i in range(1000)]
    loads = {}
    for method in ("fields_grouping", "partial_key_grouping"):
        topology, plan, conf = single_bolt(method, 8, ["key"])
        source = spout_tasks(plan)[0]
        choose = chooser(topology, plan, conf, source)
        loads[method] = Counter(choose(source, [key, i, 0])[0] for i, key in enumerate(keys))
    fields, partial = loads["fields_grouping"], loads["partial_key_grouping"]
    assert sum(fields.values()) == sum(partial.values()) == 1000
    assert max(fields.values()) >= 600
    assert max(partial.values()) < max(fields.values())
    assert max(partial.values()) <= 400


# -- keys of every type: equal keys, one task; unsupported keys, a clear error -----------


def dict_keys_in_every_order() -> list[list[dict]]:
    """20 distinct dict keys, each built in the 24 insertion orders of its 4 items."""
    keys = []
    for i in range(20):
        items = [("user", f"u{i}"), ("region", ["eu", "us"][i % 2]), ("n", i), ("t", {"a": i})]
        keys.append([dict(order) for order in itertools.permutations(items)])
    return keys


def test_fields_dict_keys_in_any_insertion_order_reach_one_task() -> None:
    topology, plan, conf = single_bolt("fields_grouping", 8, ["key"], spout_parallelism=2)
    targets = plan.component_tasks["b"]
    assert len(targets) == 8
    choosers = {s: chooser(topology, plan, conf, s) for s in spout_tasks(plan)}
    reached = []
    for orders in dict_keys_in_every_order():
        assert len(orders) == 24
        tasks = {
            choose(source, [key, n, 0])[0]
            for source, choose in choosers.items()
            for n, key in enumerate(orders)
        }
        assert len(tasks) == 1, f"{orders[0]} reached tasks {sorted(tasks)}"
        reached.append(tasks.pop())
    assert set(reached) <= set(targets)
    assert len(set(reached)) > 1


def test_partial_key_dict_keys_in_any_insertion_order_share_two_candidates() -> None:
    topology, plan, conf = single_bolt("partial_key_grouping", 8, ["key"], spout_parallelism=2)
    targets = plan.component_tasks["b"]
    source = spout_tasks(plan)[0]
    for orders in dict_keys_in_every_order():
        router = PartialKeyRouter(targets, [0])
        (pair,) = {router.candidates([key]) for key in orders}
        candidates = {targets[index] for index in pair}
        assert len(candidates) == 2
        # One emitter sending the key 24 times alternates between its two candidates.
        choose = chooser(topology, plan, conf, source)  # fresh load counts
        got = Counter(choose(source, [key, 0, 0])[0] for key in orders)
        assert got == dict.fromkeys(candidates, 12)


def test_fields_and_partial_key_treat_equal_values_of_other_types_alike() -> None:
    equal_groups = [
        [1, 1.0, True, Decimal(1), Fraction(1)],
        [{"a": 1, "b": [2]}, {"b": [2.0], "a": True}],
        [{1, 2}, frozenset({2, 1})],
        [[{"x": 1, "y": 2}], [{"y": 2, "x": 1}]],
    ]
    for method in ("fields_grouping", "partial_key_grouping"):
        topology, plan, conf = single_bolt(method, 8, ["key", "other"])
        source = spout_tasks(plan)[0]
        for group in equal_groups:
            chosen = set()
            for value in group:
                choose = chooser(topology, plan, conf, source)  # fresh load counts
                chosen.add(tuple(choose(source, [value, "o", 0])))
            assert len(chosen) == 1, (method, group)


class Opaque:
    """Compares by identity."""


IDENTITY = (
    "it compares by identity, which differs in every process; group by a field that "
    "identifies it, or give the class a stable_hash_key() method returning a supported "
    "value that identifies it"
)


@pytest.mark.parametrize("method", ["fields_grouping", "partial_key_grouping"])
def test_a_value_that_cannot_be_hashed_stably_names_the_grouping_and_field(method: str) -> None:
    topology, plan, conf = single_bolt(method, 4, ["key", "other"])
    source = spout_tasks(plan)[0]
    choose = chooser(topology, plan, conf, source)
    site = "bolt 'b' groups stream 'default' of 's'"
    for _ in range(2):  # never cached: the second emit raises too
        with pytest.raises(StableHashError) as raised:
            choose(source, [Opaque(), "x", 0])
        assert str(raised.value) == (
            f"{site} by field 'key': value of type Opaque cannot be hashed stably ({IDENTITY})"
        )
    with pytest.raises(StableHashError) as raised:
        choose(source, ["fine", {"deep": [Opaque()]}, 0])
    assert str(raised.value) == (
        f"{site} by field 'other': value of type Opaque at ['deep'][0] cannot be hashed "
        f"stably ({IDENTITY})"
    )
    # The same object, once more: no cached target lets it through.
    opaque = Opaque()
    for _ in range(2):
        with pytest.raises(StableHashError):
            choose(source, ["fine", opaque, 0])


def test_fields_single_field_error_and_routers_without_names() -> None:
    topology, plan, conf = single_bolt("fields_grouping", 4, ["other"])
    source = spout_tasks(plan)[0]
    choose = chooser(topology, plan, conf, source)
    with pytest.raises(StableHashError) as raised:
        choose(source, ["k", Opaque(), 0])
    assert str(raised.value) == (
        "bolt 'b' groups stream 'default' of 's' by field 'other': value of type Opaque "
        f"cannot be hashed stably ({IDENTITY})"
    )
    with pytest.raises(StableHashError) as raised:
        FieldsRouter([1, 2], [2]).choose(0, ["k", 1, Opaque()])
    assert str(raised.value) == (
        "a fields grouping by field at position 2: value of type Opaque cannot be hashed "
        f"stably ({IDENTITY})"
    )
    with pytest.raises(StableHashError) as raised:
        PartialKeyRouter([1, 2], [0, 1]).choose(0, ["k", [Opaque()]])
    assert str(raised.value) == (
        "a partial key grouping by field at position 1: value of type Opaque at [0] cannot "
        f"be hashed stably ({IDENTITY})"
    )


def test_fields_cache_holds_only_plain_keys_and_equal_keys_share_a_target() -> None:
    router = FieldsRouter(list(range(1, 9)), [0])
    first = router.choose(0, [1])
    for equal in (Decimal(1), Fraction(1), 1.0, True, 1):
        assert router.choose(0, [equal]) == first
    assert list(router._cache) == [1]
    router.choose(0, [frozenset({"a"})])
    router.choose(0, [{"a": 1}])
    router.choose(0, ["a"])
    assert list(router._cache) == [1, "a"]
    pair = FieldsRouter(list(range(1, 9)), [0, 1])
    pair.choose(0, ["a", 1])
    pair.choose(0, ["a", Decimal("0.5")])
    assert list(pair._cache) == [("a", 1)]


# -- all, global, direct -----------------------------------------------------------------


def test_all_grouping_sends_to_every_task() -> None:
    topology, plan, conf = single_bolt("all_grouping", 4)
    source = spout_tasks(plan)[0]
    choose = chooser(topology, plan, conf, source)
    for i in range(3):
        assert choose(source, ["k", i, i]) == plan.component_tasks["b"]


def test_all_grouping_returns_a_fresh_list() -> None:
    topology, plan, conf = single_bolt("all_grouping", 3)
    source = spout_tasks(plan)[0]
    choose = chooser(topology, plan, conf, source)
    choose(source, ["k", 0, 0]).append(999)
    assert choose(source, ["k", 0, 0]) == plan.component_tasks["b"]


def test_global_grouping_sends_to_the_lowest_task_id() -> None:
    topology, plan, conf = single_bolt("global_grouping", 5, spout_parallelism=2)
    lowest = min(plan.component_tasks["b"])
    for source in spout_tasks(plan):
        choose = chooser(topology, plan, conf, source)
        assert {tuple(choose(source, [f"k{i}", i, i])) for i in range(20)} == {(lowest,)}


def test_direct_stream_has_no_chooser_targets_but_direct_targets() -> None:
    def wire(builder: TopologyBuilder) -> None:
        builder.set_bolt("b", Sink(), 3).direct_grouping("s", "direct")
        builder.set_bolt("c", Sink(), 2).direct_grouping("s", "direct")

    topology, plan, conf = build(wire)
    source = spout_tasks(plan)[0]
    routes = routes_of(topology, plan, conf, source)
    route = routes["direct"]
    assert route.direct is True
    assert route.choose(source, ["k"]) == []
    assert route.direct_targets == frozenset(plan.component_tasks["b"] + plan.component_tasks["c"])
    assert routes["default"].direct is False
    assert routes["default"].direct_targets == frozenset()


def test_stream_without_subscribers_goes_nowhere() -> None:
    def wire(builder: TopologyBuilder) -> None:
        builder.set_bolt("b", Sink()).direct_grouping("s", "direct")

    topology, plan, conf = build(wire)
    source = spout_tasks(plan)[0]
    assert chooser(topology, plan, conf, source)(source, ["k", 0, 0]) == []


def test_route_describes_its_stream() -> None:
    topology, plan, conf = single_bolt("shuffle_grouping", 2)
    source = spout_tasks(plan)[0]
    route = routes_of(topology, plan, conf, source)["default"]
    assert route.stream_id == "default"
    assert route.width == 3
    assert route.info.component_id == "s"
    assert route.info.fields == Fields("key", "other", "n")


# -- multiple subscribers ----------------------------------------------------------------


def test_multiple_subscribers_get_concatenated_targets() -> None:
    def wire(builder: TopologyBuilder) -> None:
        builder.set_bolt("everyone", Sink(), 3).all_grouping("s")
        builder.set_bolt("one", Sink(), 2).global_grouping("s")
        builder.set_bolt("keyed", Sink(), 4).fields_grouping("s", ["key"])

    topology, plan, conf = build(wire)
    source = spout_tasks(plan)[0]
    choose = chooser(topology, plan, conf, source)
    for i in range(10):
        chosen = choose(source, [f"k{i}", 0, 0])
        assert chosen[:3] == plan.component_tasks["everyone"]
        assert chosen[3] == min(plan.component_tasks["one"])
        assert len(chosen) == 5
        assert chosen[4] in plan.component_tasks["keyed"]
        assert choose(source, [f"k{i}", 1, 1])[4] == chosen[4]


# -- local or shuffle --------------------------------------------------------------------


def _local_topology():
    def wire(builder: TopologyBuilder) -> None:
        builder.set_bolt("a", Sink(), 2).set_num_tasks(4).local_or_shuffle_grouping("s")

    def wire_both(builder: TopologyBuilder) -> None:
        wire(builder)
        builder.set_bolt("c", Sink(), 1).set_num_tasks(2).local_or_shuffle_grouping("s", "default")

    return build(wire_both, spout_parallelism=2, conf={Config.TOPOLOGY_WORKERS: 2})


def test_local_or_shuffle_prefers_tasks_of_the_emitters_worker() -> None:
    topology, plan, conf = _local_topology()
    a_tasks = plan.component_tasks["a"]
    for source in spout_tasks(plan):
        worker = plan.task_worker[source]
        local = [t for t in a_tasks if plan.task_worker[t] == worker]
        assert local and len(local) < len(a_tasks)  # the layout this test relies on
        choose = chooser(topology, plan, conf, source)
        chosen = Counter(choose(source, ["k", i, i])[0] for i in range(len(local) * 10))
        assert chosen == dict.fromkeys(local, 10)


def test_local_or_shuffle_uses_all_tasks_when_none_is_local() -> None:
    topology, plan, conf = _local_topology()
    c_tasks = plan.component_tasks["c"]
    remote = [
        s
        for s in spout_tasks(plan)
        if all(plan.task_worker[t] != plan.task_worker[s] for t in c_tasks)
    ]
    assert remote  # the layout this test relies on: one spout task shares no worker with c
    for source in remote:
        choose = chooser(topology, plan, conf, source)
        chosen = Counter(choose(source, ["k", i, i])[1] for i in range(len(c_tasks) * 10))
        assert chosen == dict.fromkeys(c_tasks, 10)


def test_local_or_shuffle_with_one_worker_is_shuffle_over_all() -> None:
    topology, plan, conf = single_bolt("local_or_shuffle_grouping", 3)
    source = spout_tasks(plan)[0]
    choose = chooser(topology, plan, conf, source)
    chosen = Counter(choose(source, ["k", i, i])[0] for i in range(9))
    assert chosen == dict.fromkeys(plan.component_tasks["b"], 3)


# -- custom ------------------------------------------------------------------------------

prepared_calls: list[tuple[int, GlobalStreamId, list[int]]] = []


class EvenKeys(CustomStreamGrouping):
    """Sends ints to the task at ``key % len(targets)``, or to every task for "all"."""

    def prepare(self, context, stream, target_tasks) -> None:
        prepared_calls.append((context.task_id, stream, list(target_tasks)))
        self.targets = target_tasks

    def choose_tasks(self, task_id, values):
        if values[0] == "all":
            return list(self.targets)
        if values[0] == "bad":
            return [max(self.targets) + 100]
        return [self.targets[values[0] % len(self.targets)]]


@pytest.fixture
def custom_topology():
    prepared_calls.clear()

    def wire(builder: TopologyBuilder) -> None:
        builder.set_bolt("b", Sink(), 3).custom_grouping("s", EvenKeys())

    yield build(wire, spout_parallelism=2)
    prepared_calls.clear()


def test_custom_grouping_prepared_with_subscriber_tasks(custom_topology) -> None:
    topology, plan, conf = custom_topology
    first, second = spout_tasks(plan)
    chooser(topology, plan, conf, first)
    chooser(topology, plan, conf, second)
    b_tasks = plan.component_tasks["b"]
    assert prepared_calls == [
        (first, GlobalStreamId("s", "default"), b_tasks),
        (second, GlobalStreamId("s", "default"), b_tasks),
    ]


def test_custom_grouping_choice_is_used(custom_topology) -> None:
    topology, plan, conf = custom_topology
    source = spout_tasks(plan)[0]
    choose = chooser(topology, plan, conf, source)
    b_tasks = plan.component_tasks["b"]
    for key in range(6):
        assert choose(source, [key, "x", 0]) == [b_tasks[key % 3]]
    assert choose(source, ["all", "x", 0]) == b_tasks


def test_custom_grouping_returning_a_foreign_task_raises(custom_topology) -> None:
    topology, plan, conf = custom_topology
    source = spout_tasks(plan)[0]
    choose = chooser(topology, plan, conf, source)
    bad = max(plan.component_tasks["b"]) + 100
    with pytest.raises(ValueError) as info:
        choose(source, ["bad", "x", 0])
    message = str(info.value)
    assert f"choose_tasks returned task {bad}" in message
    assert "'b'" in message
    assert "s:default" in message


def test_custom_grouping_instances_are_per_emitting_task(custom_topology) -> None:
    topology, plan, conf = custom_topology
    original = topology.get_component("b").inputs[0].grouping.custom
    chooser(topology, plan, conf, spout_tasks(plan)[0])
    assert not hasattr(original, "targets")


@pytest.mark.parametrize(
    ("key", "equal_key"),
    [(Decimal(3), 3), (Fraction(5, 1), 5), (Decimal("2.5"), 2.5)],
    ids=["decimal-int", "fraction-int", "decimal-float"],
)
def test_fields_task_of_a_key_does_not_depend_on_earlier_emits(key, equal_key) -> None:
    # Two emitters of one stream must agree on the task of every key, whatever each
    # emitted before (here a value that is == to the key, so shares its dict slot).
    topology, plan, conf = single_bolt("fields_grouping", 8, ["key"], spout_parallelism=2)
    first, second = spout_tasks(plan)
    fresh = chooser(topology, plan, conf, first)
    warmed = chooser(topology, plan, conf, second)
    warmed(second, [equal_key, 0, 0])
    assert fresh(first, [key, 0, 0]) == warmed(second, [key, 0, 0])


def test_routers_pickle_with_their_positions_and_loads() -> None:
    """A Spark task's snapshot holds its routers: a restored one goes on where it was."""
    import pickle

    shuffle = ShuffleRouter([1, 2, 3, 4, 5], 0)
    shuffle.choose(0, [])
    restored = pickle.loads(pickle.dumps(shuffle))
    assert [restored.choose(0, []) for _ in range(7)] == [shuffle.choose(0, []) for _ in range(7)]
    partial = PartialKeyRouter([1, 2, 3, 4], [0])
    for word in ("a", "b", "a", "c", "a"):
        partial.choose(0, [word])
    copy = pickle.loads(pickle.dumps(partial))
    assert [copy.choose(0, [w]) for w in "aaxb"] == [partial.choose(0, [w]) for w in "aaxb"]
