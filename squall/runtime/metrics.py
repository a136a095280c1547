"""Metrics: per-task counters kept by the engine, and the snapshot users read.

Counters are written by one thread only (the task's) and read by ``get_topology_info``
from another; reads may be a moment stale but never torn (plain int attributes).
"""

from __future__ import annotations

import logging
import time
import traceback
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from mypy_extensions import mypyc_attr

from squall.model.topology import is_control_stream
from squall.runtime.engine_figures import LocalFigures, SparkFigures
from squall.runtime.latency import PERCENTILES, LatencyHistogram

logger = logging.getLogger("squall")

ERRORS_KEPT = 10
CAPACITY_WINDOW_SECS = 10.0
#: The :class:`TaskStats` counters that add up over a task's runs (see ``plus``).
_ADDED_COUNTERS = (
    "executed",
    "acked",
    "failed",
    "timed_out",
    "busy_secs",
    "process_secs",
    "process_count",
    "complete_ms",
    "complete_count",
    "errors_total",
)
#: The :class:`TaskStats` latency histograms, by the name ``ComponentStats`` gives them.
LATENCY_KINDS = ("complete", "execute", "process")


@dataclass(frozen=True)
class ErrorInfo:
    """One reported error: when, where, what, and the traceback if there was one."""

    time: float
    component_id: str
    task_id: int
    error: str
    traceback: str = ""

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its fields (the compiled class has no ``__dict__``)."""
        return ErrorInfo, (self.time, self.component_id, self.task_id, self.error, self.traceback)


#: The counters of a :class:`TaskStats` that a snapshot and a pickle copy as they are.
_COUNTERS = (
    "executed",
    "acked",
    "failed",
    "timed_out",
    "errors_total",
    "busy_secs",
    "process_secs",
    "process_count",
    "complete_ms",
    "complete_count",
    "_error_window",
    "_errors_in_window",
)
#: Its containers, which a pickle carries (a snapshot copies them).
_CONTAINERS = (
    "complete_latency",
    "execute_latency",
    "process_latency",
    "errors",
    "_capacity_samples",
    "routes",
)


@mypyc_attr(serializable=True)
@dataclass
class RouteCounts:
    """A stream's counts of one task, without the route (what a snapshot keeps)."""

    emitted: int
    transferred: int


