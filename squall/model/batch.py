"""Batch bolts: Storm's ``IBatchBolt`` and the collector they emit through.

A batch bolt gets a fresh instance per batch: ``prepare`` with the batch's id,
``execute`` for each of its tuples, ``finish_batch`` once its task has received the
whole batch. Transactional topologies (``squall.transactional``, batch id: a
``TransactionAttempt``) and linear DRPC topologies (``squall.drpc``, batch id: a request
id) run them, each with its own batch coordination.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from squall.model.collectors import OutputCollector
from squall.model.components import Component
from squall.model.context import TopologyContext
from squall.model.tuple import DEFAULT_STREAM, Tuple


class BatchOutputCollector:
    """What batch bolts and emitters emit through.

    Emits are anchored to the tuple being processed (or, in ``finish_batch``, to the
    tuple that completed the batch) and counted per target task for batch coordination.
    """

    def __init__(self, out: OutputCollector) -> None:
        self._out = out
        #: The tuple emits are anchored to (set by the executor).
        self.anchor: Tuple | None = None
        #: Tuples sent to each task in this batch.
        self.counts: dict[int, int] = {}

    def emit(self, values: Sequence[Any], stream: str = DEFAULT_STREAM) -> list[int]:
        """Emit ``values`` (first value: the batch's id) on ``stream``."""
        targets = self._out.emit(values, self.anchor, stream)
        counts = self.counts
        for target in targets:
            counts[target] = counts.get(target, 0) + 1
        return targets

    def emit_direct(
        self, task_id: int, values: Sequence[Any], stream: str = DEFAULT_STREAM
    ) -> None:
        """Emit ``values`` to task ``task_id`` on a direct stream."""
        self._out.emit_direct(task_id, values, self.anchor, stream)
        self.counts[task_id] = self.counts.get(task_id, 0) + 1

    def reset_timeout(self, tup: Tuple) -> None:
        """Restart the message timeout of ``tup``'s trees (the batch's)."""
        self._out.reset_timeout(tup)

    def report_error(self, error: BaseException | str) -> None:
        """Record an error in the component's metrics and the log."""
        self._out.report_error(error)


class BatchBolt(Component):
    """Storm's ``IBatchBolt``: one instance per batch (per transaction attempt, per
    DRPC request).

    ``prepare`` runs when the batch's first tuple reaches the task, ``execute`` for each
    of its tuples, ``finish_batch`` once the task has received the whole batch. The
    instance is then dropped, with all the batch's intermediate state.
    """

    def prepare(
        self,
        conf: dict[str, Any],
        context: TopologyContext,
        collector: BatchOutputCollector,
        id: Any,
    ) -> None:
        """Called on the new instance of each batch; ``id`` is the batch's id (a
        transactional topology's ``TransactionAttempt``, a DRPC request's id)."""
        self.collector = collector
        self.id = id

    def execute(self, tup: Tuple) -> None:
        """Process one tuple of the batch. Raising fails the batch (a transactional batch
        is replayed; a DRPC request fails)."""

    def finish_batch(self) -> None:
        """The task received every tuple of the batch. For a committer, also every
        earlier transaction has committed: this is where state is updated, in strict
        transaction order. Raising fails the batch (it is replayed with a new attempt)."""


class Committer:
    """Mixin marking a :class:`BatchBolt` as a committer (``finish_batch`` in strict
    transaction order, after the batch is fully processed)."""
