"""The task plan: which task ids a component has, how tasks form executors and workers.

Both engines derive the same plan from the same topology and configuration, so a tuple
is routed to the same task id whichever engine runs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from squall.model.config import Config
from squall.model.errors import InvalidTopologyError
from squall.model.topology import StormTopology


@dataclass(frozen=True)
class ExecutorPlan:
    """One executor: a contiguous range of one component's tasks, run by one worker."""

    component_id: str
    tasks: tuple[int, ...]
    worker: int


@dataclass
class TaskPlan:
    """Task ids per component (ascending, starting at 1, components in id order).

    ``colocated`` maps each component declared ``colocated_with`` another to that
    component: its task of each index runs in the worker of the other's task of that
    index, in executors that follow the other's.
    """

    component_tasks: dict[str, list[int]]
    task_component: dict[int, str]
    executors: list[ExecutorPlan]
    num_workers: int
    task_worker: dict[int, int] = field(default_factory=dict)
    colocated: dict[str, str] = field(default_factory=dict)

    @property
    def max_task_id(self) -> int:
        """Highest task id."""
        return max(self.task_component, default=0)

    def task_index(self, task_id: int) -> int:
        """Position of ``task_id`` among its component's tasks."""
        return self.component_tasks[self.task_component[task_id]].index(task_id)

    def component_executors(self) -> dict[str, int]:
        """Component id -> how many executors run its tasks (0 for a component
        without tasks), components in id order."""
        counts = dict.fromkeys(self.component_tasks, 0)
        for executor in self.executors:
            counts[executor.component_id] += 1
        return counts

    def change_layout(self, num_workers: int, executors: Mapping[str, int]) -> None:
        """Deal the same tasks to ``num_workers`` workers, in ``executors[c]`` executors
        for each component ``c`` given (the others keep their count), as
        :func:`build_plan` deals them. Task ids never change.

        Changes this plan in place, so every holder of it (a task's
        ``TopologyContext``) sees the new layout: the local engine's rebalance calls it
        while no task runs. Counts are not checked here (see
        ``squall.local.rebalance.check_request``); a colocated component's executors
        follow its leader's whatever its count.
        """
        counts = {**self.component_executors(), **executors}
        dealt = deal_executors(self.component_tasks, counts, num_workers, self.colocated)
        self.executors = dealt
        self.task_worker = {task: ex.worker for ex in dealt for task in ex.tasks}
        self.num_workers = num_workers


def split_evenly(items: list[int], parts: int) -> list[list[int]]:
    """Split ``items`` into ``parts`` contiguous runs, the first runs one longer if needed."""
    size, extra = divmod(len(items), parts)
    runs, start = [], 0
    for part in range(parts):
        end = start + size + (1 if part < extra else 0)
        runs.append(items[start:end])
        start = end
    return runs


def deal_executors(
    component_tasks: Mapping[str, list[int]],
    executors: Mapping[str, int],
    workers: int,
    colocated: Mapping[str, str] | None = None,
) -> list[ExecutorPlan]:
    """Split each component's tasks into ``executors[c]`` contiguous runs (at least one,
    at most one per task; a component left out gets one), then deal those executors to
    ``workers`` workers round-robin, in the order of their first task.

    A component of ``colocated`` (follower -> leader, both with as many tasks) is not
    dealt: it gets an executor for each of its leader's, with the tasks of the same
    indexes, in the same worker. The executors are listed in the order of their first
    task."""
    followers = colocated or {}
    runs: list[tuple[str, list[int]]] = []
    for component_id in sorted(component_tasks):
        tasks = component_tasks[component_id]
        if not tasks or component_id in followers:
            continue
        count = max(1, min(executors.get(component_id, 1), len(tasks)))
        runs.extend((component_id, run) for run in split_evenly(tasks, count))
    runs.sort(key=lambda item: item[1][0])
    dealt = [
        ExecutorPlan(cid, tuple(tasks), position % workers)
        for position, (cid, tasks) in enumerate(runs)
    ]
    for follower, leader in sorted(followers.items()):
        own, led = component_tasks[follower], component_tasks[leader]
        dealt.extend(
            ExecutorPlan(follower, tuple(own[led.index(task)] for task in ex.tasks), ex.worker)
            for ex in list(dealt)
            if ex.component_id == leader
        )
    return sorted(dealt, key=lambda ex: ex.tasks[0])


def build_plan(topology: StormTopology, conf: dict[str, Any]) -> TaskPlan:
    """Assign task ids, executors and workers deterministically.

    Task ids are numbered from 1 over the components sorted by id (system components
    included), as Storm does. A component with ``p`` executors and ``n`` tasks gets ``p``
    executors of contiguous tasks (``min(p, n)`` if fewer tasks); executors are dealt to
    workers round-robin in task order. ``topology.max.task.parallelism`` caps both counts.
    A component ``colocated_with`` another runs its tasks in executors that follow the
    other's (see :func:`deal_executors`).

    Raises:
        InvalidTopologyError: a colocated component ends up with another task count than
            the component it is colocated with (a cap of one of them).
    """
    cap = conf.get(Config.TOPOLOGY_MAX_TASK_PARALLELISM)
    workers = max(1, int(conf.get(Config.TOPOLOGY_WORKERS) or 1))
    component_tasks: dict[str, list[int]] = {}
    task_component: dict[int, str] = {}
    parallelism_of: dict[str, int] = {}
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
        parallelism_of[component_id] = parallelism
    colocated = {spec.component_id: spec.colocated_with for spec in topology if spec.colocated_with}
    for follower, leader in colocated.items():
        if len(component_tasks[follower]) != len(component_tasks[leader]):
            raise InvalidTopologyError(
                f"component {follower!r} is colocated with {leader!r}, but they run "
                f"{len(component_tasks[follower])} and {len(component_tasks[leader])} "
                "task(s) (topology.max.task.parallelism): colocated components need as "
                "many tasks"
            )
    executors = deal_executors(component_tasks, parallelism_of, workers, colocated)
    task_worker = {task: ex.worker for ex in executors for task in ex.tasks}
    return TaskPlan(component_tasks, task_component, executors, workers, task_worker, colocated)
