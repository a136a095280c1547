"""The component interfaces: the collectors and the task context components receive are
the ABCs of ``squall.model``, implemented by every engine; the engine-facing parts
(emit sinks, the engine collector the bolt wrappers need) behave as documented."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

import squall
import squall.model
import squall.model.hooks
from squall import (
    BasicBolt,
    BasicOutputCollector,
    Bolt,
    OutputCollector,
    Spout,
    SpoutOutputCollector,
    TopologyBuilder,
    TopologyContext,
    Tuple,
)
from squall.model import hooks as model_hooks
from squall.model.tuple import StreamInfo
from squall.runtime import collectors as runtime_collectors
from squall.runtime import context as runtime_context
from squall.runtime.collectors import BoltCollector, engine_collector
from squall.runtime.sinks import EmitSink
from squall.state.executors import CheckpointedBolt, TrackingCollector
from squall.testing import SharedRecord
from squall.windowing.executor import WindowedOutputCollector
from tests.conftest import Engine, Run
from tests.test_collectors import Harness


def test_the_public_names_are_the_model_interfaces_wherever_imported() -> None:
    for name in ("OutputCollector", "SpoutOutputCollector", "BasicOutputCollector"):
        interface = getattr(squall.model, name)
        assert getattr(squall, name) is interface
        assert getattr(runtime_collectors, name) is interface
    assert squall.TopologyContext is squall.model.TopologyContext
    assert runtime_context.TopologyContext is squall.model.TopologyContext
    for name in squall.model.hooks.__all__:
        assert getattr(squall.model.hooks, name) is getattr(model_hooks, name)
    assert set(squall.model.hooks.__all__) == set(model_hooks.__all__)


def test_the_interfaces_cannot_be_instantiated_without_their_methods() -> None:
    class Partial(OutputCollector):
        def emit(self, values: Sequence[Any], anchors: Any = None, stream: str = "") -> list[int]:
            return []

    with pytest.raises(TypeError, match="abstract"):
        Partial()  # type: ignore[abstract]


class Probe(Spout):
    """Emits one tuple per task, recording what its ``open`` received."""

    outputs = ["n"]

    def __init__(self) -> None:
        self.record = SharedRecord()
        self.sent = False

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().open(conf, context, collector)
        self.record.append(
            "spout",
            (
                isinstance(collector, SpoutOutputCollector),
                isinstance(context, TopologyContext),
                context.storm_id == context.topology_name,
            ),
        )

    def next_tuple(self) -> None:
        if not self.sent:
            self.sent = True
            self.collector.emit([1], msg_id="one")


class ProbeBolt(Bolt):
    outputs = ["n"]

    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.record.append(
            "bolt", (isinstance(collector, OutputCollector), isinstance(context, TopologyContext))
        )

    def execute(self, tup: Tuple) -> None:
        self.collector.emit([tup[0]], tup)
        self.collector.ack(tup)


class ProbeBasicBolt(BasicBolt):
    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.record.append("basic-context", isinstance(context, TopologyContext))

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        self.record.append("basic", isinstance(collector, BasicOutputCollector))


def test_what_the_engines_pass_in_implements_the_interfaces(engine: Engine) -> None:
    spout = Probe()
    record = spout.record
    builder = TopologyBuilder()
    builder.set_spout("probe", spout)
    builder.set_bolt("bolt", ProbeBolt(record)).shuffle_grouping("probe")
    builder.set_bolt("basic", ProbeBasicBolt(record)).shuffle_grouping("bolt")
    run: Run
    with engine.running(builder.create_topology(), name="interfaces") as run:
        run.wait_until(lambda: len(record.get("basic")) == 1, engine.timeout)
        run.wait_idle()
        assert run.errors() == {}, run.failure()
    assert record.get("spout") == [(True, True, True)]
    assert record.get("bolt") == [(True, True)]
    assert record.get("basic-context") == [True]
    assert record.get("basic") == [True]


class RecordingSink(EmitSink):
    """Records what the core emit delivers."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def send(
        self, info: StreamInfo, source: int, targets: list[int], values: Sequence[Any]
    ) -> None:
        self.calls.append(("send", info.stream_id, source, list(targets), list(values)))

    def send_tree(
        self, info: StreamInfo, source: int, targets: list[int], values: Sequence[Any], root: int
    ) -> int:
        self.calls.append(("tree", info.stream_id, source, list(targets), list(values), root))
        return 5

    def send_to(
        self,
        info: StreamInfo,
        source: int,
        target: int,
        values: Sequence[Any],
        tree_ids: tuple[int, ...] | None,
    ) -> None:
        self.calls.append(("to", info.stream_id, source, target, list(values), tree_ids))


