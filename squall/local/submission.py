"""What both kinds of local workers start from: a submitted topology, checked, with
its system components and task plan."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from squall.local.rebalance import with_parallelism
from squall.model.config import Config, effective_config
from squall.model.topology import StormTopology
from squall.runtime.metrics import ComponentStats, TaskStats, summarize
from squall.runtime.plan import TaskPlan, build_plan
from squall.runtime.system import system_topology, validate_submission
from squall.state.wiring import check_checkpointing, with_checkpointing


class SubmittedTopology:
    """A topology submitted as ``name``: its configuration over squall's defaults,
    the topology as submitted (``user_topology``) and as run (``topology``: system
    components and checkpointing added), and its task plan.

    Built on the submitting thread; the same in every process that builds it from the
    same arguments.

    Raises:
        InvalidTopologyError: the topology or configuration is invalid.
    """

    def __init__(self, name: str, conf: dict[str, Any], topology: StormTopology) -> None:
        self.name = name
        self.conf = effective_config(conf)
        self.conf[Config.TOPOLOGY_NAME] = name
        self.user_topology = topology
        validate_submission(topology, self.conf)
        check_checkpointing(topology, self.conf)
        self.topology = system_topology(with_checkpointing(topology, self.conf), self.conf)
        self.plan: TaskPlan = build_plan(self.topology, self.conf)

    def _record_layout(self, num_workers: int, executors: Mapping[str, int]) -> None:
        """What the topology runs with after a rebalance, where users read it: its
        configuration's ``topology.workers`` and its components' parallelism hints."""
        self.conf[Config.TOPOLOGY_WORKERS] = num_workers
        for component_id, count in executors.items():
            self.topology.get_component(component_id).parallelism = count
        self.user_topology = with_parallelism(self.user_topology, executors)

    def _summaries(
        self,
        stats_of: Callable[[str, int], TaskStats],
        custom_of: Callable[[int], Mapping[str, float]],
        now: float,
    ) -> dict[str, ComponentStats]:
        """Every component's metrics, from each task's counters (``stats_of(component,
        task)``) and custom metrics (``custom_of(task)``, summed per key)."""
        components = {}
        for component_id, tasks in self.plan.component_tasks.items():
            stats = [stats_of(component_id, task) for task in tasks]
            kind = self.topology.get_component(component_id).kind
            summary = summarize(component_id, kind, stats, now)
            for task in tasks:
                for key, value in custom_of(task).items():
                    summary.custom[key] = summary.custom.get(key, 0) + value
            components[component_id] = summary
        return components


__all__ = ["SubmittedTopology"]
