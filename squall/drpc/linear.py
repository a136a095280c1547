"""``LinearDRPCTopologyBuilder``: a DRPC function computed by a chain of steps (Storm's).

The builder wires, as Storm does::

    spout (DRPCSpout) -> prepare-request -> bolt0 -> bolt1 -> ... -> boltN-1
                               |                                       |
                               +--- return info --> boltN (JoinResult) <- (id, result)
                                                        |
                                                   boltN+1 (ReturnResults)

``prepare-request`` gives each request a random id (a 63-bit integer) and emits
``(request, args)`` on its default stream, ``(request, return)`` on ``ret`` and
``(request)`` on ``id``. The first value of every tuple between steps is that id; the
last step emits ``(id, result)``. Each step runs in a
:class:`~squall.drpc.coordinated.CoordinatedBolt`, which knows when its task has
received every tuple of a request (batch bolts' ``finish_batch``, ``finished_id``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from squall.drpc.components import DRPCSpout, ReturnResults
from squall.drpc.coordinated import COORDINATED_STREAM, CoordinatedBolt, FinishedCallback
from squall.drpc.local import LocalDRPC
from squall.model.batch import BatchBolt
from squall.model.builder import BoltDeclarer, TopologyBuilder
from squall.model.collectors import BasicOutputCollector, OutputCollector
from squall.model.components import BasicBolt, Bolt
from squall.model.context import TopologyContext
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.errors import InvalidTopologyError
from squall.model.fields import Fields
from squall.model.grouping import CustomStreamGrouping
from squall.model.hooks import implements
from squall.model.topology import StormTopology
from squall.model.tuple import DEFAULT_STREAM, Tuple

SPOUT_ID = "spout"
PREPARE_ID = "prepare-request"
#: PrepareRequest's streams (Storm's names): the arguments (the default stream), the
#: return info, the request id.
ARGS_STREAM = DEFAULT_STREAM
RETURN_STREAM = "ret"
ID_STREAM = "id"

_Declaration = Callable[[BoltDeclarer, str], Any]


class PrepareRequest(BasicBolt):
    """Gives each DRPC request an id (Storm's ``PrepareRequest``): input ``(args,
    return-info)``; emits ``(request, args)``, ``(request, return)`` on ``ret`` and
    ``(request)`` on ``id``."""

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        """Emit the request's three tuples under a fresh random id."""
        args, return_info = tup.values[0], tup.values[1]
        request = random.getrandbits(63)
        collector.emit([request, args], ARGS_STREAM)
        collector.emit([request, return_info], RETURN_STREAM)
        collector.emit([request], ID_STREAM)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The args, return and id streams."""
        declarer.declare_stream(ARGS_STREAM, ["request", "args"])
        declarer.declare_stream(RETURN_STREAM, ["request", "return"])
        declarer.declare_stream(ID_STREAM, ["request"])


class JoinResult(Bolt):
    """Pairs each request's result with its return info (Storm's ``JoinResult``).

    Input: ``(request, return)`` from ``return_component`` and ``(id, result)`` from
    the last step, grouped on the id; emits ``(str(result), return-info)`` anchored to
    both, then acks both.
    """

    outputs = ["result", "return-info"]

    def __init__(self, return_component: str) -> None:
        self.return_component = return_component

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        """Start with no pending request."""
        self.collector = collector
        self.returns: dict[Any, Tuple] = {}
        self.results: dict[Any, Tuple] = {}

    def execute(self, tup: Tuple) -> None:
        """Keep ``tup``; emit once both halves of its request are here."""
        request = tup.values[0]
        if tup.source_component == self.return_component:
            self.returns[request] = tup
        else:
            self.results[request] = tup
        if request in self.returns and request in self.results:
            result = self.results.pop(request)
            returner = self.returns.pop(request)
            value = result.values[1]
            text = value if isinstance(value, str) else str(value)
            self.collector.emit([text, returner.values[1]], [result, returner])
            self.collector.ack(result)
            self.collector.ack(returner)


class LinearDRPCInputDeclarer:
    """How a step receives the previous step's tuples (Storm's
    ``LinearDRPCInputDeclarer``), returned by ``add_bolt``.

    Each grouping takes the stream as an optional first argument, as in Storm
    (``fields_grouping(Fields("id"))`` or ``fields_grouping("stream", Fields("id"))``);
    the default stream otherwise. A step declaring no grouping gets a shuffle (a none
    grouping); the first step always reads ``prepare-request``'s args stream.
    """

    def __init__(self, step: _Step) -> None:
        self._step = step

    def _add(self, declaration: _Declaration) -> LinearDRPCInputDeclarer:
        self._step.declarations.append(declaration)
        return self

    def fields_grouping(self, *args: Any) -> LinearDRPCInputDeclarer:
        """``fields_grouping([stream,] fields)``: equal values of ``fields`` go to the
        same task."""
        stream, (fields,) = _stream_and(args, 1, "fields_grouping")
        return self._add(lambda d, prev: d.fields_grouping(prev, fields, stream))

    def partial_key_grouping(self, *args: Any) -> LinearDRPCInputDeclarer:
        """``partial_key_grouping([stream,] fields)``: each key to the less loaded of
        two tasks."""
        stream, (fields,) = _stream_and(args, 1, "partial_key_grouping")
        return self._add(lambda d, prev: d.partial_key_grouping(prev, fields, stream))

    def global_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        """Everything to the step's lowest task id."""
        return self._add(lambda d, prev: d.global_grouping(prev, stream))

    def shuffle_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        """Spread the tuples evenly over the step's tasks."""
        return self._add(lambda d, prev: d.shuffle_grouping(prev, stream))

    def local_or_shuffle_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        """Prefer tasks in the same worker."""
        return self._add(lambda d, prev: d.local_or_shuffle_grouping(prev, stream))

    def none_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        """No preference (a shuffle)."""
        return self._add(lambda d, prev: d.none_grouping(prev, stream))

    def all_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        """Every task gets every tuple."""
        return self._add(lambda d, prev: d.all_grouping(prev, stream))

    def direct_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        """The previous step picks the task (``emit_direct``)."""
        return self._add(lambda d, prev: d.direct_grouping(prev, stream))

    def custom_grouping(self, *args: Any) -> LinearDRPCInputDeclarer:
        """``custom_grouping([stream,] grouping)``: tuples go where the
        ``CustomStreamGrouping`` says."""
        stream, (grouping,) = _stream_and(args, 1, "custom_grouping")
        if not isinstance(grouping, CustomStreamGrouping):
            raise InvalidTopologyError(
                f"custom_grouping needs a CustomStreamGrouping, got {type(grouping).__name__}"
            )
        return self._add(lambda d, prev: d.custom_grouping(prev, grouping, stream))

    def add_configuration(self, key: str, value: Any) -> LinearDRPCInputDeclarer:
        """Component-level configuration of the step."""
        self._step.configuration[key] = value
        return self

    def add_configurations(self, conf: dict[str, Any]) -> LinearDRPCInputDeclarer:
        """Component-level configuration of the step, several keys."""
        self._step.configuration.update(conf)
        return self

    def set_num_tasks(self, num_tasks: int) -> LinearDRPCInputDeclarer:
        """The step's number of tasks."""
        self._step.num_tasks = num_tasks
        return self


