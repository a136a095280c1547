"""The checks of an emit, one behaviour on every engine (threads, worker processes,
Spark) for core bolts, transactional batch bolts, transactional spouts' emitters,
Trident functions and Trident spouts:

- an emit on a stream the component does not declare raises ``ValueError`` from the
  emit call, naming the component, the stream and the declared streams;
- an emit of more or fewer values than the stream's fields raises ``ValueError`` naming
  the component, the stream, its fields and the values;
- an emit on a declared stream no component subscribes to goes nowhere, silently;
- a batch bolt's ``emit`` on a direct stream, ``emit_direct`` to a task that does not
  subscribe directly, or ``emit_direct`` on a stream not declared direct, raises the
  collectors' ``ValueError``.

A core bolt's error fails its input tuple (the spout's ``fail`` runs) and is reported
in the bolt's errors with its traceback, and the topology goes on. A batch bolt's, an
emitter's or a Trident function's error fails its batch, and the component that raised
it reports the error with its traceback (on Spark the executor's), once per failed
attempt: locally the batch is tried again; on Spark the micro-batch is run again
(``topology.spark.batch.retries``; these tests allow one new run, then the query
stops) and its error also stays among the failed micro-batch's. A Trident batch spout's
error is reported by the spout on every engine; on Spark it stops the query (the spout
emits in its source, see docs/spark.md).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from squall import Bolt, TopologyBuilder, Tuple
from squall.model.fields import Fields
from squall.runtime.metrics import ErrorInfo
from squall.testing import CapturingBolt, FixedTupleSpout, SharedRecord
from squall.transactional import (
    BatchBolt,
    MemoryTransactionalSpout,
    TransactionalSpout,
    TransactionalTopologyBuilder,
)
from squall.trident import (
    BatchSpout,
    FixedBatchSpout,
    Function,
    TridentCollector,
    TridentTopology,
    TridentTuple,
)
from tests.conftest import Engine, Run
from tests.helpers import wait_until

#: What each bad emit raises: the exception's line, as a pattern (a transactional
#: attempt's id differs from run to run).
UNDECLARED = (
    "ValueError: component 'bad' emitted on stream 'nope', which it does not declare "
    "(declared streams: {declared})"
)
WIDTH = (
    "ValueError: component 'bad' emitted {count} value(s) on stream 'default', which "
    "declares {width} field(s) {fields}: {values}"
)
CASES = ["undeclared", "width", "unsubscribed"]


def errors(run: Run) -> list[ErrorInfo]:
    """Every error the topology reported, of every component, in component order."""
    info = run.info()
    return [error for stats in info.components.values() for error in stats.errors]


def where(run: Run) -> list[str]:
    """The components that reported errors."""
    info = run.info()
    return sorted(cid for cid, stats in info.components.items() if stats.errors_total)


# --- core bolts ---------------------------------------------------------------------


class BadBolt(Bolt):
    """Emits each ``n`` as the case says, anchored, then acks its input."""

    outputs = {"default": ["n", "double"], "spare": ["n"]}

    def __init__(self, case: str) -> None:
        self.case = case

    def execute(self, tup: Tuple) -> None:
        n = tup["n"]
        if self.case == "undeclared":
            self.collector.emit([n, 2 * n], tup, "nope")
        elif self.case == "width":
            self.collector.emit([n], tup)
        else:
            self.collector.emit([n], tup, "spare")
            self.collector.emit([n, 2 * n], tup)
        self.collector.ack(tup)


@pytest.mark.parametrize("case", CASES)
def test_a_core_bolt_emit(engine: Engine, case: str) -> None:
    spout = FixedTupleSpout([[1], [2]], ["n"])
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("numbers", spout)
    builder.set_bolt("bad", BadBolt(case)).shuffle_grouping("numbers")
    builder.set_bolt("sink", sink).shuffle_grouping("bad")
    with engine.running(builder.create_topology(), name="core") as run:
        if case == "unsubscribed":
            wait_until(lambda: sorted(spout.acked) == [0, 1], engine.timeout, 0.02)
            run.wait_idle()
            assert sorted(sink.values()) == [[1, 2], [2, 4]]
            assert spout.failed == []
            assert errors(run) == []
            return
        wait_until(lambda: sorted(spout.failed) == [0, 1], engine.timeout, 0.02)
        wait_until(lambda: len(errors(run)) == 2, engine.timeout, 0.02)
        reported = errors(run)
        assert spout.acked == []
        assert sink.values() == []
        assert where(run) == ["bad"]
    if case == "undeclared":
        expected = [UNDECLARED.format(declared="['default', 'spare']")] * 2
    else:
        expected = sorted(
            WIDTH.format(count=1, width=2, fields="['n', 'double']", values=f"[{n}]")
            for n in (1, 2)
        )
    assert sorted(error.error for error in reported) == expected
    for error in reported:
        assert "in execute" in error.traceback
        assert "self.collector.emit(" in error.traceback


# --- transactional batch bolts --------------------------------------------------------


class BadBatchBolt(BatchBolt):
    """Emits each ``n`` of its batch as the case says; records the tasks it runs in."""

    def __init__(self, case: str) -> None:
        self.case = case
        self.record = SharedRecord()

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["attempt", "n"])
        declarer.declare_stream("spare", ["attempt", "n"])

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.collector = collector
        self.attempt = id
        self.record.append("task", context.get_this_task_id())

    def execute(self, tup: Tuple) -> None:
        n = tup["n"]
        if self.case == "undeclared":
            self.collector.emit([self.attempt, n], "nope")
        elif self.case == "width":
            self.collector.emit([self.attempt, n, n])
        else:
            self.collector.emit([self.attempt, n], "spare")
            self.collector.emit([self.attempt, n])

    def finish_batch(self) -> None:
        """Nothing more to emit."""


class Received(BatchBolt):
    """Records every ``n`` it receives."""

    outputs = ["attempt", "n"]

    def __init__(self) -> None:
        self.record = SharedRecord()

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.attempt = id

    def execute(self, tup: Tuple) -> None:
        self.record.append("n", tup["n"])

    def finish_batch(self) -> None:
        """Nothing to emit."""


#: The configuration of the tests whose batch fails: on Spark, a failed micro-batch is
#: run once more (then the query stops), as the local engine tries its batch again.
RETRIED = {"topology.spark.batch.retries": 1}


def batch_error_shows(run: Run, count: int = 2) -> bool:
    """Whether the failed batch is reported ``count`` times (the first attempt and the
    next), by the component that raised its error."""
    return len(errors(run)) >= count


@pytest.mark.parametrize("case", CASES)
def test_a_transactional_batch_bolt_emit(engine: Engine, case: str) -> None:
    spout = MemoryTransactionalSpout({0: [[1], [2]]}, ["n"], 2)
    received = Received()
    builder = TransactionalTopologyBuilder("emits", "numbers", spout, 1)
    bad = BadBatchBolt(case)
    builder.set_bolt("bad", bad).shuffle_grouping("numbers")
    builder.set_bolt("sink", received).shuffle_grouping("bad")
    with engine.running(builder.build_topology(), RETRIED, name="batch") as run:
        if case == "unsubscribed":
            wait_until(lambda: sorted(received.record.get("n")) == [1, 2], engine.timeout, 0.02)
            run.drain()
            assert errors(run) == []
            assert run.info().status == "ACTIVE"
            return
        wait_until(lambda: batch_error_shows(run), engine.timeout, 0.02)
        reported = errors(run)
        assert received.record.get("n") == []
        assert where(run) == ["bad"]
    first = reported[0]
    assert (first.component_id, first.task_id) == ("bad", bad.record.get("task")[0])
    if case == "undeclared":
        assert first.error == UNDECLARED.format(declared="['$coord', 'default', 'spare']")
    else:
        attempt = r"TransactionAttempt\(txid=1, attempt=0x[0-9a-f]+\)"
        line = WIDTH.format(count=3, width=2, fields="['attempt', 'n']", values="[{}, 1, 1]")
        assert re.fullmatch(re.escape(line).replace(r"\{\}", attempt), first.error)
    # The traceback reaches the bolt's emit (Spark: the executor's).
    assert "in execute" in first.traceback
    assert "self.collector.emit(" in first.traceback
    assert first.traceback.rstrip().splitlines()[-1] == first.error


# --- transactional spouts' emitters ----------------------------------------------------


class OneTransaction:
    """Plans transaction after transaction; its metadata is the txid."""

    def initialize_transaction(self, txid: int, prev_metadata: Any) -> int:
        return txid

    def is_ready(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to release."""


