"""The checks of an emit, one behaviour on every engine (threads, worker processes,
Spark) for core bolts, transactional batch bolts and Trident functions:

- an emit on a stream the component does not declare raises ``ValueError`` from the
  emit call, naming the component, the stream and the declared streams;
- an emit of more or fewer values than the stream's fields raises ``ValueError`` naming
  the component, the stream, its fields and the values;
- an emit on a declared stream no component subscribes to goes nowhere, silently;
- a batch bolt's ``emit`` on a direct stream, ``emit_direct`` to a task that does not
  subscribe directly, or ``emit_direct`` on a stream not declared direct, raises the
  collectors' ``ValueError``.

A core bolt's error fails its input tuple (the spout's ``fail`` runs) and is reported
in the bolt's errors with its traceback, and the topology goes on. A batch bolt's or a
Trident function's error fails its batch: on the local engine the bolt running it
reports the error with its traceback and the batch is tried again; on Spark the
micro-batch fails (the tests run no second attempt), and its error, with the executor's
traceback, is reported as the failed micro-batch's, on the spouts (see docs/spark.md).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from squall import Bolt, TopologyBuilder, Tuple
from squall.model.fields import Fields
from squall.runtime.metrics import ErrorInfo
from squall.testing import CapturingBolt, FixedTupleSpout, SharedRecord
from squall.transactional import BatchBolt, MemoryTransactionalSpout, TransactionalTopologyBuilder
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


def raised(error: ErrorInfo) -> str:
    """The line of the exception an error report ends with (a Spark micro-batch's
    error holds the executor's traceback before it)."""
    lines = [line for line in error.error.splitlines() if line.strip()]
    return lines[-1]


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
    assert sorted(raised(error) for error in reported) == expected
    for error in reported:
        assert "in execute" in error.traceback
        assert "self.collector.emit(" in error.traceback


# --- transactional batch bolts --------------------------------------------------------


class BadBatchBolt(BatchBolt):
    """Emits each ``n`` of its batch as the case says."""

    def __init__(self, case: str) -> None:
        self.case = case

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["attempt", "n"])
        declarer.declare_stream("spare", ["attempt", "n"])

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.collector = collector
        self.attempt = id

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


def batch_error_shows(engine: Engine, run: Run, count: int = 1) -> bool:
    """Whether the failed batch is reported: locally, ``count`` errors of the bolt (the
    batch is tried again and again); on Spark, the query failed with its error."""
    if engine.is_spark:
        return run.info().status == "FAILED" and bool(errors(run))
    return len(errors(run)) >= count


@pytest.mark.parametrize("case", CASES)
def test_a_transactional_batch_bolt_emit(engine: Engine, case: str) -> None:
    spout = MemoryTransactionalSpout({0: [[1], [2]]}, ["n"], 2)
    received = Received()
    builder = TransactionalTopologyBuilder("emits", "numbers", spout, 1)
    builder.set_bolt("bad", BadBatchBolt(case)).shuffle_grouping("numbers")
    builder.set_bolt("sink", received).shuffle_grouping("bad")
    with engine.running(builder.build_topology(), name="batch") as run:
        if case == "unsubscribed":
            wait_until(lambda: sorted(received.record.get("n")) == [1, 2], engine.timeout, 0.02)
            run.drain()
            assert errors(run) == []
            assert run.info().status == "ACTIVE"
            return
        wait_until(lambda: batch_error_shows(engine, run, 2), engine.timeout, 0.02)
        reported = errors(run)
        assert received.record.get("n") == []
        assert where(run) == engine.pick(["bad"], ["numbers"])
    first = reported[0]
    if case == "undeclared":
        assert raised(first) == UNDECLARED.format(declared="['$coord', 'default', 'spare']")
    else:
        attempt = r"TransactionAttempt\(txid=1, attempt=0x[0-9a-f]+\)"
        line = WIDTH.format(count=3, width=2, fields="['attempt', 'n']", values="[{}, 1, 1]")
        assert re.fullmatch(re.escape(line).replace(r"\{\}", attempt), raised(first))
    # The traceback reaches the bolt's emit (Spark: the executor's, in the error).
    trace = first.error + first.traceback
    assert "in execute" in trace
    assert "self.collector.emit(" in trace


# --- Trident functions ----------------------------------------------------------------


class Halves(Function):
    """Declared with two output fields; emits one value."""

    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        collector.emit([tup["n"] // 2])


def test_a_trident_function_emitting_the_wrong_number_of_values(engine: Engine) -> None:
    topology = TridentTopology()
    stream = topology.new_stream("numbers", FixedBatchSpout(["n"], 2, [4], [6]))
    stream.each(Fields("n"), Halves(), Fields("half", "rest"))
    with engine.running(topology, name="trident") as run:
        wait_until(lambda: batch_error_shows(engine, run), engine.timeout, 0.02)
        first = errors(run)[0]
    assert raised(first) == (
        "ValueError: Trident each (Halves) emitted 1 value(s) for output fields "
        "['half', 'rest']: [2]"
    )
    trace = first.error + first.traceback
    assert "in process" in trace  # the each processor that checked the function's emit


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
    """Locally the spout's emitter reports the error and its batch is tried again; on
    Spark the batch spout emits in its source, whose error stops the query (the
    topology's ``failure``)."""
    topology = TridentTopology()
    topology.new_stream("spout", TwoFieldSpout()).each(
        Fields("a"), lambda tup: tup["a"], Fields("c")
    )
    with engine.running(topology, name="spout") as run:
        if engine.is_spark:
            wait_until(lambda: run.info().status == "FAILED", engine.timeout, 0.02)
            figures = run.info().spark
            assert figures is not None and figures.failure is not None
            line = figures.failure
        else:
            wait_until(lambda: bool(errors(run)), engine.timeout, 0.02)
            assert where(run) == ["spout"]
            line = raised(errors(run)[0])
    expected = (
        "ValueError: component 'spout' emitted 2 value(s) on stream 'default', which "
        "declares 3 field(s) ['$attempt', 'a', 'b']: [{}, 7]"
    )
    attempt = r"TransactionAttempt\(txid=1, attempt=0x[0-9a-f]+\)"
    assert re.fullmatch(re.escape(expected).replace(r"\{\}", attempt), line)


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
    with engine.running(builder.build_topology(), name="direct") as run:
        wait_until(lambda: batch_error_shows(engine, run), engine.timeout, 0.02)
        line = raised(errors(run)[0])
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
