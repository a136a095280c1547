"""What a worker process of the local engine knows about its place in the topology."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from squall.local.board import Board
from squall.local.exchange import Exchange, StreamTable
from squall.local.transport import Links
from squall.model.topology import StormTopology
from squall.runtime.plan import TaskPlan


@dataclass
class ProcessScope:
    """Worker ``index`` of a topology whose workers are processes: it runs that
    worker's tasks only, and reaches the others through ``links``, with the shared
    counters of ``board``.

    Attributes:
        index: the worker this process runs.
        board: the shared counters.
        links: this worker's connections (its listening socket is open).
    """

    index: int
    board: Board
    links: Links

    def exchange(self, topology: StormTopology, plan: TaskPlan, inboxes: Sequence[Any]) -> Exchange:
        """The exchange of this worker; replaces the queues of other workers' tasks in
        ``inboxes`` (a list) with remote inboxes."""
        assert isinstance(inboxes, list)
        return Exchange(self.index, plan, StreamTable(topology), self.board, self.links, inboxes)


__all__ = ["ProcessScope"]