def _stream_and(args: tuple[Any, ...], count: int, method: str) -> tuple[str, tuple[Any, ...]]:
    if len(args) == count:
        return DEFAULT_STREAM, args
    if len(args) == count + 1 and isinstance(args[0], str):
        return args[0], args[1:]
    raise TypeError(
        f"{method} takes ([stream,] {'fields' if method != 'custom_grouping' else 'grouping'})"
        f", got {len(args)} arguments"
    )


class _Step:
    def __init__(self, bolt: Bolt | BasicBolt | BatchBolt, parallelism: int) -> None:
        self.bolt = bolt
        self.parallelism = parallelism
        self.declarations: list[_Declaration] = []
        self.configuration: dict[str, Any] = {}
        self.num_tasks: int | None = None


class LinearDRPCTopologyBuilder:
    """Builds a DRPC topology from a chain of steps (Storm's
    ``LinearDRPCTopologyBuilder``).

    Steps are ``Bolt``, ``BasicBolt`` or ``BatchBolt`` objects. The first value of every
    tuple a step receives and emits is the request id; the first step receives
    ``(request, args)``; the last step declares exactly one stream of two fields and
    emits ``(id, result)`` on it: ``str(result)`` is what the client's ``execute``
    returns. A batch bolt gets one instance per request and its ``finish_batch`` once
    its task has every tuple of the request; a bolt implementing ``FinishedCallback``
    gets ``finished_id(id)`` then. Any step raising (or failing a tuple) fails the
    request: the client gets a ``DRPCExecutionError``.

    Args:
        function: the DRPC function the topology serves.

    Example::

        builder = LinearDRPCTopologyBuilder("exclamation")
        builder.add_bolt(ExclaimBolt(), 3)
        cluster.submit_topology("drpc", conf, builder.create_local_topology(drpc))
        drpc.execute("exclamation", "hello")  # -> 'hello!'
    """

    def __init__(self, function: str) -> None:
        if not isinstance(function, str) or not function:
            raise InvalidTopologyError(
                f"LinearDRPCTopologyBuilder: the function must be a non-empty string, not "
                f"{function!r}"
            )
        self.function = function
        self._steps: list[_Step] = []

    def get_function(self) -> str:
        """The DRPC function the topology serves."""
        return self.function

    def add_bolt(
        self, bolt: Bolt | BasicBolt | BatchBolt, parallelism: int | None = None
    ) -> LinearDRPCInputDeclarer:
        """Add the next step, with ``parallelism`` tasks (1 by default).

        Raises:
            InvalidTopologyError: ``bolt`` is not a ``Bolt``, ``BasicBolt`` or
                ``BatchBolt``.
        """
        if not isinstance(bolt, Bolt | BasicBolt | BatchBolt):
            raise InvalidTopologyError(
                f"linear DRPC topology {self.function!r}: step {len(self._steps)} "
                f"({type(bolt).__name__}) is not a Bolt, BasicBolt or BatchBolt"
            )
        step = _Step(bolt, 1 if parallelism is None else parallelism)
        self._steps.append(step)
        return LinearDRPCInputDeclarer(step)

    def create_local_topology(self, drpc: LocalDRPC) -> StormTopology:
        """The topology, serving requests of the given ``LocalDRPC``.

        Raises:
            InvalidTopologyError: as :meth:`create_remote_topology`.
        """
        if not isinstance(drpc, LocalDRPC):
            raise InvalidTopologyError(
                f"create_local_topology needs a LocalDRPC, got {type(drpc).__name__} (use "
                "create_remote_topology for DRPC servers)"
            )
        return self._create(DRPCSpout(self.function, drpc))

    def create_remote_topology(self) -> StormTopology:
        """The topology, serving requests of the DRPC servers of its configuration
        (``drpc.servers``, see ``DRPCSpout``).

        Raises:
            InvalidTopologyError: there is no step, the last step does not declare
                exactly one stream of two fields, or the topology is invalid.
        """
        return self._create(DRPCSpout(self.function))

    def _create(self, spout: DRPCSpout) -> StormTopology:
        what = f"linear DRPC topology {self.function!r}"
        if not self._steps:
            raise InvalidTopologyError(f"{what} has no step: add_bolt at least one")
        last = self._steps[-1].bolt
        streams = OutputFieldsDeclarer()
        last.declare_output_fields(streams)
        if len(streams.streams) != 1:
            raise InvalidTopologyError(
                f"{what}: the last step ({type(last).__name__}) must declare exactly one "
                f"stream, not {sorted(streams.streams)}"
            )
        output_stream, output = next(iter(streams.streams.items()))
        fields = list(output.fields)
        if len(fields) != 2:
            raise InvalidTopologyError(
                f"{what}: the output stream of the last step ({type(last).__name__}) must "
                f"have exactly two fields, the request id and the result, not {fields}"
            )
        builder = TopologyBuilder()
        builder.set_spout(SPOUT_ID, spout)
        builder.set_bolt(PREPARE_ID, PrepareRequest()).none_grouping(SPOUT_ID)
        count = len(self._steps)
        for index, step in enumerate(self._steps):
            sources: dict[str, bool] = {}
            if index >= 1:
                sources[_bolt_id(index - 1)] = index == 1
            id_stream = None
            finishes = isinstance(step.bolt, BatchBolt) or implements(step.bolt, FinishedCallback)
            if index == count - 1 and finishes:
                id_stream = (PREPARE_ID, ID_STREAM)
            declarer = builder.set_bolt(
                _bolt_id(index), CoordinatedBolt(step.bolt, sources, id_stream), step.parallelism
            )
            if id_stream is not None:
                declarer.fields_grouping(PREPARE_ID, Fields("request"), ID_STREAM)
            previous = PREPARE_ID if index == 0 else _bolt_id(index - 1)
            if not step.declarations:
                declarer.none_grouping(previous, ARGS_STREAM)
            for declaration in step.declarations:
                declaration(declarer, previous)
            if index > 0:
                declarer.direct_grouping(_bolt_id(index - 1), COORDINATED_STREAM)
            if step.num_tasks is not None:
                declarer.set_num_tasks(step.num_tasks)
            if step.configuration:
                declarer.add_configurations(step.configuration)
        builder.set_bolt(_bolt_id(count), JoinResult(PREPARE_ID)).fields_grouping(
            _bolt_id(count - 1), Fields(fields[0]), output_stream
        ).fields_grouping(PREPARE_ID, Fields("request"), RETURN_STREAM)
        builder.set_bolt(_bolt_id(count + 1), ReturnResults()).none_grouping(_bolt_id(count))
        return builder.create_topology()


def _bolt_id(index: int) -> str:
    return f"bolt{index}"
