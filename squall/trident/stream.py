"""``TridentTopology``, ``Stream``, ``GroupedStream`` and ``TridentState``: the API."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from squall.model.errors import InvalidTopologyError
from squall.model.fields import Fields, as_fields
from squall.model.topology import StormTopology
from squall.trident.chained import ChainedAggregatorDeclarer
from squall.trident.comparison import (
    ComparisonAggregator,
    Max,
    MaxWithComparator,
    Min,
    MinWithComparator,
    comparator_function,
)
from squall.trident.compiler import compile_topology
from squall.trident.graph import Node, TridentGraph, check_fields, check_new_fields
from squall.trident.naming import operation_name
from squall.trident.operations import (
    Aggregator,
    CallableFilter,
    CallableFunction,
    CombinerAggregator,
    Filter,
    Function,
    QueryFunction,
    ReducerAggregator,
    StateUpdater,
)
from squall.trident.spouts import (
    BatchSpout,
    OpaquePartitionedTridentSpout,
    PartitionedTridentSpout,
)
from squall.trident.windowing.operation import (
    add_window,
    sliding_config,
    tumbling_config,
    window_args,
)
from squall.windowing.spec import Count, Duration

FieldsLike = Fields | Iterable[str] | str
PARTIAL_FIELD = "$partial"


def _function(operation: Any, width: int) -> Function:
    if isinstance(operation, Function):
        return operation
    if callable(operation) and not isinstance(operation, Filter):
        return CallableFunction(operation, width)
    raise InvalidTopologyError(
        f"Trident each: expected a Function or a callable, got {type(operation).__name__}"
    )


def _filter(operation: Any) -> Filter:
    if isinstance(operation, Filter):
        return operation
    if callable(operation):
        return CallableFilter(operation)
    raise InvalidTopologyError(
        f"Trident filter: expected a Filter or a callable, got {type(operation).__name__}"
    )


class TridentState:
    """A state made by ``persistent_aggregate``/``partition_persist`` or
    ``new_static_state``: queryable with ``state_query``."""

    def __init__(self, topology: TridentTopology, node: Node | None, factory: Any) -> None:
        self._topology = topology
        self.node = node
        self.factory = factory

    def new_values_stream(self) -> Stream:
        """The stream of updated values (group fields + aggregate field) of each batch."""
        if self.node is None:
            raise InvalidTopologyError("a static state has no stream of new values")
        return Stream(self._topology, self.node)

    def parallelism_hint(self, parallelism: int) -> TridentState:
        """Tasks that hold and update the state's partitions."""
        if self.node is not None:
            self.node.parallelism = parallelism
        return self


