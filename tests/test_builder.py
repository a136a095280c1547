"""Unit tests of ``TopologyBuilder``: validation errors, output sugar, declarers, pickling."""

from __future__ import annotations

import pickle
import re

import pytest

from squall import (
    BasicBolt,
    Bolt,
    Config,
    CustomStreamGrouping,
    Fields,
    InvalidTopologyError,
    Spout,
    TopologyBuilder,
)
from squall.model.builder import BoltDeclarer, SpoutDeclarer
from squall.model.declarer import StreamDeclaration
from squall.model.grouping import Grouping, GroupingKind


class WordSpout(Spout):
    outputs = ["word"]


class MultiSpout(Spout):
    outputs = {"default": ["word"], "errors": ["msg", "code"]}


class DirectSpout(Spout):
    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("word"))
        declarer.declare_stream("direct", Fields("word"), direct=True)


class PassBolt(Bolt):
    outputs = ["word"]

    def execute(self, tup) -> None:
        pass


class PassBasicBolt(BasicBolt):
    outputs = ["word"]

    def execute(self, tup, collector) -> None:
        pass


class NoExecuteBolt(Bolt):
    outputs = ["word"]


class NoExecuteBasicBolt(BasicBolt):
    pass


class ExplodingDeclareBolt(Bolt):
    def declare_output_fields(self, declarer) -> None:
        raise RuntimeError("kaboom")

    def execute(self, tup) -> None:
        pass


class SystemStreamBolt(Bolt):
    def declare_output_fields(self, declarer) -> None:
        declarer.declare_stream("__mine", ["x"])

    def execute(self, tup) -> None:
        pass


class ConfiguredBolt(Bolt):
    def get_component_configuration(self):
        return {"topology.debug": True, "my.key": "from-component", "other": 1}

    def execute(self, tup) -> None:
        pass


class FirstTask(CustomStreamGrouping):
    def prepare(self, context, stream, target_tasks) -> None:
        self.targets = target_tasks

    def choose_tasks(self, task_id, values):
        return [self.targets[0]]


def error_of(builder: TopologyBuilder) -> str:
    with pytest.raises(InvalidTopologyError) as info:
        builder.create_topology()
    return str(info.value)


# -- validation errors -------------------------------------------------------------------


def test_duplicate_id_is_reported_by_create_topology() -> None:
    builder = TopologyBuilder()
    builder.set_spout("words", WordSpout())
    builder.set_bolt("words", PassBolt()).shuffle_grouping("words")  # no error yet
    message = error_of(builder)
    assert "'words'" in message
    assert "duplicate" in message


def test_duplicate_bolt_ids() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("b", PassBolt()).shuffle_grouping("s")
    builder.set_bolt("b", PassBolt()).shuffle_grouping("s")
    message = error_of(builder)
    assert "'b'" in message
    assert "duplicate" in message


def test_subscription_to_unknown_component() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("b", PassBolt()).shuffle_grouping("ghost")
    message = error_of(builder)
    assert "'b'" in message
    assert "unknown component 'ghost'" in message


def test_subscription_to_undeclared_stream() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("b", PassBolt()).shuffle_grouping("s", "nope")
    message = error_of(builder)
    assert "'b'" in message
    assert "'nope'" in message
    assert "'s'" in message
    assert "does not declare" in message


@pytest.mark.parametrize("method", ["fields_grouping", "partial_key_grouping"])
def test_key_grouping_on_undeclared_field(method: str) -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    getattr(builder.set_bolt("b", PassBolt()), method)("s", Fields("colour"))
    message = error_of(builder)
    assert "'b'" in message
    assert "'colour'" in message
    assert "does not declare" in message
    kind = "fields" if method == "fields_grouping" else "partial_key"
    assert message.startswith(f"bolt 'b': {kind} grouping")


