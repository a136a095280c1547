"""Backpressure on LocalCluster: a fast spout cannot flood a slow bolt on another thread."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from squall import BasicBolt, Bolt, Config, LocalCluster, Spout, TopologyBuilder
from squall.local.backpressure import SPOUT_QUEUE_LIMIT
from squall.local.worker import SPOUT_BATCH
from squall.testing import SharedRecord
from tests.helpers import wait_until

BUFFER = 1000


class FloodSpout(Spout):
    """Emits a tuple on every call, forever (tracked or not)."""

    outputs = ["n"]

    def __init__(self, reliable: bool) -> None:
        self.reliable = reliable
        self.record = SharedRecord()

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        self.collector.emit([self.n], msg_id=self.n if self.reliable else None)
        self.n += 1


class SlowBolt(Bolt):
    def execute(self, tup: Any) -> None:
        time.sleep(0.001)
        self.collector.ack(tup)


@pytest.mark.parametrize("reliable", [False, True], ids=["unreliable", "reliable"])
def test_slow_bolt_inbox_stays_bounded(cluster: LocalCluster, reliable: bool) -> None:
    builder = TopologyBuilder()
    builder.set_spout("flood", FloodSpout(reliable))
    builder.set_bolt("slow", SlowBolt()).shuffle_grouping("flood")
    conf = {
        Config.TOPOLOGY_WORKER_KIND: "thread",
        Config.TOPOLOGY_WORKERS: 2,
        Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE: BUFFER,
    }
    cluster.submit_topology("bp", conf, builder.create_topology())
    running = cluster.get_running("bp")
    (spout_task,) = running.plan.component_tasks["flood"]
    (slow_task,) = running.plan.component_tasks["slow"]
    assert running.plan.task_worker[spout_task] != running.plan.task_worker[slow_task]
    inbox = running.inboxes[slow_task]

    wait_until(lambda: len(inbox) > BUFFER // 2)  # the spout has filled the queue
    bound = BUFFER + SPOUT_BATCH
    longest = 0
    queued = 0
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        longest = max(longest, len(inbox))
        queued = max(queued, sum(len(q) for q in running.inboxes))
        time.sleep(0.0005)
    info = cluster.get_topology_info("bp")
    cluster.kill_topology("bp", wait_secs=0)

    assert BUFFER // 2 < longest <= bound
    # Everything the spout emitted was executed, is queued, or is in the batch the bolt is
    # running (counted as executed when the batch ends; a batch is at most one full queue).
    emitted = info.components["flood"].emitted
    executed = info.components["slow"].executed
    assert 0 <= emitted - executed <= 2 * bound
    # ~1 ms per tuple: about a thousand executed in the second, not millions emitted.
    assert emitted < 20 * bound
    # The acker's queue is bounded too (each executed tuple sends it one message at most).
    assert queued <= 2 * bound + 2 * SPOUT_BATCH


# Fan-out: a bolt that emits FAN_OUT tuples per input feeds a slow bolt. Every queue must
# stay within its capacity plus one execute's emits of each task that feeds it.
FAN_OUT = 200


class CountingSpout(Spout):
    """Emits 0, 1, 2, ... untracked, forever."""

    outputs = ["n"]

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        self.collector.emit([self.n])
        self.n += 1


class FanOutBolt(BasicBolt):
    outputs = ["n", "k"]

    def execute(self, tup: Any, collector: Any) -> None:
        n = tup["n"]
        for k in range(FAN_OUT):
            collector.emit([n, k])


class BusyBolt(BasicBolt):
    """A bolt that does some work per tuple and emits nothing."""

    def execute(self, tup: Any, collector: Any) -> None:
        total = 0
        for i in range(100):
            total += i


def fan_out_topology(fan_tasks: int = 1) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("numbers", CountingSpout())
    builder.set_bolt("fan", FanOutBolt(), fan_tasks).shuffle_grouping("numbers")
    builder.set_bolt("slow", BusyBolt()).shuffle_grouping("fan")
    return builder.create_topology()


def watch_queues(running: Any, until: Any, timeout: float = 60.0) -> list[int]:
    """Poll every task's queue length until ``until()``; the longest seen per task."""
    longest = [0] * len(running.inboxes)
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        for task, inbox in enumerate(running.inboxes):
            if len(inbox) > longest[task]:
                longest[task] = len(inbox)
        time.sleep(0.0005)
    return longest


