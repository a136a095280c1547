"""Stateful bolts on the local engine: lifecycle, the checkpoint protocol, acks held
until commit, rollback, recovery from a durable provider, and refused topologies."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall import (
    BasicBolt,
    Config,
    InvalidTopologyError,
    LocalCluster,
    ManualClock,
    Spout,
    StatefulBolt,
    TopologyBuilder,
)
from squall.model.topology import StormTopology
from squall.state import KeyValueState
from squall.testing import SharedRecord
from tests.helpers import wait_until

SENTENCES = ["the cow jumped", "over the moon", "the man went", "to the store"]


def expected_counts(sentences: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for sentence in sentences:
        for word in sentence.split():
            counts[word] = counts.get(word, 0) + 1
    return counts


class SentenceSpout(Spout):
    """Emits ``sentences`` once each (msg id: the index), replaying a failed one; records
    ``acked`` and ``failed`` ids."""

    outputs = ["sentence"]

    def __init__(self, sentences: list[str], first_id: int = 0) -> None:
        self.sentences = sentences
        self.first_id = first_id
        self.record = SharedRecord()

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.next_index = 0
        self.replays: list[int] = []

    def next_tuple(self) -> None:
        if self.replays:
            index = self.replays.pop(0)
        elif self.next_index < len(self.sentences):
            index = self.next_index
            self.next_index += 1
        else:
            return
        self.collector.emit([self.sentences[index]], self.first_id + index)

    def ack(self, msg_id: Any) -> None:
        self.record.append("acked", msg_id)

    def fail(self, msg_id: Any) -> None:
        self.record.append("failed", msg_id)
        self.replays.append(msg_id - self.first_id)


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup["sentence"].split():
            collector.emit([word])


class WordCount(StatefulBolt):
    """Counts words in its state; records the lifecycle calls and every stream it sees."""

    outputs = ["word", "count"]

    def __init__(self) -> None:
        self.record = SharedRecord()

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.task = context.task_index
        self.record.append("calls", (self.task, "prepare"))

    def init_state(self, state: KeyValueState) -> None:
        self.record.append("calls", (self.task, "init_state"))
        self.counts = state

    def execute(self, tup: Any) -> None:
        self.record.append("streams", tup.source_stream)
        word = tup["word"]
        count = self.counts.get(word, 0) + 1
        self.counts.put(word, count)
        self.collector.emit([word, count], tup)
        self.collector.ack(tup)


def word_count(spout: Spout, counter: StatefulBolt, counters: int = 2) -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout("sentences", spout)
    builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", counter, counters).fields_grouping("split", ["word"])
    return builder.create_topology()


def states_of(cluster: LocalCluster, name: str, component: str = "count") -> dict[str, Any]:
    """Every task's state of ``component`` merged (what the tasks hold now)."""
    running = cluster.get_running(name)
    merged: dict[str, Any] = {}
    for task in running.plan.component_tasks[component]:
        merged.update(dict(running.runners[task].component.state))
    return merged


def conf_with(**settings: Any) -> Config:
    conf = Config()
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 50
    conf.update({key.replace("_", "."): value for key, value in settings.items()})
    return conf


@pytest.fixture
def local() -> Iterator[LocalCluster]:
    with LocalCluster() as cluster:
        yield cluster


def test_a_stateful_word_count_counts_exactly_and_sees_no_checkpoint_tuple(
    local: LocalCluster,
) -> None:
    sentences = SENTENCES * 25
    spout, counter = SentenceSpout(sentences), WordCount()
    local.submit_topology("words", conf_with(), word_count(spout, counter))
    wait_until(lambda: len(spout.record.get("acked")) == len(sentences), 20.0)
    assert sorted(spout.record.get("acked")) == list(range(len(sentences)))
    assert spout.record.get("failed") == []
    assert states_of(local, "words") == expected_counts(sentences)
    assert set(counter.record.get("streams")) == {"default"}
    calls = counter.record.get("calls")
    for task in (0, 1):  # each task: prepare, then init_state, before any tuple
        assert [call for index, call in calls if index == task] == ["prepare", "init_state"]
    info = local.get_topology_info("words")
    assert info.components["count"].errors_total == 0
    running = local.get_running("words")
    for task in running.plan.component_tasks["split"]:  # a basic bolt keeps its fast path
        assert running.runners[task].checkpointing is not None


