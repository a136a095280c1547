"""Trees held by windows are pending: ``info.local.pending`` counts the spout trees not
yet completed, those whose tuples a window holds included, on worker threads and worker
processes alike. A held tuple emitted without a message id has no tree: it is held but
not pending (the flush readings of examples/windowing.py, which its final table shows
as held by the windows and "0 tree(s) pending")."""

from __future__ import annotations

from typing import Any

import pytest

from squall import Count, LocalCluster, TopologyBuilder, TupleWindow, WindowedBolt
from squall.testing import FeederSpout
from tests.helpers import wait_until

NAME = "held"


class Values(WindowedBolt):
    """Emits the ``v`` values of each window."""

    outputs = ["vs"]

    def execute(self, window: TupleWindow) -> None:
        self.collector.emit([[tup["v"] for tup in window.get()]])


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_trees_held_by_a_window_are_pending_until_they_leave_it(kind: str) -> None:
    """Tumbling windows of 5 tuples: 3 tracked tuples wait for the first window (3
    trees pending), stay in it when it fires with 2 untracked ones (still 3), and leave
    it when the next window fires: acked, 0 pending, 5 untracked tuples held."""
    feeder = FeederSpout(["v"])
    builder = TopologyBuilder()
    builder.set_spout("src", feeder)
    builder.set_bolt("win", Values().with_tumbling_window(Count(5))).global_grouping("src")
    with LocalCluster() as cluster:
        cluster.submit_topology(NAME, {"topology.worker.kind": kind}, builder.create_topology())

        def figures() -> tuple[int, int, int, float]:
            info = cluster.get_topology_info(NAME)
            win = info.components["win"]
            assert info.local is not None
            held = win.custom.get("window_tuples_held", 0)
            return info.local.pending, win.executed, win.custom.get("windows_fired", 0), held

        def fed(values: list[Any], tracked: bool) -> None:
            for value in values:
                feeder.feed([value], msg_id=value if tracked else None)

        fed(["a", "b", "c"], tracked=True)
        wait_until(lambda: figures()[1] == 3, timeout=30)
        assert figures() == (3, 3, 0, 3)  # fewer than 5: no window, the 3 trees pending
        fed([1, 2], tracked=False)
        wait_until(lambda: figures()[1] == 5, timeout=30)
        assert figures() == (3, 5, 1, 5)  # the window fired; its tuples are still held
        fed([3, 4, 5, 6, 7], tracked=False)
        wait_until(lambda: figures()[:3] == (0, 10, 2), timeout=30)
        assert figures() == (0, 10, 2, 5)  # held: the 5 untracked tuples, no tree
        assert (sorted(feeder.acked), list(feeder.failed)) == (["a", "b", "c"], [])
        cluster.kill_topology(NAME)
