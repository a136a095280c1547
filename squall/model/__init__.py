"""The declarations: fields, tuples, component bases, configuration, topology building,
and the interfaces components see at run time (collectors, task context, hooks, clock,
coordination store), which the engines implement.

Pure data and interfaces; knows nothing of engines.
"""

from squall.model.builder import BoltDeclarer, SpoutDeclarer, TopologyBuilder
from squall.model.clock import Clock, ManualClock
from squall.model.collectors import BasicOutputCollector, OutputCollector, SpoutOutputCollector
from squall.model.components import BasicBolt, Bolt, Component, Spout
from squall.model.config import Config, ConfigWarning
from squall.model.context import TopologyContext
from squall.model.coordination import CoordinationStore
from squall.model.declarer import OutputFieldsDeclarer, StreamDeclaration
from squall.model.errors import (
    ComponentError,
    FailedException,
    InvalidTopologyError,
    ReportedFailedException,
    SquallError,
)
from squall.model.fields import Fields, Values
from squall.model.grouping import CustomStreamGrouping, GlobalStreamId, Grouping, GroupingKind
from squall.model.lambdas import LambdaBiConsumerBolt, LambdaConsumerBolt, LambdaSpout
from squall.model.topology import ComponentSpec, StormTopology, Subscription
from squall.model.tuple import DEFAULT_STREAM, Tuple, is_tick_tuple

__all__ = [
    "DEFAULT_STREAM",
    "BasicBolt",
    "BasicOutputCollector",
    "Bolt",
    "BoltDeclarer",
    "Clock",
    "Component",
    "ComponentError",
    "ComponentSpec",
    "Config",
    "ConfigWarning",
    "CoordinationStore",
    "CustomStreamGrouping",
    "FailedException",
    "Fields",
    "GlobalStreamId",
    "Grouping",
    "GroupingKind",
    "InvalidTopologyError",
    "LambdaBiConsumerBolt",
    "LambdaConsumerBolt",
    "LambdaSpout",
    "ManualClock",
    "OutputCollector",
    "OutputFieldsDeclarer",
    "ReportedFailedException",
    "Spout",
    "SpoutDeclarer",
    "SpoutOutputCollector",
    "SquallError",
    "StormTopology",
    "StreamDeclaration",
    "Subscription",
    "TopologyBuilder",
    "TopologyContext",
    "Tuple",
    "Values",
    "is_tick_tuple",
]
