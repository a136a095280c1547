"""Custom metrics and metrics consumers: Storm's ``org.apache.storm.metric.api``.

A component registers metrics in ``open``/``prepare`` with
``context.register_metric(name, metric, time_bucket_size_in_secs)``. Every time bucket,
the engine reads each metric of the bucket (``get_value_and_reset``) on the task's own
thread and sends the values that are not None, as :class:`DataPoint` s with a
:class:`TaskInfo`, to every metrics consumer registered with
``Config.register_metrics_consumer`` (an :class:`IMetricsConsumer`, such as
:class:`LoggingMetricsConsumer`).

The metric types are not thread-safe, as in Storm: a task updates its metrics from its
own thread (the thread that calls ``execute``/``next_tuple``), which is also the thread
that reads them.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from squall.model.errors import SquallError

if TYPE_CHECKING:
    from squall.model.context import TopologyContext

#: Storm's stream of metrics data points (``Constants.METRICS_STREAM_ID``): every
#: component declares it when the topology has metrics consumers.
METRICS_STREAM = "__metrics"
#: The prefix of the metrics consumers' component ids (``__metrics_<ClassName>``).
METRICS_COMPONENT_PREFIX = "__metrics_"
#: Storm's stream of the system ticks that end metrics buckets
#: (``Constants.METRICS_TICK_STREAM_ID``): the Spark engine wakes bolt tasks with it.
METRICS_TICK_STREAM = "__metrics_tick"

logger = logging.getLogger("squall.metrics")


class IMetric(ABC):
    """A metric a task registers with ``context.register_metric``."""

    @abstractmethod
    def get_value_and_reset(self) -> Any:
        """The value for the time bucket that ended (None: nothing to report), and start
        a new bucket. Called on the task's thread at the end of each bucket."""


class CountMetric(IMetric):
    """A count: ``incr()``/``incr_by(n)``; reports the count of the bucket (0 too)."""

    def __init__(self) -> None:
        self._value = 0

    def incr(self) -> None:
        """Add 1."""
        self._value += 1

    def incr_by(self, increment_by: int) -> None:
        """Add ``increment_by``."""
        self._value += increment_by

    def get_value_and_reset(self) -> int:
        """The count since the last call; starts again from 0."""
        value, self._value = self._value, 0
        return value


class MultiCountMetric(IMetric):
    """Counts by key: ``scope(key).incr()``; reports ``{key: count}`` (every key used
    so far, 0 for those not counted in the bucket)."""

    def __init__(self) -> None:
        self._counts: dict[str, CountMetric] = {}

    def scope(self, key: str) -> CountMetric:
        """The count of ``key`` (made at first use)."""
        count = self._counts.get(key)
        if count is None:
            count = self._counts[key] = CountMetric()
        return count

    def get_value_and_reset(self) -> dict[str, int]:
        """Every key's count since the last call; each starts again from 0."""
        return {key: count.get_value_and_reset() for key, count in self._counts.items()}


class IReducer(ABC):
    """How a :class:`ReducedMetric` folds the values it is given into one result."""

    @abstractmethod
    def init(self) -> Any:
        """A new accumulator (at the start of each bucket)."""

    @abstractmethod
    def reduce(self, accumulator: Any, value: Any) -> Any:
        """``accumulator`` with ``value`` folded in (the new accumulator)."""

    @abstractmethod
    def extract_result(self, accumulator: Any) -> Any:
        """The bucket's result (None: nothing to report)."""


@dataclass
class MeanReducerState:
    """The accumulator of :class:`MeanReducer`: how many values, and their sum."""

    count: int = 0
    sum: float = 0.0


class MeanReducer(IReducer):
    """The mean of the values of a bucket (None when there were none)."""

    def init(self) -> MeanReducerState:
        return MeanReducerState()

    def reduce(self, accumulator: MeanReducerState, value: Any) -> MeanReducerState:
        """Add ``value`` (an int or a float).

        Raises:
            TypeError: ``value`` is not a number.
        """
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(
                f"MeanReducer.reduce was given {value!r} of type {type(value).__name__}: "
                "it takes int or float values"
            )
        accumulator.count += 1
        accumulator.sum += value
        return accumulator

    def extract_result(self, accumulator: MeanReducerState) -> float | None:
        if accumulator.count > 0:
            return accumulator.sum / accumulator.count
        return None


