"""Trident operations: functions, filters and aggregators, and the built-in ones.

Every operation is copied into each task that runs it (like components); its
``prepare`` runs once per task and ``cleanup`` at shutdown. Plain callables are
accepted where a ``Function`` or ``Filter`` is expected.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from squall.model.context import TopologyContext
from squall.trident.collector import Collector
from squall.trident.tuple import TridentTuple


class TridentCollector(Collector):
    """Where an operation emits: each ``emit(values)`` becomes one output tuple,
    appended to the list given (Trident reads it after the call)."""

    __slots__ = ("_out",)

    def __init__(self, out: list[list[Any]]) -> None:
        self._out = out

    def emit(self, values: Sequence[Any]) -> None:
        """Emit ``values`` (the operation's output fields, in order)."""
        self._out.append(list(values))

    def report_error(self, error: BaseException | str) -> None:
        """Record an error (raising from the operation fails the batch instead)."""
        raise RuntimeError(str(error)) if isinstance(error, str) else error


class Operation:
    """Lifecycle shared by every Trident operation."""

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Called once per task, before any batch, in the task that runs the operation
        (``context`` is that task's)."""

    def cleanup(self) -> None:
        """Called once per task when the topology is killed."""


class Function(Operation, ABC):
    """``each(input_fields, function, output_fields)``: emit zero or more tuples per
    input; each emitted tuple is the input tuple with the output fields appended."""

    @abstractmethod
    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        """Process one tuple (projected to the input fields)."""


class Filter(Operation, ABC):
    """``each(input_fields, filter)`` / ``filter(...)``: keep the tuples it accepts."""

    @abstractmethod
    def is_keep(self, tup: TridentTuple) -> bool:
        """Whether to keep ``tup`` (projected to the input fields)."""


class CombinerAggregator(Operation, ABC):
    """Aggregates by combining: ``init`` turns each tuple into a value, ``combine`` merges
    two values, ``zero`` is the value of nothing. Combined partially before tuples are
    repartitioned (map-side), then across partitions, and with stored state."""

    @abstractmethod
    def init(self, tup: TridentTuple) -> Any:
        """The value of one tuple."""

    @abstractmethod
    def combine(self, value1: Any, value2: Any) -> Any:
        """Merge two values (associative and commutative)."""

    @abstractmethod
    def zero(self) -> Any:
        """The value of no tuple."""


class ReducerAggregator(Operation, ABC):
    """Aggregates by folding tuples into a value: ``init()`` then ``reduce(curr, tup)``."""

    @abstractmethod
    def init(self) -> Any:
        """The initial value."""

    @abstractmethod
    def reduce(self, curr: Any, tup: TridentTuple) -> Any:
        """Fold one tuple into ``curr``; return the new value."""


class Aggregator(Operation, ABC):
    """The general aggregator: ``init`` per batch (and group), ``aggregate`` per tuple,
    ``complete`` at the end, emitting any number of tuples."""

    @abstractmethod
    def init(self, batch_id: Any, collector: TridentCollector) -> Any:
        """Start a batch (or group); return the aggregation state."""

    @abstractmethod
    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        """Fold one tuple into ``state`` (may emit)."""

    @abstractmethod
    def complete(self, state: Any, collector: TridentCollector) -> None:
        """The batch (or group) is complete: emit the result."""


class StateUpdater(Operation, ABC):
    """``partition_persist``: update a state with a batch's tuples, at commit time."""

    @abstractmethod
    def update_state(
        self, state: Any, tuples: list[TridentTuple], collector: TridentCollector
    ) -> None:
        """Apply ``tuples`` to ``state`` (within the state's commit of the txid)."""


class QueryFunction(Operation, ABC):
    """``state_query``: look values up in a state, batched per partition and batch."""

    @abstractmethod
    def batch_retrieve(self, state: Any, tuples: list[TridentTuple]) -> list[Any]:
        """One result per tuple, looked up together."""

    @abstractmethod
    def execute(self, tup: TridentTuple, result: Any, collector: TridentCollector) -> None:
        """Emit the output fields for ``tup`` given its ``result``."""


# -- Built-ins ------------------------------------------------------------------------


class Count(CombinerAggregator):
    """Counts tuples."""

    def init(self, tup: TridentTuple) -> int:
        return 1

    def combine(self, value1: Any, value2: Any) -> Any:
        return value1 + value2

    def zero(self) -> int:
        return 0


class Sum(CombinerAggregator):
    """Sums the first input field (numbers)."""

    def init(self, tup: TridentTuple) -> Any:
        return tup[0]

    def combine(self, value1: Any, value2: Any) -> Any:
        return value1 + value2

    def zero(self) -> int:
        return 0


class FilterNull(Filter):
    """Keeps tuples none of whose (input) values is None."""

    def is_keep(self, tup: TridentTuple) -> bool:
        return all(value is not None for value in tup)


class Debug(Filter):
    """Prints every tuple (with an optional prefix) and keeps it."""

    def __init__(self, prefix: str = "DEBUG") -> None:
        self.prefix = prefix

    def is_keep(self, tup: TridentTuple) -> bool:
        print(f"{self.prefix}: {list(tup.values)!r}")
        return True


class FirstN(Aggregator):
    """Keeps the first ``n`` tuples of the batch, or the top ``n`` by ``sort_field``
    (descending unless ``reverse=False``)."""

    def __init__(self, n: int, sort_field: str | None = None, reverse: bool = True) -> None:
        self.n = n
        self.sort_field = sort_field
        self.reverse = reverse

    def init(self, batch_id: Any, collector: TridentCollector) -> list[TridentTuple]:
        return []

    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        state.append(tup)

    def complete(self, state: Any, collector: TridentCollector) -> None:
        chosen = state
        if self.sort_field is not None:
            field = self.sort_field
            chosen = sorted(state, key=lambda t: t[field], reverse=self.reverse)
        for tup in chosen[: self.n]:
            collector.emit(list(tup.values))


class MapGet(QueryFunction):
    """Looks each tuple's values (the key) up in a map state: one ``multi_get`` per
    partition and batch; emits the value (None when absent)."""

    def batch_retrieve(self, state: Any, tuples: list[TridentTuple]) -> list[Any]:
        return list(state.multi_get([tuple(t.values) for t in tuples]))

    def execute(self, tup: TridentTuple, result: Any, collector: TridentCollector) -> None:
        collector.emit([result])


# -- Plain callables --------------------------------------------------------------------


class CallableFunction(Function):
    """A function given as a callable ``fn(tup)``. What it returns becomes output tuples:

    * ``None`` or an empty list: no output;
    * a list or tuple of lists/tuples: one output per inner list;
    * a list or tuple with as many values as output fields: one output;
    * with one output field, a list or tuple of other length: one output per value;
    * any other iterable (a generator): one output per item (a list, or a single value);
    * a single value, with one output field: one output.
    """

    def __init__(self, fn: Callable[[TridentTuple], Any], output_width: int) -> None:
        self.fn = fn
        self.output_width = output_width

    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        result = self.fn(tup)
        if result is None:
            return
        width = self.output_width
        if isinstance(result, list | tuple):
            if not result:
                return
            if all(isinstance(item, list | tuple) for item in result):
                for item in result:
                    collector.emit(item)
            elif len(result) == width:
                collector.emit(result)
            elif width == 1:
                for item in result:
                    collector.emit([item])
            else:
                raise ValueError(
                    f"function {getattr(self.fn, '__name__', self.fn)!r} returned "
                    f"{len(result)} value(s) for {width} output field(s): {result!r}"
                )
        elif hasattr(result, "__iter__") and not isinstance(result, str | bytes | dict):
            for item in result:
                collector.emit(list(item) if isinstance(item, list | tuple) else [item])
        elif width == 1:
            collector.emit([result])
        else:
            raise ValueError(
                f"function {getattr(self.fn, '__name__', self.fn)!r} returned a single value "
                f"{result!r} for {width} output fields"
            )


class CallableFilter(Filter):
    """A filter given as a callable ``fn(tup) -> bool``."""

    def __init__(self, fn: Callable[[TridentTuple], Any]) -> None:
        self.fn = fn

    def is_keep(self, tup: TridentTuple) -> bool:
        return bool(self.fn(tup))
