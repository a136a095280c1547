"""The persistent-window topology of the crash tests, run in a child process killed
with SIGKILL, and what the tests read back.

``python -m tests.window_topologies <data directory> <state directory>`` runs it on
LocalCluster until killed: a file of event-time readings (``ts``, ``name``, ascending)
into a windowed bolt with persistent windows that archives every window in its state.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from squall import Config, Duration, LocalCluster, StatefulWindowedBolt, TopologyBuilder
from squall.connectors.files import FileSpout
from squall.model.topology import StormTopology
from squall.state import KeyValueState
from squall.state.codec import decode
from squall.state.executors import state_namespace
from squall.state.providers import provider_for
from squall.windowing.manager import WindowManager
from squall.windowing.window import TupleWindow

NAME = "crashing-windows"
LENGTH, SLIDING, LAG = Duration.seconds(20), Duration.seconds(10), Duration.seconds(20)


class WindowArchive(StatefulWindowedBolt):
    """Keeps each window in its state: ``("window", end)`` -> ``[names, new names,
    expired names]``, and ``"windows"``: how many windows it executed (as committed)."""

    outputs = ["end"]

    def init_state(self, state: KeyValueState) -> None:
        self.state = state

    def execute(self, window: TupleWindow) -> None:
        self.state.put(("window", window.end_timestamp), describe(window))
        self.state.put("windows", self.state.get("windows", 0) + 1)
        self.collector.emit([window.end_timestamp])


class RollingBackArchive(WindowArchive):
    """Archives as :class:`WindowArchive`, but its prepare of transaction 3 fails once:
    the transaction is rolled back (the windows go back to transaction 2's) and its
    tuples replayed."""

    def __init__(self) -> None:
        self.failed_once = False

    def pre_prepare(self, txid: int) -> None:
        if txid == 3 and not self.failed_once:
            self.failed_once = True
            raise RuntimeError("prepare of transaction 3 fails")


def describe(window: TupleWindow) -> list[list[str]]:
    """``[names, new names, expired names]`` of a window."""
    return [
        [t["name"] for t in window.get()],
        [t["name"] for t in window.get_new()],
        [t["name"] for t in window.get_expired()],
    ]


def conf(state_directory: str) -> Config:
    """Durable SQLite state, frequent checkpoints, few trees in flight (replays stay
    within the lag)."""
    settings = Config().set_max_spout_pending(16)
    settings[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 40
    settings[Config.TOPOLOGY_STATE_PROVIDER] = "sqlite"
    settings[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = {"directory": state_directory}
    return settings


def topology(data_directory: str, archive: WindowArchive | None = None) -> StormTopology:
    """readings (a jsonl file) -> ``archive`` (default: a :class:`WindowArchive`) with
    persistent sliding event-time windows."""
    bolt = (
        (archive or WindowArchive())
        .with_window(LENGTH, SLIDING)
        .with_timestamp_field("ts")
        .with_lag(LAG)
        .with_watermark_interval(Duration(20))
        .with_persistence()
    )
    builder = TopologyBuilder()
    builder.set_spout(
        "readings", FileSpout(data_directory, "*.jsonl", "jsonl", fields=["ts", "name"]), 1
    )
    builder.set_bolt("archive", bolt).global_grouping("readings")
    return builder.create_topology()


def write_readings(data_directory: Path, count: int) -> list[tuple[int, str]]:
    """One file of ``count`` readings 700 ms apart; the ``(ts, name)`` pairs."""
    readings = [(1_000_000 + 700 * number, f"r{number}") for number in range(count)]
    data_directory.mkdir()
    lines = "".join(json.dumps({"ts": ts, "name": name}) + "\n" for ts, name in readings)
    (data_directory / "readings.jsonl").write_text(lines)
    return readings


def expected_windows(readings: list[tuple[int, str]]) -> dict[int, list[list[str]]]:
    """The windows an uninterrupted run fires (ascending timestamps: the same for any
    watermark timing), by end; the last watermark is the newest timestamp less the lag."""
    spec = WindowArchive().with_window(LENGTH, SLIDING).with_timestamp_field("ts").window_spec()
    fired: dict[int, list[list[str]]] = {}

    def activate(window: TupleWindow) -> None:
        assert window.end_timestamp is not None
        fired[window.end_timestamp] = describe(window)

    manager = WindowManager(spec, activate, lambda tuples: None)
    for ts, name in readings:
        manager.add({"name": name}, ts)  # type: ignore[arg-type]
    manager.on_watermark(readings[-1][0] - LAG.value)
    return fired


def committed_archive(state_directory: str) -> tuple[int, dict[int, list[list[str]]]]:
    """The archive's committed state: ``(windows executed, windows by end)``."""
    store = provider_for(conf(state_directory), NAME).make_store(state_namespace("archive", 0))
    try:
        entries = {decode(key): decode(value) for key, value in store.items()}
    finally:
        store.close()
    executed = entries.pop("windows", 0)
    return executed, {key[1]: value for key, value in entries.items()}


def main(arguments: list[str]) -> None:
    data_directory, state_directory = arguments
    with LocalCluster() as cluster:
        cluster.submit_topology(NAME, conf(state_directory), topology(data_directory))
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1:])
