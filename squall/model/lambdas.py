"""Components made of functions: Storm's ``LambdaSpout``, ``LambdaBiConsumerBolt`` and
``LambdaConsumerBolt``, which ``TopologyBuilder.set_spout``/``set_bolt`` make when given
a function instead of a component.

Each task runs its own copy of the function, as each Storm task deserializes its own:
the engines copy components per task (``copy.deepcopy`` on the local engine, pickling
with cloudpickle to worker processes and Spark), and a copy here deep-copies the
function's closure and default values, so state a closure holds (an iterator, a
counter) is per task on every engine.
"""

from __future__ import annotations

import copy
import inspect
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

from squall.model.components import BasicBolt, Component, Spout
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.errors import InvalidTopologyError
from squall.model.hooks import AdaptsToBolt, implements
from squall.model.tuple import Tuple

if TYPE_CHECKING:
    from squall.model.collectors import BasicOutputCollector

#: The one field a lambda spout's tuples have (Storm's ``LambdaSpout``).
LAMBDA_FIELD = "lambda"


def copy_function(function: Callable[..., Any], memo: dict[int, Any]) -> Callable[..., Any]:
    """A copy of ``function`` with its own deep copies of its closure's values and its
    default values (a Python function otherwise copies as itself); any other callable
    is deep-copied. Runs where the engine copies a component for a task."""
    if not isinstance(function, types.FunctionType):
        return copy.deepcopy(function, memo)
    cells = None
    if function.__closure__ is not None:
        cells = tuple(_copy_cell(cell, memo) for cell in function.__closure__)
    copied = types.FunctionType(
        function.__code__,
        function.__globals__,
        function.__name__,
        copy.deepcopy(function.__defaults__, memo),
        cells,
    )
    copied.__kwdefaults__ = copy.deepcopy(function.__kwdefaults__, memo)
    copied.__qualname__ = function.__qualname__
    copied.__module__ = function.__module__
    copied.__doc__ = function.__doc__
    copied.__dict__.update(copy.deepcopy(function.__dict__, memo))
    return copied


def _copy_cell(cell: types.CellType, memo: dict[int, Any]) -> types.CellType:
    try:
        contents = cell.cell_contents
    except ValueError:  # an empty cell (a name not yet bound)
        return types.CellType()
    return types.CellType(copy.deepcopy(contents, memo))


class LambdaSpout(Spout):
    """Storm's ``LambdaSpout``: each ``next_tuple`` calls ``supplier()`` and emits what it
    returns as a one-value tuple on field ``"lambda"``, unless it returns None.

    Emits unanchored (no msg id: nothing is acked or replayed) and never waits between
    calls, as Storm's; a supplier with nothing to give returns None.
    """

    def __init__(self, supplier: Callable[[], Any]) -> None:
        self.supplier = supplier

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare([LAMBDA_FIELD])

    def next_tuple(self) -> None:
        """Emit the supplier's value, if not None. On the task's thread."""
        value = self.supplier()
        if value is not None:
            self.collector.emit([value])

    def __deepcopy__(self, memo: dict[int, Any]) -> LambdaSpout:
        return LambdaSpout(copy_function(self.supplier, memo))


class LambdaBiConsumerBolt(BasicBolt):
    """Storm's ``LambdaBiConsumerBolt``: a basic bolt whose ``execute`` is
    ``bi_consumer(tup, collector)``, declaring ``fields`` on the default stream.

    Emits through ``collector`` are anchored to ``tup``; ``tup`` is acked when the
    function returns and failed if it raises.
    """

    def __init__(
        self,
        bi_consumer: Callable[[Tuple, BasicOutputCollector], Any],
        fields: Sequence[str],
    ) -> None:
        self.bi_consumer = bi_consumer
        self.fields = list(fields)

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        """Call the function. On the task's thread."""
        self.bi_consumer(tup, collector)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(self.fields)

    def __deepcopy__(self, memo: dict[int, Any]) -> LambdaBiConsumerBolt:
        return LambdaBiConsumerBolt(copy_function(self.bi_consumer, memo), self.fields)


class LambdaConsumerBolt(BasicBolt):
    """Storm's ``LambdaConsumerBolt``: a basic bolt whose ``execute`` is
    ``consumer(tup)``; it declares no stream. ``tup`` is acked when the function
    returns and failed if it raises."""

    def __init__(self, consumer: Callable[[Tuple], Any]) -> None:
        self.consumer = consumer

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        """Call the function. On the task's thread."""
        self.consumer(tup)

    def __deepcopy__(self, memo: dict[int, Any]) -> LambdaConsumerBolt:
        return LambdaConsumerBolt(copy_function(self.consumer, memo))


