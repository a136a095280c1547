"""The time series the UI's charts draw: every topology's and component's throughput,
latency, capacity and queued tuples, sampled on a timer by the UI server.

A :class:`SeriesRecorder` runs on a daemon thread of the UI server's process and reads
the cluster every ``sample_secs`` (engine-neutral: any
:class:`~squall.runtime.cluster.Cluster`). What it keeps is bounded whatever runs and
however long: per running topology, a fine ring of the latest ``fine_count`` samples
(10 minutes at the default 2 s) and a coarse ring of ``coarse_count`` samples taken
every ``coarse_secs`` (a day at the default 60 s). A topology that is no longer running
is forgotten at the next sample. The charts survive a reload of the page, since the
samples are the server's.

Each sample holds, per user component and for the topology as a whole:

- ``emitted`` and ``acked`` per second since the previous sample of its ring;
- ``latency`` in ms: complete latency (spouts) or execute latency (bolts); the 99th
  percentile over the cluster's shortest rolling window where the engine reports
  percentiles (``complete_latency_percentiles`` ...), else the mean over the interval
  since the previous sample (``None`` when nothing completed in it);
- ``capacity`` (bolts; the topology's: its highest bolt's);
- ``queued``: tuples waiting in the component's input queues, and ``backpressure``:
  whether any of its tasks' queues is full (``LocalCluster`` reports queues; on
  ``SparkCluster`` these are ``None``/false).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from squall.model.config import Config
from squall.model.errors import SquallError
from squall.runtime.cluster import Cluster
from squall.runtime.metrics import ComponentStats, TopologyInfo

logger = logging.getLogger("squall")

#: The percentile the latency series shows where the engine reports percentiles.
PERCENTILE = 99.0


@dataclass(frozen=True)
class Point:
    """One component's (or the topology's) figures in one sample."""

    emitted: float | None = None
    acked: float | None = None
    latency: float | None = None
    capacity: float | None = None
    queued: int | None = None
    backpressure: bool = False


@dataclass(frozen=True)
class Sample:
    """The figures of one topology at one moment (``time``: epoch seconds)."""

    time: float
    topology: Point
    components: dict[str, Point]
    #: ``"p99"`` if the latencies are 99th percentiles, ``"mean"`` if means.
    latency_kind: str = "mean"


@dataclass(frozen=True)
class _Counts:
    """The cumulative counts a rate or an interval mean is taken from."""

    emitted: int
    acked: int
    latency_total_ms: float
    latency_count: int


def _counts(stats: ComponentStats) -> _Counts:
    if stats.kind == "spout":
        total, count = stats.complete_latency_ms * stats.complete_count, stats.complete_count
    else:
        total, count = stats.execute_latency_ms * stats.executed, stats.executed
    return _Counts(stats.emitted, stats.acked, total, count)


def percentile(stats: ComponentStats | None) -> float | None:
    """The 99th percentile of ``stats``'s key latency (complete for spouts, execute for
    bolts) in ms, or None where the engine reports no percentiles (or none yet)."""
    if stats is None:
        return None
    name = (
        "complete_latency_percentiles" if stats.kind == "spout" else "execute_latency_percentiles"
    )
    values = getattr(stats, name, None)
    if not isinstance(values, Mapping) or not values:
        return None
    value = values.get(PERCENTILE)
    return None if value is None else float(value)


def has_percentiles(stats: ComponentStats) -> bool:
    """Whether the engine keeps latency histograms for ``stats`` (so its percentiles
    are figures, not the zeros of a component without them, such as a Trident stage
    on Spark)."""
    return bool(stats.latency_histograms)


def _rate(now: int, before: int | None, secs: float) -> float | None:
    if before is None or secs <= 0:
        return None
    return max(0, now - before) / secs


@dataclass
class _Ring:
    """Samples of one resolution and the counts its next sample's rates start from."""

    samples: deque[Sample]
    every_secs: float
    last_at: float | None = None
    counts: dict[str, _Counts] = field(default_factory=dict)


