"""Routing the tuples of Trident and transactional stages into packets.

A stage's partition is its task: tuples are routed on the emitting side, by the local
engine's routers over task indexes (so both engines send a tuple to the same task),
into packets (see ``execute.packets``) for the next stages' partitions. A source read
in slices sends slice ``i`` along an aligned edge to task ``i`` as it is (see
:func:`aligned`): the stage reading it needs no exchange.

Runs where the emitting task runs: an executor, the driver or a source's process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from squall.model.fields import Fields
from squall.model.grouping import GroupingKind
from squall.runtime.routing import (
    AllRouter,
    FieldsRouter,
    GlobalRouter,
    PartialKeyRouter,
    ShuffleRouter,
)
from squall.spark.execute.packets import Packet, Values, value_packets
from squall.spark.plan.batch import Edge

Chooser = Callable[[int, Sequence[Any]], list[int]]

#: Groupings for which any even spread is right.
SPREADING = (GroupingKind.SHUFFLE, GroupingKind.NONE, GroupingKind.LOCAL_OR_SHUFFLE)


class Emit(NamedTuple):
    """What a component emitted."""

    stream: str
    #: The tuple's values, without the batch's attempt.
    values: Values
    #: The task index of a direct emit (None: grouped).
    task: int | None


def chooser(edge: Edge, fields: Fields, source_partition: int) -> Chooser:
    """The router of ``edge`` for tuples leaving ``source_partition``: the same choice
    the local engine makes, over task indexes."""
    targets = list(range(edge.tasks))
    kind = edge.kind
    if kind in (GroupingKind.FIELDS, GroupingKind.PARTIAL_KEY):
        router = FieldsRouter if kind is GroupingKind.FIELDS else PartialKeyRouter
        positions = [fields.index(f) for f in edge.fields]
        site = f"bolt {edge.subscriber!r} groups stream {edge.stream!r} of {edge.source!r}"
        return router(targets, positions, edge.fields, site).choose
    if kind is GroupingKind.ALL:
        return AllRouter(targets).choose
    if kind is GroupingKind.GLOBAL:
        return GlobalRouter(targets).choose
    # Shuffle, none and local-or-shuffle: a Spark partition has no "worker" to stay in
    # (the local engine with one worker also shuffles local-or-shuffle over all tasks).
    return ShuffleRouter(targets, source_partition).choose


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
    source_partition: int,
    values_list: Sequence[Values],
    slices: int = 0,
) -> list[Packet]:
    """Packets for ``values_list`` sent along ``edges`` from ``source_partition`` (slice
    ``source_partition`` of ``slices`` of a source: aligned edges keep the slice's
    tuples at its task, without looking at them). Each tuple's values are a list."""
    groups: dict[tuple[int, int, str, str], list[Values]] = {}
    choosers = []
    for edge in edges:
        if aligned(edge, slices):
            key = (edge.target, source_partition, edge.source, edge.stream)
            groups.setdefault(key, []).extend(values_list)
        else:
            choosers.append((edge, chooser(edge, fields, source_partition)))
    if choosers:
        for values in values_list:
            for edge, choose in choosers:
                for target in choose(source_partition, values):
                    key = (edge.target, target, edge.source, edge.stream)
                    group = groups.get(key)
                    if group is None:
                        group = groups[key] = []
                    group.append(values)
    return [
        packet
        for (dest, target, source, stream), grouped in groups.items()
        for packet in value_packets(dest, target, source, stream, grouped)
    ]


def route_emits(
    edges_by_stream: dict[str, list[Edge]],
    fields_by_stream: dict[str, Fields],
    source_partition: int,
    emits: Iterable[Emit],
) -> list[Packet]:
    """Packets for what a task emitted on several streams; a direct emit goes to the
    task it names on the stream's direct subscriptions.

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
                if not 0 <= task < edge.tasks:
                    raise ValueError(
                        f"emit_direct to task {task} on stream {stream!r}: the subscriber "
                        f"has tasks 0..{edge.tasks - 1}"
                    )
                key = (edge.target, task, edge.source, edge.stream)
                direct.setdefault(key, []).append(values)
    packets = [
        packet
        for (dest, target, source, stream), values_list in direct.items()
        for packet in value_packets(dest, target, source, stream, values_list)
    ]
    for stream, values_list in grouped.items():
        edges = [e for e in edges_by_stream[stream] if e.kind is not GroupingKind.DIRECT]
        packets.extend(route(edges, fields_by_stream[stream], source_partition, values_list))
    return packets
