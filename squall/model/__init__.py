"""The declarations: fields, tuples, component bases, configuration, topology building.

Pure data, picklable, no threads; knows nothing of engines.
"""

from squall.model.builder import BoltDeclarer, SpoutDeclarer, TopologyBuilder
from squall.model.components import BasicBolt, Bolt, Component, Spout
from squall.model.config import Config, ConfigWarning
from squall.model.declarer import OutputFieldsDeclarer, StreamDeclaration
from squall.model.errors import (
    ComponentError,
    FailedException,
    InvalidTopologyError,
    ReportedFailedException,
    SquallError,
)
from squall.model.fields import Fields
from squall.model.grouping import CustomStreamGrouping, GlobalStreamId, Grouping, GroupingKind
from squall.model.topology import ComponentSpec, StormTopology, Subscription
from squall.model.tuple import DEFAULT_STREAM, Tuple, is_tick_tuple

__all__ = [
    "DEFAULT_STREAM",
    "BasicBolt",
    "Bolt",
    "BoltDeclarer",
    "Component",
    "ComponentError",
    "ComponentSpec",
    "Config",
    "ConfigWarning",
    "CustomStreamGrouping",
    "FailedException",
    "Fields",
    "GlobalStreamId",
    "Grouping",
    "GroupingKind",
    "InvalidTopologyError",
    "OutputFieldsDeclarer",
    "ReportedFailedException",
    "Spout",
    "SpoutDeclarer",
    "SquallError",
    "StormTopology",
    "StreamDeclaration",
    "Subscription",
    "TopologyBuilder",
    "Tuple",
    "is_tick_tuple",
]
