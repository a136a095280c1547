"""Which partitions a ``KafkaSpout`` task reads (Storm's
``RoundRobinManualPartitioner``): the selected topics' partitions sorted by ``(topic,
partition)``, partition ``i`` to the task of index ``i % tasks``.

Every task computes its share from the same metadata, so the tasks of a spout read
disjoint partitions without the consumer-group protocol; a partition that appears (a
new topic matching the selection) goes to one task at the next refresh.
"""

from __future__ import annotations

from collections.abc import Iterable


def task_partitions(
    partitions: Iterable[tuple[str, int]], task_index: int, tasks: int
) -> list[tuple[str, int]]:
    """The partitions of task ``task_index`` of ``tasks``, sorted.

    Raises:
        ValueError: ``task_index`` is not in ``range(tasks)``.
    """
    if not 0 <= task_index < tasks:
        raise ValueError(f"task index {task_index} is not in range({tasks})")
    ordered = sorted(set(partitions))
    return [tp for index, tp in enumerate(ordered) if index % tasks == task_index]


__all__ = ["task_partitions"]
