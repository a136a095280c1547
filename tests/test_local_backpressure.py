"""Backpressure on LocalCluster: a fast spout cannot flood a slow bolt on another thread."""

from __future__ import annotations

import time
from typing import Any

import pytest

from squall import Bolt, Config, LocalCluster, Spout, TopologyBuilder
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
    conf = {Config.TOPOLOGY_WORKERS: 2, Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE: BUFFER}
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
