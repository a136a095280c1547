"""A BasicBolt in a transactional topology (Storm's ``setBolt(id, IBasicBolt)``): one
object per task prepared once, each tuple of each batch executed with emits anchored and
counted for the batch, so the batch bolts after it see whole batches; an exception fails
the batch, which is replayed and committed once."""

from __future__ import annotations

from typing import Any

import pytest

from squall import BasicBolt, FailedException, Tuple
from squall.model.errors import InvalidTopologyError
from squall.testing import SharedRecord, complete_topology
from squall.transactional import (
    BatchBolt,
    BatchOutputCollector,
    Committer,
    MemoryTransactionalSpout,
    TransactionalTopologyBuilder,
    TransactionAttempt,
)
from tests.conftest import Engine

DATA = [
    [["a", 1], ["b", 2], ["c", 3], ["d", 4]],
    [["e", 5], ["f", 6], ["g", 7]],
]
CONF = {"topology.max.spout.pending": 2, "topology.trident.batch.emit.interval.millis": 0}


class Repeat(BasicBolt):
    """Emits each word ``n`` times, odd numbers only (0 emits for even ones)."""

    outputs = ["attempt", "word"]

    def __init__(self, record: SharedRecord, fail_txid: int | None = None) -> None:
        self.record = record
        self.fail_txid = fail_txid

    def prepare(self, conf: Any, context: Any) -> None:
        self.record.append("prepared", context.task_id)

    def execute(self, tup: Tuple, collector: Any) -> None:
        attempt = tup.values[0]
        if attempt.transaction_id == self.fail_txid and not self.record.get("failed"):
            self.record.append("failed", attempt.transaction_id)
            raise FailedException("fail this batch once")
        if tup["n"] % 2:
            for _ in range(tup["n"]):
                collector.emit([attempt, tup["word"]])


class Collect(BatchBolt, Committer):
    """Records each committed batch: txid -> the words it received, sorted."""

    outputs = ["attempt", "words"]

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


def build(record: SharedRecord, fail_txid: int | None = None) -> Any:
    spout = MemoryTransactionalSpout(DATA, ["word", "n"], 2)
    builder = TransactionalTopologyBuilder("basic", "spout", spout, 2)
    builder.set_bolt("repeat", Repeat(record, fail_txid), 3).shuffle_grouping("spout")
    builder.set_committer_bolt("collect", Collect(record)).global_grouping("repeat")
    return builder.build_topology()


#: Transaction 1: a b | e f; 2: c d | g; each odd n repeated n times.
EXPECTED = [(1, ["a", "e", "e", "e", "e", "e"]), (2, ["c", "c", "c", "g"] + ["g"] * 6)]


def test_each_tuple_is_executed_and_its_emits_complete_the_batch() -> None:
    record = SharedRecord()
    result = complete_topology(build(record), conf=CONF)
    assert sorted(record.get("batches")) == EXPECTED
    assert sorted(values[1] for values in result.read_tuples("repeat")) == sorted(
        EXPECTED[0][1] + EXPECTED[1][1]
    )
    # One bolt object per task, prepared once, not once per batch.
    assert sorted(record.get("prepared")) == sorted(set(record.get("prepared")))
    assert len(record.get("prepared")) == 3


def test_an_exception_fails_the_batch_which_is_replayed_and_committed_once() -> None:
    record = SharedRecord()
    conf = {**CONF, "topology.trident.batch.retry.initial.millis": 0}
    complete_topology(build(record, fail_txid=2), conf=conf)
    assert record.get("failed") == [2]
    assert sorted(record.get("batches")) == EXPECTED


def test_a_basic_bolt_cannot_be_a_committer() -> None:
    builder = TransactionalTopologyBuilder(
        "basic", "spout", MemoryTransactionalSpout(DATA, ["word", "n"], 2)
    )
    with pytest.raises(InvalidTopologyError) as raised:
        builder.set_committer_bolt("repeat", Repeat(SharedRecord()))
    assert "bolt 'repeat': a BasicBolt (Repeat) cannot be a committer" in str(raised.value)


def test_other_bolts_are_refused_naming_the_kinds_accepted() -> None:
    builder = TransactionalTopologyBuilder(
        "basic", "spout", MemoryTransactionalSpout(DATA, ["word", "n"], 2)
    )
    with pytest.raises(InvalidTopologyError) as raised:
        builder.set_bolt("x", object())  # type: ignore[arg-type]
    assert "bolt 'x': object is not a BatchBolt or BasicBolt" in str(raised.value)


def test_a_basic_bolt_in_a_transactional_topology_on_every_engine(engine: Engine) -> None:
    record = SharedRecord()
    with engine.running(build(record), CONF) as run:
        run.wait_until(lambda: len(record.get("batches")) >= 2, engine.timeout)
        run.wait_idle()
    assert sorted(record.get("batches")) == EXPECTED
