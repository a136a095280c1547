"""Rolling windows of a topology's metrics: its figures over the last 10 minutes, 3
hours and day, beside all time, as Storm UI shows them.

Engine-neutral: a :class:`MetricsHistory` records cumulative snapshots of a topology's
:class:`~squall.runtime.metrics.TopologyInfo` (whatever engine made it) and answers a
window by subtracting, from the figures now, those of the snapshot taken when the
window began. Each window keeps at most ``BUCKETS + 1`` snapshots, one per
``window / BUCKETS`` seconds, so a window's start is exact to that step (10 s for
10 minutes); a topology younger than a window has all its figures in it.

Counts (emitted, transferred, executed, acked, failed, errors) and latencies (their
sums and counts, and each component's latency histograms, so its percentiles) are
windowed; capacity already covers the last seconds, and a
component's own metrics (``custom``) are reported as they are now. Errors are those
reported within the window.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TypeAlias

from squall.runtime.latency import LatencyHistogram
from squall.runtime.metrics import ComponentStats, TopologyInfo

#: The windows Storm UI shows, in seconds: 10 minutes, 3 hours, 1 day (and all time).
WINDOWS: tuple[int, ...] = (600, 10_800, 86_400)
#: Snapshots per window.
BUCKETS = 60
#: The name of a cluster's thread that records its topologies' figures.
HISTORY_THREAD = "squall-metrics-history"
#: Counts of a component or task that windows subtract.
_COUNTS = ("emitted", "transferred", "executed", "acked", "failed", "timed_out", "errors_total")
#: A snapshot: per component (task None) and per task, its cumulative figures.
Totals: TypeAlias = dict[tuple[str, int | None], dict[str, float]]
#: A snapshot's latency histograms: per component, by kind (``"complete"``, ...).
Histograms: TypeAlias = dict[str, dict[str, LatencyHistogram]]


def histograms_of(info: TopologyInfo) -> Histograms:
    """The components' latency histograms of ``info`` (copies: they stay as now)."""
    return {
        component_id: {kind: hist.copy() for kind, hist in stats.latency_histograms.items()}
        for component_id, stats in info.components.items()
    }


def totals_of(info: TopologyInfo) -> Totals:
    """The cumulative figures of ``info`` that windows subtract."""
    totals: Totals = {}
    for component_id, stats in info.components.items():
        figures: dict[str, float] = {name: getattr(stats, name) for name in _COUNTS}
        figures["execute_ms"] = stats.execute_latency_ms * stats.executed
        figures["process_ms"] = stats.process_latency_ms * stats.process_count
        figures["process_count"] = stats.process_count
        figures["complete_ms"] = stats.complete_latency_ms * stats.complete_count
        figures["complete_count"] = stats.complete_count
        for stream_id, counts in stats.streams.items():
            for name, value in counts.items():
                figures[f"stream:{stream_id}:{name}"] = value
        totals[(component_id, None)] = figures
        for task_id, task in stats.task_stats.items():
            totals[(component_id, task_id)] = {
                name: value for name, value in task.items() if isinstance(value, int | float)
            }
    return totals


def _less(now: dict[str, float], base: dict[str, float] | None) -> dict[str, float]:
    if not base:
        return dict(now)
    return {name: value - base.get(name, 0) for name, value in now.items()}


def _mean(total_ms: float, count: float) -> float:
    return total_ms / count if count > 0 else 0.0


def windowed_component(
    stats: ComponentStats,
    base: Totals | None,
    since_wall: float,
    base_histograms: dict[str, LatencyHistogram] | None = None,
) -> ComponentStats:
    """``stats`` (figures now) less those of snapshot ``base`` (None: nothing before)
    and its latency histograms less ``base_histograms``; errors reported since
    ``since_wall`` (``time.time()``). Per-task histograms are left out."""
    now = totals_of_component(stats)
    key = (stats.component_id, None)
    figures = _less(now[key], base.get(key) if base else None)
    streams = {
        stream_id: {name: int(figures.get(f"stream:{stream_id}:{name}", 0)) for name in counts}
        for stream_id, counts in stats.streams.items()
    }
    task_stats = {}
    for task_id, task in stats.task_stats.items():
        task_key = (stats.component_id, task_id)
        less = _less(now[task_key], base.get(task_key) if base else None)
        task_stats[task_id] = {
            name: (type(value)(less[name]) if name in less else value)
            for name, value in task.items()
        }
    counts = {name: int(figures[name]) for name in _COUNTS}
    earlier = base_histograms or {}
    windowed = replace(
        stats,
        emitted=counts["emitted"],
        transferred=counts["transferred"],
        executed=counts["executed"],
        acked=counts["acked"],
        failed=counts["failed"],
        timed_out=counts["timed_out"],
        errors_total=counts["errors_total"],
        execute_latency_ms=_mean(figures["execute_ms"], figures["executed"]),
        process_latency_ms=_mean(figures["process_ms"], figures["process_count"]),
        process_count=int(figures["process_count"]),
        complete_latency_ms=_mean(figures["complete_ms"], figures["complete_count"]),
        complete_count=int(figures["complete_count"]),
        streams=streams,
        errors=[error for error in stats.errors if error.time >= since_wall],
        task_stats=task_stats,
        task_latency_histograms={},
    )
    windowed.with_histograms(
        {kind: hist.minus(earlier.get(kind)) for kind, hist in stats.latency_histograms.items()}
    )
    return windowed