def test_fields_grouping_on_some_undeclared_fields_names_only_the_missing_one() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", MultiSpout())
    builder.set_bolt("b", PassBolt()).fields_grouping("s", ["msg", "line"], stream="errors")
    message = error_of(builder)
    assert "'line'" in message
    assert "['line']" in message
    assert "'errors'" in message


def test_direct_grouping_on_non_direct_stream() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", DirectSpout())
    builder.set_bolt("b", PassBolt()).direct_grouping("s")
    message = error_of(builder)
    assert "'b'" in message
    assert "direct grouping" in message
    assert "not declared direct" in message


def test_non_direct_grouping_on_direct_stream() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", DirectSpout())
    builder.set_bolt("b", PassBolt()).shuffle_grouping("s", "direct")
    message = error_of(builder)
    assert "'b'" in message
    assert "'direct'" in message
    assert "declared direct" in message
    assert "direct_grouping" in message


def test_direct_grouping_on_direct_stream_is_valid() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", DirectSpout())
    builder.set_bolt("b", PassBolt()).direct_grouping("s", "direct")
    topology = builder.create_topology()
    (sub,) = topology.get_component("b").inputs
    assert sub.grouping.kind is GroupingKind.DIRECT
    assert topology.get_component("s").streams["direct"].direct is True


@pytest.mark.parametrize("hint", [0, -1])
@pytest.mark.parametrize("kind", ["spout", "bolt"])
def test_parallelism_hint_below_one(kind: str, hint: int) -> None:
    builder = TopologyBuilder()
    if kind == "spout":
        builder.set_spout("c", WordSpout(), hint)
    else:
        builder.set_spout("s", WordSpout())
        builder.set_bolt("c", PassBolt(), hint).shuffle_grouping("s")
    message = error_of(builder)
    assert f"{kind} 'c'" in message
    assert "parallelism hint" in message
    assert str(hint) in message


@pytest.mark.parametrize("tasks", [0, -3])
@pytest.mark.parametrize("kind", ["spout", "bolt"])
def test_num_tasks_below_one(kind: str, tasks: int) -> None:
    builder = TopologyBuilder()
    if kind == "spout":
        builder.set_spout("c", WordSpout(), 2).set_num_tasks(tasks)
    else:
        builder.set_spout("s", WordSpout())
        builder.set_bolt("c", PassBolt(), 2).set_num_tasks(tasks).shuffle_grouping("s")
    message = error_of(builder)
    assert f"{kind} 'c'" in message
    assert "task count" in message
    assert str(tasks) in message


def test_bolt_without_inputs() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("lonely", PassBolt())
    message = error_of(builder)
    assert "'lonely'" in message
    assert "no inputs" in message


@pytest.mark.parametrize("kind", ["spout", "bolt"])
def test_component_id_starting_with_double_underscore(kind: str) -> None:
    builder = TopologyBuilder()
    if kind == "spout":
        builder.set_spout("__mine", WordSpout())
    else:
        builder.set_spout("s", WordSpout())
        builder.set_bolt("__mine", PassBolt()).shuffle_grouping("s")
    message = error_of(builder)
    assert "'__mine'" in message
    assert "reserved" in message


def test_stream_id_starting_with_double_underscore() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("b", SystemStreamBolt()).shuffle_grouping("s")
    message = error_of(builder)
    assert "'b'" in message
    assert "'__mine'" in message
    assert "reserved" in message


def test_non_spout_given_to_set_spout() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", PassBolt())
    message = error_of(builder)
    assert "'s'" in message
    assert "PassBolt is not a Spout" in message


def test_non_bolt_given_to_set_bolt() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("b", WordSpout()).shuffle_grouping("s")
    message = error_of(builder)
    assert "'b'" in message
    assert "WordSpout is not a Bolt" in message


@pytest.mark.parametrize("bolt", [NoExecuteBolt(), NoExecuteBasicBolt()], ids=["bolt", "basic"])
def test_bolt_without_execute(bolt) -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("b", bolt).shuffle_grouping("s")
    message = error_of(builder)
    assert "'b'" in message
    assert f"{type(bolt).__name__} does not implement execute" in message


