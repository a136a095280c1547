"""Component lifecycle on LocalCluster: open/prepare, activate/deactivate, kill."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from squall import (
    Bolt,
    Config,
    LocalCluster,
    ManualClock,
    Spout,
    SquallError,
    TopologyBuilder,
    is_tick_tuple,
)
from squall.runtime.rolling import HISTORY_THREAD
from squall.testing import CapturingBolt, FeederSpout, SharedRecord
from tests.helpers import settle, wait_until


def engine_threads() -> list[str]:
    """The threads of running topologies (not the cluster's own metrics history)."""
    return [
        t.name
        for t in threading.enumerate()
        if t.name.startswith("squall-") and t.name != HISTORY_THREAD
    ]


class LifecycleSpout(Spout):
    """Records its lifecycle calls as ``(task, event, thread)``; emits ``count`` tuples
    per task; counts ``next_tuple`` calls."""

    outputs = ["n"]

    def __init__(self, record: SharedRecord, count: int = 5) -> None:
        self.record = record
        self.count = count

    def _log(self, event: str) -> None:
        self.record.append("events", (self.task, event, threading.current_thread().name))

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.task = context.task_id
        self.emitted = 0
        self.record.append("instances", (self.task, id(self)))
        self._log("open")

    def activate(self) -> None:
        self._log("activate")

    def deactivate(self) -> None:
        self._log("deactivate")

    def next_tuple(self) -> None:
        self.record.append("next_tuple", self.task)
        if self.emitted < self.count:
            self._log("emit")
            self.collector.emit([self.emitted], msg_id=self.emitted)
            self.emitted += 1

    def ack(self, msg_id: Any) -> None:
        self._log("ack")

    def fail(self, msg_id: Any) -> None:
        self._log("fail")

    def close(self) -> None:
        self._log("close")


class LifecycleBolt(Bolt):
    def __init__(self, record: SharedRecord, delay: float = 0.0) -> None:
        self.record = record
        self.delay = delay

    def _log(self, event: str) -> None:
        self.record.append("events", (self.task, event, threading.current_thread().name))

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.task = context.task_id
        self.record.append("instances", (self.task, id(self)))
        self._log("prepare")

    def execute(self, tup: Any) -> None:
        if self.delay:
            time.sleep(self.delay)
        self._log("execute")
        self.collector.ack(tup)

    def cleanup(self) -> None:
        self._log("cleanup")


def lifecycle_topology(record: SharedRecord, delay: float = 0.0) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("src", LifecycleSpout(record), 2)
    builder.set_bolt("work", LifecycleBolt(record, delay), 3).shuffle_grouping("src")
    return builder.create_topology()


@pytest.mark.parametrize("workers", [1, 2])
def test_lifecycle_order_per_task(cluster: LocalCluster, workers: int) -> None:
    record = SharedRecord()
    cluster.submit_topology(
        "life",
        {Config.TOPOLOGY_WORKER_KIND: "thread", Config.TOPOLOGY_WORKERS: workers},
        lifecycle_topology(record),
    )
    running = cluster.get_running("life")
    spout_tasks = running.plan.component_tasks["src"]
    bolt_tasks = running.plan.component_tasks["work"]
    wait_until(lambda: sum(e[1] == "ack" for e in record.get("events")) == 10)
    cluster.kill_topology("life")
    assert engine_threads() == []
    assert cluster.topology_names() == []

    events = record.get("events")
    starts = [i for i, e in enumerate(events) if e[1] in ("open", "prepare")]
    # Every task is opened/prepared, once, before any task does anything else.
    assert starts == list(range(len(spout_tasks) + len(bolt_tasks)))
    thread_of = {
        task: f"squall-life-worker-{running.plan.task_worker[task]}"
        for task in spout_tasks + bolt_tasks
    }
    for task, _, thread in events:
        assert thread == thread_of[task]

    for task in spout_tasks:
        mine = [e[1] for e in events if e[0] == task]
        assert mine[:2] == ["open", "activate"]
        assert mine[-2:] == ["deactivate", "close"]
        middle = mine[2:-2]
        assert sorted(set(middle)) == ["ack", "emit"]
        assert middle.count("emit") == middle.count("ack") == 5
        assert mine.count("open") == mine.count("close") == 1
        assert mine.count("activate") == mine.count("deactivate") == 1
    for task in bolt_tasks:
        mine = [e[1] for e in events if e[0] == task]
        assert mine[0] == "prepare"
        assert mine[-1] == "cleanup"
        assert set(mine[1:-1]) <= {"execute"}
        assert mine.count("cleanup") == 1
    assert sum(e[1] == "execute" for e in events) == 10

    # Each task has its own instance of its component.
    instances = dict(record.get("instances"))
    assert sorted(instances) == sorted(spout_tasks + bolt_tasks)
    assert len(set(instances.values())) == len(instances)


def test_deactivate_stops_next_tuple_until_activate(cluster: LocalCluster) -> None:
    record = SharedRecord()
    cluster.submit_topology("toggle", {}, lifecycle_topology(record))
    wait_until(lambda: len(record.get("next_tuple")) > 50)

    cluster.deactivate("toggle")
    assert cluster.get_topology_info("toggle").status == "INACTIVE"
    calls = len(record.get("next_tuple"))
    settle(cluster, "toggle", rounds=30)
    time.sleep(0.05)
    assert len(record.get("next_tuple")) == calls

    cluster.activate("toggle")
    assert cluster.get_topology_info("toggle").status == "ACTIVE"
    wait_until(lambda: len(record.get("next_tuple")) > calls + 50)

    events = [e[1] for e in record.get("events")]
    assert events.count("deactivate") == 2  # once per spout task
    assert events.count("activate") == 4  # at start and again, per spout task
    # Deactivating an inactive topology does not call the hook again.
    cluster.deactivate("toggle")
    cluster.deactivate("toggle")
    assert [e[1] for e in record.get("events")].count("deactivate") == 4
    cluster.kill_topology("toggle")
    events = [e[1] for e in record.get("events")]
    assert events.count("deactivate") == 4
    assert events.count("close") == 2


def test_acks_reach_a_deactivated_spout(manual_cluster: LocalCluster, clock: ManualClock) -> None:
    class AckOnTick(Bolt):
        """Holds tuples; acks all of them when a tick tuple arrives."""

        def __init__(self) -> None:
            self.record = SharedRecord()

        def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
            self.collector = collector
            self.held: list[Any] = []

        def execute(self, tup: Any) -> None:
            if is_tick_tuple(tup):
                for held in self.held:
                    self.collector.ack(held)
                self.held = []
                self.record.append("ticks", 1)
                return
            self.held.append(tup)
            self.record.append("held", tup["v"])

    spout, bolt = FeederSpout(["v"]), AckOnTick()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    (
        builder.set_bolt("hold", bolt)
        .shuffle_grouping("src")
        .add_configuration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1)
    )
    manual_cluster.submit_topology("inactive-acks", {}, builder.create_topology())
    settle(manual_cluster, "inactive-acks")
    spout.feed(["a"], msg_id="a")
    spout.feed(["b"], msg_id="b")
    wait_until(lambda: len(bolt.record.get("held")) == 2)

    manual_cluster.deactivate("inactive-acks")
    spout.feed(["c"], msg_id="c")  # not emitted while inactive
    clock.advance_secs(1)
    wait_until(lambda: sorted(spout.acked) == ["a", "b"])
    settle(manual_cluster, "inactive-acks")
    assert bolt.record.get("held") == ["a", "b"]

    manual_cluster.activate("inactive-acks")
    wait_until(lambda: bolt.record.get("held") == ["a", "b", "c"])
    clock.advance_secs(1)
    wait_until(lambda: sorted(spout.acked) == ["a", "b", "c"])