class Stream:
    """A stream of a Trident topology. Operations return new streams; the stream's
    tuples flow in batches (one per transaction)."""

    def __init__(self, topology: TridentTopology, node: Node) -> None:
        self._topology = topology
        self.node = node

    @property
    def output_fields(self) -> Fields:
        """The fields of the stream's tuples."""
        return self.node.output_fields

    def get_output_fields(self) -> Fields:
        """The fields of the stream's tuples."""
        return self.node.output_fields

    def _add(self, kind: str, output: Fields, **params: Any) -> Stream:
        return Stream(self._topology, self._topology.add_node(kind, [self.node], output, params))

    # -- per-tuple operations ----------------------------------------------------------

    def each(
        self, input_fields: FieldsLike, operation: Any, output_fields: FieldsLike | None = None
    ) -> Stream:
        """``each(inputs, function, outputs)``: append ``outputs`` to each tuple for
        every tuple the function emits; ``each(inputs, filter)``: keep tuples it accepts."""
        inputs = as_fields(input_fields)
        check_fields("each", inputs, self.output_fields)
        if output_fields is None:
            return self._add("filter", self.output_fields, inputs=inputs, filter=_filter(operation))
        outputs = as_fields(output_fields)
        check_new_fields("each", outputs, self.output_fields)
        function = _function(operation, len(outputs))
        merged = Fields([*self.output_fields, *outputs])
        return self._add("each", merged, inputs=inputs, function=function, outputs=outputs)

    def filter(self, *args: Any) -> Stream:
        """``filter(filter)`` over all fields or ``filter(input_fields, filter)``."""
        if len(args) == 1:
            return self.each(self.output_fields, args[0])
        if len(args) == 2:
            return self.each(args[0], args[1])
        raise TypeError("filter takes (filter) or (input_fields, filter)")

    def map(self, fn: Callable[[Any], Any], output_fields: FieldsLike | None = None) -> Stream:
        """Replace each tuple by ``fn(tup)`` (values for ``output_fields``, default: the
        same fields)."""
        outputs = as_fields(output_fields) if output_fields is not None else self.output_fields
        return self._add("map", outputs, fn=fn)

    def flat_map(self, fn: Callable[[Any], Any], output_fields: FieldsLike | None = None) -> Stream:
        """Replace each tuple by the tuples in ``fn(tup)`` (an iterable of value lists)."""
        outputs = as_fields(output_fields) if output_fields is not None else self.output_fields
        return self._add("flat_map", outputs, fn=fn)

    def peek(self, fn: Callable[[Any], Any]) -> Stream:
        """Call ``fn(tup)`` for each tuple; the stream is unchanged."""
        return self._add("peek", self.output_fields, fn=fn)

    def project(self, fields: FieldsLike) -> Stream:
        """Keep only ``fields``, in that order."""
        kept = as_fields(fields)
        check_fields("project", kept, self.output_fields)
        return self._add("project", kept)

    # -- repartitioning ----------------------------------------------------------------

    def partition_by(self, fields: FieldsLike) -> Stream:
        """Repartition so equal values of ``fields`` are in the same partition."""
        keys = as_fields(fields)
        check_fields("partition_by", keys, self.output_fields)
        return self._add("partition", self.output_fields, grouping="fields", fields=keys)

    def shuffle(self) -> Stream:
        """Repartition evenly at random."""
        return self._add("partition", self.output_fields, grouping="shuffle")

    def broadcast(self) -> Stream:
        """Send every tuple to every partition."""
        return self._add("partition", self.output_fields, grouping="all")

    def global_(self) -> Stream:
        """Send every tuple to one partition."""
        return self._add("partition", self.output_fields, grouping="global")

    def batch_global(self) -> Stream:
        """Send each batch to one partition (one task here: the lowest)."""
        return self._add("partition", self.output_fields, grouping="global")

    def group_by(self, fields: FieldsLike) -> GroupedStream:
        """Group by ``fields``: the next aggregation runs per group."""
        keys = as_fields(fields)
        check_fields("group_by", keys, self.output_fields)
        return GroupedStream(self, keys)

    # -- aggregation -------------------------------------------------------------------

    def aggregate(self, *args: Any) -> Stream:
        """``aggregate([input_fields,] aggregator, output_fields)``: one result per
        batch over all partitions (output: the aggregate's fields only)."""
        inputs, aggregator, outputs = self._aggregation_args("aggregate", args)
        return _aggregate(self, None, inputs, aggregator, outputs)

    def partition_aggregate(self, *args: Any) -> Stream:
        """``partition_aggregate([input_fields,] aggregator, output_fields)``: one result
        per batch and partition, without repartitioning."""
        inputs, aggregator, outputs = self._aggregation_args("partition_aggregate", args)
        return self._add(
            "partition_aggregate", outputs, inputs=inputs, aggregator=aggregator, group=None
        )

    def chained_agg(self) -> ChainedAggregatorDeclarer:
        """Several aggregators over the same batch: ``chained_agg().aggregate(...)
        .aggregate(...).chain_end()`` gives one tuple per batch with every aggregator's
        output fields in order (``partition_aggregate(...)`` instead: per partition).
        See :mod:`squall.trident.chained`."""
        return ChainedAggregatorDeclarer(self, None)

    # -- min and max (Storm's comparison aggregators, per partition of each batch) ---------

    def min(self, comparator: Any = None, *, key: Any = None) -> Stream:
        """The tuple of each partition's batch that sorts first by ``comparator``
        (``cmp(a, b) -> int`` or an object with ``compare(a, b)``, given whole tuples) or
        by ``key(tup)``. Same fields. See :mod:`squall.trident.comparison`."""
        if comparator is None and key is None:
            raise InvalidTopologyError(
                "Trident min: give a comparator (cmp(a, b) -> int) or key=; for a field's "
                "natural order use min_by(field)"
            )
        cmp = comparator_function("min", comparator, key)
        assert cmp is not None
        return self._compare("min", None, MinWithComparator(None, cmp), comparator or key)

    def max(self, comparator: Any = None, *, key: Any = None) -> Stream:
        """The tuple of each partition's batch that sorts last by ``comparator`` or
        ``key`` (see :meth:`min`)."""
        if comparator is None and key is None:
            raise InvalidTopologyError(
                "Trident max: give a comparator (cmp(a, b) -> int) or key=; for a field's "
                "natural order use max_by(field)"
            )
        cmp = comparator_function("max", comparator, key)
        assert cmp is not None
        return self._compare("max", None, MaxWithComparator(None, cmp), comparator or key)

    def min_by(self, field: str, comparator: Any = None, *, key: Any = None) -> Stream:
        """The tuple of each partition's batch with the lowest value of ``field``: in
        natural order, or by ``comparator``/``key`` applied to the values. Tuples whose
        value is None are skipped; on a tie the later tuple wins. Same fields."""
        cmp = comparator_function(f"min_by({field!r})", comparator, key)
        aggregator = Min(field) if cmp is None else MinWithComparator(field, cmp)
        return self._compare("min_by", field, aggregator, field)

    def max_by(self, field: str, comparator: Any = None, *, key: Any = None) -> Stream:
        """The tuple of each partition's batch with the highest value of ``field`` (see
        :meth:`min_by`)."""
        cmp = comparator_function(f"max_by({field!r})", comparator, key)
        aggregator = Max(field) if cmp is None else MaxWithComparator(field, cmp)
        return self._compare("max_by", field, aggregator, field)

    def _compare(
        self, method: str, field: str | None, aggregator: ComparisonAggregator, argument: Any
    ) -> Stream:
        if field is not None:
            if not isinstance(field, str):
                raise InvalidTopologyError(
                    f"Trident {method}: the field must be a field name (str), got {field!r}"
                )
            check_fields(method, Fields([field]), self.output_fields)
        label = argument if isinstance(argument, str) else operation_name(argument)
        fields = self.output_fields
        return self._add(
            "partition_aggregate",
            fields,
            inputs=fields,
            aggregator=aggregator,
            group=None,
            method=method,
            argument=label,
        )

    def _aggregation_args(self, where: str, args: tuple[Any, ...]) -> tuple[Fields, Any, Fields]:
        if len(args) == 2:
            inputs, aggregator, outputs = Fields([]), args[0], args[1]
        elif len(args) == 3:
            inputs, aggregator, outputs = as_fields(args[0]), args[1], args[2]
        else:
            raise TypeError(f"{where} takes ([input_fields,] aggregator, output_fields)")
        check_fields(where, inputs, self.output_fields)
        if not isinstance(aggregator, CombinerAggregator | ReducerAggregator | Aggregator):
            raise InvalidTopologyError(
                f"Trident {where}: {type(aggregator).__name__} is not an aggregator "
                "(CombinerAggregator, ReducerAggregator or Aggregator)"
            )
        return inputs, aggregator, as_fields(outputs)

    # -- state -------------------------------------------------------------------------

    def persistent_aggregate(self, state_factory: Any, *args: Any) -> TridentState:
        """``persistent_aggregate(state_factory, [input_fields,] aggregator,
        output_fields)``: fold every batch into one stored value (key ``()``)."""
        inputs, aggregator, outputs = self._aggregation_args("persistent_aggregate", args)
        return _persist(self, Fields([]), inputs, aggregator, outputs, state_factory)

    def partition_persist(
        self,
        state_factory: Any,
        input_fields: FieldsLike,
        updater: StateUpdater,
        output_fields: FieldsLike | None = None,
    ) -> TridentState:
        """Update a state with each partition's tuples of a batch, at commit time, in
        transaction order (``updater.update_state(state, tuples, collector)``)."""
        inputs = as_fields(input_fields)
        check_fields("partition_persist", inputs, self.output_fields)
        outputs = as_fields(output_fields) if output_fields is not None else Fields([])
        node = self._topology.add_node(
            "persist",
            [self.node],
            outputs,
            {
                "mode": "updater",
                "inputs": inputs,
                "updater": updater,
                "factory": state_factory,
                "group": Fields([]),
            },
        )
        return TridentState(self._topology, node, state_factory)

    def state_query(
        self,
        state: TridentState,
        input_fields: FieldsLike,
        query: QueryFunction,
        output_fields: FieldsLike,
    ) -> Stream:
        """Look up each tuple in ``state`` (one batched lookup per partition and batch)
        and append ``output_fields``."""
        inputs = as_fields(input_fields)
        outputs = as_fields(output_fields)
        check_fields("state_query", inputs, self.output_fields)
        check_new_fields("state_query", outputs, self.output_fields)
        if not isinstance(state, TridentState):
            raise InvalidTopologyError(
                "Trident state_query: the first argument must be a TridentState"
            )
        merged = Fields([*self.output_fields, *outputs])
        return self._add(
            "state_query", merged, inputs=inputs, query=query, outputs=outputs, state=state
        )

    # -- windowing (squall.trident.windowing) -------------------------------------------

    def tumbling_window(
        self,
        window: int | Count | Duration,
        window_store_factory: Any,
        input_fields: FieldsLike,
        aggregator: Any,
        function_fields: FieldsLike,
    ) -> Stream:
        """The results of ``aggregator`` over tumbling windows of ``window`` tuples (an
        int or ``Count``) or of a ``Duration`` of processing time (the task's clock);
        the stream's fields: ``function_fields``. See :meth:`window`."""
        config = tumbling_config(window)
        return add_window(
            self, config, window_store_factory, input_fields, aggregator, function_fields, True
        )

    def sliding_window(
        self,
        window: int | Count | Duration,
        sliding: int | Count | Duration,
        window_store_factory: Any,
        input_fields: FieldsLike,
        aggregator: Any,
        function_fields: FieldsLike,
    ) -> Stream:
        """The results of ``aggregator`` over windows of the last ``window`` tuples every
        ``sliding`` tuples, or (two ``Duration``s) of the last ``window`` of processing
        time every ``sliding``. See :meth:`window`."""
        config = sliding_config(window, sliding)
        return add_window(
            self, config, window_store_factory, input_fields, aggregator, function_fields, True
        )

    def window(self, window_config: Any, *args: Any) -> Stream:
        """``window(window_config, [window_store_factory,] input_fields, aggregator,
        function_fields)``: one result (the aggregator's rows, ``function_fields``) per
        window, emitted in the batch in which the window fires. Count windows count
        tuples across batches; duration windows fire on the task's clock, checked as
        batches finish. Each task of the segment windows its own tuples. Without a
        store factory the tuples are kept in the task's memory only (results in an
        :class:`~squall.trident.windowing.InMemoryWindowsStoreFactory`'s store); with
        one they are kept in its store too (a durable store's windows survive a
        restart)."""
        factory, inputs, aggregator, functions, store_tuples = window_args(args)
        return add_window(self, window_config, factory, inputs, aggregator, functions, store_tuples)

    # -- naming and parallelism --------------------------------------------------------

    def parallelism_hint(self, parallelism: int) -> Stream:
        """Tasks for the operations since the last repartition (this segment)."""
        if not isinstance(parallelism, int) or parallelism < 1:
            raise InvalidTopologyError(
                f"Trident parallelism_hint must be >= 1, got {parallelism!r}"
            )
        self.node.parallelism = parallelism
        return self

    def name(self, name: str) -> Stream:
        """Name the operation: its segment's component id becomes ``b<N>-<name>``
        (characters other than letters, digits and ``_.+-()`` become ``_``); the first
        named operation of a segment names it."""
        self.node.name = name
        return self


