"""``TopologyContext``: the interface of what a task knows about its place in the
running topology.

Given to ``open``/``prepare`` (and to a custom grouping's ``prepare``); every engine
passes in its own implementation (``squall.runtime.context.TaskContext`` on both engines
today). Read-only; valid for the life of the task.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from squall.model.hooks import CarriesCoordinationStore
from squall.model.metrics import M, MetricRegistry

if TYPE_CHECKING:
    from squall.model.clock import Clock
    from squall.model.coordination import CoordinationStore
    from squall.model.fields import Fields
    from squall.model.grouping import GlobalStreamId, Grouping


class TopologyContext(CarriesCoordinationStore, ABC):
    """The task's identity and the topology's structure, as a task sees them.

    Attributes:
        task_id: this task's id.
        component_id: this task's component.
        task_index: this task's position among its component's tasks (0-based).
        topology_name: the topology's name.
        conf: the configuration the task runs with (the topology's, overridden by the
            component's).
        clock: the engine's time source (milliseconds): use it instead of reading the
            time (``squall.utils.Time`` reads the same clock).
        coordination_store: the engine's store for transactional coordination (txids,
            spout metadata) when no ``topology.transactional.state.dir`` is configured.
        metric_registry: the metrics this task registered (see :meth:`register_metric`).
    """

    task_id: int
    component_id: str
    task_index: int
    topology_name: str
    conf: dict[str, Any]
    clock: Clock
    coordination_store: CoordinationStore | None
    metric_registry: MetricRegistry

    @property
    def storm_id(self) -> str:
        """The topology's name (Storm's topology id)."""
        return self.topology_name

    @property
    @abstractmethod
    def worker(self) -> int:
        """Index of the worker hosting this task."""

    def current_time_millis(self) -> int:
        """The time of the topology's clock, as Storm's ``Time.currentTimeMillis()``:
        the wall clock's (ms since the epoch) when the engine runs on the system clock,
        the clock's own time when it runs on a simulated one (a ``ManualClock`` given to
        ``LocalCluster``). For intervals and deadlines, ``clock.now_ms()`` (monotonic)."""
        return self.clock.current_time_millis()

    def get_this_task_id(self) -> int:
        """This task's id."""
        return self.task_id

    def get_this_component_id(self) -> str:
        """This task's component id."""
        return self.component_id

    def get_this_task_index(self) -> int:
        """This task's position among its component's tasks (0-based)."""
        return self.task_index

    def register_metric(self, name: str, metric: M, time_bucket_size_in_secs: float) -> M:
        """Register ``metric`` (an ``IMetric``, or a function of no arguments whose
        result is the value) as ``name``: at the end of every
        ``time_bucket_size_in_secs`` seconds (on the topology's clock) the engine reads
        it (``get_value_and_reset``) on this task's thread and sends its value, unless
        None, to the topology's metrics consumers. Call it from ``open``/``prepare``.

        Returns:
            ``metric``.

        Raises:
            SquallError: called after ``open``/``prepare`` returned, or ``name`` is
                registered already in this task.
            TypeError: ``metric`` is neither an ``IMetric`` nor a function.
            ValueError: the bucket is not a number of seconds above 0.
        """
        return self.metric_registry.register(name, metric, time_bucket_size_in_secs)

    def get_registered_metric_by_name(self, name: str) -> Any:
        """The metric this task registered as ``name``, or None."""
        return self.metric_registry.get(name)

    @abstractmethod
    def get_component_id(self, task_id: int) -> str:
        """The component that task ``task_id`` belongs to."""

    @abstractmethod
    def get_component_tasks(self, component_id: str) -> list[int]:
        """Task ids of ``component_id``, ascending (empty for an unknown component)."""

    @abstractmethod
    def get_component_ids(self) -> list[str]:
        """Every component id, system components included."""

    @abstractmethod
    def get_component_output_fields(self, component_id: str, stream: str = "default") -> Fields:
        """The fields ``component_id`` declares for ``stream``.

        Raises:
            KeyError: the component or stream does not exist.
        """

    def get_this_output_fields(self, stream: str = "default") -> Fields:
        """The fields this component declares for ``stream``."""
        return self.get_component_output_fields(self.component_id, stream)

    @abstractmethod
    def get_this_streams(self) -> list[str]:
        """Streams this component declares."""

    @abstractmethod
    def get_this_sources(self) -> dict[GlobalStreamId, Grouping]:
        """The streams this component subscribes to, with their groupings."""

    @abstractmethod
    def get_this_targets(self) -> dict[str, dict[str, Grouping]]:
        """For each stream this component declares: subscriber component id -> grouping."""

    @abstractmethod
    def get_this_worker_tasks(self) -> list[int]:
        """Every task id hosted by this task's worker."""


__all__ = ["TopologyContext"]
