"""Storm's BaseStatefulWindowedBolt options: ``with_message_id_field`` (after a restart,
replayed tuples already out of the windows are dropped and those already evaluated go
back in the windows without firing them again) and ``with_max_events_in_memory`` (a
persistent window holds any number of tuples, at most that many of their values in
memory: the windows are the same as without it; misuse is refused naming the bolt)."""

from __future__ import annotations

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
from squall.state import KeyValueState
from squall.testing import CapturingBolt, FeederSpout, ManualClock
from tests.conftest import Engine, on_engine
from tests.helpers import wait_until
from tests.test_state_engines import sqlite_conf

NAME = "message-ids"


class SumWindow(StatefulWindowedBolt):
    """Emits each window as ``[ids, new ids, expired ids, windows so far]``."""

    outputs = ["ids", "new", "expired", "windows"]

    def init_state(self, state: KeyValueState) -> None:
        self.state = state

    def execute(self, window: Any) -> None:
        windows = self.state.get("windows", 0) + 1
        self.state.put("windows", windows)
        self.collector.emit(
            [
                [t["msgid"] for t in window.get()],
                [t["msgid"] for t in window.get_new()],
                [t["msgid"] for t in window.get_expired()],
                windows,
            ]
        )


def topology(spout: FeederSpout, out: CapturingBolt, message_ids: bool = True) -> Any:
    bolt = SumWindow().with_window(Count(5), Count(3))
    if message_ids:
        bolt = bolt.with_message_id_field("msgid")
    builder = TopologyBuilder()
    builder.set_spout("spout", spout)
    builder.set_bolt("sum", bolt, 1).shuffle_grouping("spout")
    builder.set_bolt("out", out).shuffle_grouping("sum")
    return builder.create_topology()


def feed(spout: FeederSpout, ids: range) -> None:
    for msg_id in ids:
        spout.feed([msg_id, msg_id * 10], msg_id=msg_id)


def run_then_replay(tmp_path: Path, message_ids: bool) -> list[list[Any]]:
    """Tuples 1..7 (windows fire at 3 and 6; 1 leaves them), a restart on the same state,
    then the spout replays what was not acked (2..7) and goes on to 12."""
    conf = sqlite_conf(tmp_path / "state")
    first, out = FeederSpout(["msgid", "v"]), CapturingBolt()
    with LocalCluster() as cluster:
        cluster.submit_topology(NAME, conf, topology(first, out, message_ids))
        feed(first, range(1, 8))
        # Acks of a stateful bolt are released when the checkpoint after them commits:
        # tuple 1 left the windows with the second window, so its progress is saved.
        wait_until(lambda: first.acked == [1] and len(out.values()) == 2, 10)
        cluster.kill_topology(NAME)
    assert out.values() == [[[1, 2, 3], [1, 2, 3], [], 1], [[2, 3, 4, 5, 6], [4, 5, 6], [1], 2]]
    second, out = FeederSpout(["msgid", "v"]), CapturingBolt()
    with LocalCluster() as cluster:
        cluster.submit_topology(NAME, conf, topology(second, out, message_ids))
        feed(second, range(2, 13))
        wait_until(lambda: len(out.values()) >= 2, 10)
        cluster.kill_topology(NAME)
    return out.values()


def test_after_a_restart_the_windows_go_on_as_if_uninterrupted(tmp_path: Path) -> None:
    # Uninterrupted, 7 8 9 fire [5..9] (new 7 8 9, 2 3 4 expired), then 10 11 12 fire
    # [8..12]: the windows count from 3 on, as the state does.
    assert run_then_replay(tmp_path, message_ids=True) == [
        [[5, 6, 7, 8, 9], [7, 8, 9], [2, 3, 4], 3],
        [[8, 9, 10, 11, 12], [10, 11, 12], [5, 6, 7], 4],
    ]


def test_without_message_ids_the_replays_fire_windows_again(tmp_path: Path) -> None:
    assert run_then_replay(tmp_path, message_ids=False)[:2] == [
        [[2, 3, 4], [2, 3, 4], [], 3],
        [[3, 4, 5, 6, 7], [5, 6, 7], [2], 4],
    ]


