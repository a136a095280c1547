"""What a Trident operation, a batch bolt or a spout emitter sees of its task on Spark.

Runs wherever the task runs: an executor's Python worker, the driver (committers) or a
source's process (spout coordinators and emitters).
"""

from __future__ import annotations

from typing import Any


class TaskView:
    """The part of ``TopologyContext`` that Trident operations, batch bolts and spout
    emitters use, for one partition. On Spark a task id is the task's index in its
    component (its partition), 0..n-1."""

    def __init__(
        self,
        component_id: str,
        task_index: int,
        tasks: int,
        conf: dict[str, Any],
        component_tasks: dict[str, int] | None = None,
        coordination_store: Any = None,
    ) -> None:
        self.component_id = component_id
        self.task_index = task_index
        self.task_id = task_index
        self.tasks = tasks
        self.conf = conf
        self.component_tasks = component_tasks or {}
        self.coordination_store = coordination_store
        self.clock = None

    def get_component_tasks(self, component_id: str) -> list[int]:
        """Task ids of ``component_id`` (this component's partitions by default)."""
        return list(range(self.component_tasks.get(component_id, self.tasks)))

    def get_this_task_index(self) -> int:
        """This task's index within its component."""
        return self.task_index