def totals_of_component(stats: ComponentStats) -> Totals:
    """:func:`totals_of` for one component."""
    return totals_of(TopologyInfo("", "", 0.0, 0, {stats.component_id: stats}))


class MetricsHistory:
    """Snapshots of one topology's figures, for its rolling windows.

    Written by one thread (:meth:`record`), read by any (:meth:`window`): a lock keeps
    them apart.

    Args:
        started: when the topology started (``time.monotonic()`` seconds).
        windows: the window lengths, in seconds.
    """

    def __init__(self, started: float, windows: Iterable[int] = WINDOWS) -> None:
        self.started = started
        self._rings: dict[int, deque[tuple[float, Totals, Histograms]]] = {
            w: deque() for w in windows
        }
        self._lock = threading.Lock()

    @property
    def windows(self) -> list[int]:
        """The window lengths kept, in seconds."""
        return sorted(self._rings)

    def record(self, now: float, info: TopologyInfo) -> None:
        """Keep a snapshot of ``info`` (taken at ``now``) where a window needs one."""
        totals: Totals | None = None
        histograms: Histograms = {}
        with self._lock:
            for window, ring in self._rings.items():
                if ring and now - ring[-1][0] < window / BUCKETS:
                    continue
                if totals is None:
                    totals, histograms = totals_of(info), histograms_of(info)
                ring.append((now, totals, histograms))
                while len(ring) > 1 and ring[1][0] <= now - window:
                    ring.popleft()

    def base(self, now: float, window: int) -> Totals | None:
        """The snapshot the window ending ``now`` starts from (None: the topology
        started within it, so nothing is subtracted).

        Raises:
            ValueError: ``window`` is not one this history keeps.
        """
        entry = self._base_entry(now, window)
        return entry[1] if entry else None

    def _base_entry(self, now: float, window: int) -> tuple[float, Totals, Histograms] | None:
        if window not in self._rings:
            raise ValueError(f"window {window} s is not kept (windows: {self.windows})")
        if now - window <= self.started:
            return None
        with self._lock:
            ring = self._rings[window]
            while len(ring) > 1 and ring[1][0] <= now - window:
                ring.popleft()
            return ring[0] if ring else None

    def window(self, now: float, info: TopologyInfo, window: int | None) -> TopologyInfo:
        """``info`` (the figures at ``now``) over the last ``window`` seconds (None:
        all time, ``info`` itself).

        Raises:
            ValueError: ``window`` is not one this history keeps.
        """
        if window is None:
            return info
        entry = self._base_entry(now, window)
        base, histograms = (entry[1], entry[2]) if entry else (None, {})
        since_wall = time.time() - window
        components = {
            component_id: windowed_component(stats, base, since_wall, histograms.get(component_id))
            for component_id, stats in info.components.items()
        }
        return replace(info, components=components)


class HistoryKeeper:
    """Records the figures of a cluster's running topologies every ``window / BUCKETS``
    seconds of the shortest window, on a daemon thread of its own that runs while any
    topology does.

    Args:
        names: the running topologies' names (called on the keeper's thread).
        info: a topology's figures now (called on the keeper's thread; a topology that
            ended meanwhile raises, and is skipped).
        windows: the window lengths, in seconds.
    """

    def __init__(
        self,
        names: Callable[[], list[str]],
        info: Callable[[str], TopologyInfo],
        windows: Iterable[int] = WINDOWS,
    ) -> None:
        self._names = names
        self.stream_info = info
        self.windows = sorted(windows)
        self.interval = self.windows[0] / BUCKETS
        self._histories: dict[str, MetricsHistory] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def started(self, name: str) -> None:
        """Topology ``name`` starts now: a new history (any old one of that name is
        dropped), and the keeper's thread runs."""
        with self._lock:
            self._histories[name] = MetricsHistory(time.monotonic(), self.windows)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=HISTORY_THREAD, daemon=True)
                self._thread.start()

    def ended(self, name: str) -> None:
        """Topology ``name`` ended: its history is dropped (the thread ends at once if
        no topology is left)."""
        with self._lock:
            self._histories.pop(name, None)
            if not self._histories:
                self._wake.set()

    def history(self, name: str) -> MetricsHistory | None:
        """The history of topology ``name`` (None: none kept)."""
        with self._lock:
            return self._histories.get(name)

    def _run(self) -> None:
        while True:
            self._wake.wait(self.interval)
            running = set(self._names())
            with self._lock:
                self._wake.clear()
                for name in [n for n in self._histories if n not in running]:
                    del self._histories[name]
                if not self._histories:
                    self._thread = None
                    return
                histories = dict(self._histories)
            for name, history in histories.items():
                try:
                    info = self.stream_info(name)
                except Exception:  # ended meanwhile; forgotten at the next round
                    continue
                history.record(time.monotonic(), info)


__all__ = ["BUCKETS", "HISTORY_THREAD", "WINDOWS", "HistoryKeeper", "MetricsHistory", "totals_of"]
