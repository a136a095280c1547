"""``TopologyBuilder``: declare spouts and bolts, wire them with groupings, validate."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from squall.model.components import BasicBolt, Bolt, Spout
from squall.model.config import Config
from squall.model.declarer import IMPLICIT_STREAMS, OutputFieldsDeclarer
from squall.model.errors import InvalidTopologyError
from squall.model.fields import Fields, as_fields
from squall.model.grouping import CustomStreamGrouping, Grouping, GroupingKind
from squall.model.hooks import AdaptsToBolt, ChecksInputs, implements
from squall.model.lambdas import is_function_component, lambda_bolt, lambda_spout
from squall.model.topology import ComponentSpec, StormTopology, Subscription
from squall.model.tuple import DEFAULT_STREAM

FieldsLike = Fields | Iterable[str] | str


class ComponentDeclarer:
    """Returned by ``set_spout``/``set_bolt``; every method returns the declarer."""

    def __init__(self, spec: ComponentSpec) -> None:
        self._spec = spec

    def set_num_tasks(self, num_tasks: int) -> ComponentDeclarer:
        """Number of tasks (component instances); defaults to the parallelism hint."""
        self._spec.num_tasks = num_tasks
        return self

    def add_configuration(self, key: str, value: Any) -> ComponentDeclarer:
        """Component-level configuration (overrides the topology's where Storm allows)."""
        self._spec.conf[key] = value
        return self

    def add_configurations(self, conf: dict[str, Any]) -> ComponentDeclarer:
        """Several component-level configuration entries at once."""
        self._spec.conf.update(conf)
        return self

    def set_max_spout_pending(self, pending: int) -> ComponentDeclarer:
        """Bound on pending tuple trees for each task of this spout."""
        return self.add_configuration(Config.TOPOLOGY_MAX_SPOUT_PENDING, pending)

    def set_debug(self, debug: bool) -> ComponentDeclarer:
        """Log this component's emits."""
        return self.add_configuration(Config.TOPOLOGY_DEBUG, debug)


class SpoutDeclarer(ComponentDeclarer):
    """Declarer for a spout."""


class BoltDeclarer(ComponentDeclarer):
    """Declarer for a bolt: adds the grouping methods that subscribe it to streams."""

    def _subscribe(self, component: str, stream: str, grouping: Grouping) -> BoltDeclarer:
        if not isinstance(stream, str):
            raise InvalidTopologyError(_stream_id_error(self._spec, component, stream, grouping))
        self._spec.inputs.append(Subscription(component, stream, grouping))
        return self

    def colocate_with(self, component: str) -> BoltDeclarer:
        """Run this bolt's task of each index in the worker of ``component``'s task of
        the same index (not a Storm API: squall's Trident compiler places a query of an
        in-process state with the tasks holding its partitions). Both must have as many
        tasks; this bolt's executors follow ``component``'s (see
        ``ComponentSpec.colocated_with``)."""
        self._spec.colocated_with = component
        return self

    def shuffle_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Tuples are spread evenly over this bolt's tasks."""
        return self._subscribe(component, stream, Grouping(GroupingKind.SHUFFLE))

    def fields_grouping(
        self, component: str, fields: FieldsLike, stream: str = DEFAULT_STREAM
    ) -> BoltDeclarer:
        """Tuples with equal values of ``fields`` always go to the same task."""
        return self._subscribe(
            component, stream, Grouping(GroupingKind.FIELDS, _fields(fields, self._spec))
        )

    def partial_key_grouping(
        self, component: str, fields: FieldsLike, stream: str = DEFAULT_STREAM
    ) -> BoltDeclarer:
        """Each key goes to one of two tasks, the less loaded one (key-skew balancing)."""
        return self._subscribe(
            component, stream, Grouping(GroupingKind.PARTIAL_KEY, _fields(fields, self._spec))
        )

    def all_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Every task receives every tuple."""
        return self._subscribe(component, stream, Grouping(GroupingKind.ALL))

    def global_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """The whole stream goes to the task with the lowest id."""
        return self._subscribe(component, stream, Grouping(GroupingKind.GLOBAL))

    def none_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """No preference: behaves as shuffle grouping, as in Storm."""
        return self._subscribe(component, stream, Grouping(GroupingKind.NONE))

    def direct_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """The emitter picks the task with ``emit_direct``; the stream must be direct."""
        return self._subscribe(component, stream, Grouping(GroupingKind.DIRECT))

    def local_or_shuffle_grouping(
        self, component: str, stream: str = DEFAULT_STREAM
    ) -> BoltDeclarer:
        """Shuffle among the tasks in the emitter's worker, or among all if there are none."""
        return self._subscribe(component, stream, Grouping(GroupingKind.LOCAL_OR_SHUFFLE))

    def custom_grouping(
        self, component: str, grouping: CustomStreamGrouping, stream: str = DEFAULT_STREAM
    ) -> BoltDeclarer:
        """Tuples go where ``grouping.choose_tasks`` says."""
        if not isinstance(grouping, CustomStreamGrouping):
            raise InvalidTopologyError(
                f"bolt {self._spec.component_id!r}: custom_grouping({component!r}, ...) "
                f"needs a CustomStreamGrouping, got {type(grouping).__name__}; squall "
                f"takes the grouping before the stream: custom_grouping(component, "
                f"grouping, stream=...)"
            )
        return self._subscribe(component, stream, Grouping(GroupingKind.CUSTOM, custom=grouping))


def _stream_id_error(
    spec: ComponentSpec, component: str, stream: object, grouping: Grouping
) -> str:
    """The message for a grouping given something other than a string as its stream id.

    The usual cause is a positional translation of Storm's
    ``fieldsGrouping(component, stream, fields)``: squall takes the fields before the
    stream, ``fields_grouping(component, fields, stream=...)``.
    """
    method = f"{grouping.kind.value}_grouping"
    where = f"bolt {spec.component_id!r}: {method}({component!r}, ...)"
    if grouping.fields is not None:
        return (
            f"{where} got {stream!r} as its stream id and {grouping.fields.to_list()} as "
            f"its fields; squall takes the fields first: {method}(component, fields, "
            f"stream=...), where Storm writes the stream first"
        )
    if grouping.kind is GroupingKind.CUSTOM:
        return (
            f"{where} got {stream!r} as its stream id; a stream id is a string: "
            f"{method}(component, grouping, stream=...)"
        )
    return (
        f"{where} got {stream!r} as its stream id; a stream id is a string: "
        f"{method}(component, stream=...)"
    )


def _fields(fields: FieldsLike, spec: ComponentSpec) -> Fields:
    try:
        return as_fields(fields)
    except (TypeError, ValueError) as exc:
        raise InvalidTopologyError(f"bolt {spec.component_id!r}: {exc}") from None


class TopologyBuilder:
    """Declares a topology's components and how streams flow between them.

    ``create_topology()`` validates everything and returns a :class:`StormTopology`.
    """

    def __init__(self) -> None:
        self._declared: list[ComponentSpec] = []

    def set_spout(
        self,
        component_id: str,
        spout: Spout | Callable[[], Any],
        parallelism_hint: int = 1,
    ) -> SpoutDeclarer:
        """Add a spout run by ``parallelism_hint`` executors.

        ``spout`` is a ``Spout``, or a function taking no argument (Storm's lambda
        spout, ``set_spout("s", lambda: next_value())``): each ``next_tuple`` emits what
        it returns as a one-value tuple on field ``"lambda"``, unanchored, unless it
        returns None (see :class:`~squall.model.lambdas.LambdaSpout`).

        Raises:
            InvalidTopologyError: a function that cannot be called with no argument.
        """
        if is_function_component(spout):
            spout = lambda_spout(component_id, spout)
        spec = ComponentSpec(component_id, spout, "spout", parallelism_hint, parallelism_hint)
        self._declared.append(spec)
        return SpoutDeclarer(spec)

    def set_bolt(
        self,
        component_id: str,
        bolt: Bolt | BasicBolt | Callable[..., Any] | Any,
        *hint_and_fields: int | str | Fields | Sequence[str],
        parallelism_hint: int | None = None,
    ) -> BoltDeclarer:
        """Add a bolt run by ``parallelism_hint`` executors; subscribe it with groupings.

        ``bolt`` is a ``Bolt``, a ``BasicBolt``, or a ``WindowedBolt`` (any component
        with a ``to_bolt()`` method that returns the bolt running it), followed by its
        parallelism hint (positional or keyword; default 1).

        Or a function, as Storm's lambda bolts: ``set_bolt("b", fn, "word", "count")``
        with ``fn(tup, collector)`` is a basic bolt declaring those output fields
        (emits anchored, the input acked when ``fn`` returns); ``set_bolt("b", fn)``
        with ``fn(tup)`` a basic bolt emitting nothing. A parallelism hint goes before
        the fields: ``set_bolt("b", fn, 2, "word")``, or ``parallelism_hint=2``. The two
        kinds are told apart by the function's signature (see
        :func:`~squall.model.lambdas.lambda_bolt`).

        Raises:
            InvalidTopologyError: naming the bolt: output fields given with a component
                (which declares its own), a function that fits neither kind, or
                arguments in another order.
        """
        hint, fields = _hint_and_fields(component_id, hint_and_fields, parallelism_hint)
        if is_function_component(bolt):
            bolt = lambda_bolt(component_id, bolt, fields)
        elif fields:
            raise InvalidTopologyError(
                f"bolt {component_id!r}: output fields {fields} are for a function given "
                f"as a bolt; {type(bolt).__name__} declares its own outputs "
                f"(declare_output_fields)"
            )
        spec = ComponentSpec(component_id, bolt, "bolt", hint, hint)
        self._declared.append(spec)
        return BoltDeclarer(spec)

    def create_topology(self) -> StormTopology:
        """Validate the declarations and return the topology.

        Raises:
            InvalidTopologyError: naming the component and what is wrong: a duplicate
                or reserved id, a component of the wrong type, parallelism or task count
                below 1, a bolt without inputs, a subscription to an unknown component or
                undeclared stream, grouping fields the stream lacks, or a grouping that
                does not match the stream's direct-ness, or what a bolt with the
                ``ChecksInputs`` hook finds wrong with its inputs' fields (a ``JoinBolt``'s).
                Every component has the system stream ``"__system"`` (fields
                ``["event"]``) without declaring it.
        """
        components: dict[str, ComponentSpec] = {}
        for declared in self._declared:
            # A snapshot: later declarer calls must not change a created topology.
            spec = declared.copy()
            _check_identity(spec, components)
            spec.streams = _declared_streams(spec)
            components[spec.component_id] = spec
        for spec in components.values():
            if not spec.is_spout:
                _check_inputs(spec, components)
            if spec.colocated_with is not None:
                _check_colocation(spec, components)
        for spec in components.values():
            if not spec.is_spout and implements(spec.component, ChecksInputs):
                _check_input_fields(spec, spec.component, components)
        return StormTopology(components)


def _check_input_fields(
    spec: ComponentSpec, bolt: ChecksInputs, components: dict[str, ComponentSpec]
) -> None:
    """Let a bolt with the ``ChecksInputs`` hook check its inputs' declared fields."""
    inputs: dict[tuple[str, str], Fields] = {}
    for sub in spec.inputs:
        source = components[sub.source]
        stream = source.streams.get(sub.stream_id) or IMPLICIT_STREAMS[sub.stream_id]
        inputs[(sub.source, sub.stream_id)] = stream.fields
    try:
        bolt.check_inputs(inputs)
    except (InvalidTopologyError, ValueError) as exc:
        raise InvalidTopologyError(f"bolt {spec.component_id!r}: {exc}") from None


def _hint_and_fields(
    component_id: str,
    arguments: tuple[Any, ...],
    keyword_hint: int | None,
) -> tuple[int, list[str]]:
    """``set_bolt``'s parallelism hint and output fields from what follows the bolt:
    ``[hint] [field, ...]`` (fields as names, or one ``Fields`` or list of names)."""
    rest = list(arguments)
    hint = keyword_hint
    if rest and not isinstance(rest[0], str | Fields | list | tuple):
        # The hint (create_topology checks it is an integer >= 1).
        if keyword_hint is not None:
            raise InvalidTopologyError(
                f"bolt {component_id!r}: the parallelism hint is given twice "
                f"({rest[0]!r} and parallelism_hint={keyword_hint!r})"
            )
        hint = rest.pop(0)
    fields: list[str] = []
    for argument in rest:
        if isinstance(argument, str):
            fields.append(argument)
        elif isinstance(argument, Fields) or (
            isinstance(argument, list | tuple) and all(isinstance(n, str) for n in argument)
        ):
            fields.extend(argument)
        else:
            raise InvalidTopologyError(
                f"bolt {component_id!r}: set_bolt takes (id, bolt, parallelism_hint) or "
                f"(id, function, [parallelism_hint,] *output_fields); got {argument!r} "
                f"where a field name belongs"
            )
    return (1 if hint is None else hint), fields


def _check_identity(spec: ComponentSpec, seen: dict[str, ComponentSpec]) -> None:
    cid = spec.component_id
    if not isinstance(cid, str) or not cid:
        raise InvalidTopologyError(f"component ids must be non-empty strings, got {cid!r}")
    if cid.startswith("__"):
        raise InvalidTopologyError(
            f"component id {cid!r} starts with '__', which is reserved for system components"
        )
    if cid in seen:
        raise InvalidTopologyError(
            f"duplicate component id {cid!r}: it is declared as a {seen[cid].kind} and "
            f"again as a {spec.kind}"
        )
    where = f"{spec.kind} {cid!r}"
    component = spec.component
    if (
        not spec.is_spout
        and implements(component, AdaptsToBolt)
        and not isinstance(component, Bolt | BasicBolt)
    ):
        # A component that runs as a bolt through an adapter (a WindowedBolt).
        try:
            spec.component = component.to_bolt()
        except (InvalidTopologyError, ValueError, TypeError) as exc:
            raise InvalidTopologyError(f"{where}: {exc}") from None
    if spec.is_spout and not isinstance(spec.component, Spout):
        raise InvalidTopologyError(
            f"{where}: {type(spec.component).__name__} is not a Spout subclass"
        )
    if not spec.is_spout:
        if not isinstance(spec.component, Bolt | BasicBolt):
            raise InvalidTopologyError(
                f"{where}: {type(spec.component).__name__} is not a Bolt or BasicBolt subclass"
            )
        base = Bolt if isinstance(spec.component, Bolt) else BasicBolt
        if type(spec.component).execute is base.execute:
            raise InvalidTopologyError(
                f"{where}: {type(spec.component).__name__} does not implement execute"
            )
    for label, value in (("parallelism hint", spec.parallelism), ("task count", spec.num_tasks)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidTopologyError(f"{where}: {label} must be an integer >= 1, got {value!r}")
    user_conf = spec.component.get_component_configuration() or {}
    if not isinstance(user_conf, dict):
        raise InvalidTopologyError(f"{where}: get_component_configuration must return a dict")
    spec.conf = {**user_conf, **spec.conf}


def _check_colocation(spec: ComponentSpec, components: dict[str, ComponentSpec]) -> None:
    where = f"{spec.kind} {spec.component_id!r}"
    leader = components.get(spec.colocated_with or "")
    if leader is None or leader is spec:
        raise InvalidTopologyError(
            f"{where} is colocated with {spec.colocated_with!r}, which is not another "
            f"component of the topology; components are {sorted(components)}"
        )
    if leader.colocated_with is not None:
        raise InvalidTopologyError(
            f"{where} is colocated with {leader.component_id!r}, which is itself colocated "
            f"with {leader.colocated_with!r}: colocate both with {leader.colocated_with!r}"
        )
    if leader.num_tasks != spec.num_tasks:
        raise InvalidTopologyError(
            f"{where} has {spec.num_tasks} task(s) and is colocated with "
            f"{leader.component_id!r}, which has {leader.num_tasks}: colocated components "
            "need as many tasks"
        )


def _declared_streams(spec: ComponentSpec) -> dict[str, Any]:
    declarer = OutputFieldsDeclarer(spec.component_id)
    try:
        spec.component.declare_output_fields(declarer)
    except InvalidTopologyError:
        raise
    except Exception as exc:
        raise InvalidTopologyError(
            f"{spec.kind} {spec.component_id!r}: declare_output_fields raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return declarer.streams


def _check_inputs(spec: ComponentSpec, components: dict[str, ComponentSpec]) -> None:
    where = f"bolt {spec.component_id!r}"
    if not spec.inputs:
        raise InvalidTopologyError(
            f"{where} has no inputs: subscribe it to a stream with a grouping, "
            "e.g. .shuffle_grouping('spout')"
        )
    seen: set[tuple[str, str]] = set()
    for sub in spec.inputs:
        source = components.get(sub.source)
        if source is None:
            raise InvalidTopologyError(
                f"{where} subscribes to unknown component {sub.source!r}; "
                f"components are {sorted(components)}"
            )
        stream = source.streams.get(sub.stream_id) or IMPLICIT_STREAMS.get(sub.stream_id)
        if stream is None:
            declared = sorted(source.streams) or "none"
            raise InvalidTopologyError(
                f"{where} subscribes to stream {sub.stream_id!r} of {source.kind} "
                f"{sub.source!r}, which does not declare it (declared streams: {declared}; "
                f"every component also has the system stream {sorted(IMPLICIT_STREAMS)})"
            )
        if (sub.source, sub.stream_id) in seen:
            raise InvalidTopologyError(
                f"{where} subscribes twice to stream {sub.stream_id!r} of {sub.source!r}"
            )
        seen.add((sub.source, sub.stream_id))
        kind = sub.grouping.kind
        if sub.grouping.fields is not None:
            missing = [name for name in sub.grouping.fields if name not in stream.fields]
            if missing:
                raise InvalidTopologyError(
                    f"{where}: {kind.value} grouping on {sub.source!r} stream "
                    f"{sub.stream_id!r} uses field(s) {missing} that the stream does not "
                    f"declare (its fields are {stream.fields.to_list()})"
                )
            if not sub.grouping.fields:
                raise InvalidTopologyError(
                    f"{where}: {kind.value} grouping needs at least one field"
                )
        if kind is GroupingKind.DIRECT and not stream.direct:
            raise InvalidTopologyError(
                f"{where}: direct grouping on {sub.source!r} stream {sub.stream_id!r}, which "
                "is not declared direct (declare it with direct=True)"
            )
        if kind is not GroupingKind.DIRECT and stream.direct:
            raise InvalidTopologyError(
                f"{where}: {kind.value} grouping on {sub.source!r} stream {sub.stream_id!r}, "
                "which is declared direct: subscribe with direct_grouping"
            )
