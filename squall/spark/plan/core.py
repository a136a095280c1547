"""What the Spark engine runs for a core topology (spouts and bolts).

The task plan is the local engine's (``squall.runtime.plan.build_plan`` over the system
topology), so both engines give the same task ids and route the same tuples to the same
tasks. On Spark a bolt's task ``i`` (its ``i``-th task id) is partition ``i`` of the
bolt's stage, and a task's "worker" is that partition: local-or-shuffle keeps a tuple
in the partition it was emitted from when the subscriber has a task of that index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from squall.model.config import Config, component_config, effective_config
from squall.model.errors import InvalidTopologyError
from squall.model.grouping import GroupingKind
from squall.model.metrics import METRICS_COMPONENT_PREFIX
from squall.model.topology import StormTopology
from squall.model.tuple import StreamInfo
from squall.runtime.plan import TaskPlan, build_plan
from squall.runtime.system import acker_count, system_topology, validate_submission
from squall.runtime.task_metrics import builtin_bucket_secs, has_metrics_consumers
from squall.spark.plan.pickling import check_picklable
from squall.state.micro_batches import with_micro_batch_state
from squall.state.wiring import check_stateful

#: The task id that stands for the ackers on Spark: what tasks send to it (acks, fails)
#: is the XOR ledger of the micro-batch, collected at its end.
LEDGER_TASK = 0


@dataclass
class BoltStagePlan:
    """One bolt component: its stage index (topological), tasks and input edges."""

    index: int
    component_id: str
    task_ids: list[int]
    #: ``(source component, stream, grouping kind)`` of each subscription.
    inputs: list[tuple[str, str, GroupingKind]]
    #: Seconds between tick tuples (None: no ticks).
    tick_secs: float | None = None

    @property
    def tasks(self) -> int:
        """Number of tasks (the stage's partitions)."""
        return len(self.task_ids)


@dataclass
class CorePlan:
    """The core topology as the Spark engine runs it.

    Attributes:
        name: the topology name.
        topology: the system topology (the user's plus the acking streams).
        plan: task ids per component (as on the local engine), partition "workers".
        conf: the effective topology configuration.
        spouts: spout component ids (each is a streaming source).
        stages: bolt components in topological order.
        locations: task id -> ``(stage index, task index)`` for bolt tasks.
        infos: ``(component, stream)`` -> the stream's ``StreamInfo``.
        tracking: whether tuple trees are tracked (ackers > 0).
    """

    name: str
    topology: StormTopology
    plan: TaskPlan
    conf: dict[str, Any]
    spouts: list[str]
    stages: list[BoltStagePlan]
    locations: dict[int, tuple[int, int]] = field(default_factory=dict)
    infos: dict[tuple[str, str], StreamInfo] = field(default_factory=dict)
    tracking: bool = True
    #: With metrics consumers: seconds between two idle micro-batches that let the
    #: tasks send their metrics (``topology.builtin.metrics.bucket.size.secs``); None
    #: without consumers.
    metrics_secs: float | None = None

    def stage(self, component_id: str) -> BoltStagePlan:
        """The stage of bolt ``component_id``."""
        return next(s for s in self.stages if s.component_id == component_id)

    def readers(self, component_id: str) -> list[BoltStagePlan]:
        """The stages subscribing to any stream of ``component_id``."""
        return [s for s in self.stages if any(i[0] == component_id for i in s.inputs)]

    def spout_slices(self, spout_id: str) -> int:
        """How many Spark partitions read a batch of ``spout_id``: the most tasks of a
        bolt subscribing to it. Partition ``i`` holds the packets for task index ``i``
        (modulo), so a bolt with that many tasks reading only this spout needs no
        exchange."""
        return max([1, *(stage.tasks for stage in self.readers(spout_id))])

    def min_tick_secs(self) -> float | None:
        """The shortest tick period of any bolt, or between the micro-batches that let
        tasks send their metrics (None if there is neither)."""
        periods = [s.tick_secs for s in self.stages if s.tick_secs]
        if self.metrics_secs is not None:
            periods.append(self.metrics_secs)
        return min(periods) if periods else None

    def sends_metrics(self, stage: BoltStagePlan) -> bool:
        """Whether the tasks of ``stage`` send metrics to the metrics consumers (the
        topology has consumers, and ``stage`` is not one)."""
        return self.metrics_secs is not None and not stage.component_id.startswith(
            METRICS_COMPONENT_PREFIX
        )


def is_core(topology: StormTopology) -> bool:
    """Whether ``topology`` is a core topology (not Trident, not transactional): it
    carries no batch IR."""
    return topology.batch_ir is None


def core_plan(name: str, topology: StormTopology, conf: dict[str, Any]) -> CorePlan:
    """Check ``topology`` for the Spark engine and plan its stages.

    Raises:
        InvalidTopologyError: the topology has a cycle (Spark runs each bolt once per
            micro-batch, in topological order), a component cannot be pickled, or a
            component's own submit check fails.
    """
    conf = effective_config(conf)
    conf[Config.TOPOLOGY_NAME] = name
    cycle = topology.find_cycle()
    if cycle:
        raise InvalidTopologyError(
            f"the Spark engine cannot run topology {name!r}: it has a cycle "
            f"({' -> '.join(cycle)}). A micro-batch runs each bolt once, as a Spark stage "
            "in topological order, so no tuple can flow back to a bolt that already ran; "
            "run cyclic topologies on LocalCluster"
        )
    validate_submission(topology, conf)
    check_stateful(topology, conf)
    topology = with_micro_batch_state(topology)
    for spec in topology:
        check_picklable(spec.component, spec.component_id)
    system = system_topology(topology, conf)
    plan = build_plan(system, conf)
    # A task's "worker" on Spark is its partition: its index within its component.
    plan.task_worker = {
        task: tasks.index(task) for tasks in plan.component_tasks.values() for task in tasks
    }
    stages = [
        BoltStagePlan(
            index,
            component_id,
            plan.component_tasks[component_id],
            [
                (sub.source, sub.stream_id, sub.grouping.kind)
                for sub in system.get_component(component_id).inputs
                if not sub.source.startswith("__")
            ],
            _tick_secs(system, component_id, conf),
        )
        for index, component_id in enumerate(
            [
                *topology.topological_order(
                    sorted(topology.bolts),
                    upstream=topology.spouts,
                    ties="earliest",
                    include_control_streams=True,
                ),
                # The metrics consumers' bolts read every component: they run last.
                *sorted(c for c in system.bolts if c.startswith(METRICS_COMPONENT_PREFIX)),
            ]
        )
    ]
    locations = {
        task: (stage.index, position)
        for stage in stages
        for position, task in enumerate(stage.task_ids)
    }
    infos = {
        (spec.component_id, stream): StreamInfo(spec.component_id, stream, declaration.fields)
        for spec in system
        for stream, declaration in spec.streams.items()
    }
    return CorePlan(
        name,
        system,
        plan,
        conf,
        sorted(topology.spouts),
        stages,
        locations,
        infos,
        acker_count(conf) > 0,
        builtin_bucket_secs(conf) if has_metrics_consumers(conf) else None,
    )


def _tick_secs(topology: StormTopology, component_id: str, conf: dict[str, Any]) -> float | None:
    spec = topology.get_component(component_id)
    frequency = component_config(conf, spec.conf).get(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS)
    return float(frequency) if frequency else None


__all__ = ["LEDGER_TASK", "BoltStagePlan", "CorePlan", "core_plan", "is_core"]
