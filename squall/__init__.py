"""squall: Apache Storm's stream-processing model in Python.

Spouts and bolts wired by stream groupings into topologies, per-tuple XOR acking, and
two engines for one topology object: :class:`LocalCluster` (embedded, the default) and
``squall.spark.SparkCluster``.
"""

from squall.compiled import use_sources_if_chosen

use_sources_if_chosen()  # SQUALL_PURE_PYTHON=1: squall's modules from their sources

from squall.compiled import compiled_core
from squall.local.cluster import LocalCluster
from squall.model import (
    BasicBolt,
    Bolt,
    ComponentError,
    Config,
    ConfigWarning,
    CustomStreamGrouping,
    FailedException,
    Fields,
    GlobalStreamId,
    InvalidTopologyError,
    OutputFieldsDeclarer,
    ReportedFailedException,
    Spout,
    SquallError,
    StormTopology,
    TopologyBuilder,
    Tuple,
    Values,
    is_tick_tuple,
)
from squall.model.clock import Clock, ManualClock
from squall.model.collectors import BasicOutputCollector, OutputCollector, SpoutOutputCollector
from squall.model.context import TopologyContext
from squall.model.metrics import CountMetric, IMetric, IMetricsConsumer, LoggingMetricsConsumer
from squall.runtime.cluster import Cluster
from squall.runtime.metrics import ComponentStats, ErrorInfo, TopologyInfo
from squall.state import KeyValueState, StatefulBolt, StatefulWindowedBolt
from squall.windowing import Count, Duration, JoinBolt, TupleWindow, WindowedBolt

__version__ = "0.1.0"

__all__ = [
    "BasicBolt",
    "BasicOutputCollector",
    "Bolt",
    "Clock",
    "Cluster",
    "ComponentError",
    "ComponentStats",
    "Config",
    "ConfigWarning",
    "Count",
    "CountMetric",
    "CustomStreamGrouping",
    "Duration",
    "ErrorInfo",
    "FailedException",
    "Fields",
    "GlobalStreamId",
    "IMetric",
    "IMetricsConsumer",
    "InvalidTopologyError",
    "JoinBolt",
    "KeyValueState",
    "LocalCluster",
    "LoggingMetricsConsumer",
    "ManualClock",
    "OutputCollector",
    "OutputFieldsDeclarer",
    "ReportedFailedException",
    "Spout",
    "SpoutOutputCollector",
    "SquallError",
    "StatefulBolt",
    "StatefulWindowedBolt",
    "StormTopology",
    "TopologyBuilder",
    "TopologyContext",
    "TopologyInfo",
    "Tuple",
    "TupleWindow",
    "Values",
    "WindowedBolt",
    "compiled_core",
    "is_tick_tuple",
]
