"""``JoinBolt``: Storm's windowed join of two or more streams (``org.apache.storm.bolt.JoinBolt``).

A ``JoinBolt`` is a :class:`~squall.windowing.WindowedBolt`: each window it fires is
joined with a hash join in the order the joins were declared. The first source is the
base; each ``join``/``left_join`` adds a source whose join field must equal the join
field of a source introduced before it. ``select`` names the output fields. The
description of the join (:mod:`squall.windowing.joining`) is checked when the topology
is built, against the fields the bolt's inputs declare.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, overload

from squall.model.declarer import OutputFieldsDeclarer
from squall.model.fields import Fields
from squall.model.hooks import ChecksInputs
from squall.model.tuple import DEFAULT_STREAM
from squall.windowing.bolt import WindowedBolt
from squall.windowing.executor import WindowedBoltExecutor
from squall.windowing.joining import JoinClause, JoinPlan, hash_join, parse_select
from squall.windowing.joining import Selector as JoinSelector
from squall.windowing.window import TupleWindow

if TYPE_CHECKING:
    from squall.model.components import Bolt
    from squall.runtime.context import TopologyContext
    from squall.windowing.executor import WindowedOutputCollector


class JoinBolt(WindowedBolt):
    """Joins the streams it receives, window by window, like an SQL ``select ... from
    a join b on ... left join c on ...`` (Storm's ``JoinBolt``).

    ``JoinBolt("genders", "id")`` starts the join from the tuples of component
    ``"genders"`` with their field ``"id"`` as join key; ``JoinBolt(JoinBolt.Selector.STREAM,
    "genders", "id")`` (or ``selector="stream"``) names streams instead of components.
    Configure the window with the ``with_*`` methods of :class:`WindowedBolt`.

    Each window that fires is joined on the task's thread: its tuples are split by
    source (in window order); the first source's tuples are the base records; each
    ``join``/``left_join``, in the order declared, matches every record to the new
    source's tuples whose join field equals the record's prior source's join field
    (hash join). An inner join drops a record without a match, a left join keeps it
    with the new source missing; a record whose prior key is missing (``None``) is
    dropped by either, as in Storm. Each result is emitted once, with the selected
    fields, on the output stream, anchored to the tuples it joins. The window's tuples
    are acked when they leave the window, as every windowed bolt's are.

    Errors (an unknown source, a field the inputs do not declare, no ``select``...)
    are raised as ``InvalidTopologyError`` naming the bolt by
    ``TopologyBuilder.create_topology()``.
    """

    #: ``JoinBolt.Selector.SOURCE``/``STREAM``, as Storm spells them.
    Selector = JoinSelector

    _output_stream: str | None = None
    _select: str | None = None

    @overload
    def __init__(self, source: JoinSelector, field: str, selector: str) -> None: ...

    @overload
    def __init__(
        self, source: str, field: str, selector: JoinSelector | str = JoinSelector.SOURCE
    ) -> None: ...

    def __init__(self, source: Any, field: str, selector: Any = JoinSelector.SOURCE) -> None:
        """``JoinBolt(source_or_stream, field, selector="source")``, or Storm's order
        ``JoinBolt(JoinBolt.Selector.STREAM, stream, field)``.

        Args:
            source: the component (or stream) the join starts from.
            field: its join field (``"x"``, or ``"x.y"`` for key ``y`` of the mapping in
                field ``x``).
            selector: ``Selector.SOURCE``/``"source"`` (names are component ids) or
                ``Selector.STREAM``/``"stream"`` (names are stream ids).
        """
        if isinstance(source, JoinSelector):  # Storm's JoinBolt(Selector, name, field)
            source, field, selector = field, selector, source
        self._selector: Any = selector
        self._clauses: list[JoinClause] = [JoinClause(source, field, None, None)]

    @property
    def selector(self) -> JoinSelector:
        """What the names refer to (``Selector.SOURCE`` or ``Selector.STREAM``).

        Raises:
            ValueError: the selector given is neither.
        """
        selector = self._selector
        try:
            return JoinSelector(selector.lower() if isinstance(selector, str) else selector)
        except ValueError:
            raise ValueError(
                f"JoinBolt: selector must be JoinBolt.Selector.SOURCE/STREAM or "
                f"'source'/'stream', got {selector!r}"
            ) from None

    def join(self, new_source: str, field: str, prior_source: str) -> JoinBolt:
        """Inner join: ``... join new_source on new_source.field = prior_source.key``,
        where ``key`` is ``prior_source``'s own join field. ``prior_source`` must have been
        introduced before (the constructor or an earlier join)."""
        self._clauses.append(JoinClause(new_source, field, prior_source, "inner"))
        return self

    def left_join(self, new_source: str, field: str, prior_source: str) -> JoinBolt:
        """Left join: as :meth:`join`, but a record without a match in ``new_source`` is
        kept, its fields from ``new_source`` ``None``."""
        self._clauses.append(JoinClause(new_source, field, prior_source, "left"))
        return self

    def select(self, comma_separated_fields: str) -> JoinBolt:
        """The output fields, comma separated: ``"id, gender, age:source_id"``...

        A name is a field (``"age"``), a nested key (``"user.name"``: key ``name`` of the
        mapping in field ``user``), or either qualified by a source (``"ages:id"``); an
        unqualified name takes the value of the first joined source (in join order)
        that has it, not ``None``. The output fields are named as written here, the
        qualifier included (``"ages:id"``), as in Storm.
        """
        self._select = comma_separated_fields
        return self

    def with_output_stream(self, stream_id: str) -> JoinBolt:
        """Emit on ``stream_id`` (declared with the selected fields) instead of the
        default stream."""
        self._output_stream = stream_id
        return self

    def plan(self) -> JoinPlan:
        """The checked description of the join.

        Raises:
            ValueError: the join is inconsistent (a source joined twice or used before it
                is introduced, a qualified join field, no or a bad ``select``...).
        """
        return JoinPlan.of(self.selector, self._clauses, parse_select(self._select))

    def to_bolt(self) -> Bolt:
        """The bolt that runs this join (used by ``set_bolt``); checks the join first."""
        self.plan()
        return JoinBoltExecutor(self)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The output stream (default: ``"default"``) with the selected fields."""
        names = self.plan().output_names
        declarer.declare_stream(self._output_stream or DEFAULT_STREAM, Fields(names))

    def check_inputs(self, inputs: Mapping[tuple[str, str], Fields]) -> None:
        """At build time: the join's sources and the bolt's inputs match, and the join
        and select fields are declared by them (see :meth:`JoinPlan.check_inputs`)."""
        self.plan().check_inputs(inputs)

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: WindowedOutputCollector
    ) -> None:
        """Called once per task, on its thread: keeps the collector, checks the join."""
        self.collector = collector
        self._plan = self.plan()

    def execute(self, window: TupleWindow) -> None:
        """Join the window's tuples and emit each result, anchored to the tuples it joins.

        Raises:
            ValueError: a tuple comes from a source outside the join, or a nested field
                is not a mapping (the window's tuples are then failed).
        """
        plan = self._plan
        stream = self._output_stream or DEFAULT_STREAM
        emit = self.collector.emit
        for joined in hash_join(plan, window.get()):
            emit(plan.project(joined), anchors=joined, stream=stream)


class JoinBoltExecutor(WindowedBoltExecutor, ChecksInputs):
    """The bolt an engine runs for a :class:`JoinBolt`: its windows, and the build-time
    check of its inputs."""

    bolt: JoinBolt

    def check_inputs(self, inputs: Mapping[tuple[str, str], Fields]) -> None:
        """Called by ``create_topology``: see :meth:`JoinBolt.check_inputs`."""
        self.bolt.check_inputs(inputs)


__all__ = ["JoinBolt", "JoinBoltExecutor"]
