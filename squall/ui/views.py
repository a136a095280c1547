"""What the REST API answers, made from a cluster's figures (engine-neutral: any
:class:`~squall.runtime.cluster.Cluster`). Runs on the UI server's threads; every call
reads the cluster afresh.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

import squall
from squall.model.errors import SquallError, excerpt
from squall.model.topology import StormTopology, is_control_stream
from squall.runtime.cluster import Cluster
from squall.runtime.metrics import ComponentStats, ErrorInfo, TopologyInfo
from squall.ui.models import (
    BoltEntry,
    ClusterSummary,
    ComponentError,
    ComponentPage,
    ComponentSeries,
    ComponentSeriesPage,
    ComponentWindowStats,
    ExecutorStats,
    GraphInput,
    GraphNode,
    InputEntry,
    SeriesValues,
    SparkBatch,
    SparkFigures,
    SpoutEntry,
    StreamStats,
    TopologyPage,
    TopologySeries,
    TopologySummaryEntry,
    WindowStats,
)
from squall.ui.series import SeriesRecorder, column, queue_capacity, queues

#: The ``window`` parameter's value for all time.
ALL_TIME = ":all-time"


class UnknownName(SquallError):
    """A topology or component that is not there (answered 404)."""


def pretty_secs(secs: float) -> str:
    """Seconds as Storm UI writes them: ``"6m 5s"``, ``"3h 0m 0s"``, ``"1d 0h 0m 0s"``."""
    left = int(secs)
    days, left = divmod(left, 86_400)
    hours, left = divmod(left, 3_600)
    minutes, seconds = divmod(left, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")]
    while len(parts) > 1 and parts[0][0] == 0:
        parts.pop(0)
    return " ".join(f"{value}{unit}" for value, unit in parts)


def parse_window(value: str | None, kept: list[int]) -> int | None:
    """The ``window`` parameter as seconds (None: all time).

    Raises:
        ValueError: not ``:all-time`` nor one of the ``kept`` windows.
    """
    if value is None or value == ALL_TIME:
        return None
    if value.isdigit() and int(value) in kept:
        return int(value)
    choices = ", ".join([*(str(w) for w in kept), ALL_TIME])
    raise ValueError(f"window {excerpt(value)} is not kept; the windows are {choices}")


def window_label(window: int | None) -> str:
    """A window as the ``window`` field shows it."""
    return ALL_TIME if window is None else str(window)


def window_pretty(window: int | None) -> str:
    """A window as ``windowPretty``/``windowHint`` show it."""
    return "All time" if window is None else pretty_secs(window)


def latency(value: float) -> str:
    """A latency or capacity as Storm UI writes it."""
    return f"{value:.3f}"


def percentiles(values: dict[float, float]) -> dict[str, str]:
    """Latency percentiles as the REST API gives them: ``{"99.9": "1.234"}`` (ms)."""
    return {f"{p:g}": latency(ms) for p, ms in values.items()}


def _info(cluster: Cluster, name: str, window: int | None = None) -> TopologyInfo:
    if name not in cluster.topology_names():
        raise UnknownName(f"no topology named {excerpt(name)} is running")
    try:
        return cluster.get_topology_info(name, window_secs=window)
    except SquallError as exc:  # ended meanwhile
        raise UnknownName(str(exc)) from exc


def _user_components(
    info: TopologyInfo, system: bool, order: list[str] | None = None
) -> dict[str, ComponentStats]:
    """The components of ``info`` (system ones only if ``system``), those named in
    ``order`` first, in that order."""
    ranked = {cid: rank for rank, cid in enumerate(order or [])}
    ids = sorted(info.components, key=lambda cid: (ranked.get(cid, len(ranked)), cid))
    return {cid: info.components[cid] for cid in ids if system or not cid.startswith("__")}


def _executors(topology: StormTopology, stats: ComponentStats) -> int:
    if stats.component_id in topology:
        return min(topology.get_component(stats.component_id).parallelism, len(stats.tasks))
    return len(stats.tasks)


def _totals(cluster: Cluster, name: str, info: TopologyInfo) -> dict[str, int]:
    topology: StormTopology = cluster.get_topology(name)
    return {
        "tasksTotal": sum(len(s.tasks) for s in info.components.values()),
        "executorsTotal": sum(_executors(topology, s) for s in info.components.values()),
        "workersTotal": info.workers,
    }


def _status(info: TopologyInfo, killing: set[str]) -> str:
    return "KILLED" if info.name in killing else info.status


def cluster_summary(cluster: Cluster, started: float, killing: set[str]) -> ClusterSummary:
    """``GET cluster/summary``: ``started`` is when the UI server started
    (``time.monotonic()``)."""
    totals = {"tasksTotal": 0, "executorsTotal": 0, "workersTotal": 0}
    names = cluster.topology_names()
    for name in names:
        try:
            info = _info(cluster, name)
        except UnknownName:
            continue
        for key, value in _totals(cluster, name, info).items():
            totals[key] += value
    uptime = time.monotonic() - started
    return ClusterSummary(
        squallVersion=squall.__version__,
        engine=cluster.engine,
        resources=cluster.resources,
        uptime=pretty_secs(uptime),
        uptimeSeconds=int(uptime),
        topologies=len(names),
        **totals,
    )


def topology_entries(cluster: Cluster, killing: set[str]) -> list[TopologySummaryEntry]:
    """The entries of ``GET topology/summary``, by name."""
    entries = []
    for name in cluster.topology_names():
        try:
            info = _info(cluster, name)
        except UnknownName:
            continue
        entries.append(
            TopologySummaryEntry(
                id=name,
                name=name,
                status=_status(info, killing),
                uptime=pretty_secs(info.uptime_secs),
                uptimeSeconds=int(info.uptime_secs),
                **_totals(cluster, name, info),
            )
        )
    return entries


def _last_error(stats: ComponentStats) -> dict[str, Any]:
    if not stats.errors:
        return {"lastError": "", "errorTime": None, "errorLapsedSecs": None, "errorTask": None}
    error = stats.errors[-1]
    return {
        "lastError": error.error,
        "errorTime": int(error.time),
        "errorLapsedSecs": int(max(0.0, time.time() - error.time)),
        "errorTask": error.task_id,
    }


def _topology_stats(info: TopologyInfo, window: int | None) -> WindowStats:
    spouts = [s for s in info.components.values() if s.kind == "spout"]
    complete_ms = sum(s.complete_latency_ms * s.complete_count for s in spouts)
    completed = sum(s.complete_count for s in spouts)
    return WindowStats(
        window=window_label(window),
        windowPretty=window_pretty(window),
        emitted=sum(
            s.emitted for s in info.components.values() if not s.component_id.startswith("__")
        ),
        transferred=sum(
            s.transferred for s in info.components.values() if not s.component_id.startswith("__")
        ),
        acked=sum(s.acked for s in spouts),
        failed=sum(s.failed for s in spouts),
        completeLatency=latency(complete_ms / completed if completed else 0.0),
    )


def _spark_figures(info: TopologyInfo) -> SparkFigures | None:
    """The micro-batches of the first query (the spout's), on SparkCluster."""
    if info.spark is None:
        return None
    query = info.spark.first
    return SparkFigures(
        batches=query.batches,
        lastBatchId=query.last_batch_id,
        lastBatchRows=query.last_batch_rows,
        lastBatchMs=query.last_batch_ms,
        medianBatchMs=query.median_batch_ms,
        rowsTotal=query.rows_total,
        retries=query.retries,
        recent=[
            SparkBatch(batchId=batch_id, rows=rows, durationMs=ms, stateCommits=commits)
            for batch_id, rows, ms, commits in query.recent_batches
        ],
    )


def _plain(value: Any) -> str | int | float | bool | None:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def topology_page(
    cluster: Cluster,
    name: str,
    window: int | None,
    system: bool,
    killing: set[str],
) -> TopologyPage:
    """``GET topology/{name}``: its figures over ``window`` (None: all time), and over
    every window in ``topologyStats``; system components only if ``system``."""
    now = _info(cluster, name)
    info = cluster.in_window(name, now, window)
    topology: StormTopology = cluster.get_topology(name)
    conf: dict[str, Any] = cluster.get_topology_conf(name)
    windows: list[int | None] = [*cluster.metric_windows, None]
    stats = [_topology_stats(cluster.in_window(name, now, w), w) for w in windows]
    components = _user_components(info, system, topology.component_ids())
    spouts = [
        SpoutEntry(
            spoutId=cid,
            executors=_executors(topology, s),
            tasks=len(s.tasks),
            emitted=s.emitted,
            transferred=s.transferred,
            acked=s.acked,
            failed=s.failed,
            completeLatency=latency(s.complete_latency_ms),
            completeLatencyPercentiles=percentiles(s.complete_latency_percentiles),
            **_last_error(s),
        )
        for cid, s in components.items()
        if s.kind == "spout"
    ]
    bolts = [
        BoltEntry(
            boltId=cid,
            executors=_executors(topology, s),
            tasks=len(s.tasks),
            emitted=s.emitted,
            transferred=s.transferred,
            executed=s.executed,
            acked=s.acked,
            failed=s.failed,
            capacity=latency(s.capacity),
            executeLatency=latency(s.execute_latency_ms),
            processLatency=latency(s.process_latency_ms),
            executeLatencyPercentiles=percentiles(s.execute_latency_percentiles),
            processLatencyPercentiles=percentiles(s.process_latency_percentiles),
            **_last_error(s),
        )
        for cid, s in components.items()
        if s.kind == "bolt"
    ]
    return TopologyPage(
        id=name,
        name=name,
        status=_status(info, killing),
        uptime=pretty_secs(info.uptime_secs),
        uptimeSeconds=int(info.uptime_secs),
        **_totals(cluster, name, info),
        msgTimeout=int(conf.get("topology.message.timeout.secs", 30)),
        window=window_label(window),
        windowHint=window_pretty(window),
        topologyStats=stats,
        spouts=spouts,
        bolts=bolts,
        configuration={key: _plain(value) for key, value in sorted(conf.items())},
        spark=_spark_figures(info),
    )


def _component(info: TopologyInfo, component_id: str) -> ComponentStats:
    try:
        return info.components[component_id]
    except KeyError:
        raise UnknownName(
            f"topology {excerpt(info.name)} has no component {excerpt(component_id)}"
        ) from None


def _component_window(stats: ComponentStats, window: int | None) -> ComponentWindowStats:
    return ComponentWindowStats(
        window=window_label(window),
        windowPretty=window_pretty(window),
        emitted=stats.emitted,
        transferred=stats.transferred,
        executed=stats.executed,
        acked=stats.acked,
        failed=stats.failed,
        completeLatency=latency(stats.complete_latency_ms),
        executeLatency=latency(stats.execute_latency_ms),
        processLatency=latency(stats.process_latency_ms),
        completeLatencyPercentiles=percentiles(stats.complete_latency_percentiles),
        executeLatencyPercentiles=percentiles(stats.execute_latency_percentiles),
        processLatencyPercentiles=percentiles(stats.process_latency_percentiles),
    )


def _error(error: ErrorInfo) -> ComponentError:
    return ComponentError(
        error=error.error,
        errorTime=int(error.time * 1000),
        errorLapsedSecs=int(max(0.0, time.time() - error.time)),
        errorTask=error.task_id,
        traceback=error.traceback,
    )


def component_page(
    cluster: Cluster,
    name: str,
    component_id: str,
    window: int | None,
    system: bool,
    killing: set[str],
) -> ComponentPage:
    """``GET topology/{name}/component/{component_id}``: over ``window`` (None: all
    time), and over every window in ``spoutSummary``/``boltStats``; control and
    system streams (acking, batches) only if ``system``."""
    now = _info(cluster, name)
    info = cluster.in_window(name, now, window)
    stats = _component(info, component_id)
    topology: StormTopology = cluster.get_topology(name)
    windows: list[int | None] = [*cluster.metric_windows, None]
    summaries = [
        _component_window(_component(cluster.in_window(name, now, w), component_id), w)
        for w in windows
    ]
    inputs = []
    if component_id in topology:
        inputs = [
            InputEntry(component=sub.source, stream=sub.stream_id, grouping=sub.grouping.describe())
            for sub in topology.get_component(component_id).inputs
        ]
    return ComponentPage(
        id=component_id,
        name=name,
        topologyId=name,
        topologyStatus=_status(info, killing),
        componentType=stats.kind,
        window=window_label(window),
        windowHint=window_pretty(window),
        executors=_executors(topology, stats),
        tasks=len(stats.tasks),
        spoutSummary=summaries if stats.kind == "spout" else None,
        boltStats=summaries if stats.kind == "bolt" else None,
        outputStats=[
            StreamStats(stream=stream, emitted=counts["emitted"], transferred=counts["transferred"])
            for stream, counts in sorted(stats.streams.items())
            if system or not is_control_stream(stream)
        ],
        inputs=inputs,
        executorStats=[
            ExecutorStats(
                id=f"[{task}-{task}]",
                task=task,
                emitted=int(figures.get("emitted", 0)),
                transferred=int(figures.get("transferred", 0)),
                executed=int(figures.get("executed", 0)),
                acked=int(figures.get("acked", 0)),
                failed=int(figures.get("failed", 0)),
            )
            for task, figures in sorted(stats.task_stats.items())
        ],
        componentErrors=[_error(error) for error in reversed(stats.errors)],
        custom=dict(stats.custom),
    )


def visualization(cluster: Cluster, name: str, window: int | None) -> dict[str, GraphNode]:
    """``GET topology/{name}/visualization``: per user component, its kind, figures
    over ``window`` and inputs."""
    info = _info(cluster, name, window)
    topology: StormTopology = cluster.get_topology(name)
    queued = queues(_info(cluster, name), queue_capacity(cluster, name))
    nodes = {}
    for spec in topology:
        if spec.system:
            continue
        stats = info.components.get(spec.component_id)
        waiting, full = queued.get(spec.component_id, (0, False)) if queued else (None, False)
        nodes[spec.component_id] = GraphNode(
            type=spec.kind,
            capacity=stats.capacity if stats else 0.0,
            latency=(
                (stats.complete_latency_ms if spec.is_spout else stats.execute_latency_ms)
                if stats
                else 0.0
            ),
            transferred=stats.transferred if stats else 0,
            link=f"/topology/{quote(name, safe='')}/component/{quote(spec.component_id, safe='')}",
            inputs=[
                GraphInput(
                    component=sub.source, stream=sub.stream_id, grouping=sub.grouping.describe()
                )
                for sub in spec.inputs
                if not sub.source.startswith("__")
            ],
            queued=waiting,
            backpressure=full,
        )
    return nodes


SERIES_FIELDS = ("emitted", "acked", "latency", "capacity", "queued", "backpressure")


def _series_of(samples: list[Any], component: str | None) -> dict[str, list[Any]]:
    return {name: column(samples, component, name) for name in SERIES_FIELDS}


def topology_series(
    cluster: Cluster, recorder: SeriesRecorder, name: str, window: int | None
) -> TopologySeries:
    """``GET topology/{name}/series``: the samples of ``name`` and of its user
    components over the last ``window`` seconds (None: all kept)."""
    info = _info(cluster, name)
    samples = recorder.samples(name, window)
    order = cluster.get_topology(name).component_ids()
    components = _user_components(info, False, order)
    return TopologySeries(
        id=name,
        window=window_label(window),
        sampleSecs=recorder.sample_secs,
        latencyKind=samples[-1].latency_kind if samples else "mean",
        times=[sample.time for sample in samples],
        topology=SeriesValues(**_series_of(samples, None)),
        components={
            cid: ComponentSeries(type=stats.kind, **_series_of(samples, cid))
            for cid, stats in components.items()
        },
    )


def component_series(
    cluster: Cluster, recorder: SeriesRecorder, name: str, component_id: str, window: int | None
) -> ComponentSeriesPage:
    """``GET topology/{name}/component/{component_id}/series``: that component's
    samples over the last ``window`` seconds (None: all kept)."""
    stats = _component(_info(cluster, name), component_id)
    samples = recorder.samples(name, window)
    return ComponentSeriesPage(
        id=component_id,
        topologyId=name,
        type=stats.kind,
        window=window_label(window),
        sampleSecs=recorder.sample_secs,
        latencyKind=samples[-1].latency_kind if samples else "mean",
        times=[sample.time for sample in samples],
        **_series_of(samples, component_id),
    )


__all__ = [
    "ALL_TIME",
    "UnknownName",
    "cluster_summary",
    "component_page",
    "component_series",
    "parse_window",
    "pretty_secs",
    "topology_entries",
    "topology_page",
    "topology_series",
    "visualization",
]
