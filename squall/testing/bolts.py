"""A bolt for tests that records every tuple it receives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from squall.model.components import Bolt
from squall.model.tuple import Tuple
from squall.runtime.collectors import OutputCollector
from squall.runtime.context import TopologyContext
from squall.testing.shared import SharedRecord


@dataclass(frozen=True)
class Received:
    """One tuple a :class:`CapturingBolt` task received."""

    task_id: int
    source_component: str
    source_stream: str
    source_task: int
    values: list[Any]


class CapturingBolt(Bolt):
    """Records every tuple it receives (on any of its tasks) and acks it.

    Tick tuples are recorded too (source component ``"__system"``). Read the records with
    ``received`` (everything, in arrival order per task), ``values()`` or ``by_task()``.

    Args:
        fail_first: fail (instead of ack) the first ``fail_first`` tuples each task gets.
    """

    def __init__(self, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.record = SharedRecord()

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector
        self.task_id = context.task_id
        self._seen = 0

    def execute(self, tup: Tuple) -> None:
        self.record.append(
            "received",
            Received(
                self.task_id,
                tup.source_component,
                tup.source_stream,
                tup.source_task,
                list(tup.values),
            ),
        )
        self._seen += 1
        if self._seen <= self.fail_first:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)

    @property
    def received(self) -> list[Received]:
        """Every tuple received, over all tasks."""
        return self.record.get("received")

    def values(self, stream: str | None = None) -> list[list[Any]]:
        """The values of every tuple received (on ``stream`` only, if given)."""
        return [r.values for r in self.received if stream is None or r.source_stream == stream]

    def by_task(self) -> dict[int, list[list[Any]]]:
        """Received values per receiving task id."""
        result: dict[int, list[list[Any]]] = {}
        for item in self.received:
            result.setdefault(item.task_id, []).append(item.values)
        return result
