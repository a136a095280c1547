"""What the Spark engine runs, read from a compiled topology.

A Trident topology compiles to a coordinator spout, an emitter per Trident spout and a
batch bolt per segment (see ``squall.trident.compiler``). The Spark engine takes the
spouts and segments from those components and replaces the batch layer with Spark's
micro-batches: one micro-batch is one transaction (txid = batch id + 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from squall.model.errors import InvalidTopologyError
from squall.model.grouping import GroupingKind
from squall.model.topology import StormTopology
from squall.trident.segment import TridentSegment
from squall.trident.sources import TridentSpoutAdapter
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
    """The spout and the segments, in topological order."""

    spout_id: str
    spout: BatchSpout
    spout_fields: tuple[str, ...]
    spout_outputs: list[Edge]
    segments: list[SegmentPlan]


def _unsupported(what: str) -> InvalidTopologyError:
    return InvalidTopologyError(f"the Spark engine does not run {what} yet; {UNSUPPORTED_HINT}")


def trident_plan(topology: StormTopology) -> TridentPlan:
    """Read the Trident plan of ``topology``.

    Raises:
        InvalidTopologyError: the topology uses a feature the Spark engine does not run
            (the message names it and suggests LocalCluster).
    """
    spouts = []
    segments: dict[str, Any] = {}
    for spec in topology:
        component = spec.component
        inner = getattr(component, "spout", None)
        bolt = getattr(component, "bolt", None)
        if spec.is_spout:
            if type(component).__name__ != "TransactionalSpoutCoordinator":
                raise _unsupported(f"core spout/bolt topologies (spout {spec.component_id!r})")
            source = type(inner).__name__
            if source == "DRPCSource":
                raise _unsupported(f"Trident DRPC streams ({spec.component_id!r})")
            if source != "SpoutGroupSource":
                raise _unsupported(f"transactional topologies ({spec.component_id!r})")
        elif isinstance(inner, TridentSpoutAdapter):
            if not isinstance(inner.spout, BatchSpout):
                raise _unsupported(
                    f"partitioned Trident spouts ({inner.stream_id!r}, "
                    f"{type(inner.spout).__name__})"
                )
            spouts.append((spec.component_id, inner))
        elif isinstance(bolt, TridentSegment):
            segments[spec.component_id] = (spec, bolt)
        else:
            raise _unsupported(f"component {spec.component_id!r} ({type(component).__name__})")
    if len(spouts) != 1:
        raise _unsupported(f"Trident topologies with {len(spouts)} spouts (one is supported)")
    spout_id, adapter = spouts[0]
    ordered = _topological(topology, list(segments), spout_id)
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
    spout_outputs: list[Edge] = []
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
            if sub.source == spout_id:
                spout_outputs.append(edge)
            else:
                plans[sub.source].outputs.setdefault(sub.stream_id, []).append(edge)
    return TridentPlan(
        spout_id,
        adapter.spout,
        tuple(adapter.fields),
        spout_outputs,
        [plans[cid] for cid in ordered],
    )


def _topological(topology: StormTopology, segments: list[str], spout_id: str) -> list[str]:
    done: list[str] = []
    remaining = list(segments)
    while remaining:
        progressed = False
        for cid in list(remaining):
            sources = {
                s.source
                for s in topology.get_component(cid).inputs
                if not s.stream_id.startswith(("$", "__")) and s.source != spout_id
            }
            if sources <= set(done):
                done.append(cid)
                remaining.remove(cid)
                progressed = True
        if not progressed:
            raise InvalidTopologyError(
                f"the Spark engine cannot run cycles (components {sorted(remaining)}); "
                "use LocalCluster"
            )
    return done
