"""The cluster's figures in Prometheus' text format, for ``GET /metrics`` (see
``docs/metrics.md``, section Prometheus).

:class:`ClusterCollector` is a ``prometheus_client`` custom collector: on each scrape,
on the server's thread that answers it, it reads every running topology's
:class:`~squall.runtime.metrics.TopologyInfo` (all time: counters only grow) and turns
it into metric families. Nothing is kept between scrapes, and each server has a
registry of its own (:func:`metrics_registry`), so prometheus_client's global registry
is never touched. Labels name topologies, components, tasks, streams, Spark queries
and Kafka partitions, never a tuple's values.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from squall.model.errors import SquallError
from squall.runtime.cluster import Cluster
from squall.runtime.engine_figures import BATCH_DURATION_BUCKETS, SparkFigures
from squall.runtime.metrics import ComponentStats, TopologyInfo

#: The labels of a task's figures.
TASK_LABELS = ("topology", "component", "task")
#: The labels of a component's figures.
COMPONENT_LABELS = ("topology", "component")
#: The labels of a stream's figures.
STREAM_LABELS = ("topology", "component", "stream")
#: The labels of a Spark query's figures.
QUERY_LABELS = ("topology", "query")
#: The labels of a spout's lag behind one partition of a Kafka topic.
LAG_LABELS = ("topology", "component", "topic", "partition")
#: The per-task counters: (metric name without ``_total``, ``task_stats`` key, help).
TASK_COUNTERS = (
    ("squall_emitted", "emitted", "Tuples emitted on user streams (one per emit call)."),
    ("squall_transferred", "transferred", "Tuples delivered to tasks from user streams."),
    ("squall_executed", "executed", "Tuples executed by a bolt task (tick tuples included)."),
    ("squall_acked", "acked", "Bolts: inputs acked; spouts: tuple trees completed."),
    ("squall_failed", "failed", "Bolts: inputs failed; spouts: tuple trees failed."),
)
#: A Kafka spout's lag behind one partition, as its ``custom`` metrics name it.
KAFKA_LAG = re.compile(r"^(?P<topic>.+)/partition_(?P<partition>\d+)/spoutLag$")


class _Families:
    """The metric families of one scrape, made as they are first needed (in that
    order)."""

    def __init__(self) -> None:
        self.families: dict[str, Metric] = {}

    def counter(
        self, name: str, documentation: str, labels: tuple[str, ...]
    ) -> CounterMetricFamily:
        family = self.families.get(name)
        if not isinstance(family, CounterMetricFamily):
            family = self.families[name] = CounterMetricFamily(name, documentation, labels=labels)
        return family

    def gauge(self, name: str, documentation: str, labels: tuple[str, ...]) -> GaugeMetricFamily:
        family = self.families.get(name)
        if not isinstance(family, GaugeMetricFamily):
            family = self.families[name] = GaugeMetricFamily(name, documentation, labels=labels)
        return family

    def histogram(
        self, name: str, documentation: str, labels: tuple[str, ...]
    ) -> HistogramMetricFamily:
        family = self.families.get(name)
        if not isinstance(family, HistogramMetricFamily):
            family = HistogramMetricFamily(name, documentation, labels=labels)
            self.families[name] = family
        return family


#: The ``le`` bounds (seconds) of the latency histograms: 100 µs to 1 min, for a
#: tuple's sub-millisecond path as for a micro-batch's seconds.
LATENCY_BUCKETS_SECS: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip


def latency_histograms(families: _Families, topology: str, stats: ComponentStats) -> None:
    """Add ``stats``' latencies to the histograms ``squall_complete_latency_seconds``
    (spouts), ``squall_execute_latency_seconds`` and ``squall_process_latency_seconds``
    (bolts), labels ``topology`` and ``component``: the one place latencies are
    exported.

    The buckets (:data:`LATENCY_BUCKETS_SECS`) count the latencies the engine recorded
    in the component's histograms (all time); a latency counts in the buckets from its
    histogram bucket's lower bound (at most 0.8% below it). ``_sum`` and ``_count`` are
    the total latency and the tuples (trees) it covers, so ``rate(_sum) /
    rate(_count)`` is the mean over any range and ``histogram_quantile`` the
    percentiles. A component whose engine keeps no histogram (a Trident stage on
    Spark) has only the ``+Inf`` bucket.
    """
    labels = [topology, stats.component_id]
    if stats.kind == "spout":
        figures = [
            (
                "squall_complete_latency_seconds",
                "Time from a spout's emit of a tracked tuple to its tree's completion.",
                "complete",
                stats.complete_latency_ms,
                stats.complete_count,
            )
        ]
    else:
        figures = [
            (
                "squall_execute_latency_seconds",
                "Time a bolt spent in execute per tuple.",
                "execute",
                stats.execute_latency_ms,
                stats.executed,
            ),
            (
                "squall_process_latency_seconds",
                "Time from the start of a bolt's execute to the tuple's ack (sampled).",
                "process",
                stats.process_latency_ms,
                stats.process_count,
            ),
        ]
    bounds_ms = [bound * 1000.0 for bound in LATENCY_BUCKETS_SECS]
    for name, documentation, kind, mean_ms, count in figures:
        family = families.histogram(name, documentation, COMPONENT_LABELS)
        histogram = stats.latency_histograms.get(kind)
        if histogram is None or histogram.count == 0:
            family.add_metric(labels, [("+Inf", count)], mean_ms * count / 1000.0)
            continue
        cumulative = histogram.cumulative_counts(bounds_ms)
        pairs = zip(LATENCY_BUCKETS_SECS, cumulative, strict=True)
        buckets = [(repr(bound), n) for bound, n in pairs]
        buckets.append(("+Inf", histogram.count))
        family.add_metric(labels, buckets, histogram.sum / 1000.0)


def _component(families: _Families, topology: str, stats: ComponentStats) -> None:
    """The figures of one component and of its tasks."""
    component = stats.component_id
    for name, key, documentation in TASK_COUNTERS:
        if key == "executed" and stats.kind == "spout":
            continue  # spouts execute nothing (Storm counts no executed for them)
        family = families.counter(name, documentation, TASK_LABELS)
        for task, figures in sorted(stats.task_stats.items()):
            family.add_metric([topology, component, str(task)], figures.get(key, 0))
    for stream, counts in sorted(stats.streams.items()):
        labels = [topology, component, stream]
        families.counter(
            "squall_stream_emitted",
            "Tuples emitted on a stream by a component's tasks.",
            STREAM_LABELS,
        ).add_metric(labels, counts["emitted"])
        families.counter(
            "squall_stream_transferred",
            "Tuples delivered to tasks from a stream of a component.",
            STREAM_LABELS,
        ).add_metric(labels, counts["transferred"])
    labels = [topology, component]
    families.counter(
        "squall_errors", "Errors reported by a component's tasks.", COMPONENT_LABELS
    ).add_metric(labels, stats.errors_total)
    if stats.kind == "spout":
        families.counter(
            "squall_timed_out",
            "Spout tuple trees failed because the message timeout passed.",
            COMPONENT_LABELS,
        ).add_metric(labels, stats.timed_out)
    families.gauge(
        "squall_capacity",
        "The highest fraction of the last ~10 s any task of the component spent executing.",
        COMPONENT_LABELS,
    ).add_metric(labels, stats.capacity)
    latency_histograms(families, topology, stats)
    for name, value in sorted(stats.custom.items()):
        lag = KAFKA_LAG.match(name)
        if lag is not None:
            families.gauge(
                "squall_spout_lag",
                "Records of a Kafka partition not yet committed by the spout (end - committed).",
                LAG_LABELS,
            ).add_metric([topology, component, lag["topic"], lag["partition"]], value)


def _spark(families: _Families, topology: str, spark: SparkFigures) -> None:
    """A Spark topology's micro-batches, per streaming query."""
    for query, figures in spark.queries.items():
        labels = [topology, query]
        families.counter(
            "squall_batches", "Micro-batches a Spark query ran.", QUERY_LABELS
        ).add_metric(labels, figures.batches)
        families.counter(
            "squall_batch_rows", "Rows (tuples) the micro-batches of a query read.", QUERY_LABELS
        ).add_metric(labels, figures.rows_total)
        families.counter(
            "squall_batch_retries",
            "Failed runs of a micro-batch that were run again.",
            QUERY_LABELS,
        ).add_metric(labels, figures.retries)
        counts = figures.duration_buckets or (0,) * len(BATCH_DURATION_BUCKETS)
        buckets = [
            (str(bound), count) for bound, count in zip(BATCH_DURATION_BUCKETS, counts, strict=True)
        ]
        families.histogram(
            "squall_batch_duration_seconds", "Wall time of a query's micro-batches.", QUERY_LABELS
        ).add_metric(
            labels, [*buckets, ("+Inf", figures.batches)], figures.duration_ms_total / 1000.0
        )