@pytest.mark.parametrize("workers", [1, 3])
def test_fan_out_into_a_slow_bolt_stays_within_the_queue_bound(
    cluster: LocalCluster, workers: int
) -> None:
    capacity = 2000
    conf = {
        Config.TOPOLOGY_WORKER_KIND: "thread",
        Config.TOPOLOGY_WORKERS: workers,
        Config.TOPOLOGY_ACKER_EXECUTORS: 0,
        Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE: capacity,
    }
    cluster.submit_topology("fan", conf, fan_out_topology())
    running = cluster.get_running("fan")
    (slow_task,) = running.plan.component_tasks["slow"]
    (fan_task,) = running.plan.component_tasks["fan"]
    slow = running.runners[slow_task].stats

    # Enough work that, unbounded, the fan-out would have queued far more than the bound.
    longest = watch_queues(running, lambda: slow.executed >= 50 * capacity)
    info = cluster.get_topology_info("fan")
    cluster.kill_topology("fan", wait_secs=0)

    # One task (fan) feeds slow: capacity plus one execute's emits.
    assert longest[slow_task] <= capacity + FAN_OUT
    assert longest[slow_task] > capacity // 2  # the fan-out did fill it
    # The spout feeds fan one tuple per next_tuple call.
    assert longest[fan_task] <= capacity + 1
    # The spout was held back: it emitted about what fan could fan out, not millions.
    # Not counted as executed yet: what fan's queue holds and the tuples of the run fan
    # may be in (counted when it ends: it stops once it sent what slow's queue had room
    # for, so it holds at most capacity // FAN_OUT + 1 of them).
    emitted = info.components["numbers"].emitted
    fanned = info.components["fan"].executed
    assert emitted - fanned <= capacity + 1 + capacity // FAN_OUT + 1


