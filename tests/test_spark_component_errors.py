"""On SparkCluster, the error of a failed micro-batch that a component's code raised is
reported in that component's errors, as the local engine reports it (the exception's
line, the traceback where the task ran, the task's id), once per failed attempt, and
stays in the micro-batch figures; the spouts list only the errors no component's code
raised. The Spark task carries the component in its failure's text
(``squall.spark.errors``): the text tests here read it out of Spark's messages."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any

import pytest

from squall.model.clock import SYSTEM_CLOCK
from squall.model.errors import FailedException, ReportedFailedException
from squall.spark.errors import (
    MARKER,
    ComponentFailure,
    FailureSource,
    component_failure,
    failure_in_text,
    note_component,
)
from squall.spark.execute.figures import BatchFigures
from squall.spark.launch.javaerrors import python_failure
from squall.spark.streaming.retries import BatchRetries
from squall.testing import SharedRecord
from squall.transactional import BatchBolt, MemoryTransactionalSpout, TransactionalTopologyBuilder
from tests.conftest import Engine
from tests.helpers import wait_until

pytestmark = pytest.mark.spark  # imports the Spark engine (the 'spark' extra)


def raising(component_id: str = "split", task_id: int = 4) -> ComponentFailure:
    """The failure of a ``ValueError`` raised by task ``task_id`` of ``component_id``."""
    try:
        raise ValueError("no such word")
    except ValueError as exc:
        return ComponentFailure.of(exc, component_id, task_id)


def spark_message(task_failure: str) -> str:
    """A failed job's text as the driver receives it: the task's failure, as Spark and
    Py4J wrap it (twice: the task's failure and the driver's stack trace)."""
    return (
        "An exception was thrown from the Python worker. Please see the stack trace below.\n"
        "Traceback (most recent call last):\n"
        '  File "/site/squall/spark/execute/stages.py", line 280, in run\n'
        f"squall.spark.errors.ComponentFailure: {task_failure}\n"
        "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handle(x.scala:1)\n"
        "Driver stacktrace:\n"
        "Caused by: org.apache.spark.api.python.PythonException: Traceback (most recent "
        "call last):\n"
        f"squall.spark.errors.ComponentFailure: {task_failure}\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(x.scala:2)\n"
    )


def test_a_component_failure_names_the_component_and_ends_with_the_original_line() -> None:
    failure = raising()
    text = str(failure)
    lines = text.splitlines()
    assert lines[0].startswith(MARKER)
    assert lines[1] == "Traceback (most recent call last):"
    assert lines[-1] == "ValueError: no such word"
    source = failure.source
    assert (source.component_id, source.task_id, source.error) == (
        "split",
        4,
        "ValueError: no such word",
    )
    assert 'raise ValueError("no such word")' in source.traceback
    assert source.traceback.rstrip().splitlines()[-1] == "ValueError: no such word"
    copy = pickle.loads(pickle.dumps(failure))
    assert isinstance(copy, ComponentFailure) and copy.source == source
    assert ComponentFailure.of(failure, "other", 9) is failure  # the first naming stays


def test_the_driver_reads_the_component_out_of_a_failed_jobs_text() -> None:
    failure = raising('split "words"\nand more', 7)
    message = spark_message(str(failure))
    assert failure_in_text(message) == failure.source
    # The query's one-line failure is still the original exception's.
    assert python_failure(message) == "ValueError: no such word"
    assert component_failure(RuntimeError(message)) == failure.source


def test_the_last_readable_marker_names_the_component() -> None:
    older = FailureSource("a", 1, "ValueError: old", "Traceback\nValueError: old\n")
    newer = FailureSource("b", 2, "KeyError: 'k'", "Traceback\nKeyError: 'k'\n")
    text = f"{older.marker()}\n...\n{newer.marker()}\n"
    assert failure_in_text(text) == newer
    assert failure_in_text(f"{older.marker()}\n{MARKER}{{not json\n") == older
    assert failure_in_text(f'{MARKER}{{"component": "a", "task": "1"}}') is None
    assert failure_in_text("ValueError: no marker here") is None
    assert component_failure(RuntimeError("Job aborted: no marker")) is None


def test_an_exception_raised_on_the_driver_is_noted_not_changed() -> None:
    try:
        raise KeyError("k")
    except KeyError as exc:
        note_component(exc, "commit", 5)
        note_component(exc, "later", 6)  # the first note stays
        caught = exc
    source = component_failure(caught)
    assert source is not None
    assert (source.component_id, source.task_id, source.error) == ("commit", 5, "KeyError: 'k'")
    assert str(caught) == "'k'"
    try:
        raise RuntimeError("wrapped") from caught
    except RuntimeError as outer:
        assert component_failure(outer) == source  # found through the chain


class AlwaysFails(BatchBolt):
    """Raises in ``finish_batch`` of every batch; records its task."""

    outputs = ["attempt", "n"]

    def __init__(self) -> None:
        self.record = SharedRecord()

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.attempt = id
        self.record.append("task", context.get_this_task_id())

    def execute(self, tup: Any) -> None:
        """Nothing per tuple."""

    def finish_batch(self) -> None:
        raise ValueError(f"cannot finish transaction {self.attempt.transaction_id}")


def test_each_failed_attempt_is_reported_once_by_the_bolt_and_in_the_figures(
    spark: Any, tmp_path: Path
) -> None:
    """Two retries: three attempts of the first micro-batch fail, then the query stops.
    The bolt reports three errors, the micro-batch figures keep three, the spout none,
    and reading the figures again adds none (the query's end is that last attempt's)."""
    from squall.spark import SparkCluster

    bolt = AlwaysFails()
    builder = TransactionalTopologyBuilder(
        "fails", "numbers", MemoryTransactionalSpout({0: [[1], [2]]}, ["n"], 2), 1
    )
    builder.set_bolt("finish", bolt).shuffle_grouping("numbers")
    conf = {
        "topology.spark.batch.retries": 2,
        "topology.spark.batch.interval.millis": 50,
        "topology.trident.batch.retry.initial.millis": 0,
    }
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path / "checkpoint"))
    try:
        cluster.submit_topology("fails", conf, builder.build_topology())
        wait_until(lambda: cluster.get_topology_info("fails").status == "FAILED", 120.0, 0.05)
        cluster.get_topology_info("fails")
        info = cluster.get_topology_info("fails")
    finally:
        cluster.shutdown()
    finish = info.components["finish"]
    assert finish.errors_total == 3
    task = bolt.record.get("task")[0]
    assert [(e.component_id, e.task_id, e.error) for e in finish.errors] == [
        ("finish", task, "ValueError: cannot finish transaction 1")
    ] * 3
    for error in finish.errors:
        assert "in finish_batch" in error.traceback
        assert error.traceback.rstrip().splitlines()[-1] == error.error
    assert info.components["numbers"].errors_total == 0
    assert info.components["numbers"].errors == []
    assert info.spark is not None
    figures = info.spark.first
    assert figures.retries == 2
    assert len(figures.errors) == 3
    assert all(e.endswith("ValueError: cannot finish transaction 1") for e in figures.errors)
    assert info.spark.failure == "ValueError: cannot finish transaction 1"


def test_a_failure_marker_says_whether_the_component_reports_it() -> None:
    try:
        raise FailedException("not now")
    except FailedException as exc:
        quiet = ComponentFailure.of(exc, "finish", 3).source
    try:
        raise ReportedFailedException("not now")
    except ReportedFailedException as exc:
        loud = ComponentFailure.of(exc, "finish", 3).source
    assert (quiet.reported, loud.reported) == (False, True)
    assert failure_in_text(quiet.marker()) == quiet
    assert failure_in_text(loud.marker()) == loud


class FailsInExecute(BatchBolt):
    """Raises ``kind`` for every tuple; records each batch it is prepared for."""

    outputs = ["attempt", "n"]

    def __init__(self, kind: type[Exception]) -> None:
        self.kind = kind
        self.record = SharedRecord()

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.record.append("prepared", context.get_this_task_id())

    def execute(self, tup: Any) -> None:
        raise self.kind(f"not now: {tup['n']}")

    def finish_batch(self) -> None:
        """Nothing to finish."""


@pytest.mark.parametrize("kind", [FailedException, ReportedFailedException])
def test_a_failed_exception_fails_the_batch_and_only_a_reported_one_is_an_error(
    engine: Engine, kind: type[Exception]
) -> None:
    """As in Storm, on every engine: a ``FailedException`` fails the batch (it is tried
    again) without an error; a ``ReportedFailedException`` is also reported by the bolt.
    On Spark both stay in the failed micro-batch's figures."""
    bolt = FailsInExecute(kind)
    spout = MemoryTransactionalSpout({0: [[1]]}, ["n"], 2)
    builder = TransactionalTopologyBuilder("failing", "numbers", spout, 1)
    builder.set_bolt("finish", bolt).shuffle_grouping("numbers")
    conf = {"topology.spark.batch.retries": 1, "topology.trident.batch.retry.initial.millis": 0}
    with engine.running(builder.build_topology(), conf, name="failing") as run:
        if engine.is_spark:  # the first attempt and the next failed: the query stops
            wait_until(lambda: run.info().status == "FAILED", engine.timeout, 0.05)
        else:
            wait_until(lambda: len(bolt.record.get("prepared")) >= 3, engine.timeout, 0.02)
            if kind is ReportedFailedException:
                wait_until(lambda: run.info().components["finish"].errors_total >= 2, 10.0)
        info = run.info()
    reporting = {cid: stats.errors for cid, stats in info.components.items() if stats.errors}
    if kind is FailedException:
        assert reporting == {}
    else:
        assert list(reporting) == ["finish"]
        task = bolt.record.get("prepared")[0]
        assert {(e.component_id, e.task_id, e.error) for e in reporting["finish"]} == {
            ("finish", task, "ReportedFailedException: not now: 1")
        }
    if engine.is_spark:
        assert info.spark is not None
        errors = info.spark.first.errors
        assert len(errors) == 2
        assert all(e.endswith(f"{kind.__name__}: not now: 1") for e in errors)


def test_the_warning_of_a_failed_attempt_names_the_component(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The driver's warning of a run again gives the component's line, not the marker
    and traceback the failure's text carries."""
    figures = BatchFigures()
    conf = {"topology.spark.batch.retries": 1, "topology.trident.batch.retry.initial.millis": 0}
    retries = BatchRetries(conf, figures, SYSTEM_CLOCK, "topology 't'")
    failures = [raising()]

    def attempt(number: int) -> int:
        if failures:
            raise failures.pop()
        return number

    with caplog.at_level(logging.WARNING, logger="squall"):
        assert retries.run(0, attempt) == 1
    assert [record.getMessage() for record in caplog.records] == [
        "batch 0 failed (component 'split' task 4: ValueError: no such word); "
        "running it again in 0 ms"
    ]
    assert figures.errors_of("split")[1] == 1
