"""``CountAsAggregator``: the count of a window's (or a batch's) tuples."""

from __future__ import annotations

from typing import Any

from squall.trident.operations import Aggregator, TridentCollector
from squall.trident.tuple import TridentTuple


class CountAsAggregator(Aggregator):
    """Emits one value: how many tuples it saw (Storm's
    ``trident.testing.CountAsAggregator``, the aggregator of Storm's windowing
    examples)."""

    def init(self, batch_id: Any, collector: TridentCollector) -> list[int]:
        return [0]

    def aggregate(self, state: list[int], tup: TridentTuple, collector: TridentCollector) -> None:
        state[0] += 1

    def complete(self, state: list[int], collector: TridentCollector) -> None:
        collector.emit([state[0]])


__all__ = ["CountAsAggregator"]
