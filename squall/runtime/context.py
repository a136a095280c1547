"""``TaskContext``: the engines' :class:`~squall.model.context.TopologyContext`.

``TopologyContext`` (the interface components receive) is re-exported here.
"""

from __future__ import annotations

from typing import Any

from squall.model.clock import SYSTEM_CLOCK, Clock
from squall.model.context import TopologyContext
from squall.model.coordination import CoordinationStore
from squall.model.fields import Fields
from squall.model.grouping import GlobalStreamId, Grouping
from squall.model.metrics import MetricRegistry
from squall.model.topology import StormTopology
from squall.runtime.plan import TaskPlan


class TaskContext(TopologyContext):
    """The context of one task, built by the engine from the topology and its task plan.

    Read-only; valid for the life of the task. Built where the task runs (a worker
    thread's process, a Spark executor).
    """

    def __init__(
        self,
        topology: StormTopology,
        plan: TaskPlan,
        task_id: int,
        topology_name: str = "",
        conf: dict[str, Any] | None = None,
        clock: Clock | None = None,
        coordination_store: CoordinationStore | None = None,
    ) -> None:
        self._topology = topology
        self._plan = plan
        self.task_id = task_id
        self.component_id = plan.task_component[task_id]
        self.task_index = plan.component_tasks[self.component_id].index(task_id)
        self.topology_name = topology_name
        self.conf = dict(conf or {})
        #: The engine's time source (milliseconds): use it instead of reading the time.
        self.clock = clock or SYSTEM_CLOCK
        #: The engine's store for transactional coordination (txids, spout metadata)
        #: when no ``topology.transactional.state.dir`` is configured.
        self.coordination_store = coordination_store
        #: The metrics this task registers (``register_metric``).
        self.metric_registry = MetricRegistry(self.component_id, task_id)

    @property
    def worker(self) -> int:
        """Index of the worker hosting this task."""
        return self._plan.task_worker[self.task_id]

    def get_component_id(self, task_id: int) -> str:
        """The component that task ``task_id`` belongs to."""
        return self._plan.task_component[task_id]

    def get_component_tasks(self, component_id: str) -> list[int]:
        """Task ids of ``component_id``, ascending (empty for an unknown component)."""
        return list(self._plan.component_tasks.get(component_id, []))

    def get_component_ids(self) -> list[str]:
        """Every component id, system components included."""
        return sorted(self._plan.component_tasks)

    def get_component_output_fields(self, component_id: str, stream: str = "default") -> Fields:
        """The fields ``component_id`` declares for ``stream``.

        Raises:
            KeyError: the component or stream does not exist.
        """
        spec = self._topology.get_component(component_id)
        try:
            return spec.streams[stream].fields
        except KeyError:
            raise KeyError(
                f"component {component_id!r} declares no stream {stream!r} "
                f"(streams: {sorted(spec.streams)})"
            ) from None

    def get_this_streams(self) -> list[str]:
        """Streams this component declares."""
        return list(self._topology.get_component(self.component_id).streams)

    def get_this_sources(self) -> dict[GlobalStreamId, Grouping]:
        """The streams this component subscribes to, with their groupings."""
        spec = self._topology.get_component(self.component_id)
        return {GlobalStreamId(s.source, s.stream_id): s.grouping for s in spec.inputs}

    def get_this_targets(self) -> dict[str, dict[str, Grouping]]:
        """For each stream this component declares: subscriber component id -> grouping."""
        spec = self._topology.get_component(self.component_id)
        return {
            stream: dict(self._topology.subscribers(self.component_id, stream))
            for stream in spec.streams
        }

    def get_this_worker_tasks(self) -> list[int]:
        """Every task id hosted by this task's worker."""
        worker = self.worker
        return sorted(t for t, w in self._plan.task_worker.items() if w == worker)

    def __repr__(self) -> str:
        return f"TopologyContext({self.component_id!r}, task={self.task_id})"


__all__ = ["TaskContext", "TopologyContext"]
