"""Storm's comparison aggregators, behind ``Stream.min``/``max``/``min_by``/``max_by``.

Each keeps, per partition of a batch, the tuple whose value (a field's, or the whole
tuple) compares lowest (``Min``) or highest (``Max``), and emits that tuple's values when
the partition's batch is complete, as Storm's ``ComparisonAggregator`` does:

* a tuple whose value is ``None`` is skipped;
* on a tie the later tuple wins (for the minimum and the maximum alike);
* a partition with no tuple, or only ``None`` values, emits nothing (Storm emits a
  tuple without values there).

Values compare in their natural order (``<``), or with a comparator: a ``cmp(a, b) ->
int`` function or an object with a ``compare(a, b) -> int`` method (a Java
``Comparator`` ported as it is written), negative when ``a`` sorts before ``b``; or with
a ``key`` function (values compare by ``key(value)``). :func:`comparator_function`
turns the user's choice into one ``cmp`` function and checks it at build time.
"""

from __future__ import annotations

import inspect
from abc import abstractmethod
from collections.abc import Callable
from typing import Any

from squall.model.errors import InvalidTopologyError
from squall.trident.operations import Aggregator, TridentCollector
from squall.trident.tuple import TridentTuple

#: A comparison function: negative, zero or positive as ``a`` sorts before, with or
#: after ``b`` (Java's ``Comparator.compare``, Python 2's ``cmp``).
Cmp = Callable[[Any, Any], int]


def _arity_error(function: Callable[..., Any]) -> bool:
    """Whether ``function`` certainly cannot be called with two positional arguments."""
    try:
        inspect.signature(function).bind(None, None)
    except TypeError:
        return True
    except ValueError:  # no signature (some builtins): trust the caller
        return False
    return False


def comparator_function(where: str, comparator: Any = None, key: Any = None) -> Cmp | None:
    """The ``cmp`` function of a ``min``/``max`` operation, or ``None`` for the values'
    natural order. Runs at build time.

    Args:
        where: the operation, for error messages (``"min_by('speed')"``).
        comparator: ``cmp(a, b) -> int`` or an object with ``compare(a, b) -> int``.
        key: a key function, ``key(value)`` (not together with ``comparator``).

    Raises:
        InvalidTopologyError: both given, or one that is not callable, or a comparator
            that takes one argument (a key function given as comparator).
    """
    if comparator is not None and key is not None:
        raise InvalidTopologyError(f"Trident {where}: give a comparator or key=, not both")
    if key is not None:
        if not callable(key):
            raise InvalidTopologyError(
                f"Trident {where}: key must be a function of one value, got {type(key).__name__}"
            )
        return _KeyCmp(key)
    if comparator is None:
        return None
    if isinstance(comparator, type):
        raise InvalidTopologyError(
            f"Trident {where}: the comparator is the class {comparator.__name__}; give an "
            f"instance ({comparator.__name__}())"
        )
    compare = getattr(comparator, "compare", None)
    if callable(compare) and not inspect.isroutine(comparator):
        function: Cmp = compare
    elif callable(comparator):
        function = comparator
    else:
        raise InvalidTopologyError(
            f"Trident {where}: the comparator must be a function cmp(a, b) -> int or an "
            f"object with a compare(a, b) method, got {type(comparator).__name__}"
        )
    if _arity_error(function):
        raise InvalidTopologyError(
            f"Trident {where}: the comparator {_name(comparator)} does not take two "
            "arguments: a comparator is cmp(a, b) -> int (negative when a sorts first, as "
            "Java's Comparator.compare); pass a function of one value as key=..."
        )
    return function


def _name(operation: Any) -> str:
    name = getattr(operation, "__name__", None)
    return repr(name) if isinstance(name, str) else type(operation).__name__


class _KeyCmp:
    """``cmp`` over ``key(value)`` (picklable, unlike a closure)."""

    def __init__(self, key: Callable[[Any], Any]) -> None:
        self.key = key

    def __call__(self, a: Any, b: Any) -> int:
        ka, kb = self.key(a), self.key(b)
        return -1 if ka < kb else (1 if kb < ka else 0)


class ComparisonAggregator(Aggregator):
    """Keeps the tuple whose value ``compare`` prefers (Storm's ``ComparisonAggregator``).

    The value is field ``input_field_name`` of each tuple, or the whole tuple when it is
    ``None``. Runs in each task of a ``partition_aggregate``: ``init`` per batch,
    ``aggregate`` per tuple, ``complete`` emits the kept tuple's values (all the fields the
    aggregator was given), or nothing if no tuple had a value.
    """

    def __init__(self, input_field_name: str | None = None) -> None:
        self.input_field_name = input_field_name

    @abstractmethod
    def compare(self, value1: Any, value2: Any) -> Any:
        """The preferred one of ``value1`` (kept so far) and ``value2`` (the new one);
        returning ``value2`` (the same object) replaces the kept tuple."""

    def value(self, tup: TridentTuple) -> Any:
        """The value of ``tup`` that is compared."""
        return tup if self.input_field_name is None else tup[self.input_field_name]

    def init(self, batch_id: Any, collector: TridentCollector) -> list[Any]:
        return [None]

    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        value2 = self.value(tup)
        if value2 is None:
            return
        kept = state[0]
        if kept is None or self.compare(self.value(kept), value2) is value2:
            state[0] = tup

    def complete(self, state: Any, collector: TridentCollector) -> None:
        if state[0] is not None:
            collector.emit(list(state[0].values))


class Min(ComparisonAggregator):
    """The tuple with the lowest value of ``input_field_name``, in natural order."""

    def __init__(self, input_field_name: str) -> None:
        super().__init__(input_field_name)

    def compare(self, value1: Any, value2: Any) -> Any:
        return value1 if value1 < value2 else value2


class Max(ComparisonAggregator):
    """The tuple with the highest value of ``input_field_name``, in natural order."""

    def __init__(self, input_field_name: str) -> None:
        super().__init__(input_field_name)

    def compare(self, value1: Any, value2: Any) -> Any:
        return value1 if value1 > value2 else value2


class MinWithComparator(ComparisonAggregator):
    """The tuple with the lowest value by ``comparator`` (a ``cmp(a, b) -> int``): of
    field ``input_field_name``, or of the whole tuple when it is ``None``."""

    def __init__(self, input_field_name: str | None, comparator: Cmp) -> None:
        super().__init__(input_field_name)
        self.comparator = comparator

    def compare(self, value1: Any, value2: Any) -> Any:
        return value1 if self.comparator(value1, value2) < 0 else value2


class MaxWithComparator(ComparisonAggregator):
    """The tuple with the highest value by ``comparator`` (a ``cmp(a, b) -> int``): of
    field ``input_field_name``, or of the whole tuple when it is ``None``."""

    def __init__(self, input_field_name: str | None, comparator: Cmp) -> None:
        super().__init__(input_field_name)
        self.comparator = comparator

    def compare(self, value1: Any, value2: Any) -> Any:
        return value1 if self.comparator(value1, value2) > 0 else value2
