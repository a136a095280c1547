"""Storm's lambda components: ``set_spout(id, supplier)`` and ``set_bolt(id, fn, ...)``
with ``fn(tup, collector)`` or ``fn(tup)``: how the builder tells them apart, its
errors, and the components running on each engine (closures copied per task, as Storm
deserializes a copy per task)."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from squall import BasicBolt, Config, Fields, InvalidTopologyError, LocalCluster, TopologyBuilder
from squall.model.lambdas import LambdaBiConsumerBolt, LambdaConsumerBolt, LambdaSpout
from squall.model.topology import StormTopology
from squall.testing import CapturingBolt, SharedRecord
from tests.conftest import Engine, on_engine, on_engines
from tests.helpers import wait_until
from tests.starter_loading import load_starter

# --- the builder ---------------------------------------------------------------------------


def build(*bolt_args: Any, **bolt_kwargs: Any) -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout("spout", lambda: None)
    builder.set_bolt("bolt", *bolt_args, **bolt_kwargs).shuffle_grouping("spout")
    return builder.create_topology()


def test_a_supplier_is_a_spout_emitting_field_lambda() -> None:
    topology = build(lambda tup: None)
    spec = topology.get_component("spout")
    assert isinstance(spec.component, LambdaSpout)
    assert spec.streams["default"].fields == Fields("lambda")
    assert spec.parallelism == 1


@pytest.mark.parametrize(
    ("args", "kwargs", "kind", "fields", "hint"),
    [
        ((lambda tup, collector: None, "a", "b"), {}, LambdaBiConsumerBolt, ["a", "b"], 1),
        ((lambda tup, collector: None, 3, "a"), {}, LambdaBiConsumerBolt, ["a"], 3),
        ((lambda tup, collector: None,), {"parallelism_hint": 2}, LambdaBiConsumerBolt, [], 2),
        ((lambda tup, collector: None, Fields("x", "y")), {}, LambdaBiConsumerBolt, ["x", "y"], 1),
        ((lambda tup: None,), {}, LambdaConsumerBolt, [], 1),
        ((lambda tup: None, 4), {}, LambdaConsumerBolt, [], 4),
        # Takes one or two arguments: a consumer without fields, a bi-consumer with them.
        ((lambda tup, collector=None: None,), {}, LambdaConsumerBolt, [], 1),
        ((lambda tup, collector=None: None, "w"), {}, LambdaBiConsumerBolt, ["w"], 1),
        ((lambda *args: None, "w"), {}, LambdaBiConsumerBolt, ["w"], 1),
        # A builtin whose signature cannot be read, as Storm's tuple -> println(tuple).
        ((print,), {}, LambdaConsumerBolt, [], 1),
    ],
)
def test_set_bolt_tells_function_kinds_apart_by_signature(
    args: tuple[Any, ...], kwargs: dict[str, Any], kind: type, fields: list[str], hint: int
) -> None:
    spec = build(*args, **kwargs).get_component("bolt")
    assert type(spec.component) is kind
    assert (spec.parallelism, spec.num_tasks) == (hint, hint)
    declared = {sid: s.fields.to_list() for sid, s in spec.streams.items()}
    assert declared == ({"default": fields} if kind is LambdaBiConsumerBolt else {})


def test_a_component_bolt_keeps_its_positional_and_keyword_hint() -> None:
    class Echo(BasicBolt):
        outputs = ["x"]

        def execute(self, tup: Any, collector: Any) -> None:
            collector.emit(tup.get_values())

    assert build(Echo(), 3).get_component("bolt").parallelism == 3
    assert build(Echo(), parallelism_hint=2).get_component("bolt").parallelism == 2


@pytest.mark.parametrize(
    ("build_it", "message"),
    [
        (
            lambda b: b.set_spout("s", lambda n: n),
            "spout 's': a function given as a spout is called with no argument (each "
            "next_tuple emits what it returns, unless None); <lambda>(n) cannot be",
        ),
        (
            lambda b: b.set_bolt("b", lambda a, b, c: None),
            "bolt 'b': a function given as a bolt takes (tup) or (tup, collector); "
            "<lambda>(a, b, c) takes neither",
        ),
        (
            lambda b: b.set_bolt("b", lambda tup: None, "word"),
            "bolt 'b': a function given as a bolt with output fields ['word'] takes (tup, "
            "collector) to emit them; <lambda>(tup) takes only the tuple",
        ),
        (
            lambda b: b.set_bolt("b", lambda tup, *, key: None),
            "bolt 'b': a function given as a bolt takes (tup) or (tup, collector); "
            "<lambda>(tup, *, key) takes neither",
        ),
        (
            lambda b: b.set_bolt("b", CapturingBolt(), "word"),
            "bolt 'b': output fields ['word'] are for a function given as a bolt; "
            "CapturingBolt declares its own outputs (declare_output_fields)",
        ),
        (
            lambda b: b.set_bolt("b", lambda t, c: None, 2, parallelism_hint=3),
            "bolt 'b': the parallelism hint is given twice (2 and parallelism_hint=3)",
        ),
        (
            lambda b: b.set_bolt("b", lambda t, c: None, "word", 2),
            "bolt 'b': set_bolt takes (id, bolt, parallelism_hint) or (id, function, "
            "[parallelism_hint,] *output_fields); got 2 where a field name belongs",
        ),
    ],
)
def test_a_function_that_fits_no_kind_is_refused_naming_the_component(
    build_it: Any, message: str
) -> None:
    with pytest.raises(InvalidTopologyError) as raised:
        build_it(TopologyBuilder())
    assert str(raised.value) == message


def test_a_hint_that_is_no_integer_is_refused_as_before() -> None:
    message = r"bolt 'bolt': parallelism hint must be an integer >= 1, got 2\.5"
    with pytest.raises(InvalidTopologyError, match=message):
        build(CapturingBolt(), 2.5)


def test_a_class_given_instead_of_an_instance_is_still_refused_as_before() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", lambda: None)
    builder.set_bolt("b", CapturingBolt).shuffle_grouping("s")
    with pytest.raises(InvalidTopologyError, match="bolt 'b': type is not a Bolt or BasicBolt"):
        builder.create_topology()


def test_a_closure_that_cannot_be_copied_is_refused_at_submit_naming_the_component() -> None:
    with (
        LocalCluster() as cluster,
        pytest.raises(InvalidTopologyError, match="component 'locked': cannot make a copy"),
    ):
        cluster.submit_topology("locked", {}, locked_topology())


def locked_topology() -> StormTopology:
    lock = threading.Lock()
    builder = TopologyBuilder()
    builder.set_spout("s", lambda: None)
    builder.set_bolt("locked", lambda tup: lock.acquire()).shuffle_grouping("s")
    return builder.create_topology()


@pytest.mark.parametrize("engine", [on_engine("process"), on_engine("spark")], indirect=True)
def test_a_closure_that_cannot_be_pickled_is_refused_naming_the_variable(engine: Engine) -> None:
    cluster = engine.new_cluster()
    with pytest.raises(InvalidTopologyError) as raised:
        cluster.submit_topology("locked", engine.conf(), locked_topology())
    assert "component 'locked' cannot be sent to" in str(raised.value)
    assert str(raised.value).endswith(
        ": locked.consumer[closure 'lock'] (lock; TypeError: cannot pickle '_thread.lock' "
        "object) cannot be pickled; create such resources inside the function, not in a "
        "variable it closes over"
    )


# --- running, on each engine --------------------------------------------------------------


def lambda_topology(record: SharedRecord, sink: CapturingBolt) -> StormTopology:
    """Two spout tasks, each with its own copy of the supplier's iterator; a
    bi-consumer bolt using closed-over values; a consumer bolt recording."""
    ids = iter(["a1-x", "b2-y", "c3-z"])
    prefix, suffix, tag = "Hello lambda:", ":so cool!", 999
    builder = TopologyBuilder()
    builder.set_spout("spout1", lambda: next(ids, None), 2)
    builder.set_bolt(
        "bolt1",
        lambda tup, collector: collector.emit(
            [prefix + tup.get_string_by_field("lambda").split("-")[0] + suffix, tag]
        ),
        2,
        "strValue",
        "intValue",
    ).shuffle_grouping("spout1")
    builder.set_bolt("bolt2", lambda tup: record.append("seen", tup.get_values())).shuffle_grouping(
        "bolt1"
    )
    builder.set_bolt("sink", sink).shuffle_grouping("bolt1")
    return builder.create_topology()


@pytest.mark.parametrize("engine", on_engines(), indirect=True)
def test_lambda_components_run_with_a_copy_of_their_closure_per_task(engine: Engine) -> None:
    record = SharedRecord()
    sink = CapturingBolt()
    expected = sorted(
        [f"Hello lambda:{first}:so cool!", 999] for first in ["a1", "b2", "c3"] for _ in range(2)
    )
    with engine.running(lambda_topology(record, sink), name="lambda") as run:
        run.wait_until(lambda: len(record.get("seen")) >= 6, engine.timeout)
        run.wait_idle()
        assert sorted(record.get("seen")) == expected
        assert sorted(sink.values()) == expected
        assert run.errors() == {}


# --- storm-starter's LambdaTopology ------------------------------------------------------


def test_lambda_topology_is_storm_starters_and_prints_each_tuple(
    capsys: pytest.CaptureFixture[str],
) -> None:
    module = load_starter("lambda_topology")
    topology = module.build_topology()
    kinds = {spec.component_id: type(spec.component).__name__ for spec in topology}
    assert kinds == {
        "spout1": "LambdaSpout",
        "bolt1": "LambdaBiConsumerBolt",
        "bolt2": "LambdaConsumerBolt",
    }
    assert topology.get_component("bolt1").streams["default"].fields.to_list() == [
        "strValue",
        "intValue",
    ]
    assert (module.conf[Config.TOPOLOGY_DEBUG], module.conf[Config.TOPOLOGY_WORKERS]) == (True, 2)
    ids = iter(["0a1b2c3d-4e5f"])
    topology = module.create_builder(lambda: next(ids, None)).create_topology()
    with LocalCluster() as cluster:
        cluster.submit_topology("lambda-demo", {}, topology)
        wait_until(lambda: "Hello lambda:0a1b2c3d:so cool!" in capsys.readouterr().out, 10)


@pytest.mark.parametrize("engine", on_engines(), indirect=True)
def test_lambda_topology_emits_prefixed_first_parts_with_the_tag(engine: Engine) -> None:
    uuids = [str(uuid.UUID(int=n * 0x1234567890ABCDEF1234567890ABCDEF)) for n in range(1, 6)]
    supplied = iter(uuids)
    builder = load_starter("lambda_topology").create_builder(lambda: next(supplied, None))
    sink = CapturingBolt()
    builder.set_bolt("sink", sink).shuffle_grouping("bolt1")
    expected = sorted([f"Hello lambda:{u.split('-')[0]}:so cool!", 999] for u in uuids)
    with engine.running(builder.create_topology(), name="lambda-demo") as run:
        run.wait_until(lambda: len(sink.values()) >= 5, engine.timeout)
        run.wait_idle()
        assert sorted(sink.values()) == expected
        assert run.errors() == {}
