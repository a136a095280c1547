"""The graph queries of ``StormTopology``: cycles, topological orders (both tie rules),
reachability and depths from the spouts; and the orders each engine takes from them
(Spark stage indices, the local engine's execution order), pinned on topologies where
the tie rules disagree."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from squall import Bolt, InvalidTopologyError, Spout, TopologyBuilder, Tuple
from squall.local.running import _execution_order
from squall.model.errors import TopologyOrderError
from squall.model.grouping import Grouping, GroupingKind
from squall.model.topology import ComponentSpec, StormTopology, Subscription, is_control_stream
from squall.spark.plan.batch import query_plans
from squall.spark.plan.core import core_plan
from squall.transactional import BatchBolt, Committer, TransactionalTopologyBuilder
from squall.transactional.spouts import PartitionedTransactionalSpout

SHUFFLE = Grouping(GroupingKind.SHUFFLE)


def graph(*components: str, system: tuple[str, ...] = ()) -> StormTopology:
    """A topology from ``"id"`` (a spout) and ``"id<source,source:stream"`` (a bolt and
    its subscriptions, on ``default`` unless a stream is named), in declaration order."""
    specs = {}
    for text in components:
        cid, _, inputs = text.partition("<")
        subscriptions = [
            Subscription(*(entry.split(":") if ":" in entry else (entry, "default")), SHUFFLE)
            for entry in inputs.split(",")
            if entry
        ]
        kind = "bolt" if "<" in text else "spout"
        specs[cid] = ComponentSpec(
            cid, None, kind, 1, 1, inputs=subscriptions, system=cid in system
        )
    return StormTopology(specs)


# --- control streams --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stream", "control"),
    [
        ("default", False),
        ("counts", False),
        ("$batch", True),
        ("$coord", True),
        ("__ack_ack", True),
        ("__system", True),
        ("_private", False),
    ],
)
def test_control_streams_are_the_batch_and_system_streams(stream: str, control: bool) -> None:
    assert is_control_stream(stream) is control


# --- find_cycle -------------------------------------------------------------------------


def test_an_acyclic_topology_has_no_cycle() -> None:
    topology = graph("s", "a<s", "b<a,s", "c<b,a")
    assert topology.find_cycle() is None


def test_the_cycle_found_starts_and_ends_with_the_same_component() -> None:
    topology = graph("s", "a<s", "b<a,d", "c<b", "d<c")
    assert topology.find_cycle() == ["b", "c", "d", "b"]


def test_a_bolt_subscribing_to_itself_is_a_cycle() -> None:
    assert graph("s", "a<s,a").find_cycle() == ["a", "a"]


def test_find_cycle_counts_control_streams() -> None:
    assert graph("s", "a<s,b:$coord", "b<a").find_cycle() == ["a", "b", "a"]


def test_find_cycle_reports_the_first_cycle_in_declaration_order() -> None:
    topology = graph("s", "x<s,y", "y<x", "a<s,b", "b<a")
    assert topology.find_cycle() == ["x", "y", "x"]


def test_find_cycle_is_not_limited_by_the_recursion_depth() -> None:
    chain = ["s", "b0<s,b1999"] + [f"b{i}<b{i - 1}" for i in range(1, 2000)]
    cycle = graph(*chain).find_cycle()
    assert cycle is not None
    assert cycle[0] == cycle[-1] and len(cycle) == 2001


# --- topological_order ------------------------------------------------------------------

#: Declared y, z, x: y subscribes to z; z and x only to the spout.
DISAGREEING = ("s", "y<z", "z<s", "x<s")


def test_passes_take_every_ready_component_of_a_pass_in_sequence_order() -> None:
    order = graph(*DISAGREEING).topological_order(
        ["y", "z", "x"], upstream={"s"}, ties="passes", include_control_streams=True
    )
    assert order == ["z", "x", "y"]


def test_earliest_always_takes_the_earliest_ready_component() -> None:
    order = graph(*DISAGREEING).topological_order(
        ["y", "z", "x"], upstream={"s"}, ties="earliest", include_control_streams=True
    )
    assert order == ["z", "y", "x"]


def test_a_pass_takes_a_component_whose_input_it_took_earlier_in_the_same_pass() -> None:
    topology = graph("s", "a<s", "b<a", "c<b", "d<s")
    order = topology.topological_order(
        ["c", "a", "b", "d"], upstream={"s"}, ties="passes", include_control_streams=True
    )
    # Pass 1 looks at c (not ready), takes a, then b (a is taken), then d; pass 2 takes c.
    assert order == ["a", "b", "d", "c"]


def test_orders_of_a_diamond() -> None:
    topology = graph("s", "join<left,right", "right<split", "left<split", "split<s")
    sequence = ["join", "right", "left", "split"]
    passes = topology.topological_order(
        sequence, upstream={"s"}, ties="passes", include_control_streams=True
    )
    earliest = topology.topological_order(
        sequence, upstream={"s"}, ties="earliest", include_control_streams=True
    )
    assert passes == ["split", "right", "left", "join"]
    assert earliest == ["split", "right", "left", "join"]


def test_subscriptions_to_upstream_components_are_satisfied() -> None:
    topology = graph("s", "emitter<s:$batch", "a<emitter", "b<a,emitter")
    order = topology.topological_order(
        ["b", "a"], upstream={"emitter"}, ties="passes", include_control_streams=False
    )
    assert order == ["a", "b"]


def test_without_control_streams_their_subscriptions_do_not_order() -> None:
    topology = graph("s", "a<s,b:$coord", "b<s")
    without = topology.topological_order(
        ["a", "b"], upstream={"s"}, ties="earliest", include_control_streams=False
    )
    assert without == ["a", "b"]
    with_them = topology.topological_order(
        ["a", "b"], upstream={"s"}, ties="earliest", include_control_streams=True
    )
    assert with_them == ["b", "a"]


def test_a_cycle_names_the_components_on_and_after_it() -> None:
    topology = graph("s", "a<s", "b<a,c", "c<b", "d<c", "e<a")
    with pytest.raises(TopologyOrderError) as caught:
        topology.topological_order(
            ["a", "b", "c", "d", "e"], upstream={"s"}, ties="passes", include_control_streams=True
        )
    assert caught.value.components == ["b", "c", "d"]
    assert isinstance(caught.value, InvalidTopologyError)


def test_a_subscription_to_a_component_neither_ordered_nor_upstream_is_never_satisfied() -> None:
    topology = graph("s", "t", "a<s", "b<t", "c<b")
    with pytest.raises(TopologyOrderError) as caught:
        topology.topological_order(
            ["a", "b", "c"], upstream={"s"}, ties="earliest", include_control_streams=True
        )
    assert caught.value.components == ["b", "c"]


def test_a_component_subscribing_twice_to_the_same_one_waits_for_it_once() -> None:
    topology = graph("s", "b<a,a:other", "a<s")
    order = topology.topological_order(
        ["b", "a"], upstream={"s"}, ties="earliest", include_control_streams=True
    )
    assert order == ["a", "b"]


# --- reachable_from ---------------------------------------------------------------------


def test_reachable_from_follows_subscriptions_downstream() -> None:
    topology = graph("s", "t", "a<s", "b<a", "c<t", "d<b,c")
    assert topology.reachable_from(["s"], include_control_streams=True) == {"a", "b", "d"}
    assert topology.reachable_from(["s", "t"], include_control_streams=True) == {
        "a",
        "b",
        "c",
        "d",
    }
    assert topology.reachable_from(["d"], include_control_streams=True) == set()


def test_reachable_from_within_goes_only_through_the_given_components() -> None:
    topology = graph("s", "a<s", "b<a", "c<s", "d<c")
    reached = topology.reachable_from(["s"], include_control_streams=True, within={"a", "b", "d"})
    assert reached == {"a", "b"}


def test_reachable_from_can_leave_out_control_streams() -> None:
    topology = graph("s", "a<s:$batch", "b<a", "c<s")
    assert topology.reachable_from(["s"], include_control_streams=False) == {"c"}
    assert topology.reachable_from(["s"], include_control_streams=True) == {"a", "b", "c"}


def test_a_source_is_reached_only_through_a_cycle() -> None:
    topology = graph("s", "a<s,b", "b<a")
    assert topology.reachable_from(["a"], include_control_streams=True) == {"a", "b"}


# --- depths_from_spouts -----------------------------------------------------------------


def test_depths_are_the_fewest_subscriptions_from_a_spout() -> None:
    topology = graph("s", "t", "a<s", "b<a", "c<b,t", "d<c", "lone<lone")
    assert topology.depths_from_spouts() == {"s": 0, "t": 0, "a": 1, "b": 2, "c": 1, "d": 2}


def test_depths_leave_out_system_components_and_do_not_go_through_them() -> None:
    topology = graph("s", "__acker<s:__ack_init", "a<s", "b<__acker", system=("__acker",))
    assert topology.depths_from_spouts() == {"s": 0, "a": 1}


def test_depths_of_a_cycle() -> None:
    topology = graph("s", "a<s,c", "b<a", "c<b")
    assert topology.depths_from_spouts() == {"s": 0, "a": 1, "b": 2, "c": 3}


# --- the orders each engine takes -------------------------------------------------------


class Numbers(Spout):
    outputs = ["n"]


class Pass(Bolt):
    outputs = ["n"]

    def execute(self, tup: Tuple) -> None:
        """Nothing to do: only the plan is looked at."""


def test_spark_core_stages_take_the_earliest_ready_bolt_by_id() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", Numbers())
    builder.set_bolt("a", Pass()).shuffle_grouping("c")
    builder.set_bolt("c", Pass()).shuffle_grouping("s")
    builder.set_bolt("d", Pass()).shuffle_grouping("s")
    plan = core_plan("stages", builder.create_topology(), {})
    # Passes over the ids would give c, d, a.
    assert [(stage.index, stage.component_id) for stage in plan.stages] == [
        (0, "c"),
        (1, "a"),
        (2, "d"),
    ]


class Coordinator:
    def number_of_partitions(self) -> int:
        return 1

    def is_ready(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to release."""