def is_function_component(candidate: object) -> TypeGuard[Callable[..., Any]]:
    """Whether ``set_spout``/``set_bolt`` take ``candidate`` as a function to wrap: a
    callable that is neither a class nor a component (nor a component adapted to a
    bolt, such as a ``WindowedBolt``)."""
    return (
        callable(candidate)
        and not isinstance(candidate, type | Component)
        and not implements(candidate, AdaptsToBolt)
    )


def _described(function: Callable[..., Any]) -> str:
    name = getattr(function, "__name__", None) or type(function).__name__
    try:
        return f"{name}{inspect.signature(function)}"
    except (TypeError, ValueError):
        return str(name)


def _arity(function: Callable[..., Any]) -> tuple[int, int | None] | None:
    """``(required positional arguments, most positional arguments or None for any)``,
    or None when the signature cannot be read (some builtins)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    required, most = 0, 0
    unbounded = False
    for parameter in signature.parameters.values():
        if parameter.kind is parameter.VAR_POSITIONAL:
            unbounded = True
        elif parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            most += 1
            required += parameter.default is parameter.empty
        elif parameter.kind is parameter.KEYWORD_ONLY and parameter.default is parameter.empty:
            return (-1, 0)  # needs a keyword argument: fits no kind
    return required, None if unbounded else most


def _accepts(arity: tuple[int, int | None] | None, count: int) -> bool:
    if arity is None:
        return True
    required, most = arity
    return 0 <= required <= count and (most is None or count <= most)


def lambda_spout(component_id: str, supplier: Callable[[], Any]) -> LambdaSpout:
    """The spout for a function given to ``set_spout``.

    Raises:
        InvalidTopologyError: the function cannot be called with no argument.
    """
    if not _accepts(_arity(supplier), 0):
        raise InvalidTopologyError(
            f"spout {component_id!r}: a function given as a spout is called with no "
            f"argument (each next_tuple emits what it returns, unless None); "
            f"{_described(supplier)} cannot be"
        )
    return LambdaSpout(supplier)


def lambda_bolt(
    component_id: str, function: Callable[..., Any], fields: Sequence[str]
) -> LambdaBiConsumerBolt | LambdaConsumerBolt:
    """The bolt for a function given to ``set_bolt``: ``fn(tup, collector)`` makes a
    :class:`LambdaBiConsumerBolt` declaring ``fields``, ``fn(tup)`` a
    :class:`LambdaConsumerBolt` (which declares nothing, so takes no fields). Told apart
    by the function's signature: one that takes either is a consumer without fields, a
    bi-consumer with them; one whose signature cannot be read (a builtin such as
    ``print``) likewise.

    Raises:
        InvalidTopologyError: naming the bolt, when the function fits neither kind.
    """
    kind = _bolt_kind(_arity(function), bool(fields))
    if kind == "bi_consumer":
        return LambdaBiConsumerBolt(function, fields)
    if kind == "consumer":
        return LambdaConsumerBolt(function)
    if fields and _accepts(_arity(function), 1):
        raise InvalidTopologyError(
            f"bolt {component_id!r}: a function given as a bolt with output fields "
            f"{list(fields)} takes (tup, collector) to emit them; {_described(function)} "
            f"takes only the tuple"
        )
    raise InvalidTopologyError(
        f"bolt {component_id!r}: a function given as a bolt takes (tup) or (tup, "
        f"collector); {_described(function)} takes neither"
    )


def _bolt_kind(
    arity: tuple[int, int | None] | None, has_fields: bool
) -> Literal["consumer", "bi_consumer"] | None:
    if has_fields:
        return "bi_consumer" if _accepts(arity, 2) else None
    if arity is not None and arity[0] == 2:
        return "bi_consumer"
    if _accepts(arity, 1):
        return "consumer"
    return "bi_consumer" if _accepts(arity, 2) else None


__all__ = [
    "LAMBDA_FIELD",
    "LambdaBiConsumerBolt",
    "LambdaConsumerBolt",
    "LambdaSpout",
    "copy_function",
    "is_function_component",
    "lambda_bolt",
    "lambda_spout",
]