def test_declare_output_fields_raising() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("b", ExplodingDeclareBolt()).shuffle_grouping("s")
    with pytest.raises(InvalidTopologyError) as info:
        builder.create_topology()
    message = str(info.value)
    assert "'b'" in message
    assert "declare_output_fields raised RuntimeError: kaboom" in message
    assert isinstance(info.value.__cause__, RuntimeError)


def test_subscribing_twice_to_one_stream() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("b", PassBolt()).shuffle_grouping("s").all_grouping("s")
    message = error_of(builder)
    assert "'b'" in message
    assert "twice" in message


def test_custom_grouping_needs_a_custom_stream_grouping() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    with pytest.raises(InvalidTopologyError, match=re.escape("bolt 'b'")):
        builder.set_bolt("b", PassBolt()).custom_grouping("s", object())  # type: ignore[arg-type]


# -- what a valid topology contains ------------------------------------------------------


def test_outputs_list_sugar_declares_the_default_stream() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    topology = builder.create_topology()
    assert topology.get_component("s").streams == {
        "default": StreamDeclaration("default", Fields("word"), False)
    }


def test_outputs_dict_sugar_declares_every_stream() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", MultiSpout())
    builder.set_bolt("b", PassBasicBolt()).shuffle_grouping("s", "errors")
    topology = builder.create_topology()
    assert topology.get_component("s").streams == {
        "default": StreamDeclaration("default", Fields("word"), False),
        "errors": StreamDeclaration("errors", Fields("msg", "code"), False),
    }
    assert topology.output_fields("s", "errors") == Fields("msg", "code")
    assert topology.get_component("b").streams == {
        "default": StreamDeclaration("default", Fields("word"), False)
    }


def test_component_without_outputs_declares_nothing() -> None:
    class Silent(Bolt):
        def execute(self, tup) -> None:
            pass

    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("sink", Silent()).shuffle_grouping("s")
    assert builder.create_topology().get_component("sink").streams == {}


def test_declarer_methods_chain() -> None:
    builder = TopologyBuilder()
    spout = builder.set_spout("s", MultiSpout(), 2)
    assert isinstance(spout, SpoutDeclarer)
    assert spout.set_num_tasks(4) is spout
    assert spout.add_configuration("k", "v") is spout
    assert spout.set_max_spout_pending(10) is spout
    assert spout.set_debug(True) is spout

    builder.set_spout("d", DirectSpout())
    bolt = builder.set_bolt("b", PassBolt(), 3)
    assert isinstance(bolt, BoltDeclarer)
    chained = [
        bolt.set_num_tasks(6),
        bolt.add_configuration("k", "v"),
        bolt.shuffle_grouping("s"),
        bolt.fields_grouping("s", Fields("msg"), stream="errors"),
        bolt.direct_grouping("d", "direct"),
        bolt.all_grouping("d"),
    ]
    assert all(result is bolt for result in chained)

    other = builder.set_bolt("c", PassBolt())
    chained = [
        other.partial_key_grouping("s", ["word"]),
        other.global_grouping("b"),
        other.none_grouping("d"),
        other.local_or_shuffle_grouping("s", "errors"),
    ]
    assert all(result is other for result in chained)
    third = builder.set_bolt("e", PassBolt())
    assert third.custom_grouping("b", FirstTask()) is third

    topology = builder.create_topology()
    s = topology.get_component("s")
    assert (s.parallelism, s.num_tasks) == (2, 4)
    assert s.conf == {"k": "v", Config.TOPOLOGY_MAX_SPOUT_PENDING: 10, Config.TOPOLOGY_DEBUG: True}
    b = topology.get_component("b")
    assert (b.parallelism, b.num_tasks) == (3, 6)
    assert [(sub.source, sub.stream_id, sub.grouping) for sub in b.inputs] == [
        ("s", "default", Grouping(GroupingKind.SHUFFLE)),
        ("s", "errors", Grouping(GroupingKind.FIELDS, Fields("msg"))),
        ("d", "direct", Grouping(GroupingKind.DIRECT)),
        ("d", "default", Grouping(GroupingKind.ALL)),
    ]
    c = topology.get_component("c")
    assert [(sub.source, sub.stream_id, sub.grouping.kind) for sub in c.inputs] == [
        ("s", "default", GroupingKind.PARTIAL_KEY),
        ("b", "default", GroupingKind.GLOBAL),
        ("d", "default", GroupingKind.NONE),
        ("s", "errors", GroupingKind.LOCAL_OR_SHUFFLE),
    ]
    assert c.inputs[0].grouping.fields == Fields("word")


