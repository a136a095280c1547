"""MemoryTransactionalSpout: Storm's partitioned transactional test spout over in-memory
partitions: ``take_amt`` tuples of every partition per transaction, exact replays, no new
transaction once the data is read (so complete_topology and wait_idle end), on every
engine."""

from __future__ import annotations

from typing import Any

import pytest

from squall import FailedException, Tuple
from squall.model.errors import InvalidTopologyError
from squall.testing import SharedRecord, complete_topology
from squall.transactional import (
    TX_FIELD,
    BatchBolt,
    BatchOutputCollector,
    Committer,
    MemoryTransactionalSpout,
    MemoryTransactionalSpoutMeta,
    TransactionalTopologyBuilder,
    TransactionAttempt,
)
from tests.conftest import Engine

DATA = {
    0: [["cat"], ["dog"], ["chicken"], ["cat"], ["dog"], ["apple"]],
    1: [["cat"], ["dog"], ["apple"], ["banana"]],
    2: [["cat"], ["cat"], ["cat"], ["cat"], ["cat"], ["dog"], ["dog"], ["dog"], ["dog"]],
}


def expected_batches(data: dict[int, list[list[Any]]], take: int) -> dict[int, list[str]]:
    """Transaction t takes items [(t - 1) * take, t * take) of every partition."""
    batches: dict[int, list[str]] = {}
    longest = max(len(queue) for queue in data.values())
    for txid in range(1, -(-longest // take) + 1):
        start = (txid - 1) * take
        batches[txid] = sorted(
            values[0] for queue in data.values() for values in queue[start : start + take]
        )
    return batches


class CollectBatch(BatchBolt, Committer):
    """Records each committed batch's words (sorted) by txid; emits ``[attempt, n]``."""

    outputs = ["attempt", "count"]

    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def prepare(
        self, conf: Any, context: Any, collector: BatchOutputCollector, id: TransactionAttempt
    ) -> None:
        self.collector, self.attempt, self.words = collector, id, []

    def execute(self, tup: Tuple) -> None:
        self.words.append(tup["word"])

    def finish_batch(self) -> None:
        self.record.append("batches", (self.attempt.transaction_id, sorted(self.words)))
        self.collector.emit([self.attempt, len(self.words)])


class FailFirstAttemptOf(BatchBolt):
    """Fails (quietly) the first attempt of transaction ``txid``; passes words on."""

    outputs = ["attempt", "word"]

    def __init__(self, txid: int, record: SharedRecord) -> None:
        self.txid = txid
        self.record = record

    def prepare(
        self, conf: Any, context: Any, collector: BatchOutputCollector, id: TransactionAttempt
    ) -> None:
        self.collector, self.attempt = collector, id

    def execute(self, tup: Tuple) -> None:
        if self.attempt.transaction_id == self.txid and not self.record.get("failed"):
            self.record.append("failed", self.attempt)
            raise FailedException("first attempt fails")
        self.collector.emit([self.attempt, tup["word"]])


def topology(record: SharedRecord, take: int = 3, emitters: int = 2, data: Any = None) -> Any:
    spout = MemoryTransactionalSpout(DATA if data is None else data, ["word"], take)
    builder = TransactionalTopologyBuilder("memory", "spout", spout, emitters)
    builder.set_committer_bolt("collect", CollectBatch(record)).global_grouping("spout")
    return builder.build_topology()


def test_declares_the_attempt_field_first_and_plans_every_partition_per_batch() -> None:
    spout = MemoryTransactionalSpout(DATA, ["word"], 3)
    built = topology(SharedRecord())
    assert list(built.get_component("spout").streams["default"].fields) == [TX_FIELD, "word"]
    assert spout.transactions_needed == 3
    coordinator = spout.get_coordinator({}, None)  # type: ignore[arg-type]
    planned = []
    while coordinator.is_ready():
        planned.append(coordinator.number_of_partitions())
    assert planned == [3, 3, 3]
    assert spout.is_exhausted()


def test_emitter_takes_take_amt_from_the_last_meta_and_replays_a_meta() -> None:
    emitter = MemoryTransactionalSpout(DATA, ["word"], 4).get_emitter({}, None)  # type: ignore[arg-type]
    emitted: list[list[Any]] = []

    class Out:
        def emit(self, values: list[Any]) -> None:
            emitted.append(values)

    attempt = TransactionAttempt(2, 7)
    meta = emitter.emit_partition_batch_new(
        attempt,
        Out(),
        1,
        MemoryTransactionalSpoutMeta(0, 3),  # type: ignore[arg-type]
    )
    assert meta == MemoryTransactionalSpoutMeta(3, 1)
    assert emitted == [[attempt, "banana"]]
    end = emitter.emit_partition_batch_new(attempt, Out(), 1, meta)  # type: ignore[arg-type]
    assert end == MemoryTransactionalSpoutMeta(4, 0)
    emitted.clear()
    emitter.emit_partition_batch(attempt, Out(), 0, MemoryTransactionalSpoutMeta(1, 2))  # type: ignore[arg-type]
    assert emitted == [[attempt, "dog"], [attempt, "chicken"]]


@pytest.mark.parametrize(
    ("partitions", "fields", "take", "error"),
    [
        (DATA, ["word"], 0, "take_amt must be a positive int, got 0"),
        (DATA, ["word"], 2.5, "take_amt must be a positive int, got 2.5"),
        ({0: [["a"]], 2: [["b"]]}, ["word"], 1, "partitions must be numbered 0 .. n-1, got [0, 2]"),
        ({0: [["a"], ["b", "c"]]}, ["word"], 1, "tuple 1 of partition 0 has 2 values"),
    ],
)
def test_bad_input_is_refused_naming_the_problem(
    partitions: Any, fields: list[str], take: Any, error: str
) -> None:
    with pytest.raises(InvalidTopologyError, match="MemoryTransactionalSpout") as raised:
        MemoryTransactionalSpout(partitions, fields, take)
    assert error in str(raised.value)


def test_complete_topology_runs_every_batch_once_and_ends() -> None:
    record = SharedRecord()
    result = complete_topology(
        topology(record),
        conf={"topology.max.spout.pending": 3, "topology.trident.batch.emit.interval.millis": 0},
    )
    assert sorted(record.get("batches")) == sorted(expected_batches(DATA, 3).items())
    emitted = result.read_tuples("spout")
    assert sorted(values[1] for values in emitted) == sorted(
        values[0] for queue in DATA.values() for values in queue
    )
    assert sorted(values[1] for values in result.read_tuples("collect")) == [3, 7, 9]


def test_empty_partitions_start_no_transaction() -> None:
    record = SharedRecord()
    result = complete_topology(topology(record, data=[[], []]), timeout_secs=10)
    assert record.get("batches") == []
    assert result.streams() == []


def test_a_failed_batch_is_replayed_with_exactly_the_same_tuples() -> None:
    record = SharedRecord()
    spout = MemoryTransactionalSpout(DATA, ["word"], 2)
    builder = TransactionalTopologyBuilder("memory-replay", "spout", spout, 2)
    builder.set_bolt("flaky", FailFirstAttemptOf(2, record), 2).shuffle_grouping("spout")
    builder.set_committer_bolt("collect", CollectBatch(record)).global_grouping("flaky")
    result = complete_topology(
        builder.build_topology(),
        conf={
            "topology.max.spout.pending": 2,
            "topology.trident.batch.emit.interval.millis": 0,
            "topology.trident.batch.retry.initial.millis": 0,
        },
    )
    assert len(record.get("failed")) == 1
    by_attempt: dict[TransactionAttempt, list[str]] = {}
    for attempt, word in result.read_tuples("spout"):
        by_attempt.setdefault(attempt, []).append(word)
    attempts_of_2 = [sorted(words) for a, words in by_attempt.items() if a.transaction_id == 2]
    assert len(attempts_of_2) == 2
    assert attempts_of_2[0] == attempts_of_2[1] == expected_batches(DATA, 2)[2]
    assert sorted(record.get("batches")) == sorted(expected_batches(DATA, 2).items())


def test_batches_on_every_engine_then_idle(engine: Engine) -> None:
    record = SharedRecord()
    expected = sorted(expected_batches(DATA, 3).items())
    with engine.running(topology(record), {"topology.max.spout.pending": 3}) as run:
        run.wait_until(lambda: len(record.get("batches")) >= len(expected), engine.timeout)
        run.wait_idle()
        assert sorted(record.get("batches")) == expected
