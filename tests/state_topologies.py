"""Topologies of the stateful-bolt tests that run in a child process (killed with
SIGKILL by the crash tests), and what the tests read back.

``python -m tests.state_topologies <data directory> <state directory>`` runs the word
count below on LocalCluster until killed.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from squall import BasicBolt, Config, LocalCluster, StatefulBolt, TopologyBuilder
from squall.connectors.files import FileSpout
from squall.model.topology import StormTopology
from squall.state import KeyValueState
from squall.state.codec import decode
from squall.state.executors import state_namespace
from squall.state.providers import provider_for

#: The topology's name (its state namespace prefix).
NAME = "crashing-words"
#: Count tasks.
COUNTERS = 2


class SplitLine(BasicBolt):
    """``line`` -> one ``word`` per word."""

    outputs = ["word"]

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup["line"].split():
            collector.emit([word])


class CountWords(StatefulBolt):
    """Counts each word in its state and emits the new count."""

    outputs = ["word", "count"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def init_state(self, state: KeyValueState) -> None:
        self.counts = state

    def execute(self, tup: Any) -> None:
        word = tup["word"]
        count = self.counts.get(word, 0) + 1
        self.counts.put(word, count)
        self.collector.emit([word, count], tup)
        self.collector.ack(tup)


def conf(state_directory: str) -> Config:
    """Durable SQLite state, frequent checkpoints, few trees in flight."""
    settings = Config().set_max_spout_pending(64).set_num_workers(2)
    settings[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 40
    settings[Config.TOPOLOGY_STATE_PROVIDER] = "sqlite"
    settings[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = {"directory": state_directory}
    return settings


def topology(data_directory: str) -> StormTopology:
    """files -> split (2 tasks) -> count (fields on word, COUNTERS tasks)."""
    builder = TopologyBuilder()
    builder.set_spout("lines", FileSpout(data_directory, "*.txt"), 1)
    builder.set_bolt("split", SplitLine(), 2).shuffle_grouping("lines")
    builder.set_bolt("count", CountWords(), COUNTERS).fields_grouping("split", ["word"])
    return builder.create_topology()


def committed_counts(state_directory: str) -> dict[str, int]:
    """Every count task's committed state, merged."""
    provider = provider_for(conf(state_directory), NAME)
    merged: dict[str, int] = {}
    for index in range(COUNTERS):
        store = provider.make_store(state_namespace("count", index))
        try:
            merged.update((decode(key), decode(value)) for key, value in store.items())
        finally:
            store.close()
    return merged


def main(arguments: list[str]) -> None:
    data_directory, state_directory = arguments
    with LocalCluster() as cluster:
        cluster.submit_topology(NAME, conf(state_directory), topology(data_directory))
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1:])
