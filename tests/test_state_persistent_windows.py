"""Persistent windows (``StatefulWindowedBolt.with_persistence()``): on both engines,
Storm's event-time example stopped after its first windows and run again on the same
durable state fires the windows an uninterrupted run fires, with the same new and
expired tuples, and window tuples are acked once saved; on the local engine, a
topology killed with SIGKILL again and again keeps every window exactly once in its
state."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from squall import (
    Config,
    Count,
    Duration,
    InvalidTopologyError,
    LocalCluster,
    StatefulWindowedBolt,
    TopologyBuilder,
)
from squall.model.topology import StormTopology
from squall.state import KeyValueState
from squall.state.codec import decode, encode
from squall.state.executors import state_namespace
from squall.state.providers import provider_for
from squall.testing import CapturingBolt, FeederSpout
from tests import window_topologies
from tests.conftest import Engine
from tests.crashing import kill_after_progress, start_child
from tests.helpers import wait_until
from tests.test_core_windowing import STORM_PHASES, WATERMARK, FieldsRecorder, PhasedSpout
from tests.test_local_windowing import hms
from tests.test_state_engines import sqlite_conf

NAME = "persistent-windows"


class WindowRecorder(StatefulWindowedBolt):
    """Emits each window as ``[names, new, expired, start, end, windows]``, ``windows``
    being the number of windows fired so far, kept in the state."""

    outputs = ["names", "new", "expired", "start", "end", "windows"]

    def init_state(self, state: KeyValueState) -> None:
        self.state = state

    def execute(self, window: Any) -> None:
        windows = self.state.get("windows", 0) + 1
        self.state.put("windows", windows)
        self.collector.emit(
            [
                [t["v"] for t in window.get()],
                [t["v"] for t in window.get_new()],
                [t["v"] for t in window.get_expired()],
                window.start_timestamp,
                window.end_timestamp,
                windows,
            ]
        )


def storm_example(spout: PhasedSpout, late: FieldsRecorder) -> tuple[StormTopology, CapturingBolt]:
    """Storm's example: 20 s windows sliding every 10 s on ``ts``, a 5 s lag, late
    tuples on ``late``; the windows are persistent."""
    bolt = (
        WindowRecorder()
        .with_window(Duration.seconds(20), Duration.seconds(10))
        .with_timestamp_field("ts")
        .with_lag(Duration.seconds(5))
        .with_watermark_interval(WATERMARK)
        .with_late_tuple_stream("late")
        .with_persistence()
    )
    out = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("win", bolt).shuffle_grouping("src")
    builder.set_bolt("out", out).shuffle_grouping("win")
    builder.set_bolt("late-sink", late).shuffle_grouping("win", "late")
    return builder.create_topology(), out


def committed_windows(conf: dict[str, Any]) -> int:
    """The windows count the bolt's committed state holds."""
    store = provider_for(conf, NAME).make_store(state_namespace("win", 0))
    try:
        raw = store.get(encode("windows"))
    finally:
        store.close()
    return 0 if raw is None else decode(raw)


#: The windows of Storm's example, as an uninterrupted run fires them.
WINDOWS = [
    [["e1", "e2", "e3"], ["e1", "e2", "e3"], [], hms(5, 59, 50), hms(6, 0, 10), 1],
    [["e1", "e2", "e3", "e4"], ["e4"], [], hms(6, 0, 0), hms(6, 0, 20), 2],
    [["e4", "e5"], ["e5"], ["e1", "e2", "e3"], hms(6, 0, 10), hms(6, 0, 30), 3],
    [["e5", "e6"], ["e6"], ["e4"], hms(6, 0, 20), hms(6, 0, 40), 4],
    [["e6"], [], ["e5"], hms(6, 0, 30), hms(6, 0, 50), 5],
    [["e7", "e8", "e9"], ["e7", "e8", "e9"], [], hms(8, 0, 10), hms(8, 0, 30), 6],
]


