"""Trident: exactly-once batch processing with a fluent API over the core model.

Streams of batches (one per transaction) transformed by functions, filters,
aggregations, joins and state operations; compiled onto spouts and bolts by
``TridentTopology.build()``.
"""

from squall.trident.chained import ChainedAggregatorDeclarer
from squall.trident.collector import Collector
from squall.trident.comparison import (
    ComparisonAggregator,
    Max,
    MaxWithComparator,
    Min,
    MinWithComparator,
)
from squall.trident.operations import (
    Aggregator,
    CombinerAggregator,
    Count,
    Debug,
    Filter,
    FilterNull,
    FirstN,
    Function,
    MapGet,
    QueryFunction,
    ReducerAggregator,
    StateUpdater,
    Sum,
    TridentCollector,
)
from squall.trident.spouts import (
    BatchSpout,
    FixedBatchSpout,
    OpaquePartitionedTridentSpout,
    PartitionedTridentSpout,
)
from squall.trident.stream import GroupedStream, Stream, TridentState, TridentTopology
from squall.trident.tuple import TridentTuple

__all__ = [
    "Aggregator",
    "BatchSpout",
    "ChainedAggregatorDeclarer",
    "Collector",
    "CombinerAggregator",
    "ComparisonAggregator",
    "Count",
    "Debug",
    "Filter",
    "FilterNull",
    "FirstN",
    "FixedBatchSpout",
    "Function",
    "GroupedStream",
    "MapGet",
    "Max",
    "MaxWithComparator",
    "Min",
    "MinWithComparator",
    "OpaquePartitionedTridentSpout",
    "PartitionedTridentSpout",
    "QueryFunction",
    "ReducerAggregator",
    "StateUpdater",
    "Stream",
    "Sum",
    "TridentCollector",
    "TridentState",
    "TridentTopology",
    "TridentTuple",
]
