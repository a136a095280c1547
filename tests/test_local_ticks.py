"""Tick tuples on LocalCluster, driven by a manual clock: exact tick counts and times.

That tick tuples reach the bolts configured for them, on both engines, is tested in
``tests/test_core_windowing.py`` (with :class:`TickRecorder`)."""

from __future__ import annotations

from typing import Any

from squall import (
    Bolt,
    Config,
    Fields,
    LocalCluster,
    ManualClock,
    TopologyBuilder,
    is_tick_tuple,
)
from squall.testing import FeederSpout, SharedRecord
from tests.helpers import settle, wait_until


class TickRecorder(Bolt):
    """Records every tuple it gets as ``(task, is_tick, component, stream, source_task,
    values, fields)``; acks everything."""

    def __init__(self, component_conf: dict[str, Any] | None = None) -> None:
        self.component_conf = component_conf
        self.record = SharedRecord()

    def get_component_configuration(self) -> dict[str, Any] | None:
        return self.component_conf

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.task = context.task_id

    def execute(self, tup: Any) -> None:
        self.record.append(
            "tuples",
            (
                self.task,
                is_tick_tuple(tup),
                tup.source_component,
                tup.source_stream,
                tup.source_task,
                list(tup.values),
                tup.fields,
            ),
        )
        self.collector.ack(tup)

    def ticks(self) -> list[Any]:
        return [t for t in self.record.get("tuples") if t[1]]

    def tick_count(self) -> int:
        return len(self.ticks())


def build(
    bolts: dict[str, tuple[TickRecorder, int, dict[str, Any]]],
) -> tuple[Any, FeederSpout]:
    spout = FeederSpout(["v"])
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    for name, (bolt, parallelism, extra_conf) in bolts.items():
        declarer = builder.set_bolt(name, bolt, parallelism).shuffle_grouping("src")
        for key, value in extra_conf.items():
            declarer.add_configuration(key, value)
    return builder.create_topology(), spout


def test_topology_level_ticks_reach_every_bolt_task(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    a, b = TickRecorder(), TickRecorder()
    topology, _ = build({"a": (a, 2, {}), "b": (b, 1, {})})
    manual_cluster.submit_topology("ticks", {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 5}, topology)
    settle(manual_cluster, "ticks")
    tasks = manual_cluster.get_running("ticks").plan.component_tasks

    clock.advance_secs(4)
    settle(manual_cluster, "ticks")
    assert a.tick_count() == b.tick_count() == 0

    for expected in (1, 2, 3):
        clock.advance_secs(5 if expected > 1 else 1)
        wait_until(lambda e=expected: a.tick_count() == 2 * e and b.tick_count() == e)
    settle(manual_cluster, "ticks")
    assert sorted(t[0] for t in a.ticks()) == sorted(tasks["a"] * 3)
    assert [t[0] for t in b.ticks()] == tasks["b"] * 3
    for tick in a.ticks() + b.ticks():
        _, is_tick, component, stream, source_task, values, fields = tick
        assert (is_tick, component, stream) == (True, "__system", "__tick")
        assert source_task == -1
        assert values == [5]
        assert fields == Fields("rate_secs")
    info = manual_cluster.get_topology_info("ticks")
    assert info.components["a"].executed == 6
    assert info.components["b"].executed == 3


def test_component_level_ticks_only_for_that_bolt(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    by_method = TickRecorder({Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 2})
    by_declarer = TickRecorder()
    plain = TickRecorder()
    topology, spout = build(
        {
            "by_method": (by_method, 1, {}),
            "by_declarer": (by_declarer, 1, {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 3}),
            "plain": (plain, 2, {}),
        }
    )
    manual_cluster.submit_topology("ticks", {}, topology)
    settle(manual_cluster, "ticks")

    # Advance 1 s at a time for 12 s: every 2 s for one bolt, every 3 s for the other.
    for second in range(1, 13):
        clock.advance_secs(1)
        wait_until(
            lambda s=second: by_method.tick_count() == s // 2 and by_declarer.tick_count() == s // 3
        )
    settle(manual_cluster, "ticks")
    assert by_method.tick_count() == 6
    assert by_declarer.tick_count() == 4
    assert plain.tick_count() == 0
    assert {tuple(t[5]) for t in by_method.ticks()} == {(2,)}
    assert {tuple(t[5]) for t in by_declarer.ticks()} == {(3,)}

    # Ordinary tuples keep flowing alongside ticks.
    spout.feed(["x"])
    spout.feed(["y"])
    spout.feed(["z"])
    wait_until(lambda: len(plain.record.get("tuples")) == 3)
    assert all(not t[1] for t in plain.record.get("tuples"))
    assert sorted(t[5] for t in plain.record.get("tuples")) == [["x"], ["y"], ["z"]]


def test_component_level_frequency_overrides_topology_level(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    fast = TickRecorder()
    default = TickRecorder()
    topology, _ = build(
        {
            "fast": (fast, 1, {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 1}),
            "default": (default, 1, {}),
        }
    )
    manual_cluster.submit_topology("ticks", {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 4}, topology)
    settle(manual_cluster, "ticks")
    for second in range(1, 9):
        clock.advance_secs(1)
        wait_until(lambda s=second: fast.tick_count() == s and default.tick_count() == s // 4)
    settle(manual_cluster, "ticks")
    assert (fast.tick_count(), default.tick_count()) == (8, 2)
    assert {tuple(t[5]) for t in default.ticks()} == {(4,)}


def test_no_ticks_without_configuration(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    bolt = TickRecorder()
    topology, spout = build({"bolt": (bolt, 2, {})})
    manual_cluster.submit_topology("ticks", {}, topology)
    settle(manual_cluster, "ticks")
    for _ in range(5):
        clock.advance_secs(20)  # also past the acker's own period (the message timeout)
        settle(manual_cluster, "ticks")
    assert bolt.record.get("tuples") == []
    spout.feed(["only"])
    wait_until(lambda: len(bolt.record.get("tuples")) == 1)
    (src_task,) = manual_cluster.get_running("ticks").plan.component_tasks["src"]
    assert bolt.record.get("tuples")[0][1:6] == (False, "src", "default", src_task, ["only"])


def test_first_tick_is_due_one_period_after_submit(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    # No waiting between submit and the clock moving: the tick schedule must count from
    # the submit (the tasks are prepared when submit_topology returns), not from whenever
    # the worker thread gets to run.
    bolt = TickRecorder()
    topology, _ = build({"bolt": (bolt, 1, {})})
    manual_cluster.submit_topology("ticks", {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 5}, topology)
    clock.advance_secs(5)
    wait_until(lambda: bolt.tick_count() == 1, timeout=2.0)
    clock.advance_secs(5)
    wait_until(lambda: bolt.tick_count() == 2, timeout=2.0)
