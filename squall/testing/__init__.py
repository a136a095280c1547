"""Public helpers for testing topologies: fixed, fed and random-word spouts, a capturing
bolt, and ``complete_topology`` (run until all input is processed, read what each
component emitted)."""

from squall.model.clock import ManualClock
from squall.testing.bolts import CapturingBolt, Received
from squall.testing.complete import CompleteTopologyResult, complete_topology
from squall.testing.shared import SharedRecord
from squall.testing.spouts import FeederSpout, FixedTupleSpout, TestWordSpout

__all__ = [
    "CapturingBolt",
    "CompleteTopologyResult",
    "FeederSpout",
    "FixedTupleSpout",
    "ManualClock",
    "Received",
    "SharedRecord",
    "TestWordSpout",
    "complete_topology",
]
