"""Linear DRPC topologies (LinearDRPCTopologyBuilder), DRPCSpout and ReturnResults:
Storm's wiring, exact per-request completion (batch bolts, FinishedCallback), failure
paths, and the builder's errors."""

from __future__ import annotations

import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from squall import (
    BasicBolt,
    BasicOutputCollector,
    Bolt,
    Fields,
    InvalidTopologyError,
    LocalCluster,
    OutputCollector,
    OutputFieldsDeclarer,
    TopologyBuilder,
    TopologyContext,
    Tuple,
)
from squall.drpc import (
    DRPCErrorReason,
    DRPCExecutionError,
    DRPCSpout,
    FinishedCallback,
    LinearDRPCTopologyBuilder,
    LocalDRPC,
    ReturnResults,
)
from squall.testing import SharedRecord
from squall.transactional import BatchBolt, BatchOutputCollector
from tests.conftest import ENGINE_SETTINGS, Engine, EngineSettings, on_engines

TIMEOUT = 10.0


@pytest.fixture
def engine_settings() -> dict[str, EngineSettings]:
    """On Spark, the first request waits for the session's Python workers."""
    return {**ENGINE_SETTINGS, "spark": ENGINE_SETTINGS["spark"].tuned(timeout=240.0)}


class Fan(BasicBolt):
    """``(id, "n word")`` -> ``n`` tuples ``(id, word, i)``; ``boom`` raises."""

    outputs = ["id", "word", "i"]

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        count, _, word = tup.get_string(1).partition(" ")
        if word == "boom":
            raise ValueError("no boom allowed")
        for i in range(int(count)):
            collector.emit([tup.get_value(0), word, i])


class Relay(BasicBolt):
    """Passes each tuple on."""

    outputs = ["id", "word", "i"]

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        collector.emit(list(tup.values))


class CountOnFinish(Bolt, FinishedCallback):
    """A plain bolt told when its task has a whole request: emits ``(id, "<count>
    <word>")``, and records each call (task, id, count)."""

    outputs = ["id", "result"]

    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector
        self.task = context.get_this_task_id()
        self.counts: Counter[Any] = Counter()
        self.words: dict[Any, str] = {}

    def execute(self, tup: Tuple) -> None:
        self.counts[tup.get_value(0)] += 1
        self.words[tup.get_value(0)] = tup.get_value(1)
        self.collector.ack(tup)

    def finished_id(self, id: Any) -> None:
        count = self.counts.pop(id, 0)
        self.record.append("finished", (self.task, id, count))
        self.collector.emit([id, f"{count} {self.words.pop(id, '')}"])


class Total(BatchBolt):
    """Counts the request's tuples; ``finish_batch`` raises for the word ``late``."""

    def prepare(
        self,
        conf: dict[str, Any],
        context: TopologyContext,
        collector: BatchOutputCollector,
        id: Any,
    ) -> None:
        self.collector = collector
        self.id = id
        self.count = 0
        self.late = False

    def execute(self, tup: Tuple) -> None:
        self.count += 1
        self.late = self.late or tup.get_value(1) == "late"

    def finish_batch(self) -> None:
        if self.late:
            raise RuntimeError("finish_batch refuses late requests")
        self.collector.emit([self.id, self.count])

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["id", "total"])


def counting_builder(record: SharedRecord) -> LinearDRPCTopologyBuilder:
    builder = LinearDRPCTopologyBuilder("count")
    builder.add_bolt(Fan(), 2)
    builder.add_bolt(Relay(), 3).shuffle_grouping()
    builder.add_bolt(CountOnFinish(record), 3).fields_grouping(Fields("id"))
    return builder


def inputs(topology: Any, component: str) -> list[tuple[str, str, str]]:
    return [
        (s.source, s.stream_id, s.grouping.describe())
        for s in topology.get_component(component).inputs
    ]


# -- wiring -------------------------------------------------------------------------------


