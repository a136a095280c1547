"""Transactional spouts: a coordinator that plans batches and emitters that emit them.

Contract (Storm's ``ITransactionalSpout``): the coordinator decides each transaction's
metadata once; the metadata is stored, and an emitter given the same transaction and
metadata must emit exactly the same tuples, so a replayed batch is identical.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Protocol

from squall.model.components import Component
from squall.runtime.coordination import open_store
from squall.transactional.attempt import TransactionAttempt
from squall.transactional.partitions import (
    PartitionCountCoordinator,
    TransactionalPartitionEmitter,
)

if TYPE_CHECKING:
    from squall.model.context import TopologyContext
    from squall.transactional.batch import BatchOutputCollector


class Coordinator(Protocol):
    """Plans transactions. Runs in the single coordinator task."""

    def initialize_transaction(self, txid: int, prev_metadata: Any) -> Any:
        """Metadata for the new transaction ``txid`` (``prev_metadata``: the previous
        transaction's, None for the first). Called once per txid; the result is stored."""

    def is_ready(self) -> bool:
        """Whether a new transaction should start now (e.g. new data is available)."""

    def close(self) -> None:
        """Release resources."""


class Emitter(Protocol):
    """Emits batches. Runs in each emitter task."""

    def emit_batch(
        self, attempt: TransactionAttempt, metadata: Any, collector: BatchOutputCollector
    ) -> None:
        """Emit the batch of ``attempt`` described by ``metadata``; identical on replay.
        Every tuple's first value is ``attempt``."""

    def cleanup_before(self, txid: int) -> None:
        """Transactions before ``txid`` are committed: their state can be dropped."""

    def close(self) -> None:
        """Release resources."""


class TransactionalSpout(Component, ABC):
    """Storm's ``ITransactionalSpout``: implement ``get_coordinator`` and ``get_emitter``,
    and declare the emitted fields (the first one holds the ``TransactionAttempt``)."""

    @abstractmethod
    def get_coordinator(self, conf: dict[str, Any], context: TopologyContext) -> Coordinator:
        """The coordinator, created once in the coordinator task."""

    @abstractmethod
    def get_emitter(self, conf: dict[str, Any], context: TopologyContext) -> Emitter:
        """An emitter, created once in each emitter task."""


class PartitionedCoordinator(Protocol):
    """Plans transactions of a partitioned spout: how many partitions there are."""

    def number_of_partitions(self) -> int:
        """Current number of partitions."""

    def is_ready(self) -> bool:
        """Whether a new transaction should start now."""

    def close(self) -> None:
        """Release resources."""


class PartitionedEmitter(Protocol):
    """Emits one partition's part of a batch."""

    def emit_partition_batch_new(
        self,
        attempt: TransactionAttempt,
        collector: BatchOutputCollector,
        partition: int,
        last_partition_meta: Any,
    ) -> Any:
        """Emit a new batch for ``partition`` following ``last_partition_meta`` (None at
        first); return this batch's partition metadata (stored for replays)."""

    def emit_partition_batch(
        self,
        attempt: TransactionAttempt,
        collector: BatchOutputCollector,
        partition: int,
        partition_meta: Any,
    ) -> None:
        """Emit exactly the batch described by ``partition_meta`` again (a replay)."""

    def close(self) -> None:
        """Release resources."""


class PartitionedTransactionalSpout(Component, ABC):
    """Storm's ``IPartitionedTransactionalSpout``: the data is split in partitions
    (e.g. a queue's shards); each emitter task emits the partitions ``p`` with
    ``p % emitter_tasks == task_index``, keeping per-partition metadata per transaction
    in the coordination store so replays are identical."""

    @abstractmethod
    def get_coordinator(
        self, conf: dict[str, Any], context: TopologyContext
    ) -> PartitionedCoordinator:
        """The coordinator, created once in the coordinator task."""

    @abstractmethod
    def get_emitter(self, conf: dict[str, Any], context: TopologyContext) -> PartitionedEmitter:
        """An emitter, created once in each emitter task."""


class PartitionedSpoutAdapter(TransactionalSpout):
    """Runs a :class:`PartitionedTransactionalSpout` as a :class:`TransactionalSpout`:
    the transaction metadata is the number of partitions."""

    def __init__(self, spout: PartitionedTransactionalSpout, transactional_id: str) -> None:
        self.spout = spout
        self.transactional_id = transactional_id

    def declare_output_fields(self, declarer: Any) -> None:
        self.spout.declare_output_fields(declarer)

    def get_component_configuration(self) -> dict[str, Any] | None:
        return self.spout.get_component_configuration()

    def get_coordinator(self, conf: dict[str, Any], context: TopologyContext) -> Coordinator:
        return PartitionCountCoordinator(self.spout.get_coordinator(conf, context))

    def get_emitter(self, conf: dict[str, Any], context: TopologyContext) -> Emitter:
        tasks = context.get_component_tasks(context.component_id)
        return TransactionalPartitionEmitter(
            self.spout.get_emitter(conf, context),
            open_store(conf, context),
            self.transactional_id,
            context.task_index,
            len(tasks),
        )
