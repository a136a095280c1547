"""Message timeouts on LocalCluster, driven by a manual clock."""

from __future__ import annotations

from typing import Any

import pytest

from squall import Config, LocalCluster, ManualClock, TopologyBuilder
from squall.testing import FeederSpout
from tests.helpers import HoldingBolt, settle, wait_until

T0 = 1_000_000.0  # the clock fixture's start


def submit(
    cluster: LocalCluster, conf: dict[str, Any]
) -> tuple[FeederSpout, FeederSpout, HoldingBolt]:
    spout = FeederSpout(["v"])
    control = FeederSpout(["command", "count"])
    sink = HoldingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_spout("control", control)
    builder.set_bolt("sink", sink).shuffle_grouping("src").all_grouping("control")
    cluster.submit_topology("timeouts", conf, builder.create_topology())
    settle(cluster, "timeouts")  # the workers run: the clock can move from here on
    return spout, control, sink


def command(control: FeederSpout, sink: HoldingBolt, name: str, count: int = 0) -> None:
    done = len(sink.record.get("done"))
    control.feed([name, count])
    wait_until(lambda: len(sink.record.get("done")) == done + 1)


def spout_pending(cluster: LocalCluster) -> dict[Any, float]:
    """msg id -> the time its timeout counts from, for the ``src`` task."""
    running = cluster.get_running("timeouts")
    (task,) = running.plan.component_tasks["src"]
    return {msg_id: start for msg_id, start in running.runners[task].collector.pending.values()}


def test_unacked_tuple_fails_once_after_the_timeout(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    spout, _, sink = submit(manual_cluster, {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10})
    spout.feed(["a"], msg_id="a")
    spout.feed(["b"], msg_id="b")
    wait_until(lambda: len(sink.record.get("held")) == 2)
    assert spout_pending(manual_cluster) == {"a": T0, "b": T0}

    clock.advance_secs(9)
    settle(manual_cluster, "timeouts")
    assert spout.failed == []
    assert manual_cluster.get_topology_info("timeouts").components["src"].timed_out == 0

    clock.advance_secs(2)
    wait_until(lambda: len(spout.failed) == 2)
    assert sorted(spout.failed) == ["a", "b"]
    src = manual_cluster.get_topology_info("timeouts").components["src"]
    assert (src.timed_out, src.failed, src.acked) == (2, 2, 0)

    # Much later: still failed exactly once each.
    for _ in range(3):
        clock.advance_secs(15)
        settle(manual_cluster, "timeouts")
    assert sorted(spout.failed) == ["a", "b"]
    assert spout.acked == []
    assert spout_pending(manual_cluster) == {}
    src = manual_cluster.get_topology_info("timeouts").components["src"]
    assert (src.timed_out, src.failed) == (2, 2)


def test_late_ack_after_the_timeout_is_ignored(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    spout, control, sink = submit(manual_cluster, {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 5})
    spout.feed(["late"], msg_id="late")
    wait_until(lambda: len(sink.record.get("held")) == 1)
    clock.advance_secs(6)
    wait_until(lambda: spout.failed == ["late"])

    command(control, sink, "ack")
    assert manual_cluster.wait_idle("timeouts", 5.0)
    settle(manual_cluster, "timeouts")
    assert spout.acked == []
    assert spout.failed == ["late"]
    src = manual_cluster.get_topology_info("timeouts").components["src"]
    assert (src.acked, src.failed, src.timed_out) == (0, 1, 1)

    # A fresh tuple acked in time is acked normally.
    spout.feed(["fresh"], msg_id="fresh")
    wait_until(lambda: len(sink.record.get("held")) == 2)
    command(control, sink, "ack")
    wait_until(lambda: spout.acked == ["fresh"])
    assert spout.failed == ["late"]


def test_reset_timeout_keeps_the_tuple_alive(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    spout, control, sink = submit(manual_cluster, {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10})
    spout.feed(["slow"], msg_id="slow")
    spout.feed(["other"], msg_id="other")
    wait_until(lambda: len(sink.record.get("held")) == 2)

    clock.advance_secs(8)
    command(control, sink, "reset_timeout", 1)  # only "slow", the oldest
    wait_until(lambda: spout_pending(manual_cluster)["slow"] == T0 + 8_000)
    assert spout_pending(manual_cluster)["other"] == T0

    clock.advance_secs(5)  # 13 s after the emit: past the original deadline
    wait_until(lambda: spout.failed == ["other"])
    settle(manual_cluster, "timeouts")
    assert spout.failed == ["other"]
    assert list(spout_pending(manual_cluster)) == ["slow"]

    clock.advance_secs(4)  # 9 s after the reset
    settle(manual_cluster, "timeouts")
    assert spout.failed == ["other"]
    command(control, sink, "ack")
    wait_until(lambda: spout.acked == ["slow"])
    assert spout.failed == ["other"]
    src = manual_cluster.get_topology_info("timeouts").components["src"]
    assert (src.acked, src.failed, src.timed_out) == (1, 1, 1)


def test_reset_timeout_then_expiry_from_the_new_deadline(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    spout, control, sink = submit(manual_cluster, {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10})
    spout.feed(["x"], msg_id="x")
    wait_until(lambda: len(sink.record.get("held")) == 1)
    clock.advance_secs(6)
    command(control, sink, "reset_timeout")
    wait_until(lambda: spout_pending(manual_cluster)["x"] == T0 + 6_000)
    clock.advance_secs(9)  # 15 s after the emit, 9 after the reset
    settle(manual_cluster, "timeouts")
    assert spout.failed == []
    clock.advance_secs(2)  # 11 s after the reset
    wait_until(lambda: spout.failed == ["x"])
    settle(manual_cluster, "timeouts")
    assert spout.failed == ["x"]
    assert spout.acked == []


@pytest.mark.parametrize("timeout_secs", [5, 30])
def test_no_fail_when_message_timeouts_are_disabled(
    manual_cluster: LocalCluster, clock: ManualClock, timeout_secs: int
) -> None:
    conf = {
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: timeout_secs,
        Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: False,
    }
    spout, control, sink = submit(manual_cluster, conf)
    spout.feed(["a"], msg_id="a")
    wait_until(lambda: len(sink.record.get("held")) == 1)
    for _ in range(4):
        clock.advance_secs(timeout_secs * 3)
        settle(manual_cluster, "timeouts")
    assert spout.failed == []
    assert manual_cluster.get_topology_info("timeouts").components["src"].timed_out == 0
    # The tree is still tracked: acking it now completes it.
    command(control, sink, "ack")
    wait_until(lambda: spout.acked == ["a"])
    assert spout.failed == []
