"""The task ids of a Trident or transactional topology on Spark: the local engine's.

The task plan is ``squall.runtime.plan.build_plan`` over the system topology, as on the
local engine, so a Trident operation, a batch bolt or a spout's emitter sees the same
``TopologyContext`` on both engines (task id, task index, every component's task ids)
and the routers send a tuple to the same task id. On Spark a component's task ``i`` (its
``i``-th task id) is partition ``i`` of its stage.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from squall.model.config import Config, component_config, effective_config
from squall.model.topology import StormTopology
from squall.runtime.context import TaskContext
from squall.runtime.plan import TaskPlan, build_plan
from squall.runtime.system import system_topology


@dataclass
class TaskLayout:
    """The task ids of every component of a topology, and the contexts of its tasks.

    Attributes:
        name: the topology's name (``TopologyContext.topology_name``).
        topology: the system topology's structure: its components' streams,
            subscriptions and configuration, without the components themselves (which
            refer to spouts, states and DRPC clients that must not travel to executors).
        plan: the local engine's task plan of the system topology.
    """

    name: str
    topology: StormTopology
    plan: TaskPlan

    @classmethod
    def of(cls, topology: StormTopology, conf: dict[str, Any], name: str = "") -> TaskLayout:
        """The layout the local engine gives ``topology`` run as ``name`` with ``conf``."""
        conf = effective_config(conf)
        conf[Config.TOPOLOGY_NAME] = name
        system = system_topology(topology, conf)
        structure = StormTopology(
            {spec.component_id: dataclasses.replace(spec, component=None) for spec in system}
        )
        return cls(name, structure, build_plan(system, conf))

    def task_ids(self, component_id: str) -> tuple[int, ...]:
        """The task ids of ``component_id``, ascending (its partitions in order)."""
        return tuple(self.plan.component_tasks[component_id])

    def context(
        self,
        component_id: str,
        task_index: int,
        conf: dict[str, Any],
        coordination_store: Any = None,
    ) -> TaskContext:
        """The context of task ``task_index`` of ``component_id``, as the local engine
        makes it (its configuration: ``conf`` with the component's own keys)."""
        task_id = self.plan.component_tasks[component_id][task_index]
        own = self.topology.get_component(component_id).conf
        return TaskContext(
            self.topology,
            self.plan,
            task_id,
            self.name,
            component_config(conf, own),
            coordination_store=coordination_store,
        )


__all__ = ["TaskLayout"]
