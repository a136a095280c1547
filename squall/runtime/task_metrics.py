"""A task's metrics for the metrics consumers: its registered metrics and the built-in
ones, read every time bucket into data points.

The engines use it the same way: when the topology has metrics consumers, each task of
a user component gets a :class:`TaskMetrics` before ``open``/``prepare`` (which registers
the built-in metrics at ``topology.builtin.metrics.bucket.size.secs``); once a bucket
ends on the topology's clock, the engine calls the runner's ``metrics_tick(bucket)`` on
the task's thread, which sends ``[TaskInfo, [DataPoint, ...]]`` on the ``__metrics``
stream to the consumer bolts (see ``squall.runtime.metrics_consumers``).

The built-in metrics report what the task's counters (:class:`TaskStats`, the figures of
``get_topology_info``) gained during the bucket.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from squall.model.config import Config
from squall.model.context import TopologyContext
from squall.model.errors import InvalidTopologyError
from squall.model.metrics import DataPoint, IMetric, TaskInfo
from squall.model.topology import is_control_stream
from squall.runtime.metrics import TaskStats

#: Storm's default of ``topology.builtin.metrics.bucket.size.secs``.
DEFAULT_BUILTIN_BUCKET_SECS = 60


class _CounterDelta(IMetric):
    """What a counter gained since the last read."""

    def __init__(self, read: Callable[[], float]) -> None:
        self._read = read
        self._last = read()

    def get_value_and_reset(self) -> float:
        now = self._read()
        gained, self._last = now - self._last, now
        return gained


class _MeanDelta(IMetric):
    """A latency over the bucket: what a sum gained divided by what its count gained,
    times ``scale``; None when the count did not change."""

    def __init__(
        self, read_sum: Callable[[], float], read_count: Callable[[], int], scale: float
    ) -> None:
        self._sum, self._count = _CounterDelta(read_sum), _CounterDelta(read_count)
        self._scale = scale

    def get_value_and_reset(self) -> float | None:
        total, count = self._sum.get_value_and_reset(), self._count.get_value_and_reset()
        return total * self._scale / count if count else None


class _StreamCounts(IMetric):
    """Per user stream the task has emitted on: what its ``emitted`` or ``transferred``
    count gained since the last read."""

    def __init__(self, stats: TaskStats, attribute: str) -> None:
        self._stats = stats
        self._attribute = attribute
        self._last: dict[str, int] = dict(self._counts())

    def _counts(self) -> Iterable[tuple[str, int]]:
        for stream, route in list(self._stats.routes.items()):
            if not is_control_stream(stream) and route.emitted:
                yield stream, getattr(route, self._attribute)

    def get_value_and_reset(self) -> dict[str, int]:
        gained = {}
        for stream, count in self._counts():
            gained[stream] = count - self._last.get(stream, 0)
            self._last[stream] = count
        return gained


def builtin_metrics(stats: TaskStats, is_spout: bool) -> dict[str, IMetric]:
    """The built-in metrics of a task, by Storm's names: ``__emit-count`` and
    ``__transfer-count`` (``{stream: n}``), ``__ack-count``, ``__fail-count``, and for a
    bolt ``__execute-count``, ``__execute-latency`` and ``__process-latency`` (mean
    milliseconds, None without tuples), for a spout ``__complete-latency``."""
    metrics: dict[str, IMetric] = {
        "__emit-count": _StreamCounts(stats, "emitted"),
        "__transfer-count": _StreamCounts(stats, "transferred"),
        "__ack-count": _CounterDelta(lambda: stats.acked),
        "__fail-count": _CounterDelta(lambda: stats.failed),
    }
    if is_spout:
        metrics["__complete-latency"] = _MeanDelta(
            lambda: stats.complete_ms, lambda: stats.complete_count, 1.0
        )
    else:
        metrics["__execute-count"] = _CounterDelta(lambda: stats.executed)
        metrics["__execute-latency"] = _MeanDelta(
            lambda: stats.busy_secs, lambda: stats.executed, 1000.0
        )
        metrics["__process-latency"] = _MeanDelta(
            lambda: stats.process_secs, lambda: stats.process_count, 1000.0
        )
    return metrics


def has_metrics_consumers(conf: dict[str, Any]) -> bool:
    """Whether the configuration registers any metrics consumer."""
    return bool(conf.get(Config.TOPOLOGY_METRICS_CONSUMER_REGISTER))


def builtin_bucket_secs(conf: dict[str, Any]) -> float:
    """``topology.builtin.metrics.bucket.size.secs`` (60 when unset).

    Raises:
        InvalidTopologyError: it is not a number of seconds above 0.
    """
    value = conf.get(Config.TOPOLOGY_BUILTIN_METRICS_BUCKET_SIZE_SECS)
    if value is None:
        return DEFAULT_BUILTIN_BUCKET_SECS
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidTopologyError(
            f"{Config.TOPOLOGY_BUILTIN_METRICS_BUCKET_SIZE_SECS} is {value!r}: it must be a "
            "number of seconds above 0"
        )
    return value


class TaskMetrics:
    """The metrics of one task, read into data points bucket by bucket.

    Made by the engine before the task's ``open``/``prepare`` (it registers the
    built-in metrics in the task's context); read on the task's thread only.
    """

    def __init__(
        self, context: TopologyContext, stats: TaskStats, is_spout: bool, conf: dict[str, Any]
    ) -> None:
        self.registry = context.metric_registry
        self.stats = stats
        bucket = builtin_bucket_secs(conf)
        for name, metric in builtin_metrics(stats, is_spout).items():
            self.registry.register(name, metric, bucket)
        self._host = socket.gethostname()
        self._worker = context.worker

    def buckets(self) -> list[float]:
        """The time buckets (seconds) of the task's metrics, ascending."""
        return sorted(self.registry.buckets)

    def data_points(self, bucket: float) -> list[DataPoint]:
        """Read (and reset) every metric of ``bucket``: the values that are not None.
        A metric that raises is reported in the task's errors and left out."""
        points = []
        for name, metric in self.registry.buckets.get(bucket, {}).items():
            try:
                value = metric.get_value_and_reset()
            except Exception as exc:
                self.stats.record_error(
                    RuntimeError(
                        f"metric {name!r}: get_value_and_reset raised {type(exc).__name__}: {exc}"
                    )
                )
                continue
            if value is not None:
                points.append(DataPoint(name, value))
        return points

    def task_info(self, bucket: float) -> TaskInfo:
        """The :class:`TaskInfo` of a bucket ending now."""
        return TaskInfo(
            self._host,
            self._worker,
            self.stats.component_id,
            self.stats.task_id,
            int(time.time()),
            bucket,
        )


