"""Processors: the runtime of Trident nodes inside a segment (one batch bolt task).

A processor receives a batch's tuples as value lists (``process``), keeps per-batch
state (``start`` creates it), and at the end of the batch (``finish``, in topological
order within the segment) emits aggregated results. ``emit`` hands values to the
processor's children in the segment and to its output streams (other segments).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, Protocol

from squall.model.context import TopologyContext
from squall.model.fields import Fields
from squall.model.hooks import CachesState
from squall.transactional.attempt import TransactionAttempt
from squall.trident.graph import Node
from squall.trident.operations import (
    Aggregator,
    CombinerAggregator,
    Count,
    TridentCollector,
)
from squall.trident.tuple import TridentTuple


def projector(positions: list[int]) -> Callable[[list[Any]], list[Any]]:
    """A fast ``values -> [values[p] for p in positions]``."""
    if not positions:
        return lambda values: []
    if len(positions) == 1:
        position = positions[0]
        return lambda values: [values[position]]
    getter = itemgetter(*positions)
    return lambda values: list(getter(values))


def key_getter(positions: list[int]) -> Callable[[list[Any]], tuple[Any, ...]]:
    """A fast ``values -> tuple(values[p] for p in positions)`` (a group key)."""
    if not positions:
        return lambda values: ()
    if len(positions) == 1:
        position = positions[0]
        return lambda values: (values[position],)
    getter = itemgetter(*positions)
    return getter  # itemgetter of two or more positions returns a tuple


_MISSING = object()


class SegmentOutput(Protocol):
    """Where a segment's processors emit on its output streams: the batch bolt's
    ``BatchOutputCollector`` on the local engine, the stage's outputs on Spark. Each
    ``values`` starts with the batch's attempt."""

    def emit(self, values: Sequence[Any], stream: str = ...) -> object:
        """Emit ``values`` on ``stream``."""
        ...


class BatchRun:
    """One batch at one task: its attempt, collector and per-processor states."""

    __slots__ = ("attempt", "collector", "states", "task_index")

    def __init__(
        self,
        attempt: TransactionAttempt,
        collector: SegmentOutput,
        processors: list[Processor],
        task_index: int,
    ) -> None:
        self.attempt = attempt
        self.collector = collector
        self.task_index = task_index
        self.states = [p.start() for p in processors]