class WideEmitter:
    """Emits one tuple of three values per batch, for two declared fields."""

    def emit_batch(self, attempt: Any, metadata: Any, collector: Any) -> None:
        collector.emit([attempt, metadata, 0])

    def cleanup_before(self, txid: int) -> None:
        """Nothing kept."""

    def close(self) -> None:
        """Nothing to release."""


class WideSpout(TransactionalSpout):
    """A transactional spout whose emitter emits more values than it declares; records
    its emitter's task."""

    outputs = ["attempt", "n"]

    def __init__(self) -> None:
        self.record = SharedRecord()

    def get_coordinator(self, conf: Any, context: Any) -> OneTransaction:
        return OneTransaction()

    def get_emitter(self, conf: Any, context: Any) -> WideEmitter:
        self.record.append("task", context.get_this_task_id())
        return WideEmitter()


def test_a_transactional_spout_emitter_emitting_the_wrong_number_of_values(
    engine: Engine,
) -> None:
    spout = WideSpout()
    builder = TransactionalTopologyBuilder("emits", "numbers", spout, 1)
    builder.set_bolt("sink", Received()).shuffle_grouping("numbers")
    with engine.running(builder.build_topology(), RETRIED, name="emitter") as run:
        wait_until(lambda: batch_error_shows(run), engine.timeout, 0.02)
        assert where(run) == ["numbers"]  # the spout's emitter
        first = errors(run)[0]
    assert (first.component_id, first.task_id) == ("numbers", spout.record.get("task")[0])
    attempt = r"TransactionAttempt\(txid=1, attempt=0x[0-9a-f]+\)"
    line = WIDTH.format(count=3, width=2, fields="['attempt', 'n']", values="[{}, 1, 0]")
    line = line.replace("'bad'", "'numbers'")
    assert re.fullmatch(re.escape(line).replace(r"\{\}", attempt), first.error)
    assert "in emit_batch" in first.traceback
    assert "collector.emit([attempt, metadata, 0])" in first.traceback


