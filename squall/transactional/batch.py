"""Batch bolts and batch coordination (Storm's ``IBatchBolt`` and ``CoordinatedBolt``).

A batch is the set of tuples sharing a batch id (their first value, a
``TransactionAttempt``). A batch bolt task knows it has received the whole batch when
every upstream task has reported, on the direct ``$coord`` stream, how many tuples of
the batch it sent to this task, and that many have arrived. It then calls the batch's
``finish_batch`` and reports its own counts downstream, so completion flows down the
topology batch by batch.

The batch tree stays open until the end: a non-committer holds the batch's input tuples
until ``finish_batch`` has run, anchoring what it emits there to them; a committer acks
its inputs at once and finishes under the coordinator's ``$commit`` tuple, which it holds
instead (so processing can complete before the commit is sent).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from squall.model.batch import BatchBolt, BatchOutputCollector, Committer
from squall.model.components import Bolt
from squall.model.config import Config
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.hooks import (
    CleansUpTask,
    FlagsCommitter,
    MakesBatchInstances,
    PreparesTask,
    ValidatesSubmission,
    implements,
)
from squall.model.topology import is_control_stream
from squall.model.tuple import Tuple
from squall.runtime.collectors import OutputCollector
from squall.runtime.context import TopologyContext
from squall.transactional.attempt import TransactionAttempt

BATCH_STREAM = "$batch"
COMMIT_STREAM = "$commit"
COORD_STREAM = "$coord"

#: Batch bolts and their collector live in ``squall.model.batch`` (linear DRPC
#: topologies run them too); imported from here as before.
__all__ = [
    "BATCH_STREAM",
    "COMMIT_STREAM",
    "COORD_STREAM",
    "BatchBolt",
    "BatchBoltExecutor",
    "BatchOutputCollector",
    "Committer",
    "EmitterExecutor",
]


@dataclass
class _Batch:
    instance: BatchBolt
    collector: BatchOutputCollector
    received: int = 0
    expected: int = 0
    reports: int = 0
    held: list[Tuple] = field(default_factory=list)
    commit: Tuple | None = None


def _downstream_tasks(context: TopologyContext) -> list[int]:
    tasks: set[int] = set()
    for stream, subscribers in context.get_this_targets().items():
        if is_control_stream(stream):
            continue
        for component in subscribers:
            tasks.update(context.get_component_tasks(component))
    return sorted(tasks)


def _attempt_of(tup: Tuple, component_id: str) -> TransactionAttempt:
    attempt = tup.values[0] if len(tup.values) else None
    if not isinstance(attempt, TransactionAttempt):
        raise ValueError(
            f"batch bolt {component_id!r} received a tuple from {tup.source_component!r} "
            f"stream {tup.source_stream!r} whose first value is {attempt!r}, not the "
            "batch's TransactionAttempt: emit [attempt, ...] in batch components"
        )
    return attempt


class BatchBoltExecutor(Bolt, FlagsCommitter):
    """Runs a :class:`BatchBolt` with batch coordination (see the module docstring)."""

    def __init__(self, bolt: BatchBolt, committer: bool) -> None:
        self.bolt = bolt
        self.committer = committer

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        self.bolt.declare_output_fields(declarer)
        declarer.declare_stream(COORD_STREAM, ["attempt", "count"], direct=True)

    def get_component_configuration(self) -> dict[str, Any] | None:
        return self.bolt.get_component_configuration()

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.conf = conf
        self.context = context
        self.out = collector
        upstream = {
            gid.component_id
            for gid in context.get_this_sources()
            if not is_control_stream(gid.stream_id)
        }
        self.expected_reports = sum(len(context.get_component_tasks(c)) for c in upstream)
        self.downstream = _downstream_tasks(context)
        self.in_flight = int(conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING) or 1)
        self.batches: dict[TransactionAttempt, _Batch] = {}
        if implements(self.bolt, PreparesTask):
            self.bolt.prepare_task(conf, context)

    def _batch(self, attempt: TransactionAttempt) -> _Batch:
        batch = self.batches.get(attempt)
        if batch is not None:
            return batch
        # Attempts are tracked separately (a late tuple of a failed attempt must not
        # disturb its replay); states of transactions too far behind any in flight
        # (their attempts failed or were replayed) are dropped.
        oldest = attempt.transaction_id - self.in_flight
        for stale in [a for a in self.batches if a.transaction_id < oldest]:
            del self.batches[stale]
        collector = BatchOutputCollector(self.out)
        # A bolt may make its per-batch instances itself (sharing task-level resources);
        # otherwise each batch gets a copy of the declared bolt.
        instance = (
            self.bolt.for_batch()
            if implements(self.bolt, MakesBatchInstances)
            else copy.deepcopy(self.bolt)
        )
        instance.prepare(self.conf, self.context, collector, attempt)
        batch = self.batches[attempt] = _Batch(instance, collector)
        return batch

    def execute(self, tup: Tuple) -> None:
        attempt = _attempt_of(tup, self.context.component_id)
        batch = self._batch(attempt)
        stream = tup.source_stream
        if stream == COMMIT_STREAM:
            batch.commit = tup
        elif stream == COORD_STREAM:
            batch.reports += 1
            batch.expected += tup.values[1]
            self._keep(batch, tup)
        else:
            batch.collector.anchor = tup
            batch.instance.execute(tup)
            batch.received += 1
            self._keep(batch, tup)
        self._finish_if_complete(attempt, batch, tup)

    def cleanup(self) -> None:
        if implements(self.bolt, CleansUpTask):
            self.bolt.cleanup_task()

    def _keep(self, batch: _Batch, tup: Tuple) -> None:
        if self.committer:
            self.out.ack(tup)
        else:
            batch.held.append(tup)

    def _finish_if_complete(self, attempt: TransactionAttempt, batch: _Batch, last: Tuple) -> None:
        if batch.reports < self.expected_reports or batch.received < batch.expected:
            return
        if self.committer and batch.commit is None:
            return
        anchor = batch.commit if batch.commit is not None else last
        batch.collector.anchor = anchor
        del self.batches[attempt]
        try:
            batch.instance.finish_batch()
        except Exception as exc:
            # The whole batch fails (and is replayed); nothing of it is acked.
            self.out.report_error(exc)
            for tup in batch.held:
                self.out.fail(tup)
            if batch.commit is not None:
                self.out.fail(batch.commit)
            return
        counts = batch.collector.counts
        for task in self.downstream:
            self.out.emit_direct(task, [attempt, counts.get(task, 0)], anchor, COORD_STREAM)
        for tup in batch.held:
            self.out.ack(tup)
        if batch.commit is not None:
            self.out.ack(batch.commit)


class EmitterExecutor(Bolt):
    """Runs a transactional spout's emitter: one batch per ``$batch`` tuple from the
    coordinator, then counts reported downstream on ``$coord``."""

    def __init__(self, spout: Any) -> None:
        self.spout = spout

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        self.spout.declare_output_fields(declarer)
        declarer.declare_stream(COORD_STREAM, ["attempt", "count"], direct=True)

    def get_component_configuration(self) -> dict[str, Any] | None:
        return self.spout.get_component_configuration()

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """The spout's own submit-time checks, if it has them (``ValidatesSubmission``)."""
        if implements(self.spout, ValidatesSubmission):
            self.spout.validate_submission(component_id, conf)

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.out = collector
        self.emitter = self.spout.get_emitter(conf, context)
        self.downstream = _downstream_tasks(context)

    def execute(self, tup: Tuple) -> None:
        attempt, metadata, committed = tup.values
        if committed:
            self.emitter.cleanup_before(committed)
        collector = BatchOutputCollector(self.out)
        collector.anchor = tup
        self.emitter.emit_batch(attempt, metadata, collector)
        counts = collector.counts
        for task in self.downstream:
            self.out.emit_direct(task, [attempt, counts.get(task, 0)], tup, COORD_STREAM)
        self.out.ack(tup)

    def cleanup(self) -> None:
        self.emitter.close()