def test_num_tasks_defaults_to_parallelism_hint() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout(), 3)
    spec = builder.create_topology().get_component("s")
    assert (spec.parallelism, spec.num_tasks) == (3, 3)


def test_component_configuration_merged_with_add_configuration_winning() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    (
        builder.set_bolt("b", ConfiguredBolt())
        .add_configuration("my.key", "from-declarer")
        .add_configuration("extra", 2)
        .shuffle_grouping("s")
    )
    conf = builder.create_topology().get_component("b").conf
    assert conf == {"topology.debug": True, "my.key": "from-declarer", "other": 1, "extra": 2}


def test_topology_lists_spouts_and_bolts() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("b", PassBolt()).shuffle_grouping("s")
    builder.set_bolt("a", PassBolt()).shuffle_grouping("b")
    topology = builder.create_topology()
    assert topology.component_ids() == ["s", "b", "a"]
    assert list(topology.spouts) == ["s"]
    assert list(topology.bolts) == ["b", "a"]
    assert [bolt for bolt, _ in topology.subscribers("b", "default")] == ["a"]
    with pytest.raises(KeyError, match="'ghost'"):
        topology.get_component("ghost")


def test_topology_pickle_round_trip() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", MultiSpout(), 2).set_max_spout_pending(5)
    builder.set_spout("d", DirectSpout())
    (
        builder.set_bolt("split", PassBolt(), 3)
        .set_num_tasks(6)
        .fields_grouping("s", ["word"])
        .direct_grouping("d", "direct")
    )
    builder.set_bolt("count", PassBasicBolt()).partial_key_grouping("split", Fields("word"))
    builder.set_bolt("custom", PassBolt()).custom_grouping("s", FirstTask(), stream="errors")
    topology = builder.create_topology()

    restored = pickle.loads(pickle.dumps(topology))

    assert restored.component_ids() == topology.component_ids()
    for original in topology:
        copy = restored.get_component(original.component_id)
        assert type(copy.component) is type(original.component)
        assert copy.kind == original.kind
        assert (copy.parallelism, copy.num_tasks) == (original.parallelism, original.num_tasks)
        assert copy.conf == original.conf
        assert copy.streams == original.streams
        assert [
            (s.source, s.stream_id, s.grouping.kind, s.grouping.fields) for s in copy.inputs
        ] == [(s.source, s.stream_id, s.grouping.kind, s.grouping.fields) for s in original.inputs]
    assert restored.get_component("split").inputs[0].grouping == Grouping(
        GroupingKind.FIELDS, Fields("word")
    )
    assert restored.get_component("s").streams["errors"].fields == Fields("msg", "code")
    assert restored.get_component("d").streams["direct"].direct is True
    custom = restored.get_component("custom").inputs[0].grouping
    assert custom.kind is GroupingKind.CUSTOM
    assert isinstance(custom.custom, FirstTask)
    assert restored.get_component("s").conf == {Config.TOPOLOGY_MAX_SPOUT_PENDING: 5}


