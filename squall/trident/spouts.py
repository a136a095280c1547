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

Emitters emit through a :class:`~squall.trident.operations.TridentCollector`-like
collector without the batch id: the adapters prepend the transaction attempt.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from squall.model.fields import Fields, as_fields
from squall.transactional.attempt import TransactionAttempt
from squall.transactional.batch import BatchOutputCollector
from squall.transactional.store import CoordinationStore, open_store, txid_key


class SpoutCollector:
    """What a Trident spout's emitter emits through: ``emit(values)``."""

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


class BatchSpout:
    """Storm's ``IBatchSpout``: implement ``get_output_fields`` and ``emit_batch``."""

    def get_output_fields(self) -> Fields:
        """The fields of the emitted tuples."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_output_fields")

    def open(self, conf: dict[str, Any], context: Any) -> None:
        """Called once in the emitting task."""

    def emit_batch(self, batch_id: int, collector: SpoutCollector) -> None:
        """Emit the batch of transaction ``batch_id`` (called again on replays)."""
        raise NotImplementedError(f"{type(self).__name__} must implement emit_batch")

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

    def open(self, conf: dict[str, Any], context: Any) -> None:
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


class PartitionedTridentSpout:
    """Transactional partitioned spout (Storm's ``IPartitionedTridentSpout``).

    ``get_coordinator(conf, context)`` returns an object with ``number_of_partitions()``,
    ``is_ready()``, ``close()``; ``get_emitter(conf, context)`` one with
    ``emit_partition_batch_new(attempt, collector, partition, last_meta) -> meta``,
    ``emit_partition_batch(attempt, collector, partition, meta)`` (an identical replay)
    and ``close()``.
    """

    def get_output_fields(self) -> Fields:
        """The fields of the emitted tuples."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_output_fields")

    def get_coordinator(self, conf: dict[str, Any], context: Any) -> Any:
        """The partition coordinator (one, in the coordinator task)."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_coordinator")

    def get_emitter(self, conf: dict[str, Any], context: Any) -> Any:
        """An emitter, in each emitter task."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_emitter")


class OpaquePartitionedTridentSpout:
    """Opaque partitioned spout (Storm's ``IOpaquePartitionedTridentSpout``).

    ``get_coordinator`` as for :class:`PartitionedTridentSpout`; ``get_emitter`` returns
    an object with ``emit_partition_batch(attempt, collector, partition, last_meta) ->
    meta`` (``last_meta``: the metadata of the latest earlier transaction, None at
    first) and ``close()``.
    """

    def get_output_fields(self) -> Fields:
        """The fields of the emitted tuples."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_output_fields")

    def get_coordinator(self, conf: dict[str, Any], context: Any) -> Any:
        """The partition coordinator (one, in the coordinator task)."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_coordinator")

    def get_emitter(self, conf: dict[str, Any], context: Any) -> Any:
        """An emitter, in each emitter task."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_emitter")


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


class PartitionCountCoordinator:
    """Metadata of a partitioned spout's transaction: the number of partitions."""

    def __init__(self, coordinator: Any) -> None:
        self._coordinator = coordinator

    def initialize_transaction(self, txid: int, prev_metadata: Any) -> int:
        return int(self._coordinator.number_of_partitions())

    def is_ready(self) -> bool:
        return bool(self._coordinator.is_ready())

    def close(self) -> None:
        self._coordinator.close()


def make_coordinator(spout: AnyTridentSpout, conf: dict[str, Any], context: Any) -> Any:
    """The transactional-layer coordinator for a Trident spout."""
    if isinstance(spout, BatchSpout):
        return BatchSpoutCoordinator()
    return PartitionCountCoordinator(spout.get_coordinator(conf, context))


# -- Adapters: emitters ----------------------------------------------------------------


class BatchSpoutEmitter:
    """Runs a :class:`BatchSpout`; acks committed batches to it."""

    def __init__(self, spout: BatchSpout, conf: dict[str, Any], context: Any) -> None:
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


class _PartitionEmitterBase:
    """Per partition metadata per transaction, in the coordination store."""

    def __init__(
        self, emitter: Any, store: CoordinationStore, stream_id: str, context: Any
    ) -> None:
        self._emitter = emitter
        self._store = store
        self._stream_id = stream_id
        tasks = context.get_component_tasks(context.component_id)
        self._task_index = context.task_index
        self._task_count = len(tasks)
        self._partitions = 0

    def _namespace(self, partition: int) -> str:
        return f"{self._stream_id}/partition/{partition}"

    def _mine(self, partitions: int) -> range:
        self._partitions = max(self._partitions, partitions)
        return range(self._task_index, partitions, self._task_count)

    def _latest_before(self, namespace: str, txid: int) -> Any:
        earlier = [k for k in self._store.keys(namespace) if k < txid_key(txid)]
        return self._store.get(namespace, earlier[-1])[0] if earlier else None

    def cleanup_before(self, txid: int) -> None:
        """Forget metadata of committed transactions, keeping each partition's newest."""
        for partition in range(self._task_index, self._partitions, self._task_count):
            namespace = self._namespace(partition)
            keys = self._store.keys(namespace)
            for key in keys[:-1]:
                if key >= txid_key(txid):
                    break
                self._store.delete(namespace, key)

    def close(self) -> None:
        self._emitter.close()


class TransactionalPartitionEmitter(_PartitionEmitterBase):
    """A transaction's partition batches are decided once and replayed identically."""

    def emit_batch(
        self, attempt: TransactionAttempt, metadata: Any, collector: BatchOutputCollector
    ) -> None:
        txid = attempt.transaction_id
        out = SpoutCollector(collector, attempt)
        for partition in self._mine(int(metadata)):
            namespace = self._namespace(partition)
            stored = self._store.get(namespace, txid_key(txid))
            if stored is not None:
                self._emitter.emit_partition_batch(attempt, out, partition, stored[0])
                continue
            last = self._latest_before(namespace, txid)
            meta = self._emitter.emit_partition_batch_new(attempt, out, partition, last)
            self._store.put(namespace, txid_key(txid), (meta,))


class OpaquePartitionEmitter(_PartitionEmitterBase):
    """Every attempt emits from the latest earlier transaction's metadata; the result
    replaces what the transaction had before (so a replay may differ)."""

    def emit_batch(
        self, attempt: TransactionAttempt, metadata: Any, collector: BatchOutputCollector
    ) -> None:
        txid = attempt.transaction_id
        out = SpoutCollector(collector, attempt)
        for partition in self._mine(int(metadata)):
            namespace = self._namespace(partition)
            last = self._latest_before(namespace, txid)
            meta = self._emitter.emit_partition_batch(attempt, out, partition, last)
            self._store.put(namespace, txid_key(txid), (meta,))


def make_emitter(spout: AnyTridentSpout, stream_id: str, conf: dict[str, Any], context: Any) -> Any:
    """The transactional-layer emitter for a Trident spout."""
    if isinstance(spout, BatchSpout):
        return BatchSpoutEmitter(spout, conf, context)
    store = open_store(conf, context)
    emitter = spout.get_emitter(conf, context)
    if isinstance(spout, OpaquePartitionedTridentSpout):
        return OpaquePartitionEmitter(emitter, store, stream_id, context)
    return TransactionalPartitionEmitter(emitter, store, stream_id, context)
