"""Topologies of the stateful-bolt tests that run in a child process (killed with
SIGKILL by the crash tests), and what the tests read back.

``python -m tests.state_topologies <data directory> <state directory>`` runs the word
count below on LocalCluster until killed.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from squall import BasicBolt, Config, LocalCluster, StatefulBolt, TopologyBuilder
from squall.connectors.files import FileSpout
from squall.model.topology import StormTopology
from squall.state import KeyValueState
from squall.state.codec import decode, encode
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


class CrashingCountWords(CountWords):
    """Counts as :class:`CountWords`; its task 0 kills its own process at one point of
    the checkpoint protocol, named by ``crash_at``:

    * ``"commit"``: in ``pre_commit`` of transaction 3 (every bolt has prepared it,
      some may have committed it);
    * ``"rollback"``: ``pre_prepare`` of transaction 3 raises (the prepare fails), then
      ``pre_rollback`` kills the process (the rollback is half done).
    """

    def __init__(self, crash_at: str) -> None:
        self.crash_at = crash_at

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.armed = context.task_index == 0

    def pre_prepare(self, txid: int) -> None:
        if self.armed and self.crash_at == "rollback" and txid == 3:
            raise RuntimeError("prepare of transaction 3 fails")

    def pre_commit(self, txid: int) -> None:
        if self.armed and self.crash_at == "commit" and txid == 3:
            os.kill(os.getpid(), signal.SIGKILL)

    def pre_rollback(self) -> None:
        if self.armed and self.crash_at == "rollback":
            os.kill(os.getpid(), signal.SIGKILL)


def conf(state_directory: str) -> Config:
    """Durable SQLite state, frequent checkpoints, few trees in flight."""
    settings = Config().set_max_spout_pending(64).set_num_workers(2).set_worker_kind("thread")
    settings[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 40
    settings[Config.TOPOLOGY_STATE_PROVIDER] = "sqlite"
    settings[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = {"directory": state_directory}
    return settings


def topology(data_directory: str, crash_at: str | None = None) -> StormTopology:
    """files -> split (2 tasks) -> count (fields on word, COUNTERS tasks); the count
    bolt kills its process at ``crash_at`` (see :class:`CrashingCountWords`)."""
    builder = TopologyBuilder()
    builder.set_spout("lines", FileSpout(data_directory, "*.txt"), 1)
    builder.set_bolt("split", SplitLine(), 2).shuffle_grouping("lines")
    counter = CountWords() if crash_at is None else CrashingCountWords(crash_at)
    builder.set_bolt("count", counter, COUNTERS).fields_grouping("split", ["word"])
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


def checkpoint_record(state_directory: str) -> list[Any] | None:
    """The checkpoint spout's committed record, ``[txid, phase]``."""
    provider = provider_for(conf(state_directory), NAME)
    store = provider.make_store("$checkpointspout")
    try:
        raw = store.get(encode("record"))
    finally:
        store.close()
    return None if raw is None else decode(raw)


def main(arguments: list[str]) -> None:
    data_directory, state_directory, *crash_at = arguments
    with LocalCluster() as cluster:
        cluster.submit_topology(
            NAME,
            conf(state_directory),
            topology(data_directory, crash_at[0] if crash_at else None),
        )
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1:])