class GroupedStream:
    """A stream grouped by fields: aggregations run per group."""

    def __init__(self, stream: Stream, group_fields: Fields) -> None:
        self.stream = stream
        self.group_fields = group_fields

    def get_group_fields(self) -> Fields:
        """The grouping fields."""
        return self.group_fields

    def aggregate(self, *args: Any) -> Stream:
        """Per group and batch: ``aggregate([input_fields,] aggregator, output_fields)``;
        output: the group fields + the aggregate's fields."""
        inputs, aggregator, outputs = self.stream._aggregation_args("aggregate", args)
        return _aggregate(self.stream, self.group_fields, inputs, aggregator, outputs)

    def partition_aggregate(self, *args: Any) -> Stream:
        """Per group within each partition, without repartitioning."""
        inputs, aggregator, outputs = self.stream._aggregation_args("partition_aggregate", args)
        output = Fields([*self.group_fields, *outputs])
        return self.stream._add(
            "partition_aggregate",
            output,
            inputs=inputs,
            aggregator=aggregator,
            group=self.group_fields,
        )

    def chained_agg(self) -> ChainedAggregatorDeclarer:
        """Several aggregators per group: ``chained_agg().aggregate(...)...chain_end()``
        gives one tuple per group and batch, the group fields then every aggregator's
        output fields in order. See :mod:`squall.trident.chained`."""
        return ChainedAggregatorDeclarer(self.stream, self.group_fields)

    def persistent_aggregate(self, state_factory: Any, *args: Any) -> TridentState:
        """Fold every batch, per group, into the state: key = the group values."""
        inputs, aggregator, outputs = self.stream._aggregation_args("persistent_aggregate", args)
        return _persist(self.stream, self.group_fields, inputs, aggregator, outputs, state_factory)

    def state_query(
        self,
        state: TridentState,
        input_fields: FieldsLike,
        query: QueryFunction,
        output_fields: FieldsLike,
    ) -> Stream:
        """Partition by the group fields, then ``state_query``."""
        return self.stream.partition_by(self.group_fields).state_query(
            state, input_fields, query, output_fields
        )

    def each(self, *args: Any) -> GroupedStream:
        """``each`` on the underlying stream, keeping the grouping."""
        return GroupedStream(self.stream.each(*args), self.group_fields)

    def filter(self, *args: Any) -> GroupedStream:
        """``filter`` on the underlying stream, keeping the grouping."""
        return GroupedStream(self.stream.filter(*args), self.group_fields)

    def to_stream(self) -> Stream:
        """The underlying stream (ungrouped)."""
        return self.stream