def test_created_topology_is_a_snapshot_of_the_builder() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    declarer = builder.set_bolt("b", PassBolt(), 2).shuffle_grouping("s")
    topology = builder.create_topology()

    # Declaring more on the same builder must not change a topology already created
    # (it may be running): Storm's createTopology returns a new structure each time.
    declarer.add_configuration("late", 1).set_num_tasks(0).all_grouping("s", "other")
    builder.set_bolt("c", PassBolt()).shuffle_grouping("b")

    spec = topology.get_component("b")
    assert spec.conf == {}
    assert spec.num_tasks == 2
    assert [(sub.source, sub.stream_id) for sub in spec.inputs] == [("s", "default")]
    assert topology.component_ids() == ["s", "b"]


# -- the system stream ---------------------------------------------------------------------

SYSTEM_SUBSCRIPTIONS = {
    "shuffle": lambda d, c: d.shuffle_grouping(c, "__system"),
    "fields": lambda d, c: d.fields_grouping(c, ["event"], "__system"),
    "partial_key": lambda d, c: d.partial_key_grouping(c, "event", "__system"),
    "all": lambda d, c: d.all_grouping(c, "__system"),
    "global": lambda d, c: d.global_grouping(c, "__system"),
    "none": lambda d, c: d.none_grouping(c, "__system"),
    "local_or_shuffle": lambda d, c: d.local_or_shuffle_grouping(c, "__system"),
    "custom": lambda d, c: d.custom_grouping(c, FirstTask(), "__system"),
}


@pytest.mark.parametrize("grouping", sorted(SYSTEM_SUBSCRIPTIONS))
def test_every_component_has_the_system_stream(grouping: str) -> None:
    """A bolt may subscribe to the ``__system`` stream of a spout and of a bolt, which
    declare only ``default``; the engines add the stream (fields ``event``) to every
    spout and bolt of the system topology (the acker, which no bolt can subscribe to,
    keeps its own streams only)."""
    from squall.runtime.system import system_topology

    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("b", PassBolt()).shuffle_grouping("s")
    watcher = builder.set_bolt("w", PassBolt()).shuffle_grouping("b")
    SYSTEM_SUBSCRIPTIONS[grouping](watcher, "s")
    SYSTEM_SUBSCRIPTIONS[grouping](watcher, "b")
    topology = builder.create_topology()
    assert [(sub.source, sub.stream_id) for sub in topology.get_component("w").inputs] == [
        ("b", "default"),
        ("s", "__system"),
        ("b", "__system"),
    ]
    assert list(topology.get_component("s").streams) == ["default"]  # as declared
    system = StreamDeclaration("__system", Fields("event"), False)
    for ackers in (0, 1):
        full = system_topology(topology, {Config.TOPOLOGY_ACKER_EXECUTORS: ackers})
        assert {
            spec.component_id: spec.streams["__system"] for spec in full if not spec.system
        } == dict.fromkeys(["s", "b", "w"], system)
        assert "__system" not in {s for spec in full if spec.system for s in spec.streams}
        assert full.subscribers("s", "__system")[0][0] == "w"


def test_fields_grouping_on_the_system_stream_takes_its_event_field() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("b", PassBolt()).fields_grouping("s", ["word"], "__system")
    message = error_of(builder)
    assert message == (
        "bolt 'b': fields grouping on 's' stream '__system' uses field(s) ['word'] that "
        "the stream does not declare (its fields are ['event'])"
    )


def test_direct_grouping_on_the_system_stream() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("b", PassBolt()).direct_grouping("s", "__system")
    assert error_of(builder) == (
        "bolt 'b': direct grouping on 's' stream '__system', which is not declared direct "
        "(declare it with direct=True)"
    )


@pytest.mark.parametrize("stream", ["__tick", "__ack_init", "__metrics"])
def test_other_system_streams_cannot_be_subscribed_to(stream: str) -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("b", PassBolt()).shuffle_grouping("s", stream)
    assert error_of(builder) == (
        f"bolt 'b' subscribes to stream '{stream}' of spout 's', which does not declare "
        "it (declared streams: ['default']; every component also has the system stream "
        "['__system'])"
    )


