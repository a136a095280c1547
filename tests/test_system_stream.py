"""Storm's system stream ``__system`` on both engines.

Every component has it without declaring it (fields ``["event"]``, as Storm's
``StormCommon`` adds it to every component), so a bolt may subscribe to
``(component, "__system")`` beside its data streams, with any grouping but a direct
one. Nothing is emitted on it (as in Storm 2.x, which stopped emitting ``["startup"]``
there), and user code can neither declare it nor emit on it. Each test takes the
``engine`` fixture (``tests/conftest.py``): it runs on LocalCluster and on SparkCluster
with the same assertions.
"""

from __future__ import annotations

from typing import Any

from squall import Config, CustomStreamGrouping, Duration, Fields, TopologyBuilder
from squall.model.grouping import GlobalStreamId
from squall.testing import CapturingBolt, FixedTupleSpout
from tests.conftest import Engine
from tests.test_core_windowing import WATERMARK, PhasedSpout, acked, settle
from tests.test_local_windowing import event_bolt

WORDS = [["a"], ["b"], ["c"]]


class IdentityBolt(CapturingBolt):
    """Storm's ``IdentityBolt``: emits what it receives (anchored), records it (as
    :class:`CapturingBolt`) and acks it. In ``prepare`` it records the streams its task
    subscribes to, the fields of ``("1", "__system")``, and the error of an emit on the
    system stream."""

    outputs = ["word"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        sources = context.get_this_sources()
        self.record.append(
            "sources",
            sorted((s.component_id, s.stream_id, g.describe()) for s, g in sources.items()),
        )
        self.record.append("fields", context.get_component_output_fields("1", "__system"))
        try:
            collector.emit(["startup"], stream="__system")
        except ValueError as error:
            self.record.append("emit_error", str(error))

    def execute(self, tup: Any) -> None:
        self.collector.emit(list(tup.values), anchors=tup)
        super().execute(tup)


def run_to_end(
    engine: Engine, builder: TopologyBuilder, spout: FixedTupleSpout, **conf: Any
) -> Any:
    """Run until every tuple of ``spout`` is acked or failed and the topology is idle;
    return ``get_topology_info`` (no component may report an error)."""
    with engine.running(builder.create_topology(), conf) as run:
        run.wait_until(
            lambda: len(spout.acked) + len(spout.failed) == len(spout.items), engine.timeout
        )
        run.wait_idle()
        assert run.errors() == {}, run.failure()
        return run.info()


def test_storm_system_stream(engine: Engine) -> None:
    """Storm's TopologyIntegrationTest.testSystemStream: bolt "2" reads spout "1" (three
    tasks, two workers) by fields grouping and its ``__system`` stream by global
    grouping; it gets the words and nothing else."""
    spout = FixedTupleSpout(WORDS, ["word"])
    identity = IdentityBolt()
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("1", spout, 3)
    builder.set_bolt("2", identity).fields_grouping("1", Fields("word")).global_grouping(
        "1", "__system"
    )
    builder.set_bolt("sink", sink).shuffle_grouping("2")
    info = run_to_end(engine, builder, spout, **{Config.TOPOLOGY_WORKERS: 2})

    assert sorted(sink.values()) == WORDS
    assert sorted(
        (r.source_component, r.source_stream, r.values[0]) for r in identity.received
    ) == [
        ("1", "default", "a"),
        ("1", "default", "b"),
        ("1", "default", "c"),
    ]
    assert sorted(spout.acked) == [0, 1, 2]
    assert spout.failed == []
    # What each preparation of the task saw (on Spark a task may be prepared again in
    # another worker process).
    assert identity.record.get("sources")
    assert {tuple(s) for s in identity.record.get("sources")} == {
        (("1", "__system", "global"), ("1", "default", "fields(word)"))
    }
    assert set(identity.record.get("fields")) == {Fields("event")}
    assert set(identity.record.get("emit_error")) == {
        "component '2' emitted on stream '__system': stream ids starting with '__' are "
        "reserved for the engine's system streams"
    }
    assert info.components["1"].streams == {"default": {"emitted": 3, "transferred": 3}}
    assert info.components["2"].streams == {"default": {"emitted": 3, "transferred": 3}}
    assert info.components["2"].executed == 3


class FirstTask(CustomStreamGrouping):
    """Sends every tuple to the first target task."""

    def prepare(self, context: Any, stream: GlobalStreamId, target_tasks: list[int]) -> None:
        self.target = min(target_tasks)

    def choose_tasks(self, task_id: int, values: Any) -> list[int]:
        return [self.target]


def test_the_system_streams_of_spouts_and_bolts_with_every_grouping(engine: Engine) -> None:
    """Three two-task bolts read the system streams of the spout and of a bolt with the
    non-direct groupings (fields and partial key on ``event``) beside their data
    streams: each gets its data, once, and nothing from a system stream."""
    spout = FixedTupleSpout([["a"], ["b"], ["c"], ["d"]], ["word"])
    relay = IdentityBolt()
    watchers = {name: CapturingBolt() for name in ("watch_a", "watch_b", "watch_c")}
    builder = TopologyBuilder()
    builder.set_spout("1", spout)
    builder.set_bolt("relay", relay).shuffle_grouping("1")
    (
        builder.set_bolt("watch_a", watchers["watch_a"], 2)
        .shuffle_grouping("1")
        .fields_grouping("1", ["event"], "__system")
        .all_grouping("relay", "__system")
    )
    (
        builder.set_bolt("watch_b", watchers["watch_b"], 2)
        .global_grouping("relay")
        .none_grouping("1", "__system")
        .partial_key_grouping("relay", ["event"], "__system")
    )
    (
        builder.set_bolt("watch_c", watchers["watch_c"], 2)
        .local_or_shuffle_grouping("1")
        .custom_grouping("1", FirstTask(), "__system")
        .global_grouping("relay", "__system")
    )
    info = run_to_end(engine, builder, spout)

    expected = {"watch_a": "1", "watch_b": "relay", "watch_c": "1"}
    for name, watcher in watchers.items():
        sources = {(r.source_component, r.source_stream) for r in watcher.received}
        assert sources == {(expected[name], "default")}, name
        assert sorted(watcher.values()) == [["a"], ["b"], ["c"], ["d"]], name
    assert {r.task_id for r in watchers["watch_b"].received} == {
        min(info.components["watch_b"].tasks)
    }
    assert sorted(spout.acked) == [0, 1, 2, 3]
    assert spout.failed == []


def test_a_subscription_to_a_system_stream_does_not_hold_the_watermark_back(
    engine: Engine,
) -> None:
    """An event-time windowed bolt subscribed to the spout's ``__system`` stream beside
    its data: the silent system stream is not an input the watermark waits for, so the
    windows fire as they would without it."""
    bolt = event_bolt(Duration(10_000), Duration(10_000), watermark=WATERMARK)
    spout = PhasedSpout(["ts", "v"], [[1_000, "a"], [12_000, "b"], [25_000, "c"]])
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("win", bolt).shuffle_grouping("src").all_grouping("src", "__system")
    expected_acks = acked(engine, ["a"], spout.msg_ids())
    with engine.running(builder.create_topology()) as run:
        run.wait_until(lambda: len(bolt.windows()) == 2, engine.timeout)  # watermark 25 s
        run.wait_until(lambda: spout.acked() == expected_acks, engine.timeout)
        settle(run, engine, "win")
        custom = run.info().components["win"].custom
    assert bolt.windows() == [
        (["a"], ["a"], [], 0, 10_000),
        (["b"], ["b"], ["a"], 10_000, 20_000),
    ]
    assert spout.acked() == expected_acks
    assert spout.failed() == []
    assert custom == {"late_tuples": 0, "windows_fired": 2, "window_tuples_held": 2}