def test_inputs_are_acked_only_once_their_state_is_committed(tmp_path: Path) -> None:
    """With the clock stopped no checkpoint is taken: the counts are in the state but
    no sentence is acked; once the interval passes, a checkpoint commits the state and
    every sentence is acked, each after the commit that holds it."""
    clock = ManualClock(start_ms=1_000.0)
    spout, counter = SentenceSpout(SENTENCES), WordCount()
    conf = conf_with()
    conf[Config.TOPOLOGY_STATE_PROVIDER] = "sqlite"
    conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = {"directory": str(tmp_path)}
    with LocalCluster(clock=clock) as cluster:
        cluster.submit_topology("held", conf, word_count(spout, counter, counters=1))
        running = cluster.get_running("held")
        count_task = running.runners[running.plan.component_tasks["count"][0]]
        wait_until(lambda: count_task.stats.executed >= 12, 10.0)  # 12 words + checkpoints
        wait_until(lambda: states_of(cluster, "held") == expected_counts(SENTENCES), 10.0)
        assert spout.record.get("acked") == []
        state = count_task.component.state
        assert state.committed_txid() is None
        clock.advance(100)
        wait_until(lambda: len(spout.record.get("acked")) == len(SENTENCES), 10.0)
        assert state.committed_txid() == 1
        assert sorted(spout.record.get("acked")) == list(range(len(SENTENCES)))


class FailsOnce(StatefulBolt):
    """Counts, but raises on the first tuple of each word it sees (the tuple is failed,
    and the spout replays its sentence)."""

    outputs = ["word", "count"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.seen: set[str] = set()

    def init_state(self, state: KeyValueState) -> None:
        self.counts = state

    def execute(self, tup: Any) -> None:
        word = tup["word"]
        if word not in self.seen:
            self.seen.add(word)
            raise ValueError(f"first sight of {word!r}")
        self.counts.put(word, self.counts.get(word, 0) + 1)
        self.collector.ack(tup)


def test_an_exception_fails_the_tuple_reports_it_and_the_spout_replays(
    local: LocalCluster,
) -> None:
    spout = SentenceSpout(["a b", "c"])
    local.submit_topology("fails", conf_with(), word_count(spout, FailsOnce(), counters=1))
    wait_until(lambda: sorted(spout.record.get("acked")) == [0, 1], 20.0)
    assert sorted(spout.record.get("failed")) == [0, 1]
    errors = local.get_topology_info("fails").components["count"].errors
    assert len(errors) == 3
    assert all("ValueError: first sight of" in error.error for error in errors)
    assert states_of(local, "fails") == {"a": 1, "b": 1, "c": 1}


def test_a_durable_state_is_given_back_after_a_restart(tmp_path: Path) -> None:
    conf = conf_with()
    conf[Config.TOPOLOGY_STATE_PROVIDER] = "sqlite"
    conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = {"directory": str(tmp_path)}
    first = SentenceSpout(SENTENCES)
    with LocalCluster() as cluster:
        cluster.submit_topology("again", conf, word_count(first, WordCount()))
        wait_until(lambda: len(first.record.get("acked")) == len(SENTENCES), 20.0)
        cluster.kill_topology("again")
    # New messages, with ids of their own (an id names one message across restarts).
    second, counter = SentenceSpout(SENTENCES[:2], first_id=100), WordCount()
    with LocalCluster() as cluster:
        cluster.submit_topology("again", conf, word_count(second, counter))
        wait_until(lambda: len(second.record.get("acked")) == 2, 20.0)
        assert states_of(cluster, "again") == expected_counts(SENTENCES + SENTENCES[:2])


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        (
            {Config.TOPOLOGY_ACKER_EXECUTORS: 0},
            re.escape("stateful bolt(s) 'count': a topology with stateful bolts needs acking"),
        ),
        (
            {Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 30_000},
            re.escape(
                "stateful bolt(s) 'count': topology.state.checkpoint.interval.ms (30000) "
                "must be below the message timeout (30 s)"
            ),
        ),
        (
            {Config.TOPOLOGY_STATE_PROVIDER: "cassandra"},
            re.escape(
                "stateful bolt(s) 'count': topology.state.provider: unknown provider "
                "'cassandra' (one of 'memory', 'sqlite', 'redis', 'postgres')"
            ),
        ),
    ],
)
def test_topologies_that_cannot_checkpoint_are_refused_naming_the_bolt(
    local: LocalCluster, conf: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidTopologyError, match=message):
        local.submit_topology("refused", conf, word_count(SentenceSpout([]), WordCount()))


def test_a_cycle_with_a_stateful_bolt_is_refused(local: LocalCluster) -> None:
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout([]))
    builder.set_bolt("count", WordCount()).shuffle_grouping("sentences").shuffle_grouping("echo")
    builder.set_bolt("echo", Split()).shuffle_grouping("count")
    with pytest.raises(InvalidTopologyError, match="must not have cycles"):
        local.submit_topology("cycle", {}, builder.create_topology())
