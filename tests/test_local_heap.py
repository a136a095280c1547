"""``topology.worker.gc.freeze``: a worker process freezes its start-up heap by default;
the submitting process's heap is frozen only when the key is true, from the topology's
start to its kill."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from squall import Bolt, Config, LocalCluster, Spout, TopologyBuilder
from squall.local import heap
from squall.model.errors import InvalidTopologyError
from squall.testing import SharedRecord
from tests.helpers import wait_until


class OneSpout(Spout):
    """Emits one tuple, then nothing."""

    outputs = ["n"]

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.sent = False

    def next_tuple(self) -> None:
        if not self.sent:
            self.sent = True
            self.collector.emit([1])


class FreezeReporter(Bolt):
    """Records how many objects its process holds frozen when a tuple reaches it."""

    def __init__(self) -> None:
        self.record = SharedRecord()

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        pass

    def execute(self, tup: Any) -> None:
        self.record.append("frozen", gc.get_freeze_count())
        self.record.append("threshold", gc.get_threshold()[0])


def seen_under(conf: dict[str, Any], measure: Any) -> tuple[int, int, int]:
    """Run OneSpout -> FreezeReporter under ``conf``: (what the bolt saw in its
    process, ``measure()`` in this process while the topology ran, after its kill), for
    ``measure`` the freeze count or the young-generation threshold."""
    reporter = FreezeReporter()
    builder = TopologyBuilder()
    builder.set_spout("one", OneSpout())
    builder.set_bolt("report", reporter).shuffle_grouping("one")
    key = "frozen" if measure is gc.get_freeze_count else "threshold"
    with LocalCluster() as cluster:
        cluster.submit_topology("heap", conf, builder.create_topology())
        wait_until(lambda: reporter.record.get(key), timeout=60.0)
        while_running = measure()
        cluster.kill_topology("heap")
        after = measure()
    return reporter.record.get(key)[0], while_running, after


def frozen_seen(conf: dict[str, Any]) -> tuple[int, int, int]:
    """Frozen objects: the bolt's, this process's while the topology ran, after."""
    return seen_under(conf, gc.get_freeze_count)


def young_threshold() -> int:
    return gc.get_threshold()[0]


def threshold_seen(conf: dict[str, Any]) -> tuple[int, int, int]:
    """The young-generation threshold: the bolt's, this process's while the topology
    ran, after."""
    return seen_under(conf, young_threshold)


def test_worker_threads_leave_the_heap_alone_by_default() -> None:
    before = gc.get_freeze_count()
    assert frozen_seen({}) == (before, before, before)


def test_worker_threads_freeze_the_heap_while_the_topology_runs_when_asked() -> None:
    seen, running, after = frozen_seen({Config.TOPOLOGY_WORKER_GC_FREEZE: True})
    # The modules and the topology's objects are frozen; the count is not constant,
    # as a frozen object that is freed leaves the permanent generation.
    assert seen > 1000 and running > 1000
    assert after == 0  # thawed at the kill: what the topology left is collectable


def test_a_kill_refreezes_while_another_topology_holds_the_heap() -> None:
    first, second = object(), object()
    try:
        heap.hold(first)
        heap.hold(second)
        heap.release(first)
        assert gc.get_freeze_count() > 1000
        heap.release(first)  # a second release of the same topology does nothing
        assert gc.get_freeze_count() > 1000
    finally:
        heap.release(second)
    assert gc.get_freeze_count() == 0


def test_worker_processes_freeze_their_start_up_heap_by_default() -> None:
    processes = {Config.TOPOLOGY_WORKERS: 2, Config.TOPOLOGY_WORKER_KIND: "process"}
    seen, running, _ = frozen_seen(processes)
    assert seen > 1000 and running == 0  # frozen there, not here
    off = {**processes, Config.TOPOLOGY_WORKER_GC_FREEZE: False}
    assert frozen_seen(off)[0] == 0


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_a_freeze_setting_that_is_not_a_boolean_is_refused_at_submit(kind: str) -> None:
    builder = TopologyBuilder()
    builder.set_spout("one", OneSpout())
    conf = {Config.TOPOLOGY_WORKER_GC_FREEZE: "no", Config.TOPOLOGY_WORKER_KIND: kind}
    with LocalCluster() as cluster, pytest.raises(InvalidTopologyError) as raised:
        cluster.submit_topology("heap", conf, builder.create_topology())
    assert "topology.worker.gc.freeze must be true or false (or unset), not 'no'" in str(
        raised.value
    )


def test_worker_threads_raise_the_young_threshold_while_the_topology_runs() -> None:
    before = young_threshold()  # Python's 700, unless something here raised it
    raised = max(before, heap.DEFAULT_YOUNG_THRESHOLD)
    assert threshold_seen({}) == (raised, raised, before)
    raised = max(before, 25_000)
    assert threshold_seen({Config.TOPOLOGY_WORKER_GC_THRESHOLD: 25_000}) == (
        raised,
        raised,
        before,
    )


def test_a_threshold_of_zero_leaves_pythons_setting_alone() -> None:
    before = young_threshold()
    assert threshold_seen({Config.TOPOLOGY_WORKER_GC_THRESHOLD: 0}) == (before,) * 3


def test_a_user_threshold_above_the_engines_is_never_lowered() -> None:
    before = gc.get_threshold()
    gc.set_threshold(40_000, *before[1:])
    try:
        assert threshold_seen({}) == (40_000, 40_000, 40_000)
    finally:
        gc.set_threshold(*before)


def test_the_threshold_is_the_highest_of_the_running_topologies_then_what_it_was() -> None:
    first, second = object(), object()
    before = young_threshold()
    try:
        heap.raise_threshold(first, 20_000)
        heap.raise_threshold(second, 15_000)
        assert young_threshold() == 20_000
        heap.restore_threshold(first)
        assert young_threshold() == 15_000
        heap.restore_threshold(first)  # a second restore of the same topology does nothing
        assert young_threshold() == 15_000
    finally:
        heap.restore_threshold(second)
    assert young_threshold() == before


def test_worker_processes_set_the_young_threshold_in_their_own_process() -> None:
    processes = {Config.TOPOLOGY_WORKERS: 2, Config.TOPOLOGY_WORKER_KIND: "process"}
    assert threshold_seen(processes)[0] == heap.DEFAULT_YOUNG_THRESHOLD
    custom = {**processes, Config.TOPOLOGY_WORKER_GC_THRESHOLD: 30_000}
    assert threshold_seen(custom)[0] == 30_000


@pytest.mark.parametrize("value", [-1, "many", True, 2.5])
def test_a_threshold_that_is_not_a_whole_number_from_zero_is_refused_at_submit(
    value: Any,
) -> None:
    builder = TopologyBuilder()
    builder.set_spout("one", OneSpout())
    conf = {Config.TOPOLOGY_WORKER_GC_THRESHOLD: value}
    with LocalCluster() as cluster, pytest.raises(InvalidTopologyError) as raised:
        cluster.submit_topology("heap", conf, builder.create_topology())
    assert (
        f"topology.worker.gc.threshold must be an integer >= 0 (0: Python's own), "
        f"not {value!r}" in str(raised.value)
    )