def queue_capacity(cluster: Cluster, name: str) -> int:
    """The tuples a task's input queue of topology ``name`` holds before it is full
    (``topology.executor.receive.buffer.size``)."""
    conf = cluster.get_topology_conf(name)
    return int(conf.get(Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE, 0))


def queues(info: TopologyInfo, capacity: int) -> dict[str, tuple[int, bool]] | None:
    """Per component: the tuples queued at its tasks, and whether any task's queue is
    full (holds ``capacity`` tuples or more); None where the engine reports no queues."""
    local = info.local
    if local is None or not local.task_queued:
        return None
    answer: dict[str, tuple[int, bool]] = {}
    for cid, stats in info.components.items():
        sizes = [local.task_queued.get(task, 0) for task in stats.tasks]
        answer[cid] = (sum(sizes), capacity > 0 and max(sizes, default=0) >= capacity)
    return answer


class SeriesRecorder:
    """Samples every running topology of ``cluster`` every ``sample_secs`` (see the
    module's description for what and how much is kept).

    Args:
        cluster: the cluster whose topologies are sampled.
        sample_secs: time between samples (the fine ring's resolution).
        fine_count: samples kept at that resolution per topology.
        coarse_secs: time between samples of the coarse ring.
        coarse_count: samples kept at the coarse resolution per topology.
    """

    def __init__(
        self,
        cluster: Cluster,
        sample_secs: float = 2.0,
        fine_count: int = 300,
        coarse_secs: float = 60.0,
        coarse_count: int = 1440,
    ) -> None:
        if sample_secs <= 0 or coarse_secs <= 0:
            raise ValueError(
                f"the UI's sampling intervals must be positive, not {sample_secs} and {coarse_secs}"
            )
        if fine_count < 2 or coarse_count < 2:
            raise ValueError(
                f"the UI keeps at least 2 samples per ring, not {fine_count} and {coarse_count}"
            )
        self.cluster = cluster
        self.sample_secs = sample_secs
        self.coarse_secs = coarse_secs
        self._fine_count = fine_count
        self._coarse_count = coarse_count
        self._rings: dict[str, tuple[_Ring, _Ring]] = {}
        self._uptimes: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Take a sample now and every ``sample_secs`` after it, on a daemon thread."""
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="squall-ui-series", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait for the thread (what was sampled stays readable)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        self._thread = None

    def _run(self) -> None:
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                self.sample()
            except Exception:  # a bad moment of one engine must not end the charts
                logger.exception("the UI could not sample the cluster's figures")
            self._stopping.wait(max(0.0, self.sample_secs - (time.monotonic() - started)))

    def sample(self) -> None:
        """Sample every running topology once (runs on the sampling thread; tests call
        it directly). Topologies no longer running are forgotten."""
        names = set(self.cluster.topology_names())
        with self._lock:
            for gone in set(self._rings) - names:
                del self._rings[gone]
                self._uptimes.pop(gone, None)
        for name in sorted(names):
            try:
                self._sample_topology(name)
            except SquallError:  # it ended meanwhile
                continue

    def _sample_topology(self, name: str) -> None:
        cluster = self.cluster
        info = cluster.get_topology_info(name)
        windows = cluster.metric_windows
        recent = cluster.in_window(name, info, windows[0]) if windows else info
        capacity = queue_capacity(cluster, name)
        now = time.monotonic()
        wall = time.time()
        with self._lock:
            rings = self._rings.get(name)
            if rings is None or info.uptime_secs < self._uptimes.get(name, 0.0):
                rings = self._rings[name] = (
                    _Ring(deque(maxlen=self._fine_count), self.sample_secs),
                    _Ring(deque(maxlen=self._coarse_count), self.coarse_secs),
                )
            self._uptimes[name] = info.uptime_secs
            for ring in rings:
                due = ring.last_at is None or now - ring.last_at >= ring.every_secs * 0.95
                if due:
                    ring.samples.append(self._sample(ring, info, recent, capacity, now, wall))
                    ring.last_at = now

    def _sample(
        self,
        ring: _Ring,
        info: TopologyInfo,
        recent: TopologyInfo,
        queue_capacity: int,
        now: float,
        wall: float,
    ) -> Sample:
        secs = now - ring.last_at if ring.last_at is not None else 0.0
        components = {
            cid: stats for cid, stats in info.components.items() if not cid.startswith("__")
        }
        queued = queues(info, queue_capacity)
        kind = "p99" if any(has_percentiles(s) for s in components.values()) else "mean"
        points: dict[str, Point] = {}
        counts = {cid: _counts(stats) for cid, stats in components.items()}
        for cid, stats in components.items():
            before = ring.counts.get(cid)
            now_counts = counts[cid]
            if kind == "p99":
                latency = percentile(recent.components.get(cid))
            elif before is not None and now_counts.latency_count > before.latency_count:
                latency = (now_counts.latency_total_ms - before.latency_total_ms) / (
                    now_counts.latency_count - before.latency_count
                )
            else:
                latency = None
            waiting, full = queued.get(cid, (0, False)) if queued is not None else (None, False)
            points[cid] = Point(
                emitted=_rate(now_counts.emitted, before.emitted if before else None, secs),
                acked=_rate(now_counts.acked, before.acked if before else None, secs),
                latency=latency,
                capacity=stats.capacity if stats.kind == "bolt" else None,
                queued=waiting,
                backpressure=full,
            )
        topology = self._topology_point(components, points, counts, ring.counts, secs, kind)
        ring.counts = counts
        return Sample(wall, topology, points, kind)

    @staticmethod
    def _topology_point(
        components: Mapping[str, ComponentStats],
        points: Mapping[str, Point],
        counts: Mapping[str, _Counts],
        before: Mapping[str, _Counts],
        secs: float,
        kind: str,
    ) -> Point:
        spouts = [cid for cid, s in components.items() if s.kind == "spout"]
        bolts = [cid for cid, s in components.items() if s.kind == "bolt"]
        first = not before or secs <= 0
        emitted = None if first else sum(points[cid].emitted or 0.0 for cid in points)
        acked = None if first else sum(points[cid].acked or 0.0 for cid in spouts)
        if kind == "p99":
            values = [v for v in (points[cid].latency for cid in spouts) if v is not None]
            latency = max(values) if values else None
        else:
            done = [(counts[cid], before[cid]) for cid in spouts if cid in before]
            total = sum(n.latency_total_ms - b.latency_total_ms for n, b in done)
            count = sum(n.latency_count - b.latency_count for n, b in done)
            latency = total / count if count > 0 else None
        queued = [points[cid].queued for cid in points]
        return Point(
            emitted=emitted,
            acked=acked,
            latency=latency,
            capacity=max(points[cid].capacity or 0.0 for cid in bolts) if bolts else None,
            queued=None if any(q is None for q in queued) else sum(q or 0 for q in queued),
            backpressure=any(points[cid].backpressure for cid in points),
        )

    def samples(self, name: str, window_secs: int | None) -> list[Sample]:
        """``name``'s samples over the last ``window_secs`` (None: all kept), oldest
        first: the coarse ones from before the fine ring's first, then the fine ones."""
        with self._lock:
            rings = self._rings.get(name)
            if rings is None:
                return []
            fine, coarse = list(rings[0].samples), list(rings[1].samples)
        start = fine[0].time if fine else float("inf")
        merged = [s for s in coarse if s.time < start] + fine
        if window_secs is None:
            return merged
        since = time.time() - window_secs
        return [s for s in merged if s.time >= since]

    def names(self) -> Iterable[str]:
        """The topologies sampled."""
        with self._lock:
            return list(self._rings)


def column(samples: list[Sample], component: str | None, name: str) -> list[Any]:
    """One figure of ``component`` (None: the topology) across ``samples``."""
    values = []
    for sample in samples:
        point = sample.topology if component is None else sample.components.get(component)
        values.append(None if point is None else getattr(point, name))
    return values


__all__ = [
    "PERCENTILE",
    "Point",
    "Sample",
    "SeriesRecorder",
    "column",
    "percentile",
    "queue_capacity",
    "queues",
]
