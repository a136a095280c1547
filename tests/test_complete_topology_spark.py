"""complete_topology on SparkCluster: the same result as on LocalCluster (every emit of
every component, spouts included), for a core topology with mocked sources and for a
transactional topology; Trident topologies are refused with a clear error."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from squall import Config, InvalidTopologyError, KeyValueState, StatefulBolt, TopologyBuilder
from squall.testing import FixedTupleSpout, complete_topology
from squall.transactional import (
    BatchBolt,
    Committer,
    MemoryTransactionalSpout,
    TransactionalTopologyBuilder,
)
from squall.trident import FixedBatchSpout, TridentTopology
from tests.conftest import Engine, on_engine

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from word_count import build_topology

SENTENCES = [["the cow jumped"], ["the cow"], ["over the moon"]]


@pytest.mark.parametrize("engine", [on_engine("local"), on_engine("spark")], indirect=True)
def test_a_core_topology_with_mocked_sources(engine: Engine) -> None:
    cluster = engine.new_cluster()
    result = complete_topology(
        build_topology(),
        {"sentences": SENTENCES},
        engine.conf(),
        cluster=cluster,
        timeout_secs=engine.timeout,
    )
    assert sorted(result.read_tuples("sentences")) == sorted(SENTENCES)
    assert sorted(result.read_tuples("split")) == sorted(
        [[w] for s in SENTENCES for w in s[0].split()]
    )
    final: dict[str, int] = {}
    for word, count in result.read_tuples("count"):
        final[word] = max(final.get(word, 0), count)
    assert final == {"the": 3, "cow": 2, "jumped": 1, "over": 1, "moon": 1}
    assert len(result.read_tuples("count")) == 8
    assert result.streams() == [
        ("count", "default"),
        ("sentences", "default"),
        ("split", "default"),
    ]
    assert result.info.components["sentences"].acked == 3
    assert cluster.topology_names() == []


class Total(BatchBolt, Committer):
    outputs = ["attempt", "total"]

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.collector, self.attempt, self.total = collector, id, 0

    def execute(self, tup: Any) -> None:
        self.total += tup["n"]

    def finish_batch(self) -> None:
        self.collector.emit([self.attempt, self.total])


@pytest.mark.parametrize("engine", [on_engine("local"), on_engine("spark")], indirect=True)
def test_a_transactional_topology_emits_per_batch(engine: Engine) -> None:
    spout = MemoryTransactionalSpout({0: [[1], [2], [3]], 1: [[10], [20]]}, ["n"], 2)
    builder = TransactionalTopologyBuilder("complete", "spout", spout, 2)
    builder.set_bolt("total", Total()).global_grouping("spout")
    result = complete_topology(
        builder.build_topology(),
        conf=engine.conf(),
        cluster=engine.new_cluster(),
        timeout_secs=engine.timeout,
    )
    assert sorted((a.transaction_id, n) for a, n in result.read_tuples("spout")) == [
        (1, 1),
        (1, 2),
        (1, 10),
        (1, 20),
        (2, 3),
    ]
    assert sorted((a.transaction_id, t) for a, t in result.read_tuples("total")) == [
        (1, 33),
        (2, 3),
    ]


def test_a_trident_topology_is_refused_on_spark(spark: Any, tmp_path: Path) -> None:
    from squall.spark import SparkCluster

    trident = TridentTopology()
    trident.new_stream("numbers", FixedBatchSpout(["n"], 2, [1], [2]))
    with (
        SparkCluster(spark=spark, checkpoint_dir=str(tmp_path)) as cluster,
        pytest.raises(InvalidTopologyError) as raised,
    ):
        complete_topology(trident.build(), cluster=cluster)
    assert "runs core and transactional topologies, not Trident" in str(raised.value)


class CountPerNumber(StatefulBolt):
    """Counts each number in its state; emits ``[n, count]``."""

    outputs = ["n", "count"]

    def init_state(self, state: KeyValueState) -> None:
        self.state = state

    def execute(self, tup: Any) -> None:
        count = self.state.get(tup["n"], 0) + 1
        self.state.put(tup["n"], count)
        self.collector.emit([tup["n"], count], tup)
        self.collector.ack(tup)


def test_a_stateful_topology_completes_on_local_cluster() -> None:
    """The checkpoint spout the engine adds is not one of the topology's spouts."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[1], [2], [1]], ["n"]))
    builder.set_bolt("count", CountPerNumber()).shuffle_grouping("numbers")
    result = complete_topology(
        builder.create_topology(), conf={Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 20}
    )
    assert result.read_tuples("count") == [[1, 1], [2, 1], [1, 2]]
