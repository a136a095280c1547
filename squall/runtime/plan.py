"""The task plan: which task ids a component has, how tasks form executors and workers.

Both engines derive the same plan from the same topology and configuration, so a tuple
is routed to the same task id whichever engine runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from squall.model.config import Config
from squall.model.topology import StormTopology


@dataclass(frozen=True)
class ExecutorPlan:
    """One executor: a contiguous range of one component's tasks, run by one worker."""

    component_id: str
    tasks: tuple[int, ...]
    worker: int


@dataclass
class TaskPlan:
    """Task ids per component (ascending, starting at 1, components in id order)."""

    component_tasks: dict[str, list[int]]
    task_component: dict[int, str]
    executors: list[ExecutorPlan]
    num_workers: int
    task_worker: dict[int, int] = field(default_factory=dict)

    @property
    def max_task_id(self) -> int:
        """Highest task id."""
        return max(self.task_component, default=0)

    def task_index(self, task_id: int) -> int:
        """Position of ``task_id`` among its component's tasks."""
        return self.component_tasks[self.task_component[task_id]].index(task_id)


def split_evenly(items: list[int], parts: int) -> list[list[int]]:
    """Split ``items`` into ``parts`` contiguous runs, the first runs one longer if needed."""
    size, extra = divmod(len(items), parts)
    runs, start = [], 0
    for part in range(parts):
        end = start + size + (1 if part < extra else 0)
        runs.append(items[start:end])
        start = end
    return runs


def build_plan(topology: StormTopology, conf: dict[str, Any]) -> TaskPlan:
    """Assign task ids, executors and workers deterministically.

    Task ids are numbered from 1 over the components sorted by id (system components
    included), as Storm does. A component with ``p`` executors and ``n`` tasks gets ``p``
    executors of contiguous tasks (``min(p, n)`` if fewer tasks); executors are dealt to
    workers round-robin in task order. ``topology.max.task.parallelism`` caps both counts.
    """
    cap = conf.get(Config.TOPOLOGY_MAX_TASK_PARALLELISM)
    workers = max(1, int(conf.get(Config.TOPOLOGY_WORKERS) or 1))
    component_tasks: dict[str, list[int]] = {}
    task_component: dict[int, str] = {}
    executors_of: list[tuple[str, list[int]]] = []
    next_task = 1
    for component_id in sorted(topology.component_ids()):
        spec = topology.get_component(component_id)
        component_cap = spec.conf.get(Config.TOPOLOGY_MAX_TASK_PARALLELISM, cap)
        num_tasks, parallelism = spec.num_tasks, spec.parallelism
        if component_cap:
            num_tasks = min(num_tasks, int(component_cap))
            parallelism = min(parallelism, int(component_cap))
        tasks = list(range(next_task, next_task + num_tasks))
        next_task += num_tasks
        component_tasks[component_id] = tasks
        for task in tasks:
            task_component[task] = component_id
        for run in split_evenly(tasks, min(parallelism, num_tasks)):
            executors_of.append((component_id, run))
    executors_of.sort(key=lambda item: item[1][0])
    executors = [
        ExecutorPlan(cid, tuple(tasks), position % workers)
        for position, (cid, tasks) in enumerate(executors_of)
    ]
    task_worker = {task: ex.worker for ex in executors for task in ex.tasks}
    return TaskPlan(component_tasks, task_component, executors, workers, task_worker)
