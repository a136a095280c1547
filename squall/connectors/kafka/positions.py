"""Where a ``KafkaSpout`` partition starts (Storm's ``FirstPollOffsetStrategy``), and the
metadata its commits carry so that a restarted task of the same topology recognises
them (Storm's ``isOffsetCommittedByThisTopology``).

* ``uncommitted_earliest`` / ``uncommitted_latest``: after the group's committed offset
  if there is one, else at the earliest offset / the end.
* ``earliest`` / ``latest``: at the earliest offset / the end, unless the committed
  offset was committed by this topology (its metadata names it): then after it.

A broker that does not keep commit metadata (Tansu 0.6 answers none) makes every
commit look like another topology's: ``earliest`` and ``latest`` then start at the
earliest offset / the end at every start of a task.
"""

from __future__ import annotations

import json

#: Start at the partition's earliest offset.
BEGINNING = "beginning"
#: Start at the partition's true end.
END = "end"


def commit_metadata(topology: str, component: str, task_id: int) -> str:
    """The metadata of a task's commits: JSON naming the topology, component and task."""
    return json.dumps(
        {"topologyId": topology, "component": component, "taskId": task_id}, sort_keys=True
    )


def committed_by(metadata: str | None, topology: str) -> bool:
    """Whether a commit's metadata names ``topology``."""
    if not metadata:
        return False
    try:
        found = json.loads(metadata)
    except ValueError:
        return False
    return isinstance(found, dict) and found.get("topologyId") == topology


def start_of(strategy: str, committed: int, metadata: str | None, topology: str) -> int | str:
    """Where a partition starts: an offset (the committed one), :data:`BEGINNING` or
    :data:`END`.

    Args:
        strategy: the spout's ``first_poll_offset``.
        committed: the group's committed offset (negative: none).
        metadata: that commit's metadata.
        topology: this topology's name.
    """
    if committed >= 0 and (strategy.startswith("uncommitted") or committed_by(metadata, topology)):
        return committed
    return END if strategy.endswith("latest") else BEGINNING


__all__ = ["BEGINNING", "END", "commit_metadata", "committed_by", "start_of"]