class Processor:
    """Base: pass-through (repartition and merge points)."""

    #: Whether the processor keeps data across batches in its task's memory (a window):
    #: an engine must then run every batch of the task in one process (on Spark, the
    #: driver).
    spans_batches = False

    def __init__(self, node: Node, input_fields: Fields) -> None:
        self.node = node
        self.input_fields = input_fields
        self.index = -1
        self.children: list[tuple[Processor, int]] = []
        self.output_streams: list[str] = []

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Once per task, before any batch."""

    def cleanup(self) -> None:
        """Once per task, at shutdown."""

    def start(self) -> Any:
        """Per-batch state (None by default)."""
        return None

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        """One tuple of the batch."""
        self.emit(run, values)

    def finish(self, run: BatchRun, state: Any) -> None:
        """The batch is complete at this task."""

    def emit(self, run: BatchRun, values: list[Any]) -> None:
        """Send ``values`` to the children and output streams."""
        states = run.states
        for child, side in self.children:
            child.process(run, states[child.index], values, side)
        for stream in self.output_streams:
            run.collector.emit([run.attempt, *values], stream)

    def wired(self) -> None:
        """Children and output streams are final: a processor with one child and no
        output stream emits straight to it (the common case, on the hot path)."""
        if len(self.children) == 1 and not self.output_streams:
            self._child, self._child_side = self.children[0]
            self.emit = self._emit_to_child  # type: ignore[method-assign]

    def _emit_to_child(self, run: BatchRun, values: list[Any]) -> None:
        child = self._child
        child.process(run, run.states[child.index], values, self._child_side)

    def _projector(self, fields: Fields) -> list[int]:
        return [self.input_fields.index(name) for name in fields]


class EachProcessor(Processor):
    """``each(inputs, function, outputs)``."""

    def __init__(self, node: Node, input_fields: Fields) -> None:
        super().__init__(node, input_fields)
        self.inputs: Fields = node.params["inputs"]
        self.positions = self._projector(self.inputs)
        self.function = node.params["function"]
        self.width = len(node.params["outputs"])
        self._project = projector(self.positions)
        # One collector per processor, reused for every tuple (hot path).
        self._out: list[list[Any]] = []
        self._collector = TridentCollector(self._out)

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        self.function.prepare(conf, context)

    def cleanup(self) -> None:
        self.function.cleanup()

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        out = self._out
        self.function.execute(TridentTuple(self._project(values), self.inputs), self._collector)
        if not out:
            return
        # A processor is never re-entered while it emits (segments are trees), so the
        # emitted list is walked in place and cleared afterwards, even on an error.
        width = self.width
        try:
            for appended in out:
                if len(appended) != width:
                    raise ValueError(
                        f"Trident each ({type(self.function).__name__}) emitted "
                        f"{len(appended)} value(s) for output fields "
                        f"{self.node.params['outputs'].to_list()}: {appended!r}"
                    )
                self.emit(run, values + appended)
        finally:
            out.clear()


class FilterProcessor(Processor):
    """``each(inputs, filter)``."""

    def __init__(self, node: Node, input_fields: Fields) -> None:
        super().__init__(node, input_fields)
        self.inputs: Fields = node.params["inputs"]
        self.positions = self._projector(self.inputs)
        self.filter = node.params["filter"]

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        self.filter.prepare(conf, context)

    def cleanup(self) -> None:
        self.filter.cleanup()

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        if self.filter.is_keep(TridentTuple([values[p] for p in self.positions], self.inputs)):
            self.emit(run, values)


def _as_row(result: Any, width: int, where: str) -> list[Any]:
    if isinstance(result, list | tuple) and len(result) == width:
        return list(result)
    if width == 1 and not isinstance(result, list | tuple):
        return [result]
    raise ValueError(f"Trident {where} returned {result!r} for {width} output field(s)")


class MapProcessor(Processor):
    """``map(fn, outputs)``: one output tuple per input."""

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        result = self.node.params["fn"](TridentTuple(values, self.input_fields))
        self.emit(run, _as_row(result, len(self.node.output_fields), "map"))


class FlatMapProcessor(Processor):
    """``flat_map(fn, outputs)``: any number of output tuples per input."""

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        width = len(self.node.output_fields)
        for result in self.node.params["fn"](TridentTuple(values, self.input_fields)) or ():
            self.emit(run, _as_row(result, width, "flat_map"))


class PeekProcessor(Processor):
    """``peek(fn)``."""

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        self.node.params["fn"](TridentTuple(values, self.input_fields))
        self.emit(run, values)


class ProjectProcessor(Processor):
    """``project(fields)``."""

    def __init__(self, node: Node, input_fields: Fields) -> None:
        super().__init__(node, input_fields)
        self.positions = self._projector(node.output_fields)

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        self.emit(run, [values[p] for p in self.positions])


class _Grouped(Processor):
    """Shared by aggregations: the group key and the projected inputs of a tuple."""

    def __init__(self, node: Node, input_fields: Fields) -> None:
        super().__init__(node, input_fields)
        group = node.params.get("group")
        self.group: Fields = group if group is not None else Fields([])
        self.grouped = group is not None and len(group) > 0
        self.group_positions = self._projector(self.group)
        inputs = node.params.get("inputs")
        self.inputs: Fields = inputs if inputs is not None else Fields([])
        self.input_positions = self._projector(self.inputs)
        self.aggregator: Any = node.params.get("aggregator")
        self._key = key_getter(self.group_positions)
        self._project = projector(self.input_positions)
        self.whole_batch = bool(node.params.get("whole_batch"))
        self.width = len(node.output_fields) - len(self.group)

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        if self.aggregator is not None:
            self.aggregator.prepare(conf, context)

    def key(self, values: list[Any]) -> tuple[Any, ...]:
        return self._key(values)

    def projected(self, values: list[Any]) -> TridentTuple:
        return TridentTuple(self._project(values), self.inputs)

    def start(self) -> dict[tuple[Any, ...], Any]:
        return {}

    def emits_empty(self, run: BatchRun) -> bool:
        """Whether an ungrouped aggregation emits a result for an empty batch here: a
        ``partition_aggregate`` in every partition, as Storm does; the whole batch's
        ``aggregate`` once, at the task global grouping sends to (index 0)."""
        return not self.grouped and (not self.whole_batch or run.task_index == 0)


class CombinePartialProcessor(_Grouped):
    """Map-side combine before a repartition: one partial per group and batch. The
    built-in ``Count`` is counted in place (its ``init`` is 1 and ``combine`` adds)."""

    def __init__(self, node: Node, input_fields: Fields) -> None:
        super().__init__(node, input_fields)
        if type(self.aggregator) is Count:
            self.process = self._count  # type: ignore[method-assign]

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        key = self._key(values)
        value = self.aggregator.init(TridentTuple(self._project(values), self.inputs))
        old = state.get(key, _MISSING)
        state[key] = value if old is _MISSING else self.aggregator.combine(old, value)

    def _count(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        key = self._key(values)
        state[key] = state.get(key, 0) + 1

    def finish(self, run: BatchRun, state: Any) -> None:
        for key, value in state.items():
            self.emit(run, [*key, value])


class CombineFinalProcessor(_Grouped):
    """After the repartition: combine the partials of each group."""

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        key = tuple(values[:-1])
        state[key] = self.aggregator.combine(state[key], values[-1]) if key in state else values[-1]

    def finish(self, run: BatchRun, state: Any) -> None:
        if not state and self.emits_empty(run):
            state[()] = self.aggregator.zero()
        for key, value in state.items():
            self.emit(run, [*key, value])


class PartitionAggregateProcessor(_Grouped):
    """Aggregation of each group (or the whole partition) within one task's batch."""

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        key = self.key(values)
        aggregator = self.aggregator
        tup = self.projected(values)
        if isinstance(aggregator, CombinerAggregator):
            value = aggregator.init(tup)
            state[key] = aggregator.combine(state[key], value) if key in state else value
        elif isinstance(aggregator, Aggregator):
            entry = state.get(key)
            if entry is None:
                out: list[list[Any]] = []
                entry = state[key] = (aggregator.init(run.attempt, TridentCollector(out)), out)
            aggregator.aggregate(entry[0], tup, TridentCollector(entry[1]))
        else:
            state[key] = aggregator.reduce(state[key] if key in state else aggregator.init(), tup)

    def finish(self, run: BatchRun, state: Any) -> None:
        aggregator = self.aggregator
        if not state and self.emits_empty(run):
            if isinstance(aggregator, CombinerAggregator):
                state[()] = aggregator.zero()
            elif isinstance(aggregator, Aggregator):
                out: list[list[Any]] = []
                state[()] = (aggregator.init(run.attempt, TridentCollector(out)), out)
            else:
                state[()] = aggregator.init()
        for key, value in state.items():
            if isinstance(aggregator, Aggregator):
                aggregator_state, out = value
                aggregator.complete(aggregator_state, TridentCollector(out))
                for row in out:
                    if len(row) != self.width:
                        raise ValueError(
                            f"Trident aggregator {type(aggregator).__name__} emitted "
                            f"{len(row)} value(s) for output fields "
                            f"{self.node.output_fields.to_list()[len(self.group) :]}: {row!r}"
                        )
                    self.emit(run, [*key, *row])
            else:
                self.emit(run, [*key, value])