def test_a_restarted_topology_fires_the_windows_of_its_saved_contents(
    engine: Engine, tmp_path: Path
) -> None:
    conf = sqlite_conf(tmp_path / "state")
    first_phase = STORM_PHASES[0]
    spout = PhasedSpout(["ts", "v"], first_phase)
    topology, out = storm_example(spout, FieldsRecorder())
    with engine.running(topology, conf, name=NAME, checkpoint="ck") as run:
        # e6 brings watermark 06:00:31: the first three windows fire and are committed.
        run.wait_until(lambda: committed_windows(conf) == 3, engine.timeout)
        # Held in windows, yet acked: saved by the checkpoint.
        run.wait_until(lambda: spout.acked() == sorted(spout.msg_ids()), engine.timeout)
    assert sorted(out.values()) == sorted(WINDOWS[:3])
    assert spout.failed() == []

    # Again, with the later phases only: e4-e6 come from the saved windows.
    spout = PhasedSpout(["ts", "v"], *STORM_PHASES[1:])
    late = FieldsRecorder()
    topology, out = storm_example(spout, late)
    with engine.running(topology, conf, name=NAME, checkpoint="ck2") as run:
        run.wait_until(lambda: len(out.values()) == 3, engine.timeout)
        spout.open_next()
        run.wait_until(lambda: len(late.tuples()) == 1, engine.timeout)
        run.wait_until(lambda: spout.acked() == sorted(spout.msg_ids()), engine.timeout)
        run.wait_until(lambda: committed_windows(conf) == 6, engine.timeout)
        assert run.errors() == {}
    assert sorted(out.values()) == sorted(WINDOWS[3:])
    assert late.tuples() == [("late", ["late_tuple"], [[hms(8, 0, 30), "e11"]])]
    assert spout.failed() == []


def test_persistent_windows_killed_again_and_again_fire_each_window_once_in_the_state(
    tmp_path: Path,
) -> None:
    """SIGKILLed at random points and restarted, the archive of windows in the state
    (exactly once) is the uninterrupted run's: each window with its exact tuples, new
    and expired tuples, and no window executed twice."""
    rng = random.Random(1516)
    data, state = tmp_path / "data", tmp_path / "state"
    readings = window_topologies.write_readings(data, 600)
    expected = window_topologies.expected_windows(readings)
    committed = 0
    for _ in range(3):
        child = start_child("tests.window_topologies", str(data), str(state))

        def progressed(before: int = committed) -> bool:
            executed = window_topologies.committed_archive(str(state))[0]
            return executed > before or executed == len(expected)

        kill_after_progress(child, progressed, rng)
        committed, archive = window_topologies.committed_archive(str(state))
        assert committed == len(archive)
        assert archive == {end: expected[end] for end in archive}
    with LocalCluster() as cluster:
        cluster.submit_topology(
            window_topologies.NAME,
            window_topologies.conf(str(state)),
            window_topologies.topology(str(data)),
        )
        wait_until(
            lambda: window_topologies.committed_archive(str(state))[0] >= len(expected),
            timeout=60.0,
        )
        cluster.kill_topology(window_topologies.NAME)
    assert window_topologies.committed_archive(str(state)) == (len(expected), expected)


def test_a_rolled_back_transaction_takes_the_windows_back_to_the_last_commit(
    tmp_path: Path,
) -> None:
    """The prepare of transaction 3 fails: its tuples are replayed into the windows as
    they were at transaction 2, and every window is archived once, exact."""
    data, state = tmp_path / "data", tmp_path / "state"
    readings = window_topologies.write_readings(data, 300)
    expected = window_topologies.expected_windows(readings)
    with LocalCluster() as cluster:
        cluster.submit_topology(
            window_topologies.NAME,
            window_topologies.conf(str(state)),
            window_topologies.topology(str(data), window_topologies.RollingBackArchive()),
        )
        wait_until(
            lambda: window_topologies.committed_archive(str(state))[0] >= len(expected),
            timeout=60.0,
        )
        info = cluster.get_topology_info(window_topologies.NAME)
        cluster.kill_topology(window_topologies.NAME)
    assert window_topologies.committed_archive(str(state)) == (len(expected), expected)
    archive = info.components["archive"]
    assert [error.error for error in archive.errors] == [
        "RuntimeError: prepare of transaction 3 fails"
    ]
    spout = info.components["readings"]
    assert spout.failed > 0  # the rolled back transaction's tuples, replayed
    assert (spout.custom["replayed"], spout.custom["lost"]) == (spout.failed, 0)


class CountWindowRecorder(StatefulWindowedBolt):
    """Emits each window as ``[names, new, expired]``."""

    outputs = ["names", "new", "expired"]

    def execute(self, window: Any) -> None:
        self.collector.emit(
            [
                [t["v"] for t in window.get()],
                [t["v"] for t in window.get_new()],
                [t["v"] for t in window.get_expired()],
            ]
        )


