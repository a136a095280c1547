"""Trident spouts and their adapters onto the batch layer.

Three kinds, with Storm's contracts:

* :class:`BatchSpout` (Storm's ``IBatchSpout``, non-transactional): emits a batch per
  transaction id; whether a replay is identical is up to the spout
  (:class:`FixedBatchSpout` replays identically). One task.
* :class:`PartitionedTridentSpout` (transactional): per partition, a batch is decided
  once (its metadata stored) and replayed identically.
* :class:`OpaquePartitionedTridentSpout` (opaque): a replay of a transaction may emit
  different tuples, but every tuple succeeds in exactly one batch; each emit continues
  from the metadata of the latest earlier transaction.

Emitters emit through a :class:`~squall.trident.collector.Collector` without the batch
id: the adapters prepend the transaction attempt.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any

from squall.model.context import TopologyContext
from squall.model.fields import Fields, as_fields
from squall.runtime.coordination import open_store
from squall.transactional.attempt import TransactionAttempt
from squall.transactional.batch import BatchOutputCollector
from squall.transactional.partitions import (
    OpaquePartitionEmitter,
    PartitionCountCoordinator,
    TransactionalPartitionEmitter,
)
from squall.trident.collector import Collector


class SpoutCollector(Collector):
    """What a Trident spout's emitter emits through: ``emit(values)`` adds one tuple to
    the batch of the attempt given."""

    __slots__ = ("_attempt", "_out")

    def __init__(self, out: BatchOutputCollector, attempt: TransactionAttempt) -> None:
        self._out = out
        self._attempt = attempt

    def emit(self, values: Sequence[Any]) -> None:
        """Emit one tuple of the batch (the spout's output fields, in order)."""
        self._out.emit([self._attempt, *values])

    def report_error(self, error: BaseException | str) -> None:
        """Record an error in the component's metrics and the log."""
        self._out.report_error(error)


class BatchSpout(ABC):
    """Storm's ``IBatchSpout``: implement ``get_output_fields`` and ``emit_batch``."""

    @abstractmethod
    def get_output_fields(self) -> Fields:
        """The fields of the emitted tuples."""

    def open(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Called once in the emitting task (``context`` is that task's)."""

    @abstractmethod
    def emit_batch(self, batch_id: int, collector: SpoutCollector) -> None:
        """Emit the batch of transaction ``batch_id`` (called again on replays)."""

    def ack(self, batch_id: int) -> None:
        """Transaction ``batch_id`` committed."""

    def close(self) -> None:
        """Release resources."""


class FixedBatchSpout(BatchSpout):
    """Emits the given tuples in batches of ``max_batch_size``; a replayed transaction
    gets exactly its first batch again. With ``set_cycle(True)`` it starts over at the
    end, forever; otherwise later batches are empty."""

    def __init__(
        self, fields: Fields | Iterable[str], max_batch_size: int, *tuples: Sequence[Any]
    ) -> None:
        self.fields = as_fields(fields)
        self.max_batch_size = max_batch_size
        self.tuples = [list(t) for t in tuples]
        self.cycle = False

    def set_cycle(self, cycle: bool) -> None:
        """Start over when the tuples run out."""
        self.cycle = cycle

    def get_output_fields(self) -> Fields:
        return self.fields

    def open(self, conf: dict[str, Any], context: TopologyContext) -> None:
        self._index = 0
        self._batches: dict[int, list[list[Any]]] = {}

    def emit_batch(self, batch_id: int, collector: SpoutCollector) -> None:
        batch = self._batches.get(batch_id)
        if batch is None:
            batch = []
            if self._index >= len(self.tuples) and self.cycle:
                self._index = 0
            while self._index < len(self.tuples) and len(batch) < self.max_batch_size:
                batch.append(self.tuples[self._index])
                self._index += 1
            self._batches[batch_id] = batch
        for values in batch:
            collector.emit(values)

    def ack(self, batch_id: int) -> None:
        self._batches.pop(batch_id, None)


class _PartitionedSpout(ABC):
    """What the partitioned Trident spouts share."""

    @abstractmethod
    def get_output_fields(self) -> Fields:
        """The fields of the emitted tuples."""

    @abstractmethod
    def get_coordinator(self, conf: dict[str, Any], context: TopologyContext) -> Any:
        """The partition coordinator (one, in the coordinator task): an object with
        ``number_of_partitions()``, ``is_ready()`` and ``close()``."""

    @abstractmethod
    def get_emitter(self, conf: dict[str, Any], context: TopologyContext) -> Any:
        """An emitter, in each emitter task (see the subclass for its methods)."""


class PartitionedTridentSpout(_PartitionedSpout):
    """Transactional partitioned spout (Storm's ``IPartitionedTridentSpout``).

    The emitter has ``emit_partition_batch_new(attempt, collector, partition,
    last_meta) -> meta``, ``emit_partition_batch(attempt, collector, partition, meta)``
    (an identical replay) and ``close()``; ``collector`` is a
    :class:`~squall.trident.collector.Collector`.
    """


class OpaquePartitionedTridentSpout(_PartitionedSpout):
    """Opaque partitioned spout (Storm's ``IOpaquePartitionedTridentSpout``).

    The emitter has ``emit_partition_batch(attempt, collector, partition, last_meta)
    -> meta`` (``last_meta``: the metadata of the latest earlier transaction, None at
    first) and ``close()``; ``collector`` is a
    :class:`~squall.trident.collector.Collector`.
    """


AnyTridentSpout = BatchSpout | PartitionedTridentSpout | OpaquePartitionedTridentSpout


# -- Adapters: coordinators ------------------------------------------------------------


class BatchSpoutCoordinator:
    """A batch spout needs no metadata: every transaction starts right away."""

    def initialize_transaction(self, txid: int, prev_metadata: Any) -> None:
        return None

    def is_ready(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to release."""


def make_coordinator(spout: AnyTridentSpout, conf: dict[str, Any], context: TopologyContext) -> Any:
    """The transactional-layer coordinator for a Trident spout."""
    if isinstance(spout, BatchSpout):
        return BatchSpoutCoordinator()
    return PartitionCountCoordinator(spout.get_coordinator(conf, context))


# -- Adapters: emitters ----------------------------------------------------------------


class BatchSpoutEmitter:
    """Runs a :class:`BatchSpout`; acks committed batches to it."""

    def __init__(self, spout: BatchSpout, conf: dict[str, Any], context: TopologyContext) -> None:
        self._spout = spout
        spout.open(conf, context)
        self._emitted: set[int] = set()

    def emit_batch(
        self, attempt: TransactionAttempt, metadata: Any, collector: BatchOutputCollector
    ) -> None:
        txid = attempt.transaction_id
        self._emitted.add(txid)
        self._spout.emit_batch(txid, SpoutCollector(collector, attempt))

    def cleanup_before(self, txid: int) -> None:
        for done in sorted(t for t in self._emitted if t <= txid):
            self._emitted.discard(done)
            self._spout.ack(done)

    def close(self) -> None:
        self._spout.close()


class TransactionalPartitionSpoutEmitter(TransactionalPartitionEmitter):
    """A transactional partitioned Trident spout's emitter (emits without the attempt)."""

    def wrap(self, collector: BatchOutputCollector, attempt: TransactionAttempt) -> SpoutCollector:
        return SpoutCollector(collector, attempt)


class OpaquePartitionSpoutEmitter(OpaquePartitionEmitter):
    """An opaque partitioned Trident spout's emitter (emits without the attempt)."""

    def wrap(self, collector: BatchOutputCollector, attempt: TransactionAttempt) -> SpoutCollector:
        return SpoutCollector(collector, attempt)


def make_emitter(
    spout: AnyTridentSpout, stream_id: str, conf: dict[str, Any], context: TopologyContext
) -> Any:
    """The transactional-layer emitter for a Trident spout."""
    if isinstance(spout, BatchSpout):
        return BatchSpoutEmitter(spout, conf, context)
    store = open_store(conf, context)
    emitter = spout.get_emitter(conf, context)
    tasks = len(context.get_component_tasks(context.component_id))
    kind = (
        OpaquePartitionSpoutEmitter
        if isinstance(spout, OpaquePartitionedTridentSpout)
        else TransactionalPartitionSpoutEmitter
    )
    return kind(emitter, store, stream_id, context.task_index, tasks)
