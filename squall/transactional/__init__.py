"""Transactional topologies: batches processed exactly once, committed in order.

Compiled onto the core model as Storm does it: a coordinator spout, emitter bolts,
batch bolts that detect the end of a batch, and committers.
"""

from squall.runtime.coordination import (
    CoordinationStore,
    MemoryCoordinationStore,
    SqliteCoordinationStore,
)
from squall.transactional.attempt import AttemptStatus, TransactionAttempt
from squall.transactional.basic import BasicBoltBatchAdapter
from squall.transactional.batch import BatchBolt, BatchOutputCollector, Committer
from squall.transactional.builder import BatchBoltDeclarer, TransactionalTopologyBuilder
from squall.transactional.memory import (
    TX_FIELD,
    MemoryTransactionalSpout,
    MemoryTransactionalSpoutMeta,
)
from squall.transactional.spouts import (
    PartitionedTransactionalSpout,
    TransactionalSpout,
)

__all__ = [
    "TX_FIELD",
    "AttemptStatus",
    "BasicBoltBatchAdapter",
    "BatchBolt",
    "BatchBoltDeclarer",
    "BatchOutputCollector",
    "Committer",
    "CoordinationStore",
    "MemoryCoordinationStore",
    "MemoryTransactionalSpout",
    "MemoryTransactionalSpoutMeta",
    "PartitionedTransactionalSpout",
    "SqliteCoordinationStore",
    "TransactionAttempt",
    "TransactionalSpout",
    "TransactionalTopologyBuilder",
]
