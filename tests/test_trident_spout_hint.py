"""A parallelism hint on the stream of a non-partitioned batch spout (``BatchSpout``,
``FixedBatchSpout``): the spout runs in one task, as Storm runs a ``FixedBatchSpout``
(its ``topology.max.task.parallelism`` is 1), so each batch is emitted once; the
operations after it run with their own hints."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from squall import Fields
from squall.testing import SharedRecord
from squall.trident import (
    BatchSpout,
    FixedBatchSpout,
    Function,
    TridentCollector,
    TridentTopology,
    TridentTuple,
)
from squall.trident import Count as TridentCount
from squall.trident.compiler import describe
from tests.conftest import Engine, on_engines
from tests.test_trident_ops import after, by_batch, chunks, observe, run_until, seen_txid

SENTENCES = [["the cow jumped"], ["the man went"], ["to the store"], ["cow and man"], ["a"]]


class Split(Function):
    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        for word in tup[0].split():
            collector.emit([word])


def word_counts(spout: BatchSpout, record: SharedRecord) -> TridentTopology:
    topology = TridentTopology()
    counts = (
        topology.new_stream("sentences", spout)
        .parallelism_hint(4)
        .each(Fields("sentence"), Split(), Fields("word"))
        .parallelism_hint(3)
        .group_by(Fields("word"))
        .aggregate(TridentCount(), Fields("count"))
        .parallelism_hint(2)
    )
    observe(counts, record, "counts")
    return topology


def test_a_hinted_batch_spout_runs_in_one_task_the_rest_with_their_hints() -> None:
    topology = word_counts(FixedBatchSpout(Fields("sentence"), 2, *SENTENCES), SharedRecord())
    assert [(s["component"], s["parallelism"]) for s in describe(topology)] == [
        ("sentences", 1),
        ("b1-each(Split)", 3),
        ("b2-aggregate(Count)+1", 2),
    ]
    ir = topology.build().batch_ir
    assert ir.source("sentences").tasks == 1
    assert [segment.tasks for segment in ir.segments] == [3, 2]


def test_a_hinted_batch_spout_emits_each_batch_once(engine: Engine) -> None:
    record = SharedRecord()
    topology = word_counts(FixedBatchSpout(Fields("sentence"), 2, *SENTENCES), record)
    batches = chunks(SENTENCES, 2)

    run_until(engine, topology, lambda: seen_txid(record, "counts", after(engine, max(batches))))

    counted = {t: rows for t, rows in by_batch(record, "counts").items() if t in batches}
    assert counted == {
        txid: sorted(
            [word, n]
            for word, n in Counter(
                word for (sentence,) in rows for word in sentence.split()
            ).items()
        )
        for txid, rows in batches.items()
    }


class TaskSpout(BatchSpout):
    """Emits one tuple per batch, [txid, its task's index]; records each open."""

    def __init__(self, record: SharedRecord) -> None:
        self.record = record
        self.task = -1

    def get_output_fields(self) -> Fields:
        return Fields("sentence")

    def open(self, conf: dict[str, Any], context: Any) -> None:
        self.task = context.task_index
        self.record.append("opened", self.task)

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        if batch_id <= 3:
            collector.emit([f"batch{batch_id} task{self.task}"])


@pytest.mark.parametrize("engine", on_engines(spark=[]), indirect=True)
def test_any_hinted_batch_spout_has_one_emitter_task(engine: Engine) -> None:
    record = SharedRecord()
    topology = word_counts(TaskSpout(record), record)

    run_until(engine, topology, lambda: seen_txid(record, "counts", 4))

    assert record.get("opened") == [0]
    counted = by_batch(record, "counts")
    assert {t: counted[t] for t in (1, 2, 3)} == {
        t: sorted([[f"batch{t}", 1], ["task0", 1]]) for t in (1, 2, 3)
    }