class ReducedMetric(IMetric):
    """Values folded by a reducer: ``update(value)``; reports the reducer's result."""

    def __init__(self, reducer: IReducer) -> None:
        self._reducer = reducer
        self._accumulator = reducer.init()

    def update(self, value: Any) -> None:
        """Fold ``value`` into the bucket's result."""
        self._accumulator = self._reducer.reduce(self._accumulator, value)

    def get_value_and_reset(self) -> Any:
        """The bucket's result; a new bucket starts."""
        value = self._reducer.extract_result(self._accumulator)
        self._accumulator = self._reducer.init()
        return value


class MultiReducedMetric(IMetric):
    """Reduced values by key: ``scope(key).update(value)``; reports ``{key: result}``
    for the keys whose result is not None."""

    def __init__(self, reducer: IReducer) -> None:
        self._reducer = reducer
        self._metrics: dict[str, ReducedMetric] = {}

    def scope(self, key: str) -> ReducedMetric:
        """The reduced metric of ``key`` (made at first use)."""
        metric = self._metrics.get(key)
        if metric is None:
            metric = self._metrics[key] = ReducedMetric(self._reducer)
        return metric

    def get_value_and_reset(self) -> dict[str, Any]:
        values = {key: metric.get_value_and_reset() for key, metric in self._metrics.items()}
        return {key: value for key, value in values.items() if value is not None}


class ICombiner(ABC):
    """How a :class:`CombinedMetric` combines its values."""

    @abstractmethod
    def identity(self) -> Any:
        """The value of a bucket with no update."""

    @abstractmethod
    def combine(self, a: Any, b: Any) -> Any:
        """``a`` and ``b`` combined."""


class CombinedMetric(IMetric):
    """Values combined by a combiner: ``update(value)``; reports the combination (the
    combiner's identity when there was no update)."""

    def __init__(self, combiner: ICombiner) -> None:
        self._combiner = combiner
        self._value = combiner.identity()

    def update(self, value: Any) -> None:
        """Combine ``value`` into the bucket's value."""
        self._value = self._combiner.combine(self._value, value)

    def get_value_and_reset(self) -> Any:
        value, self._value = self._value, self._combiner.identity()
        return value


class AssignableMetric(IMetric):
    """A value set by the task: ``set_value(v)``; reports the value last set, every
    bucket (it is not reset)."""

    def __init__(self, value: Any = None) -> None:
        self._value = value

    def set_value(self, value: Any) -> None:
        """The value to report from now on."""
        self._value = value

    def get_value_and_reset(self) -> Any:
        return self._value


@dataclass(frozen=True)
class TaskInfo:
    """Where and when a task's data points were taken (Storm's
    ``IMetricsConsumer.TaskInfo``).

    Attributes:
        src_worker_host: the host name of the task's worker.
        src_worker_port: the task's worker: its index (0-based) among the topology's
            workers (Storm gives the worker's port).
        src_component_id: the task's component.
        src_task_id: the task.
        timestamp: when the bucket ended, in seconds since the epoch.
        update_interval_secs: the bucket's length in seconds.
    """

    src_worker_host: str
    src_worker_port: int
    src_component_id: str
    src_task_id: int
    timestamp: int
    update_interval_secs: float


@dataclass(frozen=True)
class DataPoint:
    """A metric's value for one bucket: its registered ``name`` and ``value``."""

    name: str
    value: Any


class IMetricsConsumer(ABC):
    """Receives every task's data points (Storm's ``IMetricsConsumer``).

    Register it with ``Config.register_metrics_consumer(cls, argument,
    parallelism_hint)``: the engine adds a bolt ``__metrics_<ClassName>`` that makes an
    instance of ``cls`` per task, calls :meth:`prepare` in its ``prepare``, and then
    :meth:`handle_data_points` on a thread of its own for each bucket of each task.
    """

    def prepare(
        self,
        conf: dict[str, Any],
        registration_argument: Any,
        context: TopologyContext,
        error_reporter: Any,
    ) -> None:
        """Called once, in the consumer task's ``prepare``.

        Args:
            conf: the topology's configuration.
            registration_argument: the ``argument`` given at registration.
            context: the consumer task's context.
            error_reporter: has ``report_error(error)``: the error is recorded in the
                consumer component's errors.
        """

    @abstractmethod
    def handle_data_points(self, task_info: TaskInfo, data_points: list[DataPoint]) -> None:
        """The data points of one bucket of one task. Runs on the consumer task's own
        thread, one call at a time; an exception is recorded in the consumer
        component's errors and the next call proceeds."""

    def cleanup(self) -> None:
        """Called once when the consumer task ends, after the last
        :meth:`handle_data_points`."""