def test_the_builder_wires_the_topology_as_storm_does() -> None:
    builder = LinearDRPCTopologyBuilder("reach")
    builder.add_bolt(Fan(), 4)
    builder.add_bolt(Relay(), 12).shuffle_grouping().add_configuration("k", 1)
    builder.add_bolt(Relay(), 6).fields_grouping(Fields("id", "word")).set_num_tasks(12)
    builder.add_bolt(Total(), 3).fields_grouping("default", Fields("id"))
    with LocalDRPC() as drpc:
        topology = builder.create_local_topology(drpc)
        spout = topology.get_component("spout").component
        assert isinstance(spout, DRPCSpout) and spout.drpc is drpc
    assert sorted(topology.spouts) == ["spout"]
    assert sorted(topology.bolts) == [
        "bolt0", "bolt1", "bolt2", "bolt3", "bolt4", "bolt5", "prepare-request"
    ]  # fmt: skip
    assert inputs(topology, "prepare-request") == [("spout", "default", "none")]
    assert inputs(topology, "bolt0") == [("prepare-request", "default", "none")]
    assert inputs(topology, "bolt1") == [
        ("bolt0", "default", "shuffle"),
        ("bolt0", "$coordinated", "direct"),
    ]
    assert inputs(topology, "bolt2") == [
        ("bolt1", "default", "fields(id, word)"),
        ("bolt1", "$coordinated", "direct"),
    ]
    # The last step is a batch bolt: it finishes a request on the task given its id.
    assert inputs(topology, "bolt3") == [
        ("prepare-request", "id", "fields(request)"),
        ("bolt2", "default", "fields(id)"),
        ("bolt2", "$coordinated", "direct"),
    ]
    assert inputs(topology, "bolt4") == [
        ("bolt3", "default", "fields(id)"),
        ("prepare-request", "ret", "fields(request)"),
    ]
    assert inputs(topology, "bolt5") == [("bolt4", "default", "none")]
    assert [topology.get_component(f"bolt{i}").parallelism for i in range(6)] == [
        4, 12, 6, 3, 1, 1
    ]  # fmt: skip
    assert topology.get_component("bolt2").num_tasks == 12
    assert topology.get_component("bolt1").conf["k"] == 1
    assert list(topology.get_component("spout").streams["default"].fields) == [
        "args",
        "return-info",
    ]
    assert list(topology.get_component("bolt4").streams["default"].fields) == [
        "result",
        "return-info",
    ]
    assert builder.create_remote_topology().get_component("spout").component.drpc is None


def test_every_grouping_of_the_linear_declarer_reaches_the_previous_step() -> None:
    builder = LinearDRPCTopologyBuilder("g")
    builder.add_bolt(Fan()).all_grouping()  # the first step reads prepare-request
    builder.add_bolt(Relay()).global_grouping()
    builder.add_bolt(Relay()).local_or_shuffle_grouping()
    builder.add_bolt(Relay()).partial_key_grouping(Fields("word"))
    builder.add_bolt(Relay()).partial_key_grouping("default", Fields("i"))
    builder.add_bolt(Relay()).none_grouping()
    builder.add_bolt(Relay()).shuffle_grouping("default")
    builder.add_bolt(Total()).fields_grouping(Fields("id"))
    topology = builder.create_remote_topology()
    assert [inputs(topology, f"bolt{i}")[0] for i in range(7)] == [
        ("prepare-request", "default", "all"),
        ("bolt0", "default", "global"),
        ("bolt1", "default", "local_or_shuffle"),
        ("bolt2", "default", "partial_key(word)"),
        ("bolt3", "default", "partial_key(i)"),
        ("bolt4", "default", "none"),
        ("bolt5", "default", "shuffle"),
    ]
    with pytest.raises(TypeError, match=r"fields_grouping takes \(\[stream,\] fields\)"):
        builder.add_bolt(Relay()).fields_grouping("a", "b", "c")