@dataclass
class MetricsSchedule:
    """When the next bucket of ``bucket_secs`` ends (clock milliseconds) for some tasks
    of a worker: the engine calls ``metrics_tick(bucket_secs)`` on each of ``tasks``."""

    bucket_secs: float
    next_due: float
    tasks: list[Any] = field(default_factory=list)

    @property
    def period_ms(self) -> float:
        """The bucket's length in milliseconds."""
        return self.bucket_secs * 1000.0


def metrics_schedules(runners: Iterable[Any], now_ms: float) -> list[MetricsSchedule]:
    """The schedules of the buckets of ``runners`` (task runners; those without
    ``metrics`` are left out), each bucket ending first at ``now_ms`` plus its length."""
    schedules: dict[float, MetricsSchedule] = {}
    for runner in runners:
        metrics = getattr(runner, "metrics", None)
        if metrics is None:
            continue
        for bucket in metrics.buckets():
            schedule = schedules.get(bucket)
            if schedule is None:
                schedule = schedules[bucket] = MetricsSchedule(bucket, now_ms + bucket * 1000.0)
            schedule.tasks.append(runner)
    return [schedules[bucket] for bucket in sorted(schedules)]


def due_buckets(schedules: list[MetricsSchedule], now_ms: float) -> Iterable[MetricsSchedule]:
    """The schedules whose bucket ended by ``now_ms``, each moved on to its next end
    (one tick however many buckets passed)."""
    for schedule in schedules:
        if now_ms < schedule.next_due:
            continue
        while schedule.next_due <= now_ms:
            schedule.next_due += schedule.period_ms
        yield schedule


__all__ = [
    "DEFAULT_BUILTIN_BUCKET_SECS",
    "MetricsSchedule",
    "TaskMetrics",
    "builtin_bucket_secs",
    "builtin_metrics",
    "due_buckets",
    "has_metrics_consumers",
    "metrics_schedules",
]