def _to_groups(
    stream: Stream, keys: Fields, inputs: Fields, aggregator: Any, operation: str
) -> Stream:
    """Repartition ``stream`` so each group (``keys``; none: the whole batch) is in one
    partition; a combiner aggregator first combines each partition's groups (map-side),
    so only partials move. ``operation``: the API method aggregating (names the
    map-side step)."""
    grouping: dict[str, Any] = (
        {"grouping": "fields", "fields": keys} if len(keys) else {"grouping": "global"}
    )
    if isinstance(aggregator, CombinerAggregator):
        stream = stream._add(
            "combine_partial",
            Fields([*keys, PARTIAL_FIELD]),
            inputs=inputs,
            aggregator=aggregator,
            group=keys,
            operation=operation,
        )
    return stream._add("partition", stream.output_fields, **grouping)


def _aggregate(
    stream: Stream, group: Fields | None, inputs: Fields, aggregator: Any, outputs: Fields
) -> Stream:
    keys = group if group is not None else Fields([])
    output = Fields([*keys, *outputs])
    moved = _to_groups(stream, keys, inputs, aggregator, "aggregate")
    if isinstance(aggregator, CombinerAggregator):
        return moved._add(
            "combine_final", output, aggregator=aggregator, group=keys, whole_batch=True
        )
    return moved._add(
        "partition_aggregate",
        output,
        inputs=inputs,
        aggregator=aggregator,
        group=group,
        whole_batch=True,
    )


