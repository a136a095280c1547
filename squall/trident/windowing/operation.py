"""Adding a window operation to a Trident stream (Storm's ``Stream.window``).

``Stream.tumbling_window``, ``sliding_window`` and ``window`` come here. As in Storm the
operation is three nodes in one segment: the window node (its output: the trigger field
``_task_info``, then the function fields), a projection to the function fields (the
stream returned) and, off the window node, ``partition_persist`` of a
:class:`~squall.trident.windowing.state.WindowsStateUpdater` that drops each result
from the store when its batch commits. That makes the segment a committer: its batches
finish at their commits, in transaction order, so windows fill in transaction order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from squall.model.errors import InvalidTopologyError
from squall.model.fields import Fields, as_fields
from squall.trident.graph import check_fields
from squall.trident.operations import Aggregator, CombinerAggregator, ReducerAggregator
from squall.trident.windowing.config import (
    SlidingCountWindow,
    SlidingDurationWindow,
    TumblingCountWindow,
    TumblingDurationWindow,
    WindowConfig,
)
from squall.trident.windowing.processor import TRIGGER_FIELD_NAME
from squall.trident.windowing.state import WindowsStateFactory, WindowsStateUpdater
from squall.trident.windowing.store import InMemoryWindowsStoreFactory
from squall.windowing.spec import Count, Duration

if TYPE_CHECKING:
    from squall.trident.stream import FieldsLike, Stream


def tumbling_config(window: Any) -> WindowConfig:
    """``TumblingCountWindow`` for a count (an int or ``Count``),
    ``TumblingDurationWindow`` for a ``Duration``."""
    if isinstance(window, Duration):
        return TumblingDurationWindow.of(window)
    return TumblingCountWindow.of(window)


def sliding_config(window: Any, sliding: Any) -> WindowConfig:
    """``SlidingDurationWindow`` for two ``Duration``s, ``SlidingCountWindow`` for two
    counts.

    Raises:
        InvalidTopologyError: one is a duration and the other is not.
    """
    if isinstance(window, Duration) or isinstance(sliding, Duration):
        if not (isinstance(window, Duration) and isinstance(sliding, Duration)):
            raise InvalidTopologyError(
                "Trident sliding_window: give two counts or two Durations, got "
                f"{window!r} and {sliding!r}"
            )
        return SlidingDurationWindow.of(window, sliding)
    if isinstance(window, Count) or isinstance(sliding, Count):
        window = window.value if isinstance(window, Count) else window
        sliding = sliding.value if isinstance(sliding, Count) else sliding
    return SlidingCountWindow.of(window, sliding)


def add_window(
    stream: Stream,
    config: Any,
    store_factory: Any,
    input_fields: FieldsLike,
    aggregator: Any,
    function_fields: FieldsLike,
    store_tuples: bool,
) -> Stream:
    """The stream of the results of ``aggregator`` over each window of ``stream``
    (fields: ``function_fields``). ``store_tuples``: keep the tuples in the store too
    (a store factory was given), not only in the task's memory.

    Raises:
        InvalidTopologyError: a bad configuration, store factory, aggregator or field
            (the message names the operation and the problem).
    """
    where = "Trident window"
    if not isinstance(config, WindowConfig):
        raise InvalidTopologyError(
            f"{where}: expected a WindowConfig (TumblingCountWindow.of(n), "
            "SlidingCountWindow.of(n, s), TumblingDurationWindow.of(d), "
            f"SlidingDurationWindow.of(d, s)), got {config!r}"
        )
    config.validate()
    if not callable(getattr(store_factory, "create", None)):
        raise InvalidTopologyError(
            f"{where}: the window store factory must be a WindowsStoreFactory (with "
            f"create(conf)), got {type(store_factory).__name__}"
        )
    if not isinstance(aggregator, CombinerAggregator | ReducerAggregator | Aggregator):
        raise InvalidTopologyError(
            f"{where}: {type(aggregator).__name__} is not an aggregator "
            "(CombinerAggregator, ReducerAggregator or Aggregator)"
        )
    inputs = as_fields(input_fields)
    check_fields("window", inputs, stream.output_fields)
    functions = as_fields(function_fields)
    if not len(functions):
        raise InvalidTopologyError(f"{where}: give at least one function field")
    if TRIGGER_FIELD_NAME in functions:
        raise InvalidTopologyError(
            f"{where}: {TRIGGER_FIELD_NAME!r} is reserved for the window's trigger; "
            "choose other function field names"
        )
    window_id = f"w{sum(1 for n in stream._topology.nodes if n.kind == 'window') + 1}"
    windowed = stream._add(
        "window",
        Fields([TRIGGER_FIELD_NAME, *functions]),
        config=config,
        store_factory=store_factory,
        inputs=inputs,
        aggregator=aggregator,
        function_fields=functions,
        store_tuples=store_tuples,
        window_id=window_id,
    )
    results = windowed.project(functions)
    dropper = windowed.partition_persist(
        WindowsStateFactory(),
        Fields([TRIGGER_FIELD_NAME]),
        WindowsStateUpdater(store_factory),
        Fields([]),
    )
    for part in (results.node, dropper.node):
        if part is not None:
            part.params["window_part"] = True  # not named in the segment's label
    return results


def window_args(args: tuple[Any, ...]) -> tuple[Any, Any, Any, Any, bool]:
    """``(store_factory, input_fields, aggregator, function_fields, store_tuples)`` from
    the arguments of ``Stream.window`` after the config: ``(input_fields, aggregator,
    function_fields)`` keeps the tuples in memory only; ``(store_factory,
    input_fields, aggregator, function_fields)`` also in the factory's store.

    Raises:
        TypeError: another number of arguments.
    """
    if len(args) == 3:
        return InMemoryWindowsStoreFactory(), args[0], args[1], args[2], False
    if len(args) == 4:
        return args[0], args[1], args[2], args[3], True
    raise TypeError(
        "window takes (window_config, [window_store_factory,] input_fields, aggregator, "
        "function_fields)"
    )


__all__ = ["add_window", "sliding_config", "tumbling_config", "window_args"]
