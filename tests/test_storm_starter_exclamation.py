"""Storm's ``TestWordSpout`` (``squall.testing``) and storm-starter's
ExclamationTopology (``examples/storm_starter/exclamation_topology.py``)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from squall import Config, LocalCluster, ManualClock, TopologyBuilder
from squall.testing import CapturingBolt, TestWordSpout
from tests.conftest import Engine, on_engines
from tests.helpers import wait_until
from tests.starter_loading import load_starter

WORDS = ["nathan", "mike", "jackson", "golda", "bertels"]


def word_topology(spout: TestWordSpout, sink: CapturingBolt, tasks: int = 1) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("word", spout, tasks)
    builder.set_bolt("sink", sink).shuffle_grouping("word")
    return builder.create_topology()


def test_test_word_spout_emits_a_seeded_word_per_100_ms_of_the_clock() -> None:
    sink = CapturingBolt()
    clock = ManualClock()
    with LocalCluster(clock=clock) as cluster:
        cluster.submit_topology("words", {}, word_topology(TestWordSpout(seed=7), sink, 2))
        for step in range(1, 6):
            clock.advance(99)
            cluster.wait_idle("words", 10)
            assert len(sink.values()) == 2 * (step - 1)  # not due yet
            clock.advance(1)  # each task's next word is due
            wait_until(lambda s=step: len(sink.values()) == 2 * s, timeout=10)  # type: ignore[misc]
        by_source: dict[int, list[str]] = {}
        for received in sink.received:
            by_source.setdefault(received.source_task, []).append(received.values[0])
    # Task i of the spout draws from random.Random(seed + i).
    expected = []
    for index in range(2):
        rng = random.Random(7 + index)
        expected.append([rng.choice(WORDS) for _ in range(5)])
    assert sorted(by_source.values()) == sorted(expected)


def test_test_word_spout_declares_word_and_is_one_task_when_not_distributed() -> None:
    builder = TopologyBuilder()
    builder.set_spout("a", TestWordSpout())
    builder.set_spout("b", TestWordSpout(False))
    topology = builder.create_topology()
    assert topology.get_component("a").streams["default"].fields.to_list() == ["word"]
    assert topology.get_component("a").conf.get(Config.TOPOLOGY_MAX_TASK_PARALLELISM) is None
    assert topology.get_component("b").conf[Config.TOPOLOGY_MAX_TASK_PARALLELISM] == 1
    with pytest.raises(ValueError, match="TestWordSpout: interval_ms must be >= 0, got -1"):
        TestWordSpout(interval_ms=-1)


def test_test_word_spout_stops_after_max_words_per_task() -> None:
    sink = CapturingBolt()
    with LocalCluster() as cluster:
        spout = TestWordSpout(seed=3, max_words=4, interval_ms=0)
        cluster.submit_topology("words", {}, word_topology(spout, sink, 3))
        wait_until(lambda: len(sink.values()) == 12, timeout=10)
        cluster.wait_idle("words", 10)
        words = Counter(values[0] for values in sink.values())
    expected: Counter[str] = Counter()
    for index in range(3):
        rng = random.Random(3 + index)
        expected.update(rng.choice(WORDS) for _ in range(4))
    assert words == expected


# --- storm-starter's ExclamationTopology ---------------------------------------------------


def test_exclamation_topology_is_storm_starters() -> None:
    module = load_starter("exclamation_topology")
    topology = module.build_topology()
    assert {spec.component_id: spec.parallelism for spec in topology} == {
        "word": 10,
        "exclaim1": 3,
        "exclaim2": 2,
    }
    assert isinstance(topology.get_component("word").component, TestWordSpout)
    assert (module.conf[Config.TOPOLOGY_DEBUG], module.conf[Config.TOPOLOGY_WORKERS]) == (True, 3)
    assert module.__doc__


@pytest.mark.parametrize("engine", on_engines(), indirect=True)
def test_exclamation_topology_appends_six_exclamation_marks(engine: Engine) -> None:
    builder = load_starter("exclamation_topology").create_builder(seed=11, max_words=3)
    sink = CapturingBolt()
    builder.set_bolt("sink", sink).shuffle_grouping("exclaim2")
    expected: Counter[str] = Counter()
    for index in range(10):  # spout task i draws from random.Random(11 + i)
        rng = random.Random(11 + index)
        expected.update(rng.choice(WORDS) + "!!!!!!" for _ in range(3))
    with engine.running(builder.create_topology(), name="exclamation") as run:
        run.wait_until(lambda: len(sink.values()) >= 30, engine.timeout)
        run.wait_idle()
        assert Counter(values[0] for values in sink.values()) == expected
        assert run.errors() == {}
