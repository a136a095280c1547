"""Topologies of the file connectors' crash tests, run in a child process that the test
kills with SIGKILL, then again in the test's process.

    python -m tests.connectors_files_topologies core DATA OUT DONE RUN
    python -m tests.connectors_files_topologies trident DATA DATABASE COORDINATION

Each runs on LocalCluster until killed.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from squall import BasicBolt, Config, Fields, LocalCluster, TopologyBuilder
from squall.connectors.files import FileBolt, FileSpout, FileTridentSpout
from squall.model.topology import StormTopology
from squall.trident import Count as TridentCount
from squall.trident import Filter, TridentTopology, TridentTuple
from squall.trident.state import SqliteMapState, SqliteMapStateFactory, StateType


class Tag(BasicBolt):
    """Emits ``[line, run]``; takes about a millisecond per tuple, so a run of a few
    thousand lines lasts long enough to be killed in its middle."""

    outputs = ["line", "run"]

    def __init__(self, run: int) -> None:
        self.run = run

    def execute(self, tup: Any, collector: Any) -> None:
        time.sleep(0.001)
        collector.emit([tup.values[0], self.run])


def core_topology(data: str, out: str, done: str, run: int) -> StormTopology:
    """FileSpout -> Tag -> FileBolt (jsonl ``{"line": ..., "run": ...}``)."""
    builder = TopologyBuilder()
    builder.set_spout(
        "files",
        FileSpout(
            data, "*.txt", done_directory=done, batch=20, scan_ms=20, progress_ms=20, settle_ms=20
        ),
    )
    builder.set_bolt("tag", Tag(run)).shuffle_grouping("files")
    builder.set_bolt("sink", FileBolt(out, batch=10, flush_ms=20)).shuffle_grouping("tag")
    return builder.create_topology()


class Slow(Filter):
    """Keeps every tuple, a millisecond each."""

    def is_keep(self, tup: TridentTuple) -> bool:
        time.sleep(0.001)
        return True


def counts_factory(database: str) -> SqliteMapStateFactory:
    return SqliteMapState.factory(database, StateType.TRANSACTIONAL)


def trident_topology(data: str, database: str) -> TridentTopology:
    """FileTridentSpout -> Slow -> word counts in transactional SQLite state."""
    topology = TridentTopology()
    (
        topology.new_stream("words", FileTridentSpout(data, "*.txt", batch_lines=20, scan_ms=20))
        .each(Fields("line"), Slow())
        .group_by(Fields("line"))
        .persistent_aggregate(counts_factory(database), TridentCount(), Fields("count"))
    )
    return topology


def trident_conf(coordination: str) -> dict[str, Any]:
    return {
        Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR: coordination,
        Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 1,
    }


#: The core topology's configuration: few trees in flight, so lines are written and
#: acked all along the run (not all emitted first, then all processed).
CORE_CONF = {Config.TOPOLOGY_MAX_SPOUT_PENDING: 50}


def main(arguments: list[str]) -> None:
    mode, *rest = arguments
    with LocalCluster() as cluster:
        if mode == "core":
            data, out, done, run = rest
            cluster.submit_topology("crash", CORE_CONF, core_topology(data, out, done, int(run)))
        else:
            data, database, coordination = rest
            topology = trident_topology(data, database).build()
            cluster.submit_topology("crash", trident_conf(coordination), topology)
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1:])
