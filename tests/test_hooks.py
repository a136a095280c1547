"""The declared hooks (``squall.model.hooks``): what counts as implementing one, the
hooks squall's own components implement, and that an attribute which only shares a
hook's name is not taken for the hook."""

from __future__ import annotations

from typing import Any

import pytest

from squall import LocalCluster, Spout, SquallError, TopologyBuilder, Tuple
from squall.model.components import Bolt
from squall.model.hooks import (
    AdaptsToBolt,
    CachesState,
    CarriesCoordinationStore,
    CleansUpTask,
    Exhaustible,
    FlagsCommitter,
    HandlesFailedTransaction,
    MakesBatchInstances,
    PreparesTask,
    ReportsMetrics,
    SettlesBatch,
    ValidatesSubmission,
    implements,
)
from squall.runtime.context import TopologyContext
from squall.runtime.coordination import MemoryCoordinationStore, open_store
from squall.runtime.system import validate_submission
from squall.testing import FeederSpout, FixedTupleSpout, complete_topology
from squall.transactional.batch import BatchBoltExecutor
from squall.transactional.coordinator import TransactionalSpoutCoordinator
from squall.trident.segment import TridentSegment
from squall.trident.sources import DRPCCoordinator
from squall.trident.state.memory_state import MemoryMapState
from squall.windowing import WindowedBolt
from squall.windowing.executor import WindowedBoltExecutor
from tests.helpers import wait_until


class Reporting:
    def metrics(self) -> dict[str, float]:
        return {"n": 1}


class MetricsAttribute:
    def __init__(self) -> None:
        self.metrics: dict[str, float] = {}


class MetricsNone:
    metrics = None


def test_a_method_implements_its_hook() -> None:
    assert implements(Reporting(), ReportsMetrics)
    assert not implements(Reporting(), SettlesBatch)


def test_an_attribute_named_like_a_method_hook_is_not_the_hook() -> None:
    assert not implements(MetricsAttribute(), ReportsMetrics)
    assert not implements(MetricsNone(), ReportsMetrics)


def test_attribute_hooks_need_only_the_attribute() -> None:
    class Flagged:
        committer = False

    class Cached:
        def __init__(self) -> None:
            self.cache_size = 10

    assert implements(Flagged(), FlagsCommitter)
    assert implements(Cached(), CachesState)
    assert not implements(object(), FlagsCommitter)


@pytest.mark.parametrize(
    ("implementation", "hooks"),
    [
        (TransactionalSpoutCoordinator, (ValidatesSubmission, ReportsMetrics)),
        (WindowedBoltExecutor, (ValidatesSubmission, SettlesBatch, ReportsMetrics)),
        (BatchBoltExecutor, (FlagsCommitter,)),
        (TridentSegment, (PreparesTask, MakesBatchInstances, CleansUpTask)),
        (DRPCCoordinator, (HandlesFailedTransaction,)),
        (WindowedBolt, (AdaptsToBolt,)),
        (FixedTupleSpout, (Exhaustible,)),
        (FeederSpout, (Exhaustible,)),
    ],
)
def test_squall_components_declare_the_hooks_they_implement(
    implementation: type, hooks: tuple[type, ...]
) -> None:
    for hook in hooks:
        assert hook in implementation.__mro__


def test_squall_state_factories_and_contexts_declare_their_hooks() -> None:
    assert implements(MemoryMapState.factory(cache_size=5), CachesState)
    assert CarriesCoordinationStore in TopologyContext.__mro__


def test_open_store_takes_the_store_a_context_carries() -> None:
    store = MemoryCoordinationStore()

    class Context:
        coordination_store: MemoryCoordinationStore | None = store

    class EngineWithout:
        coordination_store: MemoryCoordinationStore | None = None

    assert open_store({}, Context()) is store
    with pytest.raises(RuntimeError, match="no coordination store"):
        open_store({}, EngineWithout())


class Checked(Bolt):
    """Refuses to be submitted with a message timeout over 10 s."""

    outputs = ["n"]

    def execute(self, tup: Tuple) -> None:
        self.collector.ack(tup)

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        if conf.get("topology.message.timeout.secs", 30) > 10:
            raise SquallError(f"{component_id}: timeout too long")


class Unchecked(Bolt):
    """Has an attribute named like the submit-time hook."""

    outputs = ["n"]
    validate_submission = "not a check"

    def execute(self, tup: Tuple) -> None:
        self.collector.ack(tup)


class Numbers(Spout):
    outputs = ["n"]


def test_validate_submission_calls_only_a_callable_hook() -> None:
    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers())
    builder.set_bolt("checked", Checked()).shuffle_grouping("numbers")
    builder.set_bolt("unchecked", Unchecked()).shuffle_grouping("numbers")
    topology = builder.create_topology()
    validate_submission(topology, {"topology.message.timeout.secs": 5})
    with pytest.raises(SquallError, match="checked: timeout too long"):
        validate_submission(topology, {"topology.message.timeout.secs": 30})


class CountingBolt(Bolt):
    """Keeps its own counters in an attribute named ``metrics`` (not the hook)."""

    outputs = ["n"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.metrics = {"seen": 0}

    def execute(self, tup: Tuple) -> None:
        self.metrics["seen"] += 1
        self.collector.ack(tup)


def test_a_metrics_attribute_is_not_reported_as_custom_metrics() -> None:
    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[1], [2]], ["n"]))
    builder.set_bolt("count", CountingBolt()).shuffle_grouping("numbers")
    cluster = LocalCluster()
    try:
        cluster.submit_topology("metrics-attribute", {}, builder.create_topology())

        def count() -> Any:
            return cluster.get_topology_info("metrics-attribute").components["count"]

        wait_until(lambda: count().executed == 2)
        assert count().custom == {}
    finally:
        cluster.shutdown()


class FlagSpout(Spout):
    """Has a flag named like the spout hook of ``complete_topology``."""

    outputs = ["n"]
    is_exhausted = True


def test_complete_topology_needs_an_is_exhausted_method() -> None:
    builder = TopologyBuilder()
    builder.set_spout("numbers", FlagSpout())
    with pytest.raises(SquallError, match="give it an is_exhausted"):
        complete_topology(builder.create_topology())