def test_a_tuple_without_an_integer_message_id_is_failed_naming_the_bolt() -> None:
    spout, out = FeederSpout(["msgid", "v"]), CapturingBolt()
    with LocalCluster() as cluster:
        cluster.submit_topology(
            NAME, {Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 50}, topology(spout, out)
        )
        for msg_id in (1, 2, 3):
            spout.feed([f"id-{msg_id}", msg_id], msg_id=msg_id)

        def error() -> str:
            errors = cluster.get_topology_info(NAME).components["sum"].errors
            return errors[-1].error if errors else ""

        wait_until(lambda: "message id field 'msgid' must be an integer" in error(), 10)
        assert "windowed bolt 'sum'" in error()
        assert "got 'id-1' (str)" in error()
        cluster.kill_topology(NAME)


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (
            lambda: SumWindow().with_message_id_field(""),
            "SumWindow.with_message_id_field: the field must be a non-empty string, got ''",
        ),
        (
            lambda: SumWindow().with_max_events_in_memory(0),
            "SumWindow.with_max_events_in_memory: the number of events must be a positive "
            "int, got 0",
        ),
    ],
)
def test_bad_options_are_refused(make: Any, error: str) -> None:
    with pytest.raises(InvalidTopologyError) as raised:
        make()
    assert error in str(raised.value)


def build_with(bolt: StatefulWindowedBolt) -> None:
    builder = TopologyBuilder()
    builder.set_spout("spout", FeederSpout(["msgid", "v"]))
    builder.set_bolt("win", bolt).shuffle_grouping("spout")
    builder.create_topology()


def test_max_events_in_memory_applies_to_persistent_windows() -> None:
    with pytest.raises(InvalidTopologyError) as raised:
        build_with(SumWindow().with_window(Count(5)).with_max_events_in_memory(10))
    assert "with_max_events_in_memory(10) bounds persistent windows" in str(raised.value)
    build_with(SumWindow().with_window(Count(50)).with_persistence().with_max_events_in_memory(10))
    build_with(
        SumWindow()
        .with_window(Duration.seconds(10), Duration.seconds(2))
        .with_persistence()
        .with_max_events_in_memory(25000)
    )


def count_windows(ids: range, length: int = 50, sliding: int = 7) -> list[list[Any]]:
    """What a count window of ``length`` sliding every ``sliding`` tuples fires for
    ``ids`` fed in order: ``[ids, new, expired, windows so far]`` each time."""
    windows: list[list[Any]] = []
    previous: list[int] = []
    seen: list[int] = []
    for msg_id in ids:
        seen.append(msg_id)
        if len(seen) % sliding == 0:
            window = seen[-length:]
            new = [i for i in window if i not in previous]
            expired = [i for i in seen if i < window[0] and (not previous or i >= previous[0])]
            windows.append([window, new, expired, len(windows) + 1])
            previous = window
    return windows


def spill_topology(
    spout: FeederSpout, out: CapturingBolt, window: StatefulWindowedBolt, limit: int | None
) -> Any:
    bolt = window.with_persistence()
    if limit is not None:
        bolt = bolt.with_max_events_in_memory(limit)
    builder = TopologyBuilder()
    builder.set_spout("spout", spout)
    builder.set_bolt("sum", bolt, 1).shuffle_grouping("spout")
    builder.set_bolt("out", out).shuffle_grouping("sum")
    return builder.create_topology()


def memory(cluster: LocalCluster) -> tuple[float, float, float]:
    """The bolt's window tuples held, values in memory, and the most values in memory."""
    custom = cluster.get_topology_info(NAME).components["sum"].custom
    return (
        custom.get("window_tuples_held", -1),
        custom.get("window_values_in_memory", -1),
        custom.get("window_values_in_memory_peak", -1),
    )


@pytest.mark.parametrize("limit", [None, 10])
def test_a_count_window_longer_than_the_limit_fires_the_same_windows(
    tmp_path: Path, limit: int | None
) -> None:
    spout, out = FeederSpout(["msgid", "v"]), CapturingBolt()
    expected = count_windows(range(1, 121))
    assert len(expected) == 17 and expected[8][0] == list(range(14, 64))
    topology = spill_topology(spout, out, SumWindow().with_window(Count(50), Count(7)), limit)
    with LocalCluster() as cluster:
        cluster.submit_topology(NAME, sqlite_conf(tmp_path / "state"), topology)
        feed(spout, range(1, 121))
        wait_until(lambda: len(out.values()) == 17, 20)
        wait_until(lambda: sorted(spout.acked) == list(range(1, 121)), 20)
        held, in_memory, peak = memory(cluster)
        assert cluster.get_topology_info(NAME).components["sum"].errors == []
        cluster.kill_topology(NAME)
    assert out.values() == expected
    # 120 - 7 * 17 = 1 tuple since the last window; the last window's 50 are held.
    assert held == 51
    assert (in_memory, peak) == ((-1, -1) if limit is None else (10, 10))