def test_the_builder_refuses_what_storm_refuses() -> None:
    with pytest.raises(InvalidTopologyError, match="'f' has no step: add_bolt"):
        LinearDRPCTopologyBuilder("f").create_remote_topology()
    three = LinearDRPCTopologyBuilder("f")
    three.add_bolt(Fan())
    with pytest.raises(InvalidTopologyError, match=r"must have exactly two fields.*'word', 'i'"):
        three.create_remote_topology()
    with pytest.raises(InvalidTopologyError, match=r"step 0 \(str\) is not a Bolt, BasicBolt"):
        LinearDRPCTopologyBuilder("f").add_bolt("bolt")  # type: ignore[arg-type]
    with pytest.raises(InvalidTopologyError, match="needs a LocalDRPC, got NoneType"):
        LinearDRPCTopologyBuilder("f").create_local_topology(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidTopologyError, match="must be a non-empty string"):
        LinearDRPCTopologyBuilder("")


# -- completion ---------------------------------------------------------------------------


@pytest.mark.parametrize("engine", on_engines(spark=[]), indirect=True)
def test_each_request_finishes_once_with_every_tuple(engine: Engine) -> None:
    record = SharedRecord()
    requests = [f"{n} w{n}" for n in (0, 1, 7, 40, 3, 25, 2, 11)]
    with (
        LocalDRPC(timeout_secs=engine.timeout) as drpc,
        engine.running(counting_builder(record).create_local_topology(drpc), name="c") as run,
        ThreadPoolExecutor(len(requests)) as pool,
    ):
        futures = [pool.submit(drpc.execute, "count", args) for args in requests]
        got = [run.result(f, engine.timeout) for f in futures]
        run.wait_idle()
        assert run.errors() == {}
    # The count of tuples that reached the last step, and their word (none for 0).
    assert got == [r if not r.startswith("0 ") else "0 " for r in requests]
    finished = record.get("finished")
    # Finished once per request, on one task, with all of the request's tuples.
    assert sorted(count for _, _, count in finished) == sorted(int(r.split()[0]) for r in requests)
    assert len({id for _, id, _ in finished}) == len(requests)


def test_a_batch_bolt_in_the_middle_sees_every_tuple_of_each_request() -> None:
    builder = LinearDRPCTopologyBuilder("total")
    builder.add_bolt(Fan(), 3)
    builder.add_bolt(Relay(), 4).shuffle_grouping()
    builder.add_bolt(Total(), 5).shuffle_grouping()  # partial totals, on every task
    builder.add_bolt(Total(), 2).fields_grouping(Fields("id"))  # how many partials
    with LocalDRPC(timeout_secs=TIMEOUT) as drpc, LocalCluster() as cluster:
        cluster.submit_topology("total", {}, builder.create_local_topology(drpc))
        # Each of the 5 tasks of the third step finishes each request (with 0 tuples
        # or more) and sends its partial total: the last step counts 5 of them.
        assert drpc.execute("total", "30 x") == "5"
        assert drpc.execute("total", "0 x") == "5"


# -- failures -----------------------------------------------------------------------------


@pytest.mark.timeout(300)  # Spark: a session's first micro-batches take long
@pytest.mark.parametrize("engine", on_engines(), indirect=True)
def test_a_step_raising_fails_the_request(engine: Engine) -> None:
    record = SharedRecord()
    with (
        LocalDRPC(timeout_secs=engine.timeout) as drpc,
        engine.running(counting_builder(record).create_local_topology(drpc), name="c") as run,
    ):
        with pytest.raises(DRPCExecutionError) as failed:
            drpc.execute("count", "3 boom")
        assert failed.value.reason is DRPCErrorReason.FAILED
        assert "the topology failed the request: its tuple tree failed or timed out" in str(
            failed.value
        )
        assert "DRPCSpout 'spout' ('count')" in str(failed.value)
        assert drpc.execute("count", "3 fine") == "3 fine"  # the next one is served
        run.wait_until(lambda: "bolt0" in run.errors(), engine.timeout)
        assert "ValueError: no boom allowed" in run.errors()["bolt0"][0].error


