"""Rebalancing a topology on the local engine: Storm's ``storm rebalance``.

A rebalance changes how many worker threads run a topology and how many executors run
each component; task ids never change (a component keeps its ``set_num_tasks`` tasks,
and has between 1 and that many executors). ``RunningTopology.rebalance`` runs it:

1. the spouts stop calling ``next_tuple`` (their ``deactivate`` runs) and the status is
   ``REBALANCING``; bolts keep working while the call waits ``wait_secs``;
2. every worker ends its loop between two rounds (``Worker.hand_over``), flushes its
   acks and exits, leaving its tasks open;
3. the plan is dealt again (``TaskPlan.change_layout``), each task's collectors send
   their acks through the buffer of the worker now running the task, and local-or-shuffle
   routes are chosen again for the new workers;
4. new workers adopt the same task runners (no ``open``/``prepare`` again), each tick
   schedule keeping its next due time, and start;
5. the topology goes back to the activation it had.

Nothing is lost or duplicated: a task's queue, component object, collector (with its
pending trees), counters and routes are the same objects before and after; only the
thread that runs them changes, and never while one runs them.

Everything here runs on the thread calling the rebalance, while no worker runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from squall.local.worker import Worker
from squall.model.errors import InvalidTopologyError, excerpt
from squall.model.grouping import GroupingKind
from squall.model.topology import StormTopology
from squall.runtime.collectors import BoltCollector, SpoutCollector
from squall.runtime.plan import TaskPlan
from squall.runtime.routing import stream_targets
from squall.runtime.tasks import BoltRunner, SpoutRunner, TaskRunner
from squall.state.spouts import SpoutCheckpointer


@dataclass(frozen=True)
class RebalanceRequest:
    """A checked rebalance.

    Attributes:
        num_workers: the new number of workers; None keeps the number there is.
        executors: component id -> its new number of executors (the others keep
            theirs).
        wait_secs: how long the spouts stay deactivated before the layout changes.
    """

    num_workers: int | None
    executors: dict[str, int]
    wait_secs: float


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_request(
    name: str, plan: TaskPlan, num_workers: Any, executors: Any, wait_secs: Any
) -> RebalanceRequest:
    """Check the arguments of a rebalance of topology ``name`` (running with ``plan``).

    Runs on the caller's thread and reads ``plan`` only: a refused rebalance changes
    nothing. Every way in (``LocalCluster.rebalance`` and ``check_rebalance``, so the
    REST API and ``squall rebalance`` too) checks through here.

    ``num_workers`` is at most the number of executors the topology has after the
    rebalance (with ``executors`` applied), system executors such as ``__acker``
    included, as Storm and ``executorsTotal`` count them: every worker runs at least one
    executor, and a worker without one would run nothing.

    Raises:
        InvalidTopologyError: ``num_workers`` is not an integer (``True`` is not one)
            from 1 to that executor count; ``executors`` is not a mapping, names a
            component the topology lacks, or gives a component a count that is not an
            integer from 1 to its task count, or a colocated component (see
            ``ComponentSpec.colocated_with``) another count than its leader's;
            ``wait_secs`` is not a number >= 0. The message names the topology, the bad
            value (cut short, see :func:`~squall.model.errors.excerpt`) and the allowed
            range.

    A colocated component whose leader's count changes gets the same count.
    """
    where = f"rebalance of topology {excerpt(name)}"
    if num_workers is not None and (not _is_int(num_workers) or num_workers < 1):
        raise InvalidTopologyError(
            f"{where}: num_workers must be an integer >= 1, got {excerpt(num_workers)}"
        )
    if executors is None:
        executors = {}
    if not isinstance(executors, Mapping):
        raise InvalidTopologyError(
            f"{where}: executors must map component ids to executor counts, "
            f"got {type(executors).__name__}"
        )
    counts: dict[str, int] = {}
    for component_id, count in executors.items():
        tasks = plan.component_tasks.get(component_id) if isinstance(component_id, str) else None
        if not tasks:
            raise InvalidTopologyError(
                f"{where}: the topology has no component {excerpt(component_id)} "
                f"(components: {sorted(plan.component_tasks)})"
            )
        if not _is_int(count) or not 1 <= count <= len(tasks):
            raise InvalidTopologyError(
                f"{where}: component {component_id!r} has {len(tasks)} task(s), so it "
                f"runs in 1 to {len(tasks)} executor(s); got {excerpt(count)}"
            )
        counts[component_id] = count
    _follow_leaders(where, plan, counts)
    if num_workers is not None:
        total = sum({**plan.component_executors(), **counts}.values())
        if num_workers > total:
            raise InvalidTopologyError(
                f"{where}: num_workers {excerpt(num_workers)} is more than the {total} "
                "executors the topology would have (system executors such as __acker "
                "included); a worker without an executor runs nothing, so num_workers "
                f"must be 1 to {total}"
            )
    if (
        not isinstance(wait_secs, int | float)
        or isinstance(wait_secs, bool)
        or (isinstance(wait_secs, float) and not math.isfinite(wait_secs))
        or wait_secs < 0
    ):
        raise InvalidTopologyError(
            f"{where}: wait_secs must be a number >= 0, got {excerpt(wait_secs)}"
        )
    return RebalanceRequest(num_workers, counts, float(wait_secs))


def _follow_leaders(where: str, plan: TaskPlan, counts: dict[str, int]) -> None:
    """Give each colocated component its leader's new executor count (its executors
    follow the leader's); refuse another count for it."""
    current = plan.component_executors()
    for follower, leader in sorted(plan.colocated.items()):
        count = counts.get(leader, current[leader])
        if counts.get(follower, count) != count:
            raise InvalidTopologyError(
                f"{where}: component {follower!r} runs its tasks with those of {leader!r} "
                f"(in the same workers), so it has as many executors as {leader!r} "
                f"({count}); got {counts[follower]!r}: change {leader!r}'s instead"
            )
        if leader in counts:
            counts[follower] = count