def test_a_time_window_holding_more_than_the_limit_fires_the_same_windows(
    tmp_path: Path,
) -> None:
    spout, out = FeederSpout(["msgid", "v"]), CapturingBolt()
    window = SumWindow().with_window(Duration.seconds(4), Duration.seconds(2))
    clock = ManualClock()
    with LocalCluster(clock=clock) as cluster:
        cluster.submit_topology(
            NAME, sqlite_conf(tmp_path / "state"), spill_topology(spout, out, window, 10)
        )
        # Fed, then the windows held (1..15 leave with the third window), then a tick.
        phases = [(range(1, 16), 15), (range(16, 31), 30), (range(31, 31), 30), (range(31, 36), 20)]
        for fired, (ids, held) in enumerate(phases):
            feed(spout, ids)
            wait_until(lambda held=held: memory(cluster)[0] == held, 10)
            clock.advance_secs(2)
            wait_until(lambda fired=fired: len(out.values()) == fired + 1, 10)
        # Tuples that left the windows go at a later checkpoint's prepare, whose time
        # is not the test's: between 5 (those of the last window) and the limit.
        in_memory, peak = memory(cluster)[1:]
        assert 5 <= in_memory <= 10 and peak == 10
        assert cluster.get_topology_info(NAME).components["sum"].errors == []
        cluster.kill_topology(NAME)
    ids = list(range(1, 31))
    assert out.values() == [
        [ids[:15], ids[:15], [], 1],
        [ids, ids[15:], [], 2],
        [ids[15:], [], ids[:15], 3],
        [[31, 32, 33, 34, 35], [31, 32, 33, 34, 35], ids[15:], 4],
    ]


def test_a_restart_with_the_limit_fires_the_windows_of_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    conf = sqlite_conf(tmp_path / "state")
    expected = count_windows(range(1, 121))
    spout, out = FeederSpout(["msgid", "v"]), CapturingBolt()
    with LocalCluster() as cluster:
        window = SumWindow().with_window(Count(50), Count(7))
        cluster.submit_topology(NAME, conf, spill_topology(spout, out, window, 10))
        feed(spout, range(1, 61))
        # Every tuple acked: saved by a committed checkpoint, with the windows after it.
        wait_until(lambda: sorted(spout.acked) == list(range(1, 61)), 20)
        wait_until(lambda: len(out.values()) == 8, 20)
        cluster.kill_topology(NAME)
    assert out.values() == expected[:8]
    spout, out = FeederSpout(["msgid", "v"]), CapturingBolt()
    with LocalCluster() as cluster:
        window = SumWindow().with_window(Count(50), Count(7))
        cluster.submit_topology(NAME, conf, spill_topology(spout, out, window, 10))
        wait_until(lambda: memory(cluster)[0] == 50 + 4, 20)
        assert memory(cluster)[1:] == (10, 10)
        feed(spout, range(61, 121))
        wait_until(lambda: len(out.values()) == 9, 20)
        assert memory(cluster)[1:] == (10, 10)
        cluster.kill_topology(NAME)
    assert out.values() == expected[8:]


@pytest.mark.parametrize("engine", [on_engine("local"), on_engine("spark")], indirect=True)
def test_message_id_windows_fire_as_any_window_on_both_engines(
    engine: Engine, tmp_path: Path
) -> None:
    spout, out = FeederSpout(["msgid", "v"]), CapturingBolt()
    conf = sqlite_conf(tmp_path / "state")
    with engine.running(topology(spout, out), conf, name=NAME, checkpoint="ck") as run:
        feed(spout, range(1, 8))
        run.wait_until(lambda: len(out.values()) == 2, engine.timeout)
        run.wait_until(lambda: 1 in spout.acked, engine.timeout)
    assert out.values() == [[[1, 2, 3], [1, 2, 3], [], 1], [[2, 3, 4, 5, 6], [4, 5, 6], [1], 2]]


@pytest.mark.parametrize("engine", [on_engine("local"), on_engine("spark")], indirect=True)
def test_windows_longer_than_the_limit_fire_the_same_windows_on_both_engines(
    engine: Engine, tmp_path: Path
) -> None:
    spout, out = FeederSpout(["msgid", "v"]), CapturingBolt()
    topology = spill_topology(spout, out, SumWindow().with_window(Count(50), Count(7)), 10)
    conf = sqlite_conf(tmp_path / "state")
    with engine.running(topology, conf, name=NAME, checkpoint="ck") as run:
        feed(spout, range(1, 121))
        run.wait_until(lambda: len(out.values()) == 17, engine.timeout)
        run.wait_until(lambda: sorted(spout.acked) == list(range(1, 121)), engine.timeout)
        custom = run.info().components["sum"].custom
        assert run.errors() == {}
    assert out.values() == count_windows(range(1, 121))
    assert (custom["window_values_in_memory"], custom["window_values_in_memory_peak"]) == (10, 10)
