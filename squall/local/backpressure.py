"""Backpressure of the local engine: every task's receive queue is bounded.

Storm 2.x bounds each executor's receive queue (``topology.executor.receive.buffer.size``)
and holds back a producer whose target queue is full. The local engine does the same
without blocking a thread (a worker runs its tasks cooperatively, so a producer waiting
inside ``emit`` could wait for a consumer on its own thread forever): a task does not
start an ``execute`` or a ``next_tuple`` while a queue it feeds is full. Its own input
then stays queued, which holds back *its* producers in turn, up to the spouts.

How far a queue can go past its capacity: a producer looks at its targets' queues, then
may transfer up to its share of the room it saw (the room divided among the tasks that
feed the fullest target) before it looks again, and the ``execute`` that crosses that
share finishes, whatever it emits. So a queue holds at most its capacity plus, per task
that feeds it, what one ``execute`` (or ``next_tuple``) emits; and when its producers run
on several threads, a producer may still be spending a share it was given when another
looks, so on a busy machine the queue can also hold the unspent shares of the others (at
most the capacity in all).

Cycles: a task never waits for a queue in its own cycle (its strongly connected
component of the component graph), so a cyclic topology cannot deadlock on full queues.
Tuples circulating in a cycle are bounded only by what the cycle itself does; producers
feeding the cycle from outside, and the spouts, are still held back by its full queues.
The acker's messages are not gated: bolts do not wait for the acker's queue, and the
acker does not wait for the spouts' queues (spouts drain them every round, active or
not; a spout task receives at most one message per pending tuple tree).

Spouts wait for short queues: a spout is not polled while any bolt's queue, the acker's
included, holds more than ``SPOUT_QUEUE_LIMIT`` tuples (about one worker round of a
task), and its gate measures room below that mark rather than below the capacity. Queues
filled to their capacity hold each tuple for as long as the whole queue takes to run,
and tuples held that long survive the garbage collector's young generations: full
collections then take a growing share of the worker's time, throughput falls below the
offered rate and the queues stay full (a stable, slow state). Short queues avoid it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from squall.model.topology import StormTopology
from squall.runtime.acker import ACKER_COMPONENT
from squall.runtime.checkpointing import CHECKPOINT_STREAM
from squall.runtime.plan import TaskPlan
from squall.runtime.routing import StreamRoute

#: A budget meaning "no target to watch": never runs out in practice.
UNLIMITED = 1 << 62

#: Spouts are not polled while a bolt's queue holds more tuples than this (or than the
#: queues' capacity, if smaller): about one worker round of a bolt task's tuples.
SPOUT_QUEUE_LIMIT = 2048


def component_graph(topology: StormTopology) -> dict[str, set[str]]:
    """Component id -> the components subscribing to any of its streams (the acker and
    its streams left out)."""
    graph: dict[str, set[str]] = {cid: set() for cid in topology.component_ids()}
    for spec in topology:
        if spec.component_id == ACKER_COMPONENT:
            continue
        for sub in spec.inputs:
            if sub.source in graph and sub.source != ACKER_COMPONENT:
                graph[sub.source].add(spec.component_id)
    return graph


def cycle_groups(graph: dict[str, set[str]]) -> dict[str, int]:
    """Strongly connected components: component id -> group number (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    group: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    counter = 0
    groups = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group[member] = groups
                    if member == node:
                        break
                groups += 1
    return group


def watched_components(topology: StormTopology) -> dict[str, list[str]]:
    """Component id -> the components whose queues its tasks wait for.

    Those are the components subscribing to one of its streams, except the acker and
    components in the same cycle (strongly connected component) as itself. The acker
    waits for nobody.
    """
    graph = component_graph(topology)
    groups = cycle_groups(graph)
    return {
        component_id: [s for s in sorted(subscribers) if groups[s] != groups[component_id]]
        for component_id, subscribers in graph.items()
    }


def watched_targets(topology: StormTopology, plan: TaskPlan) -> dict[str, list[int]]:
    """Component id -> the tasks whose queues its tasks wait for (see
    ``watched_components``)."""
    return {
        component_id: [t for c in components for t in plan.component_tasks.get(c, ())]
        for component_id, components in watched_components(topology).items()
    }


class _RoutesMeter:
    """The sum of several routes' ``transferred`` counts."""

    __slots__ = ("_routes",)

    def __init__(self, routes: Sequence[StreamRoute]) -> None:
        self._routes = list(routes)

    @property
    def transferred(self) -> int:
        """Tuples transferred on every route so far."""
        return sum(route.transferred for route in self._routes)


class OutputGate:
    """Tells one task how many tuples it may still transfer before it must look again
    at the queues it feeds. Used only from the task's worker thread.

    Args:
        queues: the receive queues the task waits for.
        writers: for each queue, how many tasks wait for it (its share divisor).
        capacity: ``topology.executor.receive.buffer.size``.
        routes: the task's output routes, whose ``transferred`` counts measure what it
            has sent.
    """

    __slots__ = (
        "_capacity",
        "_queues",
        "_uniform",
        "_writers",
        "blocked_checks",
        "meter",
        "watching",
    )

    def __init__(
        self,
        queues: Sequence[deque[Any]],
        writers: Sequence[int],
        capacity: int,
        routes: Sequence[StreamRoute],
    ) -> None:
        self._queues = list(queues)
        self._writers = [max(1, w) for w in writers]
        self._capacity = capacity
        #: ``meter.transferred``: what the task has sent so far (all streams, targets).
        self.meter: StreamRoute | _RoutesMeter = (
            routes[0] if len(routes) == 1 else _RoutesMeter(routes)
        )
        if not routes:
            self._queues = []
        #: Whether the task feeds any queue it must wait for.
        self.watching = bool(self._queues)
        #: The writers' count when every queue has the same (then the fullest queue
        #: alone sets the budget); 0 otherwise.
        uniform = self.watching and len(set(self._writers)) == 1
        self._uniform = self._writers[0] if uniform else 0
        #: How many times the gate found a queue full (the task was held back).
        self.blocked_checks = 0

    def budget(self) -> int:
        """How many more tuples the task may transfer before looking again; 0 when a
        queue it feeds is full (the task must not start more work now)."""
        capacity = self._capacity
        if self._uniform:  # the common case, without a loop in Python
            room = capacity - max(map(len, self._queues))
            if room <= 0:
                self.blocked_checks += 1
                return 0
            share = room // self._uniform
            return share if share > 0 else 1
        budget = UNLIMITED
        for queue, writers in zip(self._queues, self._writers, strict=True):
            room = capacity - len(queue)
            if room <= 0:
                self.blocked_checks += 1
                return 0
            share = room // writers
            if share < budget:
                budget = share
        return budget if budget > 0 else 1


def build_gates(
    topology: StormTopology,
    plan: TaskPlan,
    inboxes: Sequence[deque[Any]],
    routes_of: dict[int, dict[str, StreamRoute]],
    capacity: int,
) -> dict[int, OutputGate]:
    """An ``OutputGate`` for every task of ``routes_of`` (see the module docstring for
    what it watches)."""
    components = watched_components(topology)
    watched = watched_targets(topology, plan)
    writers: dict[int, int] = {}
    for component_id, tasks in watched.items():
        producers = len(plan.component_tasks.get(component_id, ()))
        for task in tasks:
            writers[task] = writers.get(task, 0) + producers
    gates: dict[int, OutputGate] = {}
    # Spouts wait for short queues: they feed at most about a round of tuples ahead.
    spout_capacity = min(capacity, SPOUT_QUEUE_LIMIT)
    for component_id, task_ids in plan.component_tasks.items():
        spec = topology.get_component(component_id)
        targets = watched.get(component_id, [])
        # Only the streams that reach a watched queue count towards the budget (not the
        # checkpoint stream: a tuple a second).
        streams = {
            stream_id
            for stream_id in spec.streams
            if stream_id != CHECKPOINT_STREAM
            and any(
                s in components[component_id]
                for s, _ in topology.subscribers(component_id, stream_id)
            )
        }
        for task_id in task_ids:
            if task_id not in routes_of:
                continue  # run by another worker process
            routes = routes_of[task_id]
            gates[task_id] = OutputGate(
                [inboxes[t] for t in targets],
                [writers[t] for t in targets],
                spout_capacity if spec.is_spout else capacity,
                [routes[stream_id] for stream_id in sorted(streams)],
            )
    return gates