class StateProcessor(Processor):
    """Holds the task's state object, made by the factory in ``prepare``."""

    def __init__(self, node: Node, input_fields: Fields, factory: Any) -> None:
        super().__init__(node, input_fields)
        self.factory = factory
        self.state: Any = None

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        self.open_state(conf, context)

    def open_state(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Make the task's state with the factory (in ``prepare``; an engine may close
        it and make it again between batches)."""
        tasks = context.get_component_tasks(context.component_id)
        self.state = self.factory.make_state(conf, context, context.task_index, len(tasks))

    def close_state(self) -> None:
        """Close the task's state (its connections, its cache) and forget it."""
        state, self.state = self.state, None
        if state is not None and callable(getattr(state, "close", None)):
            state.close()

    def cleanup(self) -> None:
        """At shutdown: close the task's state (``State.close``)."""
        self.close_state()


class PersistProcessor(StateProcessor):
    """``persistent_aggregate`` / ``partition_persist``: updates the state at commit
    time (the segment is a committer), in transaction order, with the batch's txid."""

    def __init__(self, node: Node, input_fields: Fields) -> None:
        super().__init__(node, input_fields, node.params["factory"])
        self.mode = node.params["mode"]
        self.aggregator: Any = node.params.get("aggregator") or node.params.get("updater")
        self.group: Fields = node.params["group"]
        self.group_positions = self._projector(self.group)
        inputs = node.params.get("inputs")
        self.inputs: Fields = inputs if inputs is not None else Fields([])
        self.input_positions = self._projector(self.inputs) if self.mode != "combiner" else []

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        super().prepare(conf, context)
        self.aggregator.prepare(conf, context)

    def cleanup(self) -> None:
        """At shutdown: the aggregator's or updater's ``cleanup``, then close the
        state."""
        try:
            _cleanup(self.aggregator)
        finally:
            super().cleanup()

    def start(self) -> dict[tuple[Any, ...], Any]:
        return {}

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        if self.mode == "combiner":
            key = tuple(values[:-1])
            state[key] = (
                self.aggregator.combine(state[key], values[-1]) if key in state else values[-1]
            )
            return
        key = tuple(values[p] for p in self.group_positions) if self.mode == "reducer" else ()
        state.setdefault(key, []).append(
            TridentTuple([values[p] for p in self.input_positions], self.inputs)
        )

    def finish(self, run: BatchRun, state: Any) -> None:
        txid = run.attempt.transaction_id
        target = self.state
        target.begin_commit(txid)
        if self.mode == "updater":
            out: list[list[Any]] = []
            self.aggregator.update_state(target, state.get((), []), TridentCollector(out))
            target.commit(txid)
            for row in out:
                self.emit(run, row)
            return
        keys = list(state)
        aggregator = self.aggregator
        if self.mode == "combiner":
            updaters = [_combine_into(aggregator, state[key]) for key in keys]
        else:
            updaters = [_reduce_into(aggregator, state[key]) for key in keys]
        new_values = target.multi_update(keys, updaters) if keys else []
        target.commit(txid)
        for key, value in zip(keys, new_values, strict=True):
            self.emit(run, [*key, value])


