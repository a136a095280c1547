"""``MemoryTransactionalSpout``: Storm's partitioned transactional test spout over
in-memory data.

The data travels with the spout: every task (a thread's deep copy, a worker process's
or a Spark executor's unpickled copy) holds the same partitions, so a batch is emitted
alike wherever its emitter runs, and a replay from the stored partition metadata
(``MemoryTransactionalSpoutMeta``: where the batch starts and how many tuples it has)
emits exactly the same tuples.

Each transaction takes the next ``take_amt`` tuples (fewer at the end) of every
partition. Once the transactions planned cover every partition to its end, the
coordinator is no longer ready: no new transaction starts, so a finite input leaves
the topology idle (``wait_idle``) and :func:`squall.testing.complete_topology` can tell
when the run is complete (see :meth:`MemoryTransactionalSpout.is_exhausted`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from squall.model.declarer import OutputFieldsDeclarer
from squall.model.errors import InvalidTopologyError
from squall.model.fields import Fields
from squall.model.hooks import Exhaustible
from squall.model.tuple import DEFAULT_STREAM
from squall.transactional.attempt import TransactionAttempt
from squall.transactional.spouts import PartitionedTransactionalSpout

if TYPE_CHECKING:
    from squall.model.context import TopologyContext
    from squall.transactional.batch import BatchOutputCollector

#: The name of the first output field, which carries the batch's ``TransactionAttempt``.
TX_FIELD = "MemoryTransactionalSpout/id"


@dataclass(frozen=True)
class MemoryTransactionalSpoutMeta:
    """What one transaction took from one partition: ``amt`` tuples from ``index``."""

    index: int
    amt: int


class MemoryTransactionalSpout(PartitionedTransactionalSpout, Exhaustible):
    """A partitioned transactional spout over fixed in-memory partitions (Storm's
    ``org.apache.storm.testing.MemoryTransactionalSpout``).

    Args:
        partitions: partition number -> the value lists of its tuples, for partitions
            ``0 .. n-1`` (a mapping, or a list whose item ``p`` is partition ``p``).
        out_fields: the fields of each tuple (``Fields`` or names); the spout declares
            ``[TX_FIELD, *out_fields]``: every tuple's first value is the attempt.
        take_amt: the most tuples taken from each partition per transaction.

    Raises:
        InvalidTopologyError: the partitions are not numbered ``0 .. n-1``, a tuple
            does not have one value per field, or ``take_amt`` is not a positive int
            (the message names the partition and tuple).
    """

    def __init__(
        self,
        partitions: Mapping[int, Sequence[Sequence[Any]]] | Sequence[Sequence[Sequence[Any]]],
        out_fields: Fields | Iterable[str],
        take_amt: int,
    ) -> None:
        fields = out_fields if isinstance(out_fields, Fields) else Fields(list(out_fields))
        if isinstance(take_amt, bool) or not isinstance(take_amt, int) or take_amt < 1:
            raise InvalidTopologyError(
                f"MemoryTransactionalSpout: take_amt must be a positive int, got {take_amt!r}"
            )
        by_number = (
            dict(partitions) if isinstance(partitions, Mapping) else dict(enumerate(partitions))
        )
        if sorted(by_number) != list(range(len(by_number))):
            raise InvalidTopologyError(
                "MemoryTransactionalSpout: partitions must be numbered 0 .. n-1, got "
                f"{sorted(by_number)!r}"
            )
        queues: list[list[list[Any]]] = []
        for number in range(len(by_number)):
            queue = [list(values) for values in by_number[number]]
            for position, values in enumerate(queue):
                if len(values) != len(fields):
                    raise InvalidTopologyError(
                        f"MemoryTransactionalSpout: tuple {position} of partition {number} "
                        f"has {len(values)} values {values!r} for the {len(fields)} fields "
                        f"{list(fields)!r}"
                    )
            queues.append(queue)
        self.out_fields = fields
        self.take_amt = take_amt
        self._queues = queues
        #: New transactions this copy's coordinator has planned.
        self._planned = 0

    @property
    def transactions_needed(self) -> int:
        """How many transactions read every partition to its end."""
        sizes = [len(queue) for queue in self._queues]
        return max((-(-size // self.take_amt) for size in sizes), default=0)

    def is_exhausted(self) -> bool:
        """Whether this copy's coordinator has planned every tuple into transactions.

        Meaningful on the copy that runs the coordinator (the coordinator spout's task);
        the coordinator spout of a transactional topology adds that every transaction
        has committed before it calls itself exhausted.
        """
        return self._planned >= self.transactions_needed

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare_stream(DEFAULT_STREAM, [TX_FIELD, *self.out_fields])

    def get_coordinator(
        self, conf: dict[str, Any], context: TopologyContext
    ) -> MemoryTransactionalSpoutCoordinator:
        return MemoryTransactionalSpoutCoordinator(self)

    def get_emitter(
        self, conf: dict[str, Any], context: TopologyContext
    ) -> MemoryTransactionalSpoutEmitter:
        return MemoryTransactionalSpoutEmitter(self._queues, self.take_amt)


class MemoryTransactionalSpoutCoordinator:
    """Plans the transactions: ready while some partition has tuples no transaction has
    taken yet. squall asks ``number_of_partitions()`` once per new transaction, right
    after ``is_ready()`` said True; that is where a transaction is counted."""

    def __init__(self, spout: MemoryTransactionalSpout) -> None:
        self._spout = spout

    def number_of_partitions(self) -> int:
        self._spout._planned += 1
        return len(self._spout._queues)

    def is_ready(self) -> bool:
        return not self._spout.is_exhausted()

    def close(self) -> None:
        """Nothing to release."""


class MemoryTransactionalSpoutEmitter:
    """Emits a partition's next ``take_amt`` tuples, or replays a stored batch."""

    def __init__(self, queues: list[list[list[Any]]], take_amt: int) -> None:
        self._queues = queues
        self._take_amt = take_amt

    def emit_partition_batch_new(
        self,
        attempt: TransactionAttempt,
        collector: BatchOutputCollector,
        partition: int,
        last_partition_meta: MemoryTransactionalSpoutMeta | None,
    ) -> MemoryTransactionalSpoutMeta:
        index = 0
        if last_partition_meta is not None:
            index = last_partition_meta.index + last_partition_meta.amt
        left = len(self._queues[partition]) - index
        meta = MemoryTransactionalSpoutMeta(index, max(0, min(left, self._take_amt)))
        self.emit_partition_batch(attempt, collector, partition, meta)
        return meta

    def emit_partition_batch(
        self,
        attempt: TransactionAttempt,
        collector: BatchOutputCollector,
        partition: int,
        partition_meta: MemoryTransactionalSpoutMeta,
    ) -> None:
        queue = self._queues[partition]
        for values in queue[partition_meta.index : partition_meta.index + partition_meta.amt]:
            collector.emit([attempt, *values])

    def close(self) -> None:
        """Nothing to release."""
