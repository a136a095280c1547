"""Where the queries of a Trident state run: with the partitions they read.

A state whose factory keeps its data in each process's memory
(``StateLocality.IN_PROCESS``, ``MemoryMapState``) holds each key in the process of the
task that owns the key's partition. As in Storm, where a state's queries run in the
state's own bolt, a query of such a state that this topology updates with
``persistent_aggregate`` is sent to that task's worker:

* :func:`route_state_queries` repartitions the query's stream by the query's input
  fields, the key it reads (``group_by(...).state_query(...)`` on those fields already
  does; the global aggregate of an ungrouped ``persistent_aggregate`` lives in the
  state's first task, so its queries go to their segment's first task);
* :func:`colocations` gives the segments of a state and of its queries as many tasks
  (the largest parallelism hint among them, as Storm gives a bolt holding a state and
  its queries) and runs each query task in the worker of the state task of its index:
  a key's state task and query task have the same index, as both are fields-grouped
  on the key's values.

A query of an in-process state that cannot be sent to the partition holding its key
(the state is updated by ``partition_persist``, whose updater chooses the keys of each
partition, or by no stream of this topology) keeps its place; engines that run tasks in
several processes refuse it (``TridentIR.check_worker_processes``).
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from squall.model.fields import Fields
from squall.trident.graph import Node, Segment, TridentGraph
from squall.trident.state.base import StateLocality, locality_of


def keyed_update(query: Node, nodes: Container[int]) -> Node | None:
    """The ``persistent_aggregate`` node that updates the state ``query`` (a
    ``state_query`` node) reads, if that state keeps its data in each process and so
    must be read where its partitions are, and the node is one of ``nodes`` (the ids of
    the topology's nodes); else ``None``."""
    if query.kind != "state_query":
        return None
    state = query.params["state"]
    update = state.node
    if update is None or update.id not in nodes:
        return None
    if locality_of(state.factory) is not StateLocality.IN_PROCESS:
        return None
    return update if update.params.get("mode") in ("combiner", "reducer") else None


def unrouted_reason(query: Node, nodes: Container[int]) -> str:
    """Why a query of an in-process state cannot be sent to the partition holding its
    key ("" for a query that can, or of a state every process reaches); ``nodes``: the
    ids of the topology's nodes."""
    state = query.params["state"]
    if locality_of(state.factory) is not StateLocality.IN_PROCESS:
        return ""
    if keyed_update(query, nodes) is not None:
        return ""
    if state.node is None or state.node.id not in nodes:
        return "no stream of this topology updates it"
    return "partition_persist decides which partition holds a key"


def _routing(query: Node, update: Node) -> dict[str, Any]:
    inputs: Fields = query.params["inputs"]
    if len(update.params["group"]) and len(inputs):
        return {"grouping": "fields", "fields": inputs}
    return {"grouping": "global"}


def _routed_by(node: Node, routing: dict[str, Any]) -> bool:
    if node.kind != "partition" or node.params.get("grouping") != routing["grouping"]:
        return False
    return routing["grouping"] != "fields" or list(node.params["fields"]) == list(routing["fields"])


def route_state_queries(topology: TridentGraph) -> None:
    """Repartition the stream of every query that :func:`keyed_update` finds by the key
    it reads, unless the stream before it is partitioned so already. Runs where the
    topology is built; adding the repartition again is a no-op."""
    nodes = {node.id for node in topology.nodes}
    for query in list(topology.nodes):
        update = keyed_update(query, nodes)
        if update is None:
            continue
        routing = _routing(query, update)
        parent = query.parents[0]
        if _routed_by(parent, routing):
            continue
        partition = Node("partition", [parent], parent.output_fields, routing)
        topology.nodes.insert(topology.nodes.index(query), partition)
        query.parents[0] = partition


def colocations(segments: list[Segment], segment_of: dict[int, Segment]) -> None:
    """Give the segments of each in-process state and of the queries routed to it (see
    :func:`route_state_queries`) one task count, the largest parallelism among them, and
    colocate all but the first of them with the first (``Segment.colocated_with``)."""
    owner: dict[int, int] = {}

    def root(index: int) -> int:
        while owner.get(index, index) != index:
            index = owner[index]
        return index

    for segment in segments:
        for node in segment.nodes:
            update = keyed_update(node, segment_of)
            if update is not None:
                a, b = root(segment.index), root(segment_of[update.id].index)
                owner[max(a, b)] = min(a, b)
    placed = {*owner, *owner.values()}
    together: dict[int, list[Segment]] = {}
    for segment in segments:
        if segment.index in placed:
            together.setdefault(root(segment.index), []).append(segment)
    for members in together.values():
        tasks = max(member.parallelism for member in members)
        leader = members[0]
        for member in members:
            member.placed_tasks = tasks
            if member is not leader:
                member.colocated_with = leader.component_id
