"""``Collector``: the interface every Trident collector implements (Storm's
``TridentCollector``).

A Trident operation (function, aggregator, state updater, query function) and a
Trident spout's emitter are given one: each ``emit(values)`` becomes one tuple of the
batch, ``report_error`` records an error. The engines and Trident pass in their own
implementations (``squall.trident.operations.TridentCollector`` for operations,
``squall.trident.spouts.SpoutCollector`` for spouts).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any


class Collector(ABC):
    """What a Trident operation or spout emitter emits through.

    Called in the task that runs the operation or emitter, while it processes a batch.
    """

    __slots__ = ()

    @abstractmethod
    def emit(self, values: Sequence[Any]) -> None:
        """Emit one tuple: ``values`` are its fields, in the declared order."""

    @abstractmethod
    def report_error(self, error: BaseException | str) -> None:
        """Record an error (the implementation says whether it also fails the batch)."""


__all__ = ["Collector"]