def tick_dues(workers: Iterable[Worker]) -> dict[int, float]:
    """Task id -> when its next tick tuple is due (clock milliseconds), for every task
    of ``workers`` (stopped) that receives ticks."""
    dues: dict[int, float] = {}
    for worker in workers:
        due_of_inbox = {
            id(inbox): schedule.next_due for schedule in worker.ticks for inbox in schedule.inboxes
        }
        for runner in worker.runners:
            due = due_of_inbox.get(id(runner.inbox))
            if due is not None:
                dues[runner.task_id] = due
    return dues


def task_collectors(runner: TaskRunner) -> list[BoltCollector | SpoutCollector]:
    """Every collector a task acks through: its own, and a data spout's collector of
    checkpoint tuples in a topology with stateful bolts."""
    collectors: list[BoltCollector | SpoutCollector] = []
    if isinstance(runner, SpoutRunner):
        collectors.append(runner.collector)
        if isinstance(runner.checkpointing, SpoutCheckpointer):
            collectors.append(runner.checkpointing.output_collector)
    elif isinstance(runner, BoltRunner):
        collectors.append(runner.collector)
    return collectors


def refresh_local_routes(
    topology: StormTopology, plan: TaskPlan, runners: Iterable[TaskRunner]
) -> None:
    """Choose again the targets of every stream with a local-or-shuffle subscriber, for
    the workers of ``plan``: the other routers of such a stream are made anew too (a
    custom grouping on it is prepared again); the stream's counts are kept."""
    local_streams: dict[str, list[str]] = {}
    for spec in topology:
        local_streams[spec.component_id] = [
            stream_id
            for stream_id in spec.streams
            if any(
                grouping.kind is GroupingKind.LOCAL_OR_SHUFFLE
                for _, grouping in topology.subscribers(spec.component_id, stream_id)
            )
        ]
    for runner in runners:
        for stream_id in local_streams.get(runner.component_id, ()):
            router, _ = stream_targets(topology, plan, runner.context, stream_id)
            runner.stats.routes[stream_id].router = router


def with_parallelism(topology: StormTopology, executors: Mapping[str, int]) -> StormTopology:
    """``topology`` with the parallelism hints of ``executors`` (a copy when one
    changes: the topology a user submitted is never modified)."""
    if not any(
        cid in topology and topology.get_component(cid).parallelism != count
        for cid, count in executors.items()
    ):
        return topology
    specs = {}
    for spec in topology:
        copy = spec.copy()
        copy.parallelism = executors.get(spec.component_id, spec.parallelism)
        specs[spec.component_id] = copy
    result = StormTopology(specs)
    result.batch_ir = topology.batch_ir
    return result


__all__ = [
    "RebalanceRequest",
    "check_request",
    "refresh_local_routes",
    "task_collectors",
    "tick_dues",
    "with_parallelism",
]