# --- Trident functions ----------------------------------------------------------------


class Halves(Function):
    """Declared with two output fields; emits one value."""

    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        collector.emit([tup["n"] // 2])


def test_a_trident_function_emitting_the_wrong_number_of_values(engine: Engine) -> None:
    topology = TridentTopology()
    stream = topology.new_stream("numbers", FixedBatchSpout(["n"], 2, [4], [6]))
    stream.each(Fields("n"), Halves(), Fields("half", "rest"))
    with engine.running(topology, RETRIED, name="trident") as run:
        wait_until(lambda: batch_error_shows(run), engine.timeout, 0.02)
        first = errors(run)[0]
        assert where(run) == ["b1-each(Halves)"]  # the bolt running the function's segment
    assert first.component_id == "b1-each(Halves)"
    assert first.error == (
        "ValueError: Trident each (Halves) emitted 1 value(s) for output fields "
        "['half', 'rest']: [2]"
    )
    assert "in process" in first.traceback  # the each processor that checked the emit


class TwoFieldSpout(BatchSpout):
    """Declares two output fields; its first batch holds a tuple of one value."""

    def get_output_fields(self) -> Fields:
        return Fields("a", "b")

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        if batch_id == 1:
            collector.emit([7])

    def ack(self, batch_id: int) -> None:
        """Nothing to release."""


def test_a_trident_spout_emitting_the_wrong_number_of_values(engine: Engine) -> None:
    """The spout reports the error with its traceback. Locally its emitter's batch is
    tried again; on Spark the batch spout emits in its source, whose error stops the
    query (the topology's ``failure`` is the same line)."""
    topology = TridentTopology()
    topology.new_stream("spout", TwoFieldSpout()).each(
        Fields("a"), lambda tup: tup["a"], Fields("c")
    )
    with engine.running(topology, name="spout") as run:
        wait_until(lambda: bool(errors(run)), engine.timeout, 0.02)
        assert where(run) == ["spout"]
        first = errors(run)[0]
        if engine.is_spark:
            info = run.info()
            assert info.status == "FAILED"
            assert info.spark is not None and info.spark.failure == first.error
            assert errors(run) == [first]  # reported once, however often it is read
    assert first.component_id == "spout"
    expected = (
        "ValueError: component 'spout' emitted 2 value(s) on stream 'default', which "
        "declares 3 field(s) ['$attempt', 'a', 'b']: [{}, 7]"
    )
    attempt = r"TransactionAttempt\(txid=1, attempt=0x[0-9a-f]+\)"
    assert re.fullmatch(re.escape(expected).replace(r"\{\}", attempt), first.error)
    assert "in emit_batch" in first.traceback
    assert "collector.emit([7])" in first.traceback


# --- direct streams of batch bolts ------------------------------------------------------


class DirectBatchBolt(BatchBolt):
    """Emits each ``n`` as the case says: ``emit`` on its direct stream, ``emit_direct``
    to a task that does not subscribe, or ``emit_direct`` on a stream not direct.
    Records the tasks of ``sink`` (the direct stream's subscriber)."""

    def __init__(self, case: str) -> None:
        self.case = case
        self.record = SharedRecord()

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["attempt", "n"])
        declarer.declare_stream("direct", ["attempt", "n"], direct=True)

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.collector = collector
        self.attempt = id
        self.sink_tasks = context.get_component_tasks("sink")
        self.record.append("sink tasks", list(self.sink_tasks))

    def execute(self, tup: Tuple) -> None:
        n = tup["n"]
        if self.case == "emit on direct":
            self.collector.emit([self.attempt, n], "direct")
        elif self.case == "not a subscriber":
            self.collector.emit_direct(999, [self.attempt, n], "direct")
        else:
            self.collector.emit_direct(self.sink_tasks[0], [self.attempt, n])

    def finish_batch(self) -> None:
        """Nothing more to emit."""


@pytest.mark.parametrize("case", ["emit on direct", "not a subscriber", "not direct"])
def test_a_batch_bolt_direct_emit(engine: Engine, case: str) -> None:
    spout = MemoryTransactionalSpout({0: [[1]]}, ["n"], 2)
    bad = DirectBatchBolt(case)
    builder = TransactionalTopologyBuilder("direct", "numbers", spout, 1)
    builder.set_bolt("bad", bad).shuffle_grouping("numbers")
    builder.set_bolt("sink", Received(), 2).direct_grouping("bad", "direct")
    with engine.running(builder.build_topology(), RETRIED, name="direct") as run:
        wait_until(lambda: batch_error_shows(run), engine.timeout, 0.02)
        assert where(run) == ["bad"]
        line = errors(run)[0].error
    tasks = bad.record.get("sink tasks")[0]
    expected = {
        "emit on direct": (
            "ValueError: component 'bad' used emit on stream 'direct', which is declared "
            "direct: use emit_direct(task_id, values, ...)"
        ),
        "not a subscriber": (
            "ValueError: component 'bad' emitted direct to task 999 on stream 'direct', "
            "but that task does not subscribe to the stream with a direct grouping "
            f"(subscribed tasks: {sorted(tasks)})"
        ),
        "not direct": (
            "ValueError: component 'bad' used emit_direct on stream 'default', which is "
            "not declared direct (declare it with direct=True)"
        ),
    }
    assert line == expected[case]
