"""The interfaces components are given are typed: no ``context``/``collector`` parameter
of the package is ``Any``, and every collector a Trident operation or spout emitter
emits through implements ``squall.trident.collector.Collector``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import squall
from squall.transactional.attempt import TransactionAttempt
from squall.trident.operations import TridentCollector
from squall.trident.spouts import SpoutCollector

#: A parameter or attribute named ``context``/``collector`` (or ``*_context``) typed Any.
UNTYPED = re.compile(r"\b\w*(context|collector): Any\b")


def test_no_context_or_collector_is_typed_any() -> None:
    package = Path(squall.__file__).parent
    found = [
        f"{path.relative_to(package)}:{number}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if UNTYPED.search(line)
    ]
    assert found == []


class _Batch:
    """What a spout collector hands its tuples to."""

    def __init__(self) -> None:
        self.emitted: list[list[Any]] = []

    def emit(self, values: list[Any]) -> None:
        self.emitted.append(list(values))

    def report_error(self, error: BaseException | str) -> None:
        raise AssertionError(error)


def test_trident_collectors_implement_the_collector_interface() -> None:
    from squall.trident.collector import Collector

    out: list[list[Any]] = []
    operation = TridentCollector(out)
    assert isinstance(operation, Collector)
    operation.emit(("a", 1))
    assert out == [["a", 1]]

    batch = _Batch()
    attempt = TransactionAttempt(7, 1)
    spout = SpoutCollector(batch, attempt)  # type: ignore[arg-type]
    assert isinstance(spout, Collector)
    spout.emit(["b"])
    assert batch.emitted == [[attempt, "b"]]


def test_the_spark_readers_collector_implements_the_interface() -> None:
    from squall.spark.sources.sourcereader import Rows
    from squall.trident.collector import Collector

    rows = Rows()
    assert isinstance(rows, Collector)
    rows.emit(("x", 2))
    assert rows.rows == [["x", 2]]


def test_a_collector_must_implement_emit_and_report_error() -> None:
    from squall.trident.collector import Collector

    class EmitsOnly(Collector):
        def emit(self, values: Any) -> None:
            """Nothing."""

    with pytest.raises(TypeError, match="report_error"):
        EmitsOnly()  # type: ignore[abstract]