class LoggingMetricsConsumer(IMetricsConsumer):
    """Logs one line per data point, in Storm's format, to the logger
    ``squall.metrics`` at level INFO: the bucket's timestamp, the worker's host and
    port, the task and component, the metric's name (padded to 23 characters) and its
    value, separated by tabs."""

    def handle_data_points(self, task_info: TaskInfo, data_points: list[DataPoint]) -> None:
        for line in format_data_points(task_info, data_points):
            logger.info("%s", line)


def format_data_points(task_info: TaskInfo, data_points: list[DataPoint]) -> Iterator[str]:
    """The lines :class:`LoggingMetricsConsumer` logs for ``data_points``."""
    header = (
        f"{task_info.timestamp}\t{task_info.src_worker_host:>15}:{task_info.src_worker_port:<4}"
        f"\t{task_info.src_task_id:>3}:{task_info.src_component_id:<11}\t"
    )
    for point in data_points:
        yield f"{header}{point.name:<23.23}\t{point.value}"


M = TypeVar("M")


class MetricRegistry:
    """The metrics one task registered, by time bucket (a task's
    ``TopologyContext`` holds one).

    Registration is open until the engine calls :meth:`close` after ``open``/
    ``prepare``. Read and written on the task's thread.
    """

    def __init__(self, component_id: str, task_id: int) -> None:
        self.component_id = component_id
        self.task_id = task_id
        #: Bucket seconds -> metric name -> metric, in registration order.
        self.buckets: dict[float, dict[str, IMetric]] = {}
        self.closed = False

    def register(self, name: str, metric: M, time_bucket_size_in_secs: float) -> M:
        """Add ``metric`` as ``name``, read every ``time_bucket_size_in_secs``.

        Raises:
            SquallError: registration is closed (``open``/``prepare`` returned), or
                ``name`` is registered already in this task.
            TypeError: ``metric`` is neither an :class:`IMetric` nor a function of no
                arguments (whose result is then the bucket's value).
            ValueError: the bucket is not a number of seconds above 0.
        """
        where = f"component {self.component_id!r} task {self.task_id}"
        if self.closed:
            raise SquallError(
                f"{where}: register_metric({name!r}) can only be called from within open() "
                "or prepare()"
            )
        stored: IMetric
        if isinstance(metric, IMetric):
            stored = metric
        elif callable(metric):  # Storm's lambda form: registerMetric(name, () -> 0, 1)
            stored = _CallableMetric(metric)
        else:
            raise TypeError(
                f"{where}: metric {name!r} must be an IMetric (with get_value_and_reset) "
                f"or a function of no arguments, not {type(metric).__name__}"
            )
        bucket = time_bucket_size_in_secs
        if (
            isinstance(bucket, bool)
            or not isinstance(bucket, (int, float))
            or not math.isfinite(bucket)
            or bucket <= 0
        ):
            raise ValueError(
                f"{where}: metric {name!r} has time bucket {bucket!r}: it must be a number "
                "of seconds above 0"
            )
        if any(name in metrics for metrics in self.buckets.values()):
            raise SquallError(f"{where}: the same metric name {name!r} was registered twice")
        self.buckets.setdefault(bucket, {})[name] = stored
        return metric

    def close(self) -> None:
        """End registration (the engine calls it once ``open``/``prepare`` returned)."""
        self.closed = True

    def get(self, name: str) -> Any:
        """The metric registered as ``name`` (as it was given), or None."""
        for metrics in self.buckets.values():
            if name in metrics:
                metric = metrics[name]
                return metric.function if isinstance(metric, _CallableMetric) else metric
        return None


class _CallableMetric(IMetric):
    """A function registered as a metric: its result is the bucket's value."""

    def __init__(self, function: Callable[[], Any]) -> None:
        self.function = function

    def get_value_and_reset(self) -> Any:
        return self.function()


__all__ = [
    "METRICS_COMPONENT_PREFIX",
    "METRICS_STREAM",
    "METRICS_TICK_STREAM",
    "AssignableMetric",
    "CombinedMetric",
    "CountMetric",
    "DataPoint",
    "ICombiner",
    "IMetric",
    "IMetricsConsumer",
    "IReducer",
    "LoggingMetricsConsumer",
    "MeanReducer",
    "MeanReducerState",
    "MetricRegistry",
    "MultiCountMetric",
    "MultiReducedMetric",
    "ReducedMetric",
    "TaskInfo",
    "format_data_points",
]
