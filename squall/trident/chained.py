"""Chained aggregation: several aggregators over the same batch (or group), one result.

``stream.chained_agg()`` (or ``grouped.chained_agg()``) returns a
:class:`ChainedAggregatorDeclarer`, Storm's declarer of that name: declare aggregators
with ``aggregate(...)`` (over the whole batch, or each group) or
``partition_aggregate(...)`` (within each partition), not both in one chain, then
``chain_end()`` returns the stream of the results. Every aggregator sees every tuple (its
own input fields); the result tuple is the group fields, then each aggregator's output
fields in declaration order. An aggregator that emits several tuples multiplies the
results (every combination is emitted, as Storm does); one that emits none leaves none.

As in Storm, a chain of ``CombinerAggregator`` s only is combined partially in each
partition before the repartition (only the partial values move); a chain with another
kind of aggregator repartitions the tuples first.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from squall.model.context import TopologyContext
from squall.model.errors import InvalidTopologyError
from squall.model.fields import Fields
from squall.trident.naming import operation_name
from squall.trident.operations import (
    Aggregator,
    CombinerAggregator,
    ReducerAggregator,
    TridentCollector,
)
from squall.trident.tuple import TridentTuple

if TYPE_CHECKING:
    from squall.trident.stream import Stream


class CombinerStep(Aggregator):
    """A ``CombinerAggregator`` in a chain: ``zero()``, then each tuple's ``init``
    combined in; with ``partials``, the tuples hold partial values (first input field)
    combined as they are."""

    def __init__(self, combiner: CombinerAggregator, partials: bool = False) -> None:
        self.combiner = combiner
        self.partials = partials

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        self.combiner.prepare(conf, context)

    def cleanup(self) -> None:
        self.combiner.cleanup()

    def init(self, batch_id: Any, collector: TridentCollector) -> list[Any]:
        return [self.combiner.zero()]

    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        value = tup[0] if self.partials else self.combiner.init(tup)
        state[0] = self.combiner.combine(state[0], value)

    def complete(self, state: Any, collector: TridentCollector) -> None:
        collector.emit([state[0]])


class ReducerStep(Aggregator):
    """A ``ReducerAggregator`` in a chain: ``init()``, then ``reduce`` with each tuple."""

    def __init__(self, reducer: ReducerAggregator) -> None:
        self.reducer = reducer

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        self.reducer.prepare(conf, context)

    def cleanup(self) -> None:
        self.reducer.cleanup()

    def init(self, batch_id: Any, collector: TridentCollector) -> list[Any]:
        return [self.reducer.init()]

    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        state[0] = self.reducer.reduce(state[0], tup)

    def complete(self, state: Any, collector: TridentCollector) -> None:
        collector.emit([state[0]])


def as_aggregator(aggregator: Any) -> Aggregator:
    """Any kind of aggregator as an ``Aggregator`` (a combiner or reducer wrapped)."""
    if isinstance(aggregator, CombinerAggregator):
        return CombinerStep(aggregator)
    if isinstance(aggregator, ReducerAggregator):
        return ReducerStep(aggregator)
    return aggregator


class ChainedAggregator(Aggregator):
    """Runs ``aggregators`` side by side over the same tuples (Storm's
    ``ChainedAggregatorImpl``); emits, at ``complete``, every combination of one tuple
    emitted by each, concatenated in order.

    Args:
        aggregators: the aggregators, each an ``Aggregator``.
        inputs: each aggregator's input fields (projected from the tuples it is given,
            whose fields are ``fields``).
        fields: the fields of the tuples the chain is given.
        widths: each aggregator's number of output fields.
        names: each aggregator's user-facing name (labels and messages).
    """

    def __init__(
        self,
        aggregators: list[Aggregator],
        inputs: list[Fields],
        fields: Fields,
        widths: list[int],
        names: list[str],
    ) -> None:
        self.aggregators = aggregators
        self.inputs = inputs
        self.positions = [[fields.index(name) for name in own] for own in inputs]
        self.widths = widths
        self.names = names

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        for aggregator in self.aggregators:
            aggregator.prepare(conf, context)

    def cleanup(self) -> None:
        for aggregator in self.aggregators:
            aggregator.cleanup()

    def init(self, batch_id: Any, collector: TridentCollector) -> list[Any]:
        outs: list[list[list[Any]]] = [[] for _ in self.aggregators]
        states = [
            aggregator.init(batch_id, TridentCollector(out))
            for aggregator, out in zip(self.aggregators, outs, strict=True)
        ]
        return [states, outs]

    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        states, outs = state
        values = tup.values
        for i, aggregator in enumerate(self.aggregators):
            own = TridentTuple([values[p] for p in self.positions[i]], self.inputs[i])
            aggregator.aggregate(states[i], own, TridentCollector(outs[i]))

    def complete(self, state: Any, collector: TridentCollector) -> None:
        states, outs = state
        for i, aggregator in enumerate(self.aggregators):
            aggregator.complete(states[i], TridentCollector(outs[i]))
            for row in outs[i]:
                if len(row) != self.widths[i]:
                    raise ValueError(
                        f"Trident chained_agg: aggregator {self.names[i]} emitted "
                        f"{len(row)} value(s) for {self.widths[i]} output field(s): {row!r}"
                    )
        for combination in itertools.product(*outs):
            collector.emit([value for row in combination for value in row])


class ChainedAggregatorDeclarer:
    """Declares the aggregators of a chain (Storm's ``ChainedAggregatorDeclarer``); made
    by ``Stream.chained_agg()`` and ``GroupedStream.chained_agg()`` at build time.

    ``aggregate([input_fields,] aggregator, output_fields)`` and
    ``partition_aggregate([input_fields,] aggregator, output_fields)`` add an aggregator
    (any kind) and return the declarer; ``chain_end()`` returns the stream of results.
    """

    def __init__(self, stream: Stream, group: Fields | None) -> None:
        self._stream = stream
        self._group = group
        self._specs: list[tuple[Fields, Any, Fields]] = []
        self._kind: str | None = None

    def aggregate(self, *args: Any) -> ChainedAggregatorDeclarer:
        """Add an aggregator over the whole batch (or each group), across partitions."""
        return self._declare("aggregate", args)

    def partition_aggregate(self, *args: Any) -> ChainedAggregatorDeclarer:
        """Add an aggregator within each partition (no repartition)."""
        return self._declare("partition_aggregate", args)

    def _declare(self, kind: str, args: tuple[Any, ...]) -> ChainedAggregatorDeclarer:
        if self._kind is not None and self._kind != kind:
            raise InvalidTopologyError(
                f"Trident chained_agg: {kind} after {self._kind}: a chain runs its "
                "aggregators either over the whole batch (aggregate) or within each "
                "partition (partition_aggregate), not both"
            )
        self._kind = kind
        self._specs.append(self._stream._aggregation_args(f"chained_agg().{kind}", args))
        return self

    def chain_end(self) -> Stream:
        """The stream of the chain's results: the group fields (if grouped), then every
        aggregator's output fields in declaration order.

        Raises:
            InvalidTopologyError: no aggregator declared, or output fields used twice or
                clashing with the group fields.
        """
        if not self._specs:
            raise InvalidTopologyError(
                "Trident chained_agg: declare at least one aggregator (aggregate or "
                "partition_aggregate) before chain_end()"
            )
        keys = self._group if self._group is not None else Fields([])
        outputs = [name for _, _, out in self._specs for name in out]
        repeated = sorted({n for n in outputs if outputs.count(n) > 1 or n in keys})
        if repeated:
            raise InvalidTopologyError(
                "Trident chained_agg: output fields must be distinct (and differ from the "
                f"group fields {keys.to_list()}): {repeated} used twice in {outputs}"
            )
        names = [operation_name(aggregator) for _, aggregator, _ in self._specs]
        for (_, aggregator, out), name in zip(self._specs, names, strict=True):
            if not isinstance(aggregator, Aggregator) and len(out) != 1:
                raise InvalidTopologyError(
                    f"Trident chained_agg: {name} gives one value per batch or group: give "
                    f"it one output field, got {out.to_list()}"
                )
        return self._build(keys, Fields(outputs), names)

    def _build(self, keys: Fields, outputs: Fields, names: list[str]) -> Stream:
        """Add the chain's nodes (see the module docstring) to the topology."""
        stream, specs = self._stream, self._specs
        inputs = Fields(list(dict.fromkeys(name for own, _, _ in specs for name in own)))
        result = Fields([*keys, *outputs])
        widths = [len(out) for _, _, out in specs]
        steps = [as_aggregator(aggregator) for _, aggregator, _ in specs]
        chain = ChainedAggregator(steps, [own for own, _, _ in specs], inputs, widths, names)
        label = {"method": "chained_agg", "argument": ".".join(names)}
        if self._kind == "partition_aggregate":
            return stream._add(
                "partition_aggregate",
                result,
                inputs=inputs,
                aggregator=chain,
                group=self._group,
                **label,
            )
        grouping: dict[str, Any] = (
            {"grouping": "fields", "fields": keys} if len(keys) else {"grouping": "global"}
        )
        if all(isinstance(aggregator, CombinerAggregator) for _, aggregator, _ in specs):
            # Combined in each partition first; only the partial values move.
            partial = stream._add(
                "partition_aggregate",
                result,
                inputs=inputs,
                aggregator=chain,
                group=self._group,
                **label,
            )
            combiners: list[Aggregator] = [
                CombinerStep(aggregator, partials=True) for _, aggregator, _ in specs
            ]
            chain = ChainedAggregator(
                combiners, [Fields([name]) for name in outputs], outputs, widths, names
            )
            stream, inputs = partial._add("partition", result, **grouping), outputs
        else:
            stream = stream._add("partition", stream.output_fields, **grouping)
        return stream._add(
            "partition_aggregate",
            result,
            inputs=inputs,
            aggregator=chain,
            group=self._group,
            whole_batch=True,
            **label,
        )