def _cleanup(operation: Any) -> None:
    """``operation.cleanup()`` if it has one."""
    cleanup = getattr(operation, "cleanup", None)
    if callable(cleanup):
        cleanup()


def _combine_into(aggregator: Any, partial: Any) -> Any:
    def update(old: Any) -> Any:
        return aggregator.combine(aggregator.zero() if old is None else old, partial)

    return update


def _reduce_into(aggregator: Any, tuples: list[TridentTuple]) -> Any:
    def update(old: Any) -> Any:
        value = aggregator.init() if old is None else old
        for tup in tuples:
            value = aggregator.reduce(value, tup)
        return value

    return update


class StateQueryProcessor(StateProcessor):
    """``state_query``: one batched lookup per partition and batch, at its end."""

    def __init__(self, node: Node, input_fields: Fields) -> None:
        state = node.params["state"]
        factory = state.factory
        cache_size = factory.cache_size if isinstance(factory, CachesState) else 0
        if state.node is not None and cache_size > 0:
            # The state is written by this topology's persist tasks: read it uncached,
            # or a query task's cache would serve values older than the last commit.
            factory = dataclasses.replace(factory, cache_size=0)
        super().__init__(node, input_fields, factory)
        self.query = node.params["query"]
        self.inputs: Fields = node.params["inputs"]
        self.positions = self._projector(self.inputs)
        self.width = len(node.params["outputs"])

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        super().prepare(conf, context)
        self.query.prepare(conf, context)

    def cleanup(self) -> None:
        """At shutdown: the query function's ``cleanup``, then close the state."""
        try:
            _cleanup(self.query)
        finally:
            super().cleanup()

    def start(self) -> list[list[Any]]:
        return []

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        state.append(values)

    def finish(self, run: BatchRun, state: Any) -> None:
        if not state:
            return
        tuples = [
            TridentTuple([values[p] for p in self.positions], self.inputs) for values in state
        ]
        results = self.query.batch_retrieve(self.state, tuples)
        for values, tup, result in zip(state, tuples, results, strict=True):
            out: list[list[Any]] = []
            self.query.execute(tup, result, TridentCollector(out))
            for appended in out:
                self.emit(run, values + list(appended))