def test_a_collector_delivers_its_emits_to_its_sink() -> None:
    harness = Harness(ackers=1)
    wiring = harness.bolt_wiring
    sink = RecordingSink()
    bolt = BoltCollector(dataclasses.replace(wiring, sink=sink))
    source = wiring.task_id
    info = StreamInfo("s", "default", squall.Fields("word", "n"))
    anchor = Tuple(["x", 1], info, 1, (11, 3))
    two_trees = Tuple(["y", 2], info, 1, (12, 4, 13, 6))
    untracked = Tuple(["z", 3], info, 1)

    targets = bolt.emit(["a", 1], anchor)
    assert anchor.ack_val == 5  # the XOR of the edges the sink made
    bolt.emit(["b", 2])
    bolt.emit(["c", 3], untracked)
    bolt.emit(["d", 4], [two_trees])
    direct = harness.tasks["d"][0]
    bolt.emit_direct(direct, ["e"], stream="direct")

    calls = sink.calls
    assert calls[0] == ("tree", "default", source, targets, ["a", 1], 11)
    assert calls[1] == ("send", "default", source, targets, ["b", 2])
    assert calls[2] == ("send", "default", source, targets, ["c", 3])
    assert [call[:5] for call in calls[3:-1]] == [
        ("to", "default", source, target, ["d", 4]) for target in targets
    ]
    for call in calls[3:-1]:  # one edge per target, into both trees
        roots = call[5]
        assert roots[0::2] == (12, 13) and roots[1] == roots[3]
    assert calls[-1] == ("to", "direct", source, direct, ["e"], None)
    assert all(not box for box in harness.outboxes)  # nothing bypassed the sink


def test_the_stateful_wrapper_collector_implements_the_interface() -> None:
    harness = Harness(ackers=1)
    acked: list[Tuple] = []
    wrapper = CheckpointedBolt.__new__(CheckpointedBolt)
    tracking = TrackingCollector(harness.bolt, wrapper, acked.append)
    assert isinstance(tracking, OutputCollector)
    info = StreamInfo("s", "default", squall.Fields("word", "n"))
    tup = Tuple(["x", 1], info, 1, (11, 3))
    tracking.ack(tup)
    assert acked == [tup]
    tracking.reset_timeout(tup)  # on to the task's collector: a timeout reset of tree 11
    (acker,) = harness.acker_tasks
    assert [(t.source_stream, list(t.values)) for t in harness.outboxes[acker]] == [
        ("__ack_reset_timeout", [11])
    ]
    tracking.report_error("broken")
    assert harness.bolt.stats.errors[-1].error.endswith("broken")


def test_the_windowed_bolt_collector_implements_the_interface() -> None:
    harness = Harness(ackers=1)
    assert isinstance(WindowedOutputCollector(harness.bolt, {}), OutputCollector)


def test_engine_collector_names_the_component_it_cannot_run() -> None:
    harness = Harness(ackers=1)
    assert engine_collector(harness.bolt, "bolt 'r'") is harness.bolt
    wrapper = CheckpointedBolt.__new__(CheckpointedBolt)
    foreign = TrackingCollector(harness.bolt, wrapper, lambda tup: None)
    with pytest.raises(TypeError) as error:
        engine_collector(foreign, "windowed bolt 'w'")
    assert str(error.value) == (
        "windowed bolt 'w' runs on the engine's bolt collector, got TrackingCollector"
    )
