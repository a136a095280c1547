"""Storm's storm-starter ``TransactionalWords``, ported line by line.

A more involved transactional topology than ``transactional_global_count``. It
processes a stream of words and produces two outputs:

1. a count for each word (stored in ``COUNT_DATABASE``);
2. how many words are in every bucket of ``BUCKET_SIZE`` counts: how many words have
   appeared 0-9 times, how many 10-19 times, and so on (``BUCKET_DATABASE``).

A batch of words can decrement the count of some buckets and increment others, as
words move between buckets while their counts grow. ``count`` is a committer (the
counts are updated in strict transaction order, each stored with its txid and the
previous count); ``bucketize`` is a basic bolt turning count changes into bucket
deltas; ``buckets`` adds the deltas per bucket.

Run it::

    squall run examples/storm_starter/transactional_words.py --seconds 5

or ``python examples/storm_starter/transactional_words.py``, which runs until every word
is counted and prints both databases. ``build_topology(data, take)`` is what the tests
use.
"""

from __future__ import annotations

import time
from typing import Any

from squall import (
    BasicBolt,
    BasicOutputCollector,
    Config,
    Fields,
    LocalCluster,
    StormTopology,
    TopologyContext,
    Tuple,
)
from squall.transactional import (
    BatchBolt,
    BatchOutputCollector,
    Committer,
    MemoryTransactionalSpout,
    TransactionalTopologyBuilder,
    TransactionAttempt,
)

BUCKET_SIZE = 10
PARTITION_TAKE_PER_BATCH = 3
DATA: dict[int, list[list[Any]]] = {
    0: [["cat"], ["dog"], ["chicken"], ["cat"], ["dog"], ["apple"]],
    1: [["cat"], ["dog"], ["apple"], ["banana"]],
    2: [["cat"], ["cat"], ["cat"], ["cat"], ["cat"], ["dog"], ["dog"], ["dog"], ["dog"]],
}


class CountValue:
    """A word's row: its count, the count before the last transaction, and that txid."""

    def __init__(self) -> None:
        self.prev_count: int | None = None
        self.count = 0
        self.txid: int | None = None


class BucketValue:
    """A bucket's row: how many words it holds, and the transaction that wrote it."""

    def __init__(self) -> None:
        self.count = 0
        self.txid: int | None = None


#: The databases, in memory. ``count`` (a committer) writes ``COUNT_DATABASE`` in this
#: process on both engines; ``buckets`` runs where its tasks run (on Spark, executors).
COUNT_DATABASE: dict[str, CountValue] = {}
BUCKET_DATABASE: dict[int, BucketValue] = {}

#: The configuration ``squall run`` starts from.
conf = Config()
conf.set_max_spout_pending(3)


class KeyedCountUpdater(BatchBolt, Committer):
    """Counts the batch's words, then adds them to each word's stored count."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

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
        key = tuple.get_string(1)
        curr = self._counts.get(key)
        if curr is None:
            curr = 0
        self._counts[key] = curr + 1

    def finish_batch(self) -> None:
        for key in self._counts:
            val = COUNT_DATABASE.get(key)
            if val is None or val.txid != self._id.transaction_id:
                new_val = CountValue()
                new_val.txid = self._id.transaction_id
                if val is not None:
                    new_val.prev_count = val.count
                    new_val.count = val.count
                new_val.count = new_val.count + self._counts[key]
                COUNT_DATABASE[key] = new_val
            else:
                new_val = val
            self._collector.emit([self._id, key, new_val.count, new_val.prev_count])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("id", "key", "count", "prev-count"))


class Bucketize(BasicBolt):
    """Turns a word's new count into bucket deltas: +1 for the bucket it enters, -1
    for the one it leaves."""

    def execute(self, tuple: Tuple, collector: BasicOutputCollector) -> None:
        attempt = tuple.get_value(0)
        curr = tuple.get_value(2)
        prev = tuple.get_value(3)

        curr_bucket = curr // BUCKET_SIZE
        prev_bucket = None
        if prev is not None:
            prev_bucket = prev // BUCKET_SIZE

        if prev_bucket is None:
            collector.emit([attempt, curr_bucket, 1])
        elif curr_bucket != prev_bucket:
            collector.emit([attempt, curr_bucket, 1])
            collector.emit([attempt, prev_bucket, -1])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("attempt", "bucket", "delta"))


class BucketCountUpdater(BatchBolt):
    """Adds the batch's deltas to each bucket's stored count."""

    def __init__(self) -> None:
        self._accum: dict[int, int] = {}

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
        bucket = tuple.get_value(1)
        delta = tuple.get_value(2)
        curr = self._accum.get(bucket)
        if curr is None:
            curr = 0
        self._accum[bucket] = curr + delta

    def finish_batch(self) -> None:
        for bucket in self._accum:
            curr_val = BUCKET_DATABASE.get(bucket)
            if curr_val is None or curr_val.txid != self._attempt.transaction_id:
                new_val = BucketValue()
                new_val.txid = self._attempt.transaction_id
                new_val.count = self._accum[bucket]
                if curr_val is not None:
                    new_val.count += curr_val.count
                BUCKET_DATABASE[bucket] = new_val
            else:
                new_val = curr_val
            self._collector.emit([self._attempt, bucket, new_val.count])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("id", "bucket", "count"))


#: What ``squall run`` shows under its final metrics (as ``--show`` would):
#: each word's latest count and each bucket's latest size, as the committers emitted them.
show = ["count@key", "buckets@bucket"]


def build_topology(
    data: dict[int, list[list[Any]]] | None = None, take: int = PARTITION_TAKE_PER_BATCH
) -> StormTopology:
    """The topology of Storm's ``main``, over ``data`` (default ``DATA``)."""
    spout = MemoryTransactionalSpout(DATA if data is None else data, Fields("word"), take)
    builder = TransactionalTopologyBuilder("top-n-words", "spout", spout, 2)
    builder.set_bolt("count", KeyedCountUpdater(), 5).fields_grouping("spout", Fields("word"))
    builder.set_bolt("bucketize", Bucketize()).none_grouping("count")
    builder.set_bolt("buckets", BucketCountUpdater(), 5).fields_grouping(
        "bucketize", Fields("bucket")
    )
    return builder.build_topology()


def main() -> None:
    """Run on a LocalCluster until every word is counted; print both databases."""
    config = Config(conf)
    config.set_debug(True)
    total = sum(len(partition) for partition in DATA.values())
    with LocalCluster() as cluster:
        cluster.submit_topology("top-n-topology", config, build_topology())
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            if sum(value.count for value in COUNT_DATABASE.values()) >= total:
                break
            time.sleep(0.01)
        cluster.wait_idle("top-n-topology")  # the buckets follow the last counts
        cluster.kill_topology("top-n-topology")
    print("counts:", {key: value.count for key, value in sorted(COUNT_DATABASE.items())})
    print("buckets:", {key: value.count for key, value in sorted(BUCKET_DATABASE.items())})


if __name__ == "__main__":
    main()