class TaskStats:
    """Counters of one task. Written only by the task's own thread."""

    __slots__ = (
        "_capacity_samples",
        "_error_window",
        "_errors_in_window",
        "acked",
        "busy_secs",
        "complete_count",
        "complete_latency",
        "complete_ms",
        "component_id",
        "errors",
        "errors_total",
        "execute_latency",
        "executed",
        "failed",
        "max_errors_per_window",
        "process_count",
        "process_latency",
        "process_secs",
        "routes",
        "task_id",
        "throttle_secs",
        "timed_out",
    )

    def __init__(
        self,
        component_id: str,
        task_id: int,
        throttle_secs: float = 10.0,
        max_errors_per_window: int = 5,
    ) -> None:
        self.component_id = component_id
        self.task_id = task_id
        self.executed = 0
        self.acked = 0
        self.failed = 0
        self.timed_out = 0
        self.busy_secs = 0.0
        self.process_secs = 0.0
        self.process_count = 0
        self.complete_ms = 0.0
        self.complete_count = 0
        #: Latency histograms (ms), recorded beside the sums above: every tree's
        #: complete latency (spouts), every batch's mean execute time per tuple, and
        #: the process-latency samples (bolts).
        self.complete_latency = LatencyHistogram()
        self.execute_latency = LatencyHistogram()
        self.process_latency = LatencyHistogram()
        self.errors: deque[ErrorInfo] = deque(maxlen=ERRORS_KEPT)
        self.errors_total = 0
        self.routes: dict[str, Any] = {}
        self.throttle_secs = throttle_secs
        self.max_errors_per_window = max_errors_per_window
        self._error_window = 0.0
        self._errors_in_window = 0
        self._capacity_samples: deque[tuple[float, float]] = deque()

    def record_error(self, error: BaseException | str, with_traceback: bool = True) -> None:
        """Count an error; keep its message and traceback unless throttled.

        Storm's throttle: at most ``max_errors_per_window`` errors are recorded in full per
        ``throttle_secs``; the rest are counted only.
        """
        self.errors_total += 1
        now = time.time()
        if now - self._error_window >= self.throttle_secs:
            self._error_window = now
            self._errors_in_window = 0
        self._errors_in_window += 1
        if self._errors_in_window > self.max_errors_per_window:
            return
        if isinstance(error, BaseException):
            text = f"{type(error).__name__}: {error}"
            trace = (
                "".join(traceback.format_exception(type(error), error, error.__traceback__))
                if with_traceback
                else ""
            )
        else:
            text, trace = str(error), ""
        self.errors.append(ErrorInfo(now, self.component_id, self.task_id, text, trace))
        logger.error(
            "component %r task %d: %s%s",
            self.component_id,
            self.task_id,
            text,
            f"\n{trace}" if trace else "",
        )

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its constructor's arguments and its state (the compiled class has
        no ``__dict__``); take a :meth:`snapshot` first, whose routes are counts."""
        arguments = (self.component_id, self.task_id, self.throttle_secs)
        state = tuple(getattr(self, name) for name in (*_COUNTERS, *_CONTAINERS))
        return TaskStats, (*arguments, self.max_errors_per_window), state

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        """Set the counters (and, from a pickle, the histograms, errors and routes)."""
        for name, value in zip((*_COUNTERS, *_CONTAINERS), state, strict=False):
            setattr(self, name, value)

    def snapshot(self) -> TaskStats:
        """A copy of these counters that can be pickled (routes become their counts),
        taken from any thread: for a process that reports another process's tasks."""
        copy = TaskStats(
            self.component_id, self.task_id, self.throttle_secs, self.max_errors_per_window
        )
        copy.__setstate__(tuple(getattr(self, name) for name in _COUNTERS))
        for _ in range(100):  # the task's thread may append meanwhile: copy again
            try:
                copy.complete_latency = self.complete_latency.copy()
                copy.execute_latency = self.execute_latency.copy()
                copy.process_latency = self.process_latency.copy()
                copy.errors = deque(list(self.errors), maxlen=ERRORS_KEPT)
                copy._capacity_samples = deque(list(self._capacity_samples))
                copy.routes = {
                    stream: RouteCounts(route.emitted, route.transferred)
                    for stream, route in list(self.routes.items())
                }
                break
            except RuntimeError:
                continue
        return copy

    def plus(self, later: TaskStats) -> TaskStats:
        """These counters (an earlier run of the task, e.g. a process that died) with
        ``later``'s (the run after it) added: a new snapshot, neither is changed.

        Counts, latency sums, latency histograms and per-stream counts are added;
        errors are merged (the most recent ``ERRORS_KEPT``); capacity is ``later``'s,
        the run that is there now. Runs on any thread, on snapshots (see :meth:`snapshot`).
        """
        total = later.snapshot()
        for name in _ADDED_COUNTERS:
            setattr(total, name, getattr(self, name) + getattr(later, name))
        for kind in LATENCY_KINDS:
            histogram = getattr(self, f"{kind}_latency").copy()
            histogram.merge(getattr(later, f"{kind}_latency"))
            setattr(total, f"{kind}_latency", histogram)
        routes: dict[str, Any] = {
            stream: RouteCounts(route.emitted, route.transferred)
            for stream, route in self.routes.items()
        }
        for stream, route in later.routes.items():
            earlier = routes.get(stream)
            routes[stream] = (
                RouteCounts(route.emitted, route.transferred)
                if earlier is None
                else RouteCounts(
                    earlier.emitted + route.emitted, earlier.transferred + route.transferred
                )
            )
        total.routes = routes
        # Capacity compares busy time with samples of it: shift ``later``'s samples
        # by the busy time added before them.
        total._capacity_samples = deque(
            (at, busy + self.busy_secs) for at, busy in later._capacity_samples
        )
        merged = sorted([*self.errors, *later.errors], key=lambda error: error.time)
        total.errors = deque(merged[-ERRORS_KEPT:], maxlen=ERRORS_KEPT)
        return total

    def stopped(self) -> TaskStats:
        """A snapshot of these counters for a run that has ended: no capacity (the
        task does not run there any more)."""
        copy = self.snapshot()
        copy._capacity_samples = deque()
        return copy

    def sample_capacity(self, now: float) -> None:
        """Remember (time, busy seconds) about once a second, for ``capacity``."""
        samples = self._capacity_samples
        if samples and now - samples[-1][0] < 1.0:
            return
        samples.append((now, self.busy_secs))
        while len(samples) > 2 and now - samples[1][0] >= CAPACITY_WINDOW_SECS:
            samples.popleft()

    def capacity(self, now: float) -> float:
        """Fraction of the last ~10 s this task spent executing (Storm's capacity)."""
        samples = self._capacity_samples
        if not samples:
            return 0.0
        start, busy_then = samples[0]
        elapsed = now - start
        if elapsed <= 0:
            return 0.0
        return max(0.0, min(1.0, (self.busy_secs - busy_then) / elapsed))


