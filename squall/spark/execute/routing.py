"""Routing the tuples of Trident and transactional stages into packets.

A stage's partition is its task: tuples are routed on the emitting side, by the local
engine's routers (``squall.runtime.routing.make_router``, custom groupings included)
over the target's task ids, as the emitting task (its ``TopologyContext``), so both
engines send a tuple to the same task; the chosen task ids are mapped back to the
target's partitions once per packet. A source read in slices sends slice ``i`` along an
aligned edge to task ``i`` as it is (see :func:`aligned`): the stage reading it needs no
exchange.

Runs where the emitting task runs: an executor, the driver or a source's process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from squall.model.fields import Fields
from squall.model.grouping import GlobalStreamId, GroupingKind
from squall.runtime.context import TopologyContext
from squall.runtime.plan import TaskPlan
from squall.runtime.routing import Chooser, make_router
from squall.spark.execute.packets import Packet, Values, value_packets
from squall.spark.plan.batch import Edge

#: Groupings for which any even spread is right.
SPREADING = (GroupingKind.SHUFFLE, GroupingKind.NONE, GroupingKind.LOCAL_OR_SHUFFLE)


class Emit(NamedTuple):
    """What a component emitted."""

    stream: str
    #: The tuple's values, without the batch's attempt.
    values: Values
    #: The task id of a direct emit (None: grouped).
    task: int | None


def chooser(
    edge: Edge, fields: Fields, sender: TopologyContext, plan: TaskPlan, attempt: Any = None
) -> Chooser:
    """The router of ``edge`` for tuples (of fields ``fields``) that task ``sender``
    emits: the local engine's, over the target's task ids (a custom grouping is a copy
    prepared for this task, and sees each tuple with the batch's ``attempt`` in front,
    as on the local engine: rows carry the values without it)."""
    choose = make_router(
        edge.grouping,
        list(edge.task_ids),
        sender.task_id,
        fields,
        sender,
        plan,
        GlobalStreamId(edge.source, edge.stream),
        edge.subscriber,
    )
    if edge.kind is not GroupingKind.CUSTOM or attempt is None:
        return choose

    def with_attempt(task_id: int, values: Sequence[Any]) -> list[int]:
        return choose(task_id, [attempt, *values])

    return with_attempt


def aligned(edge: Edge, slices: int) -> bool:
    """Whether a source read in ``slices`` slices sends slice ``i`` of its batch to
    task ``i`` along ``edge``: a spreading grouping over as many tasks as slices. Slices
    are contiguous parts of the batch of (nearly) equal size, so each task gets an even
    share in emit order, and the stage reading such an edge needs no exchange (see
    ``BatchPipeline``)."""
    return edge.kind in SPREADING and edge.tasks == slices


def route(
    edges: list[Edge],
    fields: Fields,
    sender: TopologyContext,
    plan: TaskPlan,
    values_list: Sequence[Values],
    part: int = 0,
    slices: int = 0,
    attempt: Any = None,
) -> list[Packet]:
    """Packets for ``values_list`` that task ``sender`` sends along ``edges`` (``plan``:
    the task plan its context is of) in a batch whose tuples carry ``attempt`` first (a
    transactional topology's; None: Trident's, whose groupings never see it). For slice
    ``part`` of ``slices`` of a source, aligned edges keep the slice's tuples at task
    ``part``, without looking at them. Each tuple's values are a list."""
    # (edge position, target partition) for aligned edges, (edge position, target task
    # id) for routed ones: task ids become partitions once per group, not per tuple.
    kept: dict[tuple[int, int], list[Values]] = {}
    routed: dict[tuple[int, int], list[Values]] = {}
    choosers = []
    for position, edge in enumerate(edges):
        if aligned(edge, slices):
            kept.setdefault((position, part), []).extend(values_list)
        else:
            choosers.append((position, chooser(edge, fields, sender, plan, attempt)))
    if choosers:
        task_id = sender.task_id
        for values in values_list:
            for position, choose in choosers:
                for target in choose(task_id, values):
                    key = (position, target)
                    group = routed.get(key)
                    if group is None:
                        group = routed[key] = []
                    group.append(values)
    packets: list[Packet] = []
    for (position, partition), grouped in kept.items():
        edge = edges[position]
        packets.extend(value_packets(edge.target, partition, edge.source, edge.stream, grouped))
    for (position, target), grouped in routed.items():
        edge = edges[position]
        partition = target - edge.task_ids[0]
        packets.extend(value_packets(edge.target, partition, edge.source, edge.stream, grouped))
    return packets


def route_emits(
    edges_by_stream: dict[str, list[Edge]],
    fields_by_stream: dict[str, Fields],
    sender: TopologyContext,
    plan: TaskPlan,
    emits: Iterable[Emit],
    attempt: Any = None,
) -> list[Packet]:
    """Packets for what task ``sender`` emitted on several streams in the batch of
    ``attempt`` (see :func:`route`); a direct emit goes to the task id it names on the
    stream's direct subscriptions.

    Raises:
        ValueError: a direct emit names a task the subscriber does not have.
    """
    grouped: dict[str, list[Values]] = {}
    direct: dict[tuple[int, int, str, str], list[Values]] = {}
    for stream, values, task in emits:
        edges = edges_by_stream.get(stream)
        if not edges:
            continue
        if task is None:
            grouped.setdefault(stream, []).append(values)
            continue
        for edge in edges:
            if edge.kind is GroupingKind.DIRECT:
                first = edge.task_ids[0]
                if not first <= task < first + len(edge.task_ids):
                    raise ValueError(
                        f"emit_direct to task {task} on stream {stream!r}: the subscriber "
                        f"{edge.subscriber!r} has tasks {list(edge.task_ids)}"
                    )
                key = (edge.target, task - first, edge.source, edge.stream)
                direct.setdefault(key, []).append(values)
    packets = [
        packet
        for (dest, target, source, stream), values_list in direct.items()
        for packet in value_packets(dest, target, source, stream, values_list)
    ]
    for stream, values_list in grouped.items():
        edges = [e for e in edges_by_stream[stream] if e.kind is not GroupingKind.DIRECT]
        fields = fields_by_stream[stream]
        packets.extend(route(edges, fields, sender, plan, values_list, attempt=attempt))
    return packets