def count_windows(spout: PhasedSpout) -> tuple[StormTopology, CapturingBolt]:
    """Windows of the last 4 tuples, sliding every 3, persistent."""
    bolt = CountWindowRecorder().with_window(Count(4), Count(3)).with_persistence()
    out = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("win", bolt).shuffle_grouping("src")
    builder.set_bolt("out", out).shuffle_grouping("win")
    return builder.create_topology(), out


def test_count_windows_go_on_counting_across_a_restart(engine: Engine, tmp_path: Path) -> None:
    """4 tuples, then a restart, then 5: the tuples since the last window count towards
    the next one, which holds saved tuples."""
    conf = sqlite_conf(tmp_path / "state")
    spout = PhasedSpout(["v"], [[name] for name in "abcd"])
    topology, out = count_windows(spout)
    with engine.running(topology, conf, name=NAME, checkpoint="ck") as run:
        run.wait_until(lambda: spout.acked() == list("abcd"), engine.timeout)
    assert out.values() == [[["a", "b", "c"], ["a", "b", "c"], []]]
    spout = PhasedSpout(["v"], [[name] for name in "efghi"])
    topology, out = count_windows(spout)
    with engine.running(topology, conf, name=NAME, checkpoint="ck2") as run:
        run.wait_until(lambda: len(out.values()) == 2, engine.timeout)
        run.wait_until(lambda: spout.acked() == list("efghi"), engine.timeout)
    assert out.values() == [
        [["c", "d", "e", "f"], ["d", "e", "f"], ["a", "b"]],
        [["f", "g", "h", "i"], ["g", "h", "i"], ["c", "d", "e"]],
    ]


def single_window_topology(
    bolt: StatefulWindowedBolt, spout: FeederSpout, out: CapturingBolt | None = None
) -> StormTopology:
    """``src`` -> ``win`` (-> ``out``, if given)."""
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("win", bolt).shuffle_grouping("src")
    if out is not None:
        builder.set_bolt("out", out).shuffle_grouping("win")
    return builder.create_topology()


def test_persistent_windows_are_bounded_neither_by_the_timeout_nor_by_pending_tuples(
    tmp_path: Path,
) -> None:
    """Without persistence a window of 10 tuples under max pending 4 (or of a minute
    under a 30 s timeout) is refused; with it, its tuples are acked once saved and the
    window fills."""
    conf = {
        **sqlite_conf(tmp_path / "state"),
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 4,
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30,
    }
    with LocalCluster() as cluster:
        for window in (Count(10), Duration.seconds(60)):
            refused = CountWindowRecorder().with_tumbling_window(window)
            with pytest.raises(InvalidTopologyError, match="windowed bolt 'win'"):
                cluster.submit_topology(
                    "refused", conf, single_window_topology(refused, FeederSpout(["v"]))
                )
        spout, out = FeederSpout(["v"]), CapturingBolt()
        bolt = CountWindowRecorder().with_tumbling_window(Count(10)).with_persistence()
        cluster.submit_topology(NAME, conf, single_window_topology(bolt, spout, out))
        for number in range(12):
            spout.feed([f"v{number}"], msg_id=number)
        wait_until(lambda: len(spout.acked) == 12)
        wait_until(lambda: len(out.values()) == 1)
    names = [f"v{number}" for number in range(10)]
    assert out.values() == [[names, names, []]]
    assert spout.failed == []


def test_a_tuple_value_the_state_cannot_store_is_failed_naming_the_bolt(tmp_path: Path) -> None:
    spout = FeederSpout(["v"])
    bolt = CountWindowRecorder().with_tumbling_window(Count(2)).with_persistence()
    with LocalCluster() as cluster:
        cluster.submit_topology(
            NAME, sqlite_conf(tmp_path / "state"), single_window_topology(bolt, spout)
        )
        spout.feed([object()], msg_id="object")
        spout.feed(["text"], msg_id="text")
        wait_until(lambda: spout.failed == ["object"] and spout.acked == ["text"])
        errors = cluster.get_topology_info(NAME).components["win"].errors
    assert len(errors) == 1
    assert errors[0].error.startswith(
        "StateSerializationError: windowed bolt 'win' task 0 (windows): the value of key 0 "
        "cannot be stored: type builtins.object is not supported"
    )