class NumberSpout(PartitionedTransactionalSpout):
    outputs = ["attempt", "n"]

    def get_coordinator(self, conf: dict[str, Any], context: Any) -> Coordinator:
        return Coordinator()

    def get_emitter(self, conf: dict[str, Any], context: Any) -> Any:
        raise AssertionError("only the plan is looked at")


class Forward(BatchBolt):
    outputs = ["attempt", "n"]


class Total(BatchBolt, Committer):
    outputs = ["attempt", "total"]


def test_spark_batch_stages_are_taken_in_passes_then_committers_last() -> None:
    builder = TransactionalTopologyBuilder("stages", "numbers", NumberSpout())
    builder.set_bolt("y", Forward()).shuffle_grouping("z")
    builder.set_bolt("total", Total()).global_grouping("numbers")
    builder.set_bolt("z", Forward()).shuffle_grouping("numbers")
    builder.set_bolt("x", Forward()).shuffle_grouping("numbers")
    builder.set_bolt("after_total", Forward()).shuffle_grouping("total")
    (plan,) = query_plans(builder.build_topology())
    # Passes: total, z, x, after_total, then y; committers and what follows them last.
    # The earliest ready bolt each time would give z, y, x, total, after_total.
    assert [(stage.index, stage.component_id) for stage in plan.segments] == [
        (0, "z"),
        (1, "x"),
        (2, "y"),
        (3, "total"),
        (4, "after_total"),
    ]


def test_spark_batch_stages_in_a_cycle_are_refused() -> None:
    builder = TransactionalTopologyBuilder("cyclic", "numbers", NumberSpout())
    builder.set_bolt("a", Forward()).shuffle_grouping("numbers").shuffle_grouping("b")
    builder.set_bolt("b", Forward()).shuffle_grouping("a")
    with pytest.raises(
        InvalidTopologyError, match=r"cannot run cycles \(components \['a', 'b'\]\)"
    ):
        query_plans(builder.build_topology())


def test_local_tasks_run_by_depth_from_the_spouts_then_the_acker() -> None:
    topology = graph(
        "s", "a<c", "c<s", "d<s", "lone<lone", "__acker<s:__ack_init", system=("__acker",)
    )
    runners: Any = [
        SimpleNamespace(component_id=cid, task_id=task)
        for task, cid in enumerate(["__acker", "lone", "d", "c", "a", "s"], start=1)
    ]
    order = _execution_order(topology, runners)
    assert [r.component_id for r in order] == ["s", "d", "c", "a", "lone", "__acker"]