def test_finish_batch_raising_fails_the_request() -> None:
    builder = LinearDRPCTopologyBuilder("total")
    builder.add_bolt(Fan(), 2)
    builder.add_bolt(Total(), 2).fields_grouping(Fields("id"))
    with LocalDRPC(timeout_secs=TIMEOUT) as drpc, LocalCluster() as cluster:
        cluster.submit_topology("total", {}, builder.create_local_topology(drpc))
        with pytest.raises(DRPCExecutionError, match="tuple tree failed") as failed:
            drpc.execute("total", "4 late")
        assert failed.value.reason is DRPCErrorReason.FAILED
        assert drpc.execute("total", "4 early") == "4"
        errors = cluster.get_topology_info("total").components["bolt1"].errors
        assert "RuntimeError: finish_batch refuses late requests" in errors[0].error


# -- DRPCSpout and ReturnResults ----------------------------------------------------------


class Echo(BasicBolt):
    """``(args, return-info)`` -> ``(args or a non-string, return-info)``; records the
    return info."""

    outputs = ["result", "return-info"]

    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        self.record.append("return-info", tup.get_value(1))
        args = tup.get_string(0)
        collector.emit([42 if args == "number" else args, tup.get_value(1)])


def echo_topology(spout: DRPCSpout, record: SharedRecord) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("drpc", spout)
    builder.set_bolt("echo", Echo(record), 2).shuffle_grouping("drpc")
    builder.set_bolt("return", ReturnResults(), 2).shuffle_grouping("echo")
    return builder.create_topology()


def test_drpc_spout_emits_the_json_of_the_return_info_and_results_return_as_is() -> None:
    record = SharedRecord()
    with LocalDRPC(timeout_secs=TIMEOUT) as drpc, LocalCluster() as cluster:
        cluster.submit_topology("echo", {}, echo_topology(DRPCSpout("echo", drpc), record))
        # The result string as is: not the JSON of result tuples.
        assert drpc.execute("echo", '["not", "json"') == '["not", "json"'
        (text,) = record.get("return-info")
        info = json.loads(text)
        assert sorted(info) == ["kind", "request_id", "service_id"]
        assert (info["kind"], info["service_id"]) == ("local", drpc.service_id)
        assert text == json.dumps(info, sort_keys=True)


def test_return_results_fails_a_request_whose_result_is_not_a_string() -> None:
    with LocalDRPC(timeout_secs=TIMEOUT) as drpc, LocalCluster() as cluster:
        topology = echo_topology(DRPCSpout("echo", drpc), SharedRecord())
        cluster.submit_topology("echo", {}, topology)
        with pytest.raises(DRPCExecutionError, match="tuple tree failed"):
            drpc.execute("echo", "number")
        errors = cluster.get_topology_info("echo").components["return"].errors
        assert "ReturnResults 'return': tuple from 'echo': the result must be a string, got " in (
            errors[0].error
        )
        assert "int 42" in errors[0].error


def test_a_drpc_spout_without_drpc_servers_is_refused_at_submit() -> None:
    with LocalCluster() as cluster:
        topology = echo_topology(DRPCSpout("echo"), SharedRecord())
        with pytest.raises(
            InvalidTopologyError,
            match=r"DRPCSpout 'drpc' \('echo'\): no DRPC servers configured for the topology: "
            "set 'drpc.servers'",
        ):
            cluster.submit_topology("echo", {}, topology)
        conf = {"drpc.servers": ["h"], "drpc.invocations.authorization.token": "a b"}
        with pytest.raises(InvalidTopologyError, match=r"invocations\.authorization\.token"):
            cluster.submit_topology("echo", conf, topology)


def test_drpc_spout_refuses_an_empty_function() -> None:
    with pytest.raises(ValueError, match="DRPCSpout: the function must be a non-empty string"):
        DRPCSpout("")
