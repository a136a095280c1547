"""User-facing base classes name a missing method when the subclass is created."""

from __future__ import annotations

import pytest

from squall import WindowedBolt
from squall.transactional import PartitionedTransactionalSpout, TransactionalSpout
from squall.trident import (
    Aggregator,
    BatchSpout,
    CombinerAggregator,
    Filter,
    Function,
    PartitionedTridentSpout,
    ReducerAggregator,
)
from squall.trident.operations import QueryFunction, StateUpdater


@pytest.mark.parametrize(
    ("base", "missing"),
    [
        (Function, "execute"),
        (Filter, "is_keep"),
        (CombinerAggregator, "combine"),
        (ReducerAggregator, "reduce"),
        (Aggregator, "complete"),
        (StateUpdater, "update_state"),
        (QueryFunction, "batch_retrieve"),
        (BatchSpout, "emit_batch"),
        (PartitionedTridentSpout, "get_emitter"),
        (TransactionalSpout, "get_coordinator"),
        (PartitionedTransactionalSpout, "get_emitter"),
        (WindowedBolt, "execute"),
    ],
)
def test_an_incomplete_subclass_names_what_it_lacks(base: type, missing: str) -> None:
    incomplete = type(f"Incomplete{base.__name__}", (base,), {})
    with pytest.raises(TypeError, match=missing):
        incomplete()


def test_a_complete_subclass_is_created() -> None:
    class Upper(Function):
        def execute(self, tup: object, collector: object) -> None:
            """Nothing to do."""

    assert isinstance(Upper(), Function)