def test_several_producers_on_several_workers_share_the_room(cluster: LocalCluster) -> None:
    capacity = 3000
    conf = {
        Config.TOPOLOGY_WORKER_KIND: "thread",
        Config.TOPOLOGY_WORKERS: 4,
        Config.TOPOLOGY_ACKER_EXECUTORS: 0,
        Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE: capacity,
    }
    cluster.submit_topology("fan", conf, fan_out_topology(fan_tasks=3))
    running = cluster.get_running("fan")
    (slow_task,) = running.plan.component_tasks["slow"]
    fan_tasks = running.plan.component_tasks["fan"]
    assert len({running.plan.task_worker[t] for t in fan_tasks}) == 3
    slow = running.runners[slow_task].stats

    longest = watch_queues(running, lambda: slow.executed >= 30 * capacity)
    cluster.kill_topology("fan", wait_secs=0)

    # Each feeding task transfers at most its share of the room it saw (a third: three
    # feed it), then finishes the execute in progress. The tasks run on three threads: a
    # task may still be spending a share it was given when another looks at the queue,
    # so on a busy machine the queue can also hold the unspent shares of the other two.
    writers = len(fan_tasks)
    stale_shares = (writers - 1) * (capacity // writers)
    assert longest[slow_task] <= capacity + writers * FAN_OUT + stale_shares
    assert longest[slow_task] > capacity // 2  # the fan-out did fill it


FAN_OUT_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from squall import Config, LocalCluster
from tests.test_local_backpressure import fan_out_topology, watch_queues

conf = {{Config.TOPOLOGY_WORKERS: 3, Config.TOPOLOGY_ACKER_EXECUTORS: 0}}
conf[Config.TOPOLOGY_WORKER_KIND] = "thread"
with LocalCluster() as cluster:
    cluster.submit_topology("fan", conf, fan_out_topology())
    running = cluster.get_running("fan")
    (slow_task,) = running.plan.component_tasks["slow"]
    slow = running.runners[slow_task].stats
    longest = watch_queues(running, lambda: slow.executed >= {executions}, timeout=240)
    cluster.kill_topology("fan", wait_secs=0)
# VmHWM: this process's peak RSS (ru_maxrss would count the parent's, from before exec).
with open("/proc/self/status") as status:
    peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(longest[slow_task], peak_kb // 1024)
"""


def test_fan_out_scenario_memory_stays_bounded(tmp_path: Any) -> None:
    """The default capacity (32,768), three workers, acking off: the slow bolt's queue
    stays within 32,768 + 200 and the process within 100 MB (unbounded, the queue grew by
    millions of tuples and the process past 700 MB)."""
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parent.parent)
    script = tmp_path / "fan_out.py"
    script.write_text(FAN_OUT_SCRIPT.format(root=root, executions=1_000_000))
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    longest, rss_mb = map(int, result.stdout.split())
    assert 16_384 < longest <= 32_768 + FAN_OUT
    assert rss_mb < 100


class Countdown(BasicBolt):
    """Passes ``n - 1`` on around the cycle until it reaches 0, then emits on ``done``."""

    outputs = {"default": ["n"], "done": ["n"]}

    def execute(self, tup: Any, collector: Any) -> None:
        n = tup["n"]
        if n > 0:
            collector.emit([n - 1])
        else:
            collector.emit([n], stream="done")


class Numbers(Spout):
    """Emits ``count`` tuples of value ``start``, tracked, then nothing."""

    outputs = ["n"]

    def __init__(self, count: int, start: int) -> None:
        self.count = count
        self.start = start
        self.record = SharedRecord()

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.next_id = 0

    def next_tuple(self) -> None:
        if self.next_id < self.count:
            self.collector.emit([self.start], msg_id=self.next_id)
            self.next_id += 1

    def ack(self, msg_id: Any) -> None:
        self.record.append("acked", msg_id)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_cycle_with_full_queues_does_not_deadlock(cluster: LocalCluster, workers: int) -> None:
    """ping <-> pong, each passing a countdown to the other: their queues are full most of
    the time, and every tree still completes."""
    spout = Numbers(count=500, start=40)
    builder = TopologyBuilder()
    builder.set_spout("numbers", spout)
    builder.set_bolt("ping", Countdown(), 2).shuffle_grouping("numbers").shuffle_grouping("pong")
    builder.set_bolt("pong", Countdown(), 2).shuffle_grouping("ping")
    builder.set_bolt("sink", BusyBolt()).shuffle_grouping("ping", "done").shuffle_grouping(
        "pong", "done"
    )
    conf = {
        Config.TOPOLOGY_WORKER_KIND: "thread",
        Config.TOPOLOGY_WORKERS: workers,
        Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE: 20,
    }
    cluster.submit_topology("cycle", conf, builder.create_topology())
    wait_until(lambda: len(spout.record.get("acked")) == 500, timeout=60)
    info = cluster.get_topology_info("cycle")
    cluster.kill_topology("cycle", wait_secs=0)
    assert sorted(spout.record.get("acked")) == list(range(500))
    assert info.components["sink"].executed == 500
    assert info.components["ping"].executed + info.components["pong"].executed == 500 * 41


def test_tasks_do_not_wait_for_queues_in_their_own_cycle() -> None:
    from squall.local.backpressure import watched_targets
    from squall.runtime.plan import build_plan
    from squall.runtime.system import system_topology

    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers(count=1, start=1))
    builder.set_bolt("ping", Countdown(), 2).shuffle_grouping("numbers").shuffle_grouping("pong")
    builder.set_bolt("pong", Countdown()).shuffle_grouping("ping")
    builder.set_bolt("self", Countdown()).shuffle_grouping("pong", "done").shuffle_grouping("self")
    builder.set_bolt("sink", BusyBolt()).shuffle_grouping("self", "done")
    conf = {Config.TOPOLOGY_ACKER_EXECUTORS: 1}
    topology = system_topology(builder.create_topology(), conf)
    plan = build_plan(topology, conf)
    tasks = plan.component_tasks
    watched = watched_targets(topology, plan)

    assert watched["numbers"] == tasks["ping"]
    assert watched["ping"] == []  # pong is in ping's cycle
    assert watched["pong"] == tasks["self"]  # ping is in its cycle, self is not
    assert watched["self"] == tasks["sink"]  # a bolt subscribing to itself
    assert watched["sink"] == []
    # Nobody waits for the acker, and it waits for nobody.
    assert all(task not in watched[c] for c in watched for task in tasks["__acker"])
    assert watched["__acker"] == []


# Spouts wait for short queues: a spout is not polled while a bolt's queue holds more
# than one worker round of tuples, whatever the queues' capacity. Queues that grow to
# their capacity hold tuples for seconds: they are what made latency flip from
# sub-millisecond to seconds at the same offered rate.
BURST = 100
RELEASE = threading.Event()


class BurstSpout(Spout):
    """Emits BURST untracked tuples on every call, forever."""

    outputs = ["n"]

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        for _ in range(BURST):
            self.collector.emit([self.n])
            self.n += 1


class BlockedBolt(BasicBolt):
    """Waits in its first execute until RELEASE is set (thread workers only)."""

    def execute(self, tup: Any, collector: Any) -> None:
        RELEASE.wait(30)


def test_spouts_are_held_while_a_bolt_queue_holds_more_than_a_round(
    cluster: LocalCluster,
) -> None:
    builder = TopologyBuilder()
    builder.set_spout("burst", BurstSpout())
    builder.set_bolt("blocked", BlockedBolt()).shuffle_grouping("burst")
    conf = Config().set_num_workers(2).set_worker_kind("thread").set_num_ackers(0)
    assert conf.get(Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE) is None  # the default
    RELEASE.clear()
    cluster.submit_topology("held", conf, builder.create_topology())
    try:
        running = cluster.get_running("held")
        (spout_task,) = running.plan.component_tasks["burst"]
        (bolt_task,) = running.plan.component_tasks["blocked"]
        (spout_worker,) = [
            w for w in running.workers if any(r.task_id == spout_task for r in w.runners)
        ]
        assert not any(r.task_id == bolt_task for r in spout_worker.runners)
        inbox = running.inboxes[bolt_task]
        wait_until(lambda: len(inbox) >= SPOUT_QUEUE_LIMIT)
        # The spout's worker runs more turns (each could poll it 128 times): it is held.
        for _ in range(10):
            assert spout_worker.call(lambda: None).done.wait(5)
        assert SPOUT_QUEUE_LIMIT <= len(inbox) <= SPOUT_QUEUE_LIMIT + BURST
    finally:
        RELEASE.set()
        cluster.kill_topology("held", wait_secs=0)