def _persist(
    stream: Stream, group: Fields, inputs: Fields, aggregator: Any, outputs: Fields, factory: Any
) -> TridentState:
    if len(outputs) != 1:
        raise InvalidTopologyError(
            "Trident persistent_aggregate stores one value per key: give one output field, "
            f"got {outputs.to_list()}"
        )
    if isinstance(aggregator, Aggregator):
        raise InvalidTopologyError(
            "Trident persistent_aggregate needs a CombinerAggregator or ReducerAggregator "
            f"(state is updated value by value), got {type(aggregator).__name__}"
        )
    moved = _to_groups(stream, group, inputs, aggregator, "persistent_aggregate")
    mode = "combiner" if isinstance(aggregator, CombinerAggregator) else "reducer"
    params = {
        "mode": mode,
        "aggregator": aggregator,
        "group": group,
        "inputs": inputs,
        "factory": factory,
    }
    output = Fields([*group, *outputs])
    node = stream._topology.add_node("persist", [moved.node], output, params)
    return TridentState(stream._topology, node, factory)


class TridentTopology(TridentGraph):
    """A Trident topology: streams from spouts, operations, states; ``build()`` makes
    the :class:`StormTopology` to submit."""

    def __init__(self) -> None:
        super().__init__()
        self.static_states: list[TridentState] = []

    def new_stream(self, txid: str, spout: Any) -> Stream:
        """A stream from ``spout``; ``txid`` names its transactions and metadata in the
        coordination store (a restarted topology continues them)."""
        if not isinstance(
            spout, BatchSpout | PartitionedTridentSpout | OpaquePartitionedTridentSpout
        ):
            raise InvalidTopologyError(
                f"Trident new_stream({txid!r}): {type(spout).__name__} is not a Trident spout "
                "(BatchSpout, FixedBatchSpout, PartitionedTridentSpout, "
                "OpaquePartitionedTridentSpout)"
            )
        if any(n.kind == "spout" and n.params["stream_id"] == txid for n in self.nodes):
            raise InvalidTopologyError(f"Trident new_stream: stream id {txid!r} is used twice")
        fields = as_fields(spout.get_output_fields())
        node = self.add_node("spout", [], fields, {"stream_id": txid, "spout": spout})
        return Stream(self, node)

    def new_drpc_stream(self, function_name: str, drpc: Any = None) -> Stream:
        """A stream of DRPC requests for ``function_name`` (one field, ``args``); the
        stream's final tuples are the request's result (JSON list of value lists).
        ``drpc``: a ``LocalDRPC``, or None for the DRPC server named in the
        configuration (``drpc.servers``, reached on ``drpc.invocations.port`` with
        ``drpc.invocations.authorization.token``)."""
        node = self.add_node(
            "drpc_spout", [], Fields("args"), {"function": function_name, "drpc": drpc}
        )
        return Stream(self, node)

    def new_static_state(self, factory: Any) -> TridentState:
        """A read-only state (e.g. an external database) for ``state_query``."""
        state = TridentState(self, None, factory)
        self.static_states.append(state)
        return state

    def merge(self, *streams: Stream) -> Stream:
        """One stream with the tuples of all ``streams`` (fields: the first stream's;
        all must have the same number of fields)."""
        if len(streams) == 1 and isinstance(streams[0], list | tuple):
            streams = tuple(streams[0])
        if len(streams) < 2:
            raise InvalidTopologyError("Trident merge needs at least two streams")
        width = len(streams[0].output_fields)
        for stream in streams:
            if len(stream.output_fields) != width:
                raise InvalidTopologyError(
                    "Trident merge: streams must have the same number of fields, got "
                    f"{[s.output_fields.to_list() for s in streams]}"
                )
        node = self.add_node("merge", [s.node for s in streams], streams[0].output_fields, {})
        return Stream(self, node)

    def join(
        self,
        stream1: Stream,
        fields1: FieldsLike,
        stream2: Stream,
        fields2: FieldsLike,
        output_fields: FieldsLike,
    ) -> Stream:
        """Inner join of two streams within each batch on ``fields1 == fields2``.
        Output: the join fields, then the other fields of ``stream1``, then of
        ``stream2``, named by ``output_fields``."""
        keys1, keys2, outputs = as_fields(fields1), as_fields(fields2), as_fields(output_fields)
        check_fields("join", keys1, stream1.output_fields)
        check_fields("join", keys2, stream2.output_fields)
        if len(keys1) != len(keys2):
            raise InvalidTopologyError(
                "Trident join: both sides need the same number of join fields"
            )
        rest1 = [f for f in stream1.output_fields if f not in keys1]
        rest2 = [f for f in stream2.output_fields if f not in keys2]
        if len(outputs) != len(keys1) + len(rest1) + len(rest2):
            raise InvalidTopologyError(
                f"Trident join: {len(outputs)} output field(s) {outputs.to_list()} for "
                f"{len(keys1)} join field(s) + {len(rest1)} + {len(rest2)} other field(s)"
            )
        node = self.add_node(
            "join", [stream1.node, stream2.node], outputs, {"keys": [keys1, keys2]}
        )
        return Stream(self, node)

    def build(self) -> StormTopology:
        """Compile to a :class:`StormTopology` (validated).

        Raises:
            InvalidTopologyError: an invalid Trident topology (messages name the operation).
        """
        return compile_topology(self)