def topology_metrics(families: _Families, info: TopologyInfo) -> None:
    """Every figure of one topology (all time)."""
    topology = info.name
    families.gauge(
        "squall_uptime_seconds", "Seconds since the topology was submitted.", ("topology",)
    ).add_metric([topology], info.uptime_secs)
    for _, stats in sorted(info.components.items()):
        _component(families, topology, stats)
    if info.local is not None:
        families.gauge(
            "squall_pending_trees",
            "Tuple trees emitted by spouts and not yet acked, failed or timed out.",
            ("topology",),
        ).add_metric([topology], info.local.pending)
        families.gauge(
            "squall_queued_tuples", "Tuples waiting in the tasks' input queues.", ("topology",)
        ).add_metric([topology], info.local.queued)
    if info.spark is not None:
        _spark(families, topology, info.spark)


class ClusterCollector(Collector):
    """Reads ``cluster``'s topologies on each scrape (on the thread that answers it)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def collect(self) -> Iterator[Metric]:
        """The metric families of every running topology; a topology that ends during
        the scrape is left out."""
        families = _Families()
        for name in self.cluster.topology_names():
            try:
                info = self.cluster.get_topology_info(name)
            except SquallError:  # killed meanwhile
                continue
            topology_metrics(families, info)
        yield from families.families.values()


def metrics_registry(cluster: Cluster) -> CollectorRegistry:
    """A registry of its own (never prometheus_client's global one) holding a
    :class:`ClusterCollector` of ``cluster``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(cluster))
    return registry


__all__ = ["ClusterCollector", "latency_histograms", "metrics_registry", "topology_metrics"]
