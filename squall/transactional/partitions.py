"""Partitioned spouts' bookkeeping, shared by transactional topologies and Trident.

The coordinator's metadata of a transaction is the number of partitions; each emitter
task emits the partitions ``p`` with ``p % tasks == task_index`` and keeps, per
partition, each transaction's partition metadata in the coordination store (Storm's
rotating transactional state): a transactional emitter replays a transaction from its
stored metadata, an opaque one re-emits from the latest earlier transaction's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from squall.runtime.coordination import CoordinationStore, txid_key
from squall.transactional.attempt import TransactionAttempt

if TYPE_CHECKING:
    from squall.transactional.batch import BatchOutputCollector


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


class PartitionEmitter:
    """Base of the partitioned emitters: this task's partitions and their metadata.

    ``wrap(collector, attempt)`` gives the collector the user's emitter sees (the batch
    collector itself by default; Trident prepends the attempt to each tuple).
    """

    def __init__(
        self,
        emitter: Any,
        store: CoordinationStore,
        namespace: str,
        task_index: int,
        task_count: int,
    ) -> None:
        self._emitter = emitter
        self._store = store
        self._namespace_prefix = namespace
        self._task_index = task_index
        self._task_count = task_count
        self._partitions = 0

    def wrap(self, collector: BatchOutputCollector, attempt: TransactionAttempt) -> Any:
        """The collector passed to the user's emitter."""
        return collector

    def _namespace(self, partition: int) -> str:
        return f"{self._namespace_prefix}/partition/{partition}"

    def _mine(self, partitions: int) -> range:
        self._partitions = max(self._partitions, partitions)
        return range(self._task_index, partitions, self._task_count)

    def _latest_before(self, namespace: str, txid: int) -> Any:
        earlier = [k for k in self._store.keys(namespace) if k < txid_key(txid)]
        return self._store.get(namespace, earlier[-1])[0] if earlier else None

    def cleanup_before(self, txid: int) -> None:
        """Forget partition metadata of transactions before ``txid`` (committed),
        keeping each partition's newest: the next new batch continues from it."""
        for partition in range(self._task_index, self._partitions, self._task_count):
            namespace = self._namespace(partition)
            keys = self._store.keys(namespace)
            for key in keys[:-1]:
                if key >= txid_key(txid):
                    break
                self._store.delete(namespace, key)

    def close(self) -> None:
        self._emitter.close()


class TransactionalPartitionEmitter(PartitionEmitter):
    """A transaction's partition batches are decided once and replayed identically:
    ``emit_partition_batch_new(attempt, collector, partition, last_meta) -> meta`` the
    first time, ``emit_partition_batch(attempt, collector, partition, meta)`` after."""

    def emit_batch(
        self, attempt: TransactionAttempt, metadata: Any, collector: BatchOutputCollector
    ) -> None:
        txid = attempt.transaction_id
        out = self.wrap(collector, attempt)
        for partition in self._mine(int(metadata)):
            namespace = self._namespace(partition)
            stored = self._store.get(namespace, txid_key(txid))
            if stored is not None:
                self._emitter.emit_partition_batch(attempt, out, partition, stored[0])
                continue
            last = self._latest_before(namespace, txid)
            meta = self._emitter.emit_partition_batch_new(attempt, out, partition, last)
            self._store.put(namespace, txid_key(txid), (meta,))


class OpaquePartitionEmitter(PartitionEmitter):
    """Every attempt emits from the latest earlier transaction's metadata
    (``emit_partition_batch(attempt, collector, partition, last_meta) -> meta``); the
    result replaces what the transaction had, so a replay may differ."""

    def emit_batch(
        self, attempt: TransactionAttempt, metadata: Any, collector: BatchOutputCollector
    ) -> None:
        txid = attempt.transaction_id
        out = self.wrap(collector, attempt)
        for partition in self._mine(int(metadata)):
            namespace = self._namespace(partition)
            last = self._latest_before(namespace, txid)
            meta = self._emitter.emit_partition_batch(attempt, out, partition, last)
            self._store.put(namespace, txid_key(txid), (meta,))