def test_user_code_cannot_declare_the_system_stream() -> None:
    class DeclaresSystem(Spout):
        def declare_output_fields(self, declarer) -> None:
            declarer.declare_stream("__system", ["event"])

    builder = TopologyBuilder()
    builder.set_spout("s", DeclaresSystem())
    assert error_of(builder) == (
        "component 's': stream id '__system' starts with '__', which is reserved for system streams"
    )


# -- Storm's argument order: the stream id comes last in squall ---------------------------


def test_fields_passed_where_the_stream_id_belongs_names_both() -> None:
    # Storm's fieldsGrouping("s", "default", new Fields("word")), translated positionally.
    declarer = TopologyBuilder().set_bolt("b", PassBolt())
    with pytest.raises(InvalidTopologyError) as caught:
        declarer.fields_grouping("s", "default", Fields("word"))  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith("bolt 'b': fields_grouping('s', ...) got Fields('word') as its")
    assert "stream id and ['default'] as its fields" in message
    assert "fields_grouping(component, fields, stream=...)" in message


def test_partial_key_grouping_with_storm_order_of_plain_strings() -> None:
    declarer = TopologyBuilder().set_bolt("b", PassBolt())
    with pytest.raises(InvalidTopologyError) as caught:
        declarer.partial_key_grouping("s", "words", ["word"])  # type: ignore[arg-type]
    message = str(caught.value)
    assert "partial_key_grouping('s', ...) got ['word'] as its stream id" in message
    assert "['words'] as its fields" in message


@pytest.mark.parametrize(
    "method",
    [
        "shuffle_grouping",
        "all_grouping",
        "global_grouping",
        "none_grouping",
        "direct_grouping",
        "local_or_shuffle_grouping",
    ],
)
def test_fields_as_the_stream_of_other_groupings(method: str) -> None:
    declarer = TopologyBuilder().set_bolt("b", PassBolt())
    with pytest.raises(InvalidTopologyError) as caught:
        getattr(declarer, method)("s", Fields("word"))
    assert str(caught.value) == (
        f"bolt 'b': {method}('s', ...) got Fields('word') as its stream id; a stream id "
        f"is a string: {method}(component, stream=...)"
    )


def test_custom_grouping_in_storm_order_says_which_comes_first() -> None:
    declarer = TopologyBuilder().set_bolt("b", PassBolt())
    with pytest.raises(InvalidTopologyError) as caught:
        declarer.custom_grouping("s", "default", FirstTask())  # type: ignore[arg-type]
    assert "custom_grouping(component, grouping, stream=...)" in str(caught.value)
    with pytest.raises(InvalidTopologyError) as caught:
        declarer.custom_grouping("s", FirstTask(), Fields("word"))  # type: ignore[arg-type]
    assert "got Fields('word') as its stream id" in str(caught.value)


def colocated(leader_tasks: int, follower_tasks: int, leader: str = "a") -> TopologyBuilder:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout())
    builder.set_bolt("a", PassBolt(), leader_tasks).shuffle_grouping("s")
    builder.set_bolt("b", PassBolt(), follower_tasks).shuffle_grouping("s").colocate_with(leader)
    return builder


def test_a_colocated_bolt_needs_another_component_with_as_many_tasks() -> None:
    assert colocated(3, 3).create_topology().get_component("b").colocated_with == "a"
    with pytest.raises(InvalidTopologyError, match="'b' has 2 task\\(s\\) and is colocated"):
        colocated(3, 2).create_topology()
    with pytest.raises(InvalidTopologyError, match="with 'x', which is not another component"):
        colocated(3, 3, leader="x").create_topology()
    with pytest.raises(InvalidTopologyError, match="with 'b', which is not another component"):
        colocated(3, 3, leader="b").create_topology()
    chained = colocated(2, 2)
    chained.set_bolt("c", PassBolt(), 2).shuffle_grouping("s").colocate_with("b")
    with pytest.raises(InvalidTopologyError, match="which is itself colocated with 'a'"):
        chained.create_topology()
