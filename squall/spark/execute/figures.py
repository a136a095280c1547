"""Per-component counts of the stages of a Spark topology, summed over tasks and
micro-batches: executed (tuples in), emitted (emit calls), transferred (tuples sent to
tasks) and seconds spent running the component's tasks.

Stages on executors add to a Spark accumulator (merged on the driver from successful
tasks only); stages on the driver add directly.
"""

from __future__ import annotations

from typing import Any

from pyspark.accumulators import AccumulatorParam

#: ``[executed, emitted, transferred, seconds]``
Figures = list[float]


def zero() -> Figures:
    return [0, 0, 0, 0.0]


class FiguresParam(AccumulatorParam):
    """Adds figures element by element."""

    def zero(self, value: Figures) -> Figures:
        return zero()

    def addInPlace(self, value1: Figures, value2: Figures) -> Figures:
        for index, added in enumerate(value2):
            value1[index] += added
        return value1


def add(target: Any, executed: int, emitted: int, transferred: int, seconds: float) -> None:
    """Add one task's run to ``target`` (an accumulator, or a list on the driver)."""
    figures = [executed, emitted, transferred, seconds]
    if isinstance(target, list):
        FiguresParam().addInPlace(target, figures)
    else:
        target.add(figures)
