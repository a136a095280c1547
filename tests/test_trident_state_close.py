"""When a Trident topology is killed, each task closes the states it made
(``State.close``) and cleans up its state updaters and query functions (their
``cleanup``), as it prepared them."""

from __future__ import annotations

from typing import Any

from squall import Fields, LocalCluster
from squall.testing import SharedRecord
from squall.trident import QueryFunction, StateUpdater, TridentCollector, TridentTopology
from squall.trident.spouts import FixedBatchSpout
from squall.trident.state import State, StateFactory
from squall.trident.tuple import TridentTuple
from tests.helpers import wait_until


class Noted(State):
    """A state that records its batches and its close."""

    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def begin_commit(self, txid: int) -> None:
        pass

    def commit(self, txid: int) -> None:
        self.record.append("committed", txid)

    def close(self) -> None:
        self.record.append("events", "state closed")


class NotedFactory(StateFactory):
    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def make_state(
        self, conf: dict[str, Any], context: Any, partition_index: int, num_partitions: int
    ) -> Noted:
        self.record.append("events", "state made")
        return Noted(self.record)


class NotedUpdater(StateUpdater):
    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def update_state(
        self, state: Any, tuples: list[TridentTuple], collector: TridentCollector
    ) -> None:
        pass

    def cleanup(self) -> None:
        self.record.append("events", "updater cleaned up")


class NotedQuery(QueryFunction):
    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def batch_retrieve(self, state: Any, tuples: list[TridentTuple]) -> list[Any]:
        return [None] * len(tuples)

    def execute(self, tup: TridentTuple, result: Any, collector: TridentCollector) -> None:
        collector.emit([result])

    def cleanup(self) -> None:
        self.record.append("events", "query cleaned up")


def test_a_killed_topology_closes_its_states_and_cleans_up_updaters_and_queries() -> None:
    record = SharedRecord()
    topology = TridentTopology()
    stream = topology.new_stream("n", FixedBatchSpout(Fields(["n"]), 2, [1], [2], [3]))
    state = stream.partition_persist(NotedFactory(record), Fields(["n"]), NotedUpdater(record))
    stream.state_query(state, Fields(["n"]), NotedQuery(record), Fields(["found"]))
    with LocalCluster() as cluster:
        cluster.submit_topology("noted", {}, topology.build())
        wait_until(lambda: len(record.get("committed")) >= 2, timeout=10.0)
        assert "state closed" not in record.get("events")
        cluster.kill_topology("noted")
    events = record.get("events")
    assert sorted(events) == [
        "query cleaned up",
        "state closed",
        "state closed",
        "state made",
        "state made",
        "updater cleaned up",
    ]