class Gate:
    """A threading.Event shared (not copied) by every task copy holding it."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def __deepcopy__(self, memo: dict[int, Any]) -> Gate:
        return self


class GatedBolt(LifecycleBolt):
    """Blocks in its first ``execute`` until the gate opens."""

    def __init__(self, record: SharedRecord, gate: Gate) -> None:
        super().__init__(record)
        self.gate = gate

    def execute(self, tup: Any) -> None:
        if not self.gate.event.is_set():
            self.record.append("blocked", tup["n"])
            assert self.gate.event.wait(10.0)
        super().execute(tup)


def test_kill_drains_in_flight_tuples(cluster: LocalCluster) -> None:
    record, gate = SharedRecord(), Gate()
    spout = FeederSpout(["n"])
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("slow", GatedBolt(record, gate)).shuffle_grouping("src")
    # Fed before the start: the spout's first batch emits all 60.
    spout.feed_many([[n] for n in range(60)], msg_ids=range(60))
    cluster.submit_topology("drain", {}, builder.create_topology())
    wait_until(lambda: record.get("blocked") == [0])
    running = cluster.get_running("drain")
    (slow_task,) = running.plan.component_tasks["slow"]
    assert spout.record.queued() == 0
    assert len(running.inboxes[slow_task]) == 59  # in flight when the kill starts

    opener = threading.Timer(0.05, gate.event.set)
    opener.start()
    try:
        cluster.kill_topology("drain", wait_secs=10)
    finally:
        opener.join()
    events = [e[1] for e in record.get("events")]
    assert events.count("execute") == 60
    assert events[-1] == "cleanup"
    assert sorted(spout.acked) == list(range(60))
    assert spout.failed == []
    assert engine_threads() == []


def test_cluster_errors_for_names(cluster: LocalCluster) -> None:
    record = SharedRecord()
    topology = lifecycle_topology(record)
    cluster.submit_topology("dup", {}, topology)
    with pytest.raises(SquallError, match="already running"):
        cluster.submit_topology("dup", {}, topology)
    assert cluster.topology_names() == ["dup"]
    for call in (
        cluster.kill_topology,
        cluster.activate,
        cluster.deactivate,
        cluster.get_topology_info,
    ):
        with pytest.raises(SquallError, match="no topology named 'nope'"):
            call("nope")
    cluster.kill_topology("dup", wait_secs=0)
    with pytest.raises(SquallError):
        cluster.kill_topology("dup")
    assert cluster.topology_names() == []
    # A killed name can be submitted again.
    cluster.submit_topology("dup", {}, topology)
    assert cluster.topology_names() == ["dup"]


def test_workers_run_on_named_threads(cluster: LocalCluster) -> None:
    spout = FeederSpout(["n"])
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("sink", sink, 4).shuffle_grouping("src")
    cluster.submit_topology(
        "three",
        {Config.TOPOLOGY_WORKER_KIND: "thread", Config.TOPOLOGY_WORKERS: 3},
        builder.create_topology(),
    )
    running = cluster.get_running("three")
    expected = [f"squall-three-worker-{i}" for i in range(3)]
    assert [t.name for t in running.threads()] == expected
    assert sorted(engine_threads()) == expected
    assert all(t.is_alive() for t in running.threads())
    assert cluster.get_topology_info("three").workers == 3
    assert sorted(set(running.plan.task_worker.values())) == [0, 1, 2]

    spout.feed_many([[n] for n in range(8)])
    wait_until(lambda: len(sink.received) == 8)
    cluster.kill_topology("three")
    assert engine_threads() == []
    assert not any(t.is_alive() for t in running.threads())


def test_shutdown_kills_every_topology() -> None:
    record = SharedRecord()
    with LocalCluster() as local:
        local.submit_topology("one", {}, lifecycle_topology(record))
        local.submit_topology(
            "two",
            {Config.TOPOLOGY_WORKER_KIND: "thread", Config.TOPOLOGY_WORKERS: 2},
            lifecycle_topology(record),
        )
        assert local.topology_names() == ["one", "two"]
        assert len(engine_threads()) == 3
    assert engine_threads() == []
    events = [e[1] for e in record.get("events")]
    assert events.count("close") == 4
    assert events.count("cleanup") == 6
