"""What the Spark engine runs, read from a compiled topology.

A Trident topology compiles to a coordinator spout, an emitter per Trident spout and a
batch bolt per segment (see ``squall.trident.compiler``). The Spark engine takes the
spouts and segments from those components and replaces the batch layer with Spark's
micro-batches: one micro-batch is one transaction (txid = batch id + 1).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from squall.model.errors import InvalidTopologyError
from squall.model.grouping import GroupingKind
from squall.model.topology import StormTopology
from squall.spark.pickling import check_picklable
from squall.trident.segment import TridentSegment
from squall.trident.sources import DRPCSpoutAdapter, TridentSpoutAdapter
from squall.trident.spouts import BatchSpout

UNSUPPORTED_HINT = "run it on LocalCluster for now"


@dataclass(frozen=True)
class Edge:
    """Tuples of stream ``stream`` of ``source`` go to segment ``target`` (by index) by
    ``grouping`` over that segment's ``tasks`` partitions."""

    source: str
    stream: str
    target: int
    kind: GroupingKind
    fields: tuple[str, ...]
    tasks: int


@dataclass
class SegmentPlan:
    """One segment: its bolt, its tasks (partitions) and where its streams go."""

    index: int
    component_id: str
    segment: TridentSegment
    tasks: int
    committer: bool
    inputs: list[Edge] = field(default_factory=list)
    outputs: dict[str, list[Edge]] = field(default_factory=dict)


@dataclass
class TridentPlan:
    """One batch source (a spout, or a DRPC stream) and the segments it feeds, in
    topological order: one streaming query."""

    spout_id: str
    spout: BatchSpout | None
    spout_fields: tuple[str, ...]
    spout_outputs: list[Edge]
    segments: list[SegmentPlan]
    drpc_function: str | None = None
    drpc: Any = None


def _unsupported(what: str) -> InvalidTopologyError:
    return InvalidTopologyError(f"the Spark engine does not run {what} yet; {UNSUPPORTED_HINT}")


def trident_plans(topology: StormTopology) -> list[TridentPlan]:
    """The plans of ``topology``: one per batch source (the regular spout first).

    Segments are copies: the Spark run may rewire them (DRPC results) without touching
    the topology object, which ``LocalCluster`` can still run.

    Raises:
        InvalidTopologyError: the topology uses a feature the Spark engine does not run
            (the message names it and suggests LocalCluster).
    """
    sources: list[tuple[str, Any]] = []
    segments: dict[str, Any] = {}
    for spec in topology:
        component = spec.component
        inner = getattr(component, "spout", None)
        bolt = getattr(component, "bolt", None)
        if spec.is_spout:
            if type(component).__name__ != "TransactionalSpoutCoordinator":
                raise _unsupported(f"core spout/bolt topologies (spout {spec.component_id!r})")
            if type(inner).__name__ not in ("SpoutGroupSource", "DRPCSource"):
                raise _unsupported(f"transactional topologies ({spec.component_id!r})")
        elif isinstance(inner, TridentSpoutAdapter):
            if not isinstance(inner.spout, BatchSpout):
                raise _unsupported(
                    f"partitioned Trident spouts ({inner.stream_id!r}, "
                    f"{type(inner.spout).__name__})"
                )
            sources.append((spec.component_id, inner))
        elif isinstance(inner, DRPCSpoutAdapter):
            sources.append((spec.component_id, _drpc_source(topology, spec.component_id)))
        elif isinstance(bolt, TridentSegment):
            check_picklable(component, spec.component_id)
            segments[spec.component_id] = (spec, _detached(bolt))
        else:
            raise _unsupported(f"component {spec.component_id!r} ({type(component).__name__})")
    regular = [s for s in sources if isinstance(s[1], TridentSpoutAdapter)]
    if len(regular) > 1:
        raise _unsupported(f"Trident topologies with {len(regular)} spouts (one is supported)")
    ordered = _topological(topology, list(segments), {sid for sid, _ in sources})
    plans = {
        cid: SegmentPlan(
            index,
            cid,
            segments[cid][1],
            topology.get_component(cid).num_tasks,
            bool(getattr(topology.get_component(cid).component, "committer", False)),
        )
        for index, cid in enumerate(ordered)
    }
    source_edges: dict[str, list[Edge]] = {sid: [] for sid, _ in sources}
    for cid in ordered:
        spec = topology.get_component(cid)
        for sub in spec.inputs:
            if sub.stream_id.startswith(("$", "__")):
                continue
            edge = Edge(
                sub.source,
                sub.stream_id,
                plans[cid].index,
                sub.grouping.kind,
                tuple(sub.grouping.fields or ()),
                spec.num_tasks,
            )
            plans[cid].inputs.append(edge)
            if sub.source in source_edges:
                source_edges[sub.source].append(edge)
            else:
                plans[sub.source].outputs.setdefault(sub.stream_id, []).append(edge)
    result = []
    for source_id, source in sorted(sources, key=lambda s: isinstance(s[1], tuple)):
        reached = _reached(topology, source_id, set(segments))
        members = [plans[cid] for cid in ordered if cid in reached]
        if isinstance(source, TridentSpoutAdapter):
            result.append(
                TridentPlan(
                    source_id, source.spout, tuple(source.fields), source_edges[source_id], members
                )
            )
        else:
            function, drpc = source
            result.append(
                TridentPlan(
                    source_id, None, ("args",), source_edges[source_id], members, function, drpc
                )
            )
    return result


def _detached(segment: TridentSegment) -> TridentSegment:
    """A copy of ``segment`` whose processors keep only their own graph node: a node
    refers to its parents, and through them to the whole upstream graph (spouts, a
    ``LocalDRPC``), which must not travel to executors."""
    copied = copy.deepcopy(segment)
    for processor in copied.processors:
        processor.node = dataclasses.replace(processor.node, parents=[])
    return copied


def _drpc_source(topology: StormTopology, emitter_id: str) -> tuple[str, Any]:
    """``(function, drpc)`` of the DRPC stream whose emitter is ``emitter_id``."""
    coordinator = next(
        s.source for s in topology.get_component(emitter_id).inputs if s.stream_id == "$batch"
    )
    source = topology.get_component(coordinator).component.spout
    return source.function, source.drpc


def _reached(topology: StormTopology, source: str, segments: set[str]) -> set[str]:
    reached: set[str] = set()
    frontier = [source]
    while frontier:
        current = frontier.pop()
        for cid in segments - reached:
            inputs = topology.get_component(cid).inputs
            if any(s.source == current and not s.stream_id.startswith(("$", "__")) for s in inputs):
                reached.add(cid)
                frontier.append(cid)
    return reached


def _topological(topology: StormTopology, segments: list[str], sources: set[str]) -> list[str]:
    done: list[str] = []
    remaining = list(segments)
    while remaining:
        progressed = False
        for cid in list(remaining):
            inputs = {
                s.source
                for s in topology.get_component(cid).inputs
                if not s.stream_id.startswith(("$", "__")) and s.source not in sources
            }
            if inputs <= set(done):
                done.append(cid)
                remaining.remove(cid)
                progressed = True
        if not progressed:
            raise InvalidTopologyError(
                f"the Spark engine cannot run cycles (components {sorted(remaining)}); "
                "use LocalCluster"
            )
    return done
