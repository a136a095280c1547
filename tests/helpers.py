"""Helpers for squall's own tests."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from squall import Bolt, LocalCluster
from squall.testing import SharedRecord


def wait_until(
    condition: Callable[[], bool], timeout: float = 5.0, interval: float = 0.002
) -> None:
    """Poll ``condition`` until true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


def settle(cluster: LocalCluster, name: str, rounds: int = 5, timeout: float = 5.0) -> None:
    """Wait until every worker of ``name`` has run at least ``rounds`` more whole loop turns.

    A command given to ``Worker.call`` runs at the start of the worker's next turn, so
    ``rounds + 1`` commands waited for one after another span ``rounds`` whole turns.
    """
    workers = cluster.get_running(name).workers
    for _ in range(rounds + 1):
        commands = [(worker, worker.call(lambda: None)) for worker in workers]
        for worker, command in commands:
            if not command.done.wait(timeout):
                raise AssertionError(f"worker {worker.name} ran no loop turn within {timeout} s")


class HoldingBolt(Bolt):
    """Holds data tuples; a tuple from component ``control`` with values
    ``[command, count]`` calls ``collector.<command>`` on the ``count`` oldest held ones
    (``count`` 0: all). ``ack`` and ``fail`` release them, ``reset_timeout`` keeps them.
    The control tuple itself is acked."""

    def __init__(self) -> None:
        self.record = SharedRecord()

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: list[Any] = []

    def execute(self, tup: Any) -> None:
        if tup.source_component != "control":
            self.held.append(tup)
            self.record.append("held", list(tup.values))
            return
        command, count = tup.values
        chosen = self.held[: count or len(self.held)]
        if command != "reset_timeout":
            del self.held[: len(chosen)]
        for held in chosen:
            getattr(self.collector, command)(held)
        self.record.append("done", (command, len(chosen)))
        self.collector.ack(tup)


def table_row(output: str, component: str) -> dict[str, str]:
    """The cells of ``component``'s row in the last table of ``output`` with a row per
    component (not in the table of the components' own metrics that may follow a
    metrics table)."""
    header: list[str] = []
    row: list[str] = []
    in_metrics = False
    for line in output.splitlines():
        cells = [cell.strip() for cell in re.split(r"[│┃]", line)[1:-1]]
        if cells and cells[0] == "component":
            in_metrics = cells[1:2] != ["metric"]
            if in_metrics:
                header = cells
        elif in_metrics and cells and cells[0] == component:
            row = cells
    assert header and row, f"no row for {component!r} in:\n{output}"
    return {name: value.replace(",", "") for name, value in zip(header, row, strict=True)}


@contextmanager
def closing_all(sockets: list[socket.socket]) -> Iterator[list[socket.socket]]:
    """``sockets``, each closed when the block ends (the connections a test opened)."""
    try:
        yield sockets
    finally:
        for sock in sockets:
            sock.close()
