"""Storm's storm-starter ``TransactionalGlobalCount``, ported line by line.

A basic transactional topology: it keeps a count of the tuples seen so far in a
database. The source of data and the database are in-memory stand-ins, as in Storm:
``MemoryTransactionalSpout`` reads ``DATA``'s three partitions, ``PARTITION_TAKE_PER_BATCH``
tuples of each per transaction; ``partial-count`` (a batch bolt, 5 tasks) counts each
batch's tuples; the committer ``sum`` adds them to ``DATABASE``, storing the txid with
the count so that a replayed transaction is not counted twice.

Run it::

    squall run examples/storm_starter/transactional_global_count.py --seconds 5

or ``python examples/storm_starter/transactional_global_count.py``, which runs until every
tuple is counted and prints the count (19). ``build_topology(data, take)`` is what the
tests use.
"""

from __future__ import annotations

import time
from typing import Any

from squall import Config, Fields, LocalCluster, StormTopology, TopologyContext, Tuple
from squall.transactional import (
    BatchBolt,
    BatchOutputCollector,
    Committer,
    MemoryTransactionalSpout,
    TransactionalTopologyBuilder,
    TransactionAttempt,
)

PARTITION_TAKE_PER_BATCH = 3
DATA: dict[int, list[list[Any]]] = {
    0: [["cat"], ["dog"], ["chicken"], ["cat"], ["dog"], ["apple"]],
    1: [["cat"], ["dog"], ["apple"], ["banana"]],
    2: [["cat"], ["cat"], ["cat"], ["cat"], ["cat"], ["dog"], ["dog"], ["dog"], ["dog"]],
}
GLOBAL_COUNT_KEY = "GLOBAL-COUNT"


class Value:
    """A row of the database: the count and the transaction that wrote it."""

    def __init__(self) -> None:
        self.count = 0
        self.txid: int | None = None


#: The database, in memory (the committer runs in this process on both engines).
DATABASE: dict[str, Value] = {}

#: The configuration ``squall run`` starts from.
conf = Config()
conf.set_max_spout_pending(3)


class BatchCount(BatchBolt):
    """Counts the tuples of its batch (one instance per batch)."""

    def __init__(self) -> None:
        self._count = 0

    def prepare(
        self,
        conf: dict[str, Any],
        context: TopologyContext,
        collector: BatchOutputCollector,
        id: TransactionAttempt,
    ) -> None:
        self._collector = collector
        self._id = id

    def execute(self, tuple: Tuple) -> None:
        self._count += 1

    def finish_batch(self) -> None:
        self._collector.emit([self._id, self._count])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("id", "count"))


class UpdateGlobalCount(BatchBolt, Committer):
    """Adds the batch's partial counts to the global count, once per transaction."""

    def __init__(self) -> None:
        self._sum = 0

    def prepare(
        self,
        conf: dict[str, Any],
        context: TopologyContext,
        collector: BatchOutputCollector,
        attempt: TransactionAttempt,
    ) -> None:
        self._collector = collector
        self._attempt = attempt

    def execute(self, tuple: Tuple) -> None:
        self._sum += tuple.get_value(1)

    def finish_batch(self) -> None:
        val = DATABASE.get(GLOBAL_COUNT_KEY)
        if val is None or val.txid != self._attempt.transaction_id:
            newval = Value()
            newval.txid = self._attempt.transaction_id
            if val is None:
                newval.count = self._sum
            else:
                newval.count = self._sum + val.count
            DATABASE[GLOBAL_COUNT_KEY] = newval
        else:
            newval = val
        self._collector.emit([self._attempt, newval.count])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("id", "sum"))


#: What ``squall run`` shows under its final metrics (as ``--show`` would):
#: the global count after each of the last transactions ``sum`` committed.
show = ["sum"]


def build_topology(
    data: dict[int, list[list[Any]]] | None = None, take: int = PARTITION_TAKE_PER_BATCH
) -> StormTopology:
    """The topology of Storm's ``main``, over ``data`` (default ``DATA``)."""
    spout = MemoryTransactionalSpout(DATA if data is None else data, Fields("word"), take)
    builder = TransactionalTopologyBuilder("global-count", "spout", spout, 3)
    builder.set_bolt("partial-count", BatchCount(), 5).none_grouping("spout")
    builder.set_bolt("sum", UpdateGlobalCount()).global_grouping("partial-count")
    return builder.build_topology()


def main() -> None:
    """Run on a LocalCluster until every tuple is counted; print the count."""
    config = Config(conf)
    config.set_debug(True)
    total = sum(len(partition) for partition in DATA.values())
    with LocalCluster() as cluster:
        cluster.submit_topology("global-count-topology", config, build_topology())
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            value = DATABASE.get(GLOBAL_COUNT_KEY)
            if value is not None and value.count >= total:
                break
            time.sleep(0.01)
        cluster.kill_topology("global-count-topology")
    print("global count:", DATABASE[GLOBAL_COUNT_KEY].count)


if __name__ == "__main__":
    main()