class JoinProcessor(Processor):
    """Inner join of two sides within the batch, on their key fields."""

    def __init__(self, node: Node, parent_fields: list[Fields]) -> None:
        super().__init__(node, parent_fields[0])
        self.key_positions = [
            [fields.index(name) for name in keys]
            for fields, keys in zip(parent_fields, node.params["keys"], strict=True)
        ]
        self.rest_positions = [
            [i for i in range(len(fields)) if i not in positions]
            for fields, positions in zip(parent_fields, self.key_positions, strict=True)
        ]

    def start(
        self,
    ) -> tuple[dict[tuple[Any, ...], list[list[Any]]], dict[tuple[Any, ...], list[list[Any]]]]:
        return ({}, {})

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        key = tuple(values[p] for p in self.key_positions[side])
        state[side].setdefault(key, []).append([values[p] for p in self.rest_positions[side]])

    def finish(self, run: BatchRun, state: Any) -> None:
        left, right = state
        for key, left_rows in left.items():
            for left_rest in left_rows:
                for right_rest in right.get(key, ()):
                    self.emit(run, [*key, *left_rest, *right_rest])


class DRPCReturnProcessor(Processor):
    """The end of a DRPC stream: returns the batch's tuples as the request's result."""

    def __init__(self, node: Node, input_fields: Fields) -> None:
        super().__init__(node, input_fields)
        self.resolver = node.params["resolver"]

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        self.resolver.prepare(conf, context)

    def start(self) -> list[list[Any]]:
        return []

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        state.append(values)

    def finish(self, run: BatchRun, state: Any) -> None:
        self.resolver.return_result(run.attempt, json.dumps(state, default=str))


PROCESSORS: dict[str, type[Processor]] = {
    "each": EachProcessor,
    "filter": FilterProcessor,
    "map": MapProcessor,
    "flat_map": FlatMapProcessor,
    "peek": PeekProcessor,
    "project": ProjectProcessor,
    "partition": Processor,
    "merge": Processor,
    "combine_partial": CombinePartialProcessor,
    "combine_final": CombineFinalProcessor,
    "partition_aggregate": PartitionAggregateProcessor,
    "persist": PersistProcessor,
    "state_query": StateQueryProcessor,
    "drpc_return": DRPCReturnProcessor,
}