def _no_percentiles() -> dict[float, float]:
    return dict.fromkeys(PERCENTILES, 0.0)


@mypyc_attr(serializable=True)
@dataclass
class ComponentStats:
    """Metrics of one component, summed (counts) or averaged (latencies) over its tasks.

    Attributes:
        component_id: the component.
        kind: ``"spout"`` or ``"bolt"``.
        tasks: task ids.
        emitted: tuples emitted on user streams (one per emit call).
        transferred: tuples sent to tasks (an emit to three tasks counts three).
        executed: tuples executed (bolts).
        acked: tuples acked (bolts: inputs acked; spouts: trees completed).
        failed: tuples failed (bolts: inputs failed; spouts: trees failed or timed out).
        timed_out: spout trees failed because of the message timeout (part of ``failed``).
        execute_latency_ms: mean time in ``execute`` per tuple (bolts).
        process_latency_ms: mean time from ``execute`` start to ack, sampled (bolts).
        complete_latency_ms: mean time from spout emit to tree completion (spouts).
        process_count: the tuples ``process_latency_ms`` is the mean of.
        complete_count: the trees ``complete_latency_ms`` is the mean of.
        complete_latency_percentiles: percentile -> complete latency in ms (spouts),
            over the same trees (and window) as ``complete_latency_ms``; keys
            ``PERCENTILES`` (50, 90, 99, 99.9, 99.99), values 0.0 when none completed.
        execute_latency_percentiles: the same of execute latency (bolts; a batch of
            tuples executed back to back counts as that many tuples of its mean time).
        process_latency_percentiles: the same of the process-latency samples (bolts).
        latency_histograms: ``"complete"``, ``"execute"``, ``"process"`` -> the
            component's :class:`~squall.runtime.latency.LatencyHistogram` the
            percentiles come from (not in ``to_dict``).
        task_latency_histograms: task id -> its histograms by the same names (all time
            only: empty in a window; not in ``to_dict``).
        capacity: highest fraction of the last ~10 s any task spent executing (bolts;
            near 1.0 means the component is the bottleneck).
        streams: per stream id, ``{"emitted": n, "transferred": n}``. System streams are
            listed once used: ``__ack_fail``/``__ack_reset_timeout`` of bolts and the
            acker's replies. Spout inits and bolt acks are XOR-combined per worker before
            they are sent (see ``AckBuffer``), so they are counted per topology, in
            ``TopologyInfo.local.ack_messages``.
        errors: the most recent errors (newest last).
        errors_total: every error reported, including ones throttled from ``errors``.
        custom: counters a component reports itself, summed over its tasks (a windowed
            bolt: ``late_tuples``, ``windows_fired``, ``window_tuples_held``).
    """

    component_id: str
    kind: str
    tasks: list[int]
    emitted: int = 0
    transferred: int = 0
    executed: int = 0
    acked: int = 0
    failed: int = 0
    timed_out: int = 0
    execute_latency_ms: float = 0.0
    process_latency_ms: float = 0.0
    complete_latency_ms: float = 0.0
    process_count: int = 0
    complete_count: int = 0
    capacity: float = 0.0
    streams: dict[str, dict[str, int]] = field(default_factory=dict)
    errors: list[ErrorInfo] = field(default_factory=list)
    errors_total: int = 0
    custom: dict[str, float] = field(default_factory=dict)
    task_stats: dict[int, dict[str, Any]] = field(default_factory=dict)
    complete_latency_percentiles: dict[float, float] = field(default_factory=_no_percentiles)
    execute_latency_percentiles: dict[float, float] = field(default_factory=_no_percentiles)
    process_latency_percentiles: dict[float, float] = field(default_factory=_no_percentiles)
    latency_histograms: dict[str, LatencyHistogram] = field(default_factory=dict, repr=False)
    task_latency_histograms: dict[int, dict[str, LatencyHistogram]] = field(
        default_factory=dict, repr=False
    )

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def with_histograms(self, histograms: dict[str, LatencyHistogram]) -> None:
        """Set ``latency_histograms`` and the percentiles they give (in place)."""
        self.latency_histograms = histograms
        empty = LatencyHistogram()
        self.complete_latency_percentiles = histograms.get("complete", empty).percentiles()
        self.execute_latency_percentiles = histograms.get("execute", empty).percentiles()
        self.process_latency_percentiles = histograms.get("process", empty).percentiles()

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (JSON-serialisable; percentile keys become strings such
        as ``"99.9"`` in JSON), without the histograms."""
        data = asdict(replace(self, latency_histograms={}, task_latency_histograms={}))
        del data["latency_histograms"], data["task_latency_histograms"]
        return data


@mypyc_attr(serializable=True)
@dataclass
class TopologyInfo:
    """What ``get_topology_info(name)`` returns.

    ``components`` maps component id to :class:`ComponentStats`, system components
    (``__acker``) included. Item access works too: ``info["components"]["split"]["acked"]``.
    The engine's own figures are typed: ``local`` on ``LocalCluster`` (pending trees,
    queued tuples, executors, worker processes), ``spark`` on ``SparkCluster``
    (micro-batches, checkpoint, resources); the other one is None. ``extra`` gives
    them as a plain dict.
    """

    name: str
    status: str
    uptime_secs: float
    workers: int
    components: dict[str, ComponentStats]
    local: LocalFigures | None = None
    spark: SparkFigures | None = None

    @property
    def extra(self) -> dict[str, Any]:
        """The engine's figures (``local`` or ``spark``) as a plain dict, under the
        names of their attributes (for Spark: the first query's figures at the top,
        every query's under ``"queries"``); empty when the engine gives none. A new
        dict on each read."""
        if self.local is not None:
            return self.local.as_dict()
        if self.spark is not None:
            return self.spark.as_dict()
        return {}

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (JSON-serialisable): the fields, the engine's figures
        under ``"extra"``."""
        data = asdict(replace(self, components={}))
        data["components"] = {cid: stats.to_dict() for cid, stats in self.components.items()}
        del data["local"], data["spark"]
        data["extra"] = self.extra
        return data


def summarize(component_id: str, kind: str, stats: list[TaskStats], now: float) -> ComponentStats:
    """Combine the task counters of one component into its :class:`ComponentStats`."""
    summary = ComponentStats(component_id, kind, [s.task_id for s in stats])
    busy = process_secs = complete_ms = 0.0
    process_count = complete_count = 0
    errors: list[ErrorInfo] = []
    for task in stats:
        task_emitted = task_transferred = 0
        for stream_id, route in task.routes.items():
            if stream_id.startswith("__") and not route.emitted:
                continue
            entry = summary.streams.setdefault(stream_id, {"emitted": 0, "transferred": 0})
            entry["emitted"] += route.emitted
            entry["transferred"] += route.transferred
            if not is_control_stream(stream_id):
                task_emitted += route.emitted
                task_transferred += route.transferred
        summary.emitted += task_emitted
        summary.transferred += task_transferred
        summary.executed += task.executed
        summary.acked += task.acked
        summary.failed += task.failed
        summary.timed_out += task.timed_out
        summary.errors_total += task.errors_total
        busy += task.busy_secs
        process_secs += task.process_secs
        process_count += task.process_count
        complete_ms += task.complete_ms
        complete_count += task.complete_count
        summary.capacity = max(summary.capacity, task.capacity(now))
        errors.extend(task.errors)
        summary.task_stats[task.task_id] = {
            "emitted": task_emitted,
            "transferred": task_transferred,
            "executed": task.executed,
            "acked": task.acked,
            "failed": task.failed,
        }
    if summary.executed:
        summary.execute_latency_ms = busy * 1000.0 / summary.executed
    if process_count:
        summary.process_latency_ms = process_secs * 1000.0 / process_count
    if complete_count:
        summary.complete_latency_ms = complete_ms / complete_count
    summary.process_count = process_count
    summary.complete_count = complete_count
    summary.errors = sorted(errors, key=lambda e: e.time)[-ERRORS_KEPT:]
    summary.task_latency_histograms = {
        task.task_id: {kind: getattr(task, f"{kind}_latency").copy() for kind in LATENCY_KINDS}
        for task in stats
    }
    summary.with_histograms(
        {
            kind: LatencyHistogram.merged(
                histograms[kind] for histograms in summary.task_latency_histograms.values()
            )
            for kind in LATENCY_KINDS
        }
    )
    return summary
