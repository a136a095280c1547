"""``GET /metrics``: the cluster's figures in Prometheus' text format, read with
prometheus_client's own parser; the token and host rules; the metrics-only server of
``squall run --metrics-port``."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from squall import BasicBolt, Fields, LocalCluster, SquallError, TopologyBuilder
from squall.runtime.latency import LatencyHistogram
from squall.runtime.metrics import ComponentStats
from squall.testing import FixedTupleSpout
from squall.ui import UIServer
from squall.ui.prometheus import LATENCY_BUCKETS_SECS, _Families, latency_histograms
from tests.helpers import wait_until
from tests.test_ui_api import words_topology

ROOT = Path(__file__).resolve().parent.parent
#: What is scraped: metric name -> {labels (sorted pairs): value}, and name -> type.
Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def parse(text: str) -> tuple[Samples, dict[str, str]]:
    """The samples and the families' types of an exposition, as Prometheus reads it."""
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            key = tuple(sorted(sample.labels.items()))
            assert key not in samples.get(sample.name, {}), (sample.name, key)
            samples.setdefault(sample.name, {})[key] = sample.value
    return samples, types


def by(samples: Samples, name: str, *label_names: str) -> dict[tuple[str, ...], float]:
    """The samples of ``name`` keyed by the values of ``label_names``; each sample has
    exactly the labels topology and ``label_names``."""
    result = {}
    for key, value in samples[name].items():
        labels = dict(key)
        assert sorted(labels) == sorted(("topology", *label_names)), (name, labels)
        result[tuple(labels[label] for label in label_names)] = value
    return result


def scrape(url: str, **headers: str) -> tuple[Samples, dict[str, str]]:
    answer = httpx.get(f"{url}metrics", headers=headers, timeout=10.0)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return parse(answer.text)


@pytest.fixture
def served() -> Iterator[tuple[LocalCluster, UIServer]]:
    with LocalCluster() as cluster, UIServer(cluster, port=0) as ui:
        cluster.submit_topology("words", {}, words_topology())
        wait_until(lambda: cluster.get_topology_info("words").components["words"].failed == 2)
        cluster.wait_idle("words")
        yield cluster, ui


def test_an_idle_topology_is_scraped_with_exact_counters_per_task(served: Any) -> None:
    cluster, ui = served
    info = cluster.get_topology_info("words")
    samples, types = scrape(ui.url)
    tasks = {c: info.components[c].tasks for c in ("words", "upper", "sink", "__acker")}
    (spout_task,) = tasks["words"]
    sink_tasks, upper_tasks = tasks["sink"], tasks["upper"]

    emitted = by(samples, "squall_emitted_total", "component", "task")
    assert set(emitted) == {(c, str(t)) for c, ts in tasks.items() for t in ts}
    assert emitted[("words", str(spout_task))] == 6
    assert sum(emitted[("upper", str(t))] for t in upper_tasks) == 4  # 2 of 6 words fail
    assert all(emitted[("sink", str(t))] == 0 for t in sink_tasks)
    executed = by(samples, "squall_executed_total", "component", "task")
    assert ("words", str(spout_task)) not in executed  # spouts execute nothing
    assert sum(executed[("upper", str(t))] for t in upper_tasks) == 6
    sink_counts = {t: info.components["sink"].task_stats[t]["executed"] for t in sink_tasks}
    assert sum(sink_counts.values()) == 4
    assert {t: executed[("sink", str(t))] for t in sink_tasks} == sink_counts
    acked = by(samples, "squall_acked_total", "component", "task")
    failed = by(samples, "squall_failed_total", "component", "task")
    assert (acked[("words", str(spout_task))], failed[("words", str(spout_task))]) == (4, 2)
    assert sum(failed[("upper", str(t))] for t in upper_tasks) == 2
    transferred = by(samples, "squall_transferred_total", "component", "task")
    assert transferred[("words", str(spout_task))] == 6

    streams = by(samples, "squall_stream_emitted_total", "component", "stream")
    assert streams[("words", "default")] == 6
    assert streams[("upper", "default")] == 4
    assert (
        by(samples, "squall_stream_transferred_total", "component", "stream")[("upper", "default")]
        == 4
    )
    assert by(samples, "squall_errors_total", "component") == {
        ("words",): 0,
        ("upper",): 2,
        ("sink",): 0,
        ("__acker",): 0,
    }
    assert by(samples, "squall_timed_out_total", "component") == {("words",): 0}
    assert by(samples, "squall_pending_trees") == {(): 0}
    assert by(samples, "squall_queued_tuples") == {(): 0}
    capacity = by(samples, "squall_capacity", "component")
    assert set(capacity) == {("words",), ("upper",), ("sink",), ("__acker",)}
    assert all(0.0 <= value <= 1.0 for value in capacity.values())

    # Latencies: histograms in seconds, per component; their count is what the mean
    # covers, their sum the total time.
    complete = by(samples, "squall_complete_latency_seconds_count", "component")
    assert complete == {("words",): 4}
    buckets = by(samples, "squall_complete_latency_seconds_bucket", "component", "le")
    assert buckets[("words", "+Inf")] == 4
    counts = [buckets[("words", repr(bound))] for bound in LATENCY_BUCKETS_SECS]
    assert counts == sorted(counts) and counts[-1] == 4  # cumulative; all under 60 s
    spout = info.components["words"]
    (total,) = by(samples, "squall_complete_latency_seconds_sum", "component").values()
    assert total == pytest.approx(spout.complete_latency_ms * 4 / 1000.0)
    execute = by(samples, "squall_execute_latency_seconds_count", "component")
    assert execute == {("upper",): 6, ("sink",): 4, ("__acker",): 8}
    process = by(samples, "squall_process_latency_seconds_count", "component")
    assert process[("upper",)] == 6 and process[("sink",)] == 4

    assert types == {
        "squall_uptime_seconds": "gauge",
        "squall_emitted": "counter",
        "squall_transferred": "counter",
        "squall_executed": "counter",
        "squall_acked": "counter",
        "squall_failed": "counter",
        "squall_stream_emitted": "counter",
        "squall_stream_transferred": "counter",
        "squall_errors": "counter",
        "squall_timed_out": "counter",
        "squall_capacity": "gauge",
        "squall_complete_latency_seconds": "histogram",
        "squall_execute_latency_seconds": "histogram",
        "squall_process_latency_seconds": "histogram",
        "squall_pending_trees": "gauge",
        "squall_queued_tuples": "gauge",
    }
    # Nothing lands in prometheus_client's global registry.
    exposed = prometheus_client.generate_latest(prometheus_client.REGISTRY).decode()
    assert "squall_" not in exposed


def test_openmetrics_is_served_when_the_scraper_asks_for_it(served: Any) -> None:
    _, ui = served
    answer = httpx.get(
        f"{ui.url}metrics", headers={"Accept": "application/openmetrics-text"}, timeout=10.0
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/openmetrics-text")
    assert answer.text.endswith("# EOF\n")
    assert 'squall_acked_total{component="words",task=' in answer.text


class Lagging(FixedTupleSpout):
    """A spout that reports Kafka's lag metrics, as ``KafkaSpout`` does."""

    def metrics(self) -> dict[str, float]:
        return {
            "orders/partition_0/spoutLag": 3,
            "orders/partition_1/spoutLag": 0,
            "orders/totalSpoutLag": 3,
            "in_flight": 0,
        }


class Sink(BasicBolt):
    def execute(self, tup: Any, collector: Any) -> None:
        pass


def test_a_spout_that_reports_kafka_lag_gets_a_lag_gauge_per_partition() -> None:
    builder = TopologyBuilder()
    builder.set_spout("orders", Lagging([["a"]], Fields("order")))
    builder.set_bolt("sink", Sink()).shuffle_grouping("orders")
    with LocalCluster() as cluster, UIServer(cluster, port=0) as ui:
        cluster.submit_topology("lagging", {}, builder.create_topology())
        cluster.wait_idle("lagging")
        samples, types = scrape(ui.url)
    assert types["squall_spout_lag"] == "gauge"
    assert by(samples, "squall_spout_lag", "component", "topic", "partition") == {
        ("orders", "orders", "0"): 3,
        ("orders", "orders", "1"): 0,
    }


def test_metrics_follow_the_token_and_host_rules() -> None:
    with LocalCluster() as cluster, UIServer(cluster, port=0, token="s3cret") as ui:
        url = f"{ui.url}metrics"
        refused = httpx.get(url, timeout=10.0)
        assert refused.status_code == 401
        assert refused.json()["errorMessage"] == (
            "a token is needed: Authorization: Bearer <token>"
        )
        wrong = httpx.get(url, headers={"Authorization": "Bearer nope"}, timeout=10.0)
        assert wrong.status_code == 401
        given = httpx.get(url, headers={"Authorization": "Bearer s3cret"}, timeout=10.0)
        assert given.status_code == 200
        assert given.text == ""  # no topology runs: no samples
        rebound = httpx.get(
            url,
            headers={"Authorization": "Bearer s3cret", "Host": f"evil.example:{ui.port}"},
            timeout=10.0,
        )
        assert rebound.status_code == 403


def test_a_metrics_only_server_serves_metrics_and_nothing_else() -> None:
    with (
        LocalCluster() as cluster,
        UIServer(cluster, port=0, metrics_only=True) as server,
        httpx.Client(base_url=server.url, timeout=10.0) as client,
    ):
        cluster.submit_topology("words", {}, words_topology())
        wait_until(lambda: cluster.get_topology_info("words").components["words"].failed == 2)
        cluster.wait_idle("words")
        samples, _ = scrape(server.url)
        assert by(samples, "squall_acked_total", "component", "task")[("words", "6")] == 4
        for path in ("", "api/v1/cluster/summary", "api/v1/openapi.json", "topology/words"):
            assert client.get(path).status_code == 404, path
        assert client.post("api/v1/topology/words/kill/0").status_code == 404
        assert cluster.topology_names() == ["words"]


def test_a_metrics_only_server_beyond_loopback_needs_a_token() -> None:
    with LocalCluster() as cluster:
        with pytest.raises(SquallError) as raised:
            UIServer(cluster, host="0.0.0.0", port=0, metrics_only=True)
        assert str(raised.value).startswith(
            "the metrics server would listen on 0.0.0.0, beyond this machine, without a "
            "token: anyone reaching it could read every topology's figures. Give a token"
        )


FINITE = """
from squall import BasicBolt, Fields, TopologyBuilder
from squall.testing import FixedTupleSpout


class Sink(BasicBolt):
    def execute(self, tup, collector):
        pass


def build_topology():
    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[n] for n in range(7)], Fields("n")))
    builder.set_bolt("sink", Sink(), 2).shuffle_grouping("numbers")
    return builder.create_topology()
"""


def test_squall_run_serves_metrics_alone_on_the_metrics_port(tmp_path: Path) -> None:
    source = tmp_path / "finite.py"
    source.write_text(textwrap.dedent(FINITE))
    command = [
        sys.executable,
        "-c",
        "from squall.cli.main import main; main()",
        "run",
        str(source),
        "--metrics-port",
        "0",
        "--seconds",
        "120",
        "--no-live",
    ]
    with subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as run:
        assert run.stdout is not None
        lines = []
        for line in run.stdout:
            lines.append(line)
            if line.startswith("Prometheus metrics at "):
                break
        url = lines[-1].split(" at ", 1)[1].strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", url), lines
        base = url.removesuffix("metrics")

        def acked() -> float:
            samples, _ = scrape(base)
            spout = by(samples, "squall_acked_total", "component", "task")
            return sum(v for (component, _), v in spout.items() if component == "numbers")

        wait_until(lambda: acked() == 7, timeout=60.0, interval=0.1)
        assert httpx.get(f"{base}api/v1/cluster/summary", timeout=10.0).status_code == 404
        run.send_signal(signal.SIGINT)
        rest = run.stdout.read()
        assert run.wait(timeout=60) == 0, rest
    assert "numbers" in rest  # the summary's table


def test_a_spark_topology_is_scraped_with_its_micro_batches(spark: Any, tmp_path: Path) -> None:
    from squall.runtime.engine_figures import BATCH_DURATION_BUCKETS
    from squall.spark import SparkCluster

    with (
        SparkCluster(spark=spark, checkpoint_dir=str(tmp_path)) as cluster,
        UIServer(cluster, port=0) as ui,
    ):
        cluster.submit_topology(
            "words", {"topology.spark.batch.interval.millis": 50}, words_topology()
        )
        wait_until(
            lambda: cluster.get_topology_info("words").components["words"].failed == 2,
            timeout=120.0,
        )
        cluster.wait_idle("words")
        info = cluster.get_topology_info("words")
        samples, types = scrape(ui.url)
    query = info.spark.first if info.spark else None
    assert query is not None and query.batches >= 1
    spout = by(samples, "squall_acked_total", "component", "task")
    (spout_task,) = info.components["words"].tasks
    assert spout[("words", str(spout_task))] == 4
    failed = by(samples, "squall_failed_total", "component", "task")
    assert failed[("words", str(spout_task))] == 2
    executed = by(samples, "squall_executed_total", "component", "task")
    assert sum(v for (c, _), v in executed.items() if c == "upper") == 6
    assert sum(v for (c, _), v in executed.items() if c == "sink") == 4
    assert by(samples, "squall_errors_total", "component")[("upper",)] == 2
    assert by(samples, "squall_batch_rows_total", "query") == {("core",): 6}
    assert by(samples, "squall_batches_total", "query") == {("core",): query.batches}
    assert by(samples, "squall_batch_retries_total", "query") == {("core",): 0}
    assert types["squall_batch_duration_seconds"] == "histogram"
    buckets = by(samples, "squall_batch_duration_seconds_bucket", "query", "le")
    bounds = [*(str(bound) for bound in BATCH_DURATION_BUCKETS), "+Inf"]
    assert [le for (_, le) in buckets] == bounds
    counts = [buckets[("core", le)] for le in bounds]
    assert counts == sorted(counts) and counts[-1] == query.batches
    assert by(samples, "squall_batch_duration_seconds_count", "query") == {("core",): query.batches}
    (total,) = by(samples, "squall_batch_duration_seconds_sum", "query").values()
    assert total > 0
    assert "squall_pending_trees" not in types  # the local engine's figures


def test_squall_run_refuses_a_metrics_server_beyond_loopback_without_a_token(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from squall.cli.main import main

    source = tmp_path / "finite.py"
    source.write_text(textwrap.dedent(FINITE))
    arguments = ["run", str(source), "--metrics-port", "0", "--metrics-host", "0.0.0.0"]
    result = CliRunner().invoke(main, [*arguments, "--no-live"], env={"SQUALL_UI_TOKEN": ""})
    assert result.exit_code == 1, result.output
    assert (
        "the metrics server would listen on 0.0.0.0, beyond this machine, without a token"
        in result.output
    )


class Vanishing:
    """A cluster whose topology ``gone`` is killed between the listing and its read."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def topology_names(self) -> list[str]:
        return ["gone", *self.cluster.topology_names()]

    def get_topology_info(self, name: str) -> Any:
        if name == "gone":
            raise SquallError("no topology named 'gone' is running")
        return self.cluster.get_topology_info(name)


def test_a_topology_killed_during_a_scrape_is_left_out(served: Any) -> None:
    from prometheus_client import generate_latest

    from squall.ui.prometheus import metrics_registry

    cluster, _ = served
    samples, _ = parse(generate_latest(metrics_registry(Vanishing(cluster))).decode())
    assert {dict(key)["topology"] for key in samples["squall_acked_total"]} == {"words"}


def test_latency_buckets_count_the_recorded_latencies_in_seconds() -> None:
    """Known latencies land in the exact ``le`` buckets, cumulatively; the sum is in
    seconds; a component without a histogram keeps its count in ``+Inf`` alone."""
    histogram = LatencyHistogram()
    for ms in (0.05, 0.2, 0.2, 3.0, 40.0, 2_000.0):
        histogram.record(ms)
    spout = ComponentStats(component_id="words", kind="spout", tasks=[1])
    spout.complete_count = 6
    spout.latency_histograms = {"complete": histogram}
    families = _Families()
    latency_histograms(families, "t", spout)
    family = families.families["squall_complete_latency_seconds"]
    got = {s.labels["le"]: s.value for s in family.samples if s.name.endswith("_bucket")}
    expected_at = {0.0001: 1, 0.00025: 3, 0.001: 3, 0.005: 4, 0.05: 5, 1.0: 5, 2.5: 6}
    for bound, count in expected_at.items():
        assert got[repr(bound)] == count, bound
    assert got["+Inf"] == 6
    (total,) = [s.value for s in family.samples if s.name.endswith("_sum")]
    assert total == pytest.approx((0.05 + 0.4 + 3.0 + 40.0 + 2_000.0) / 1000.0, rel=0.01)

    bolt = ComponentStats(component_id="stage", kind="bolt", tasks=[2])
    bolt.executed, bolt.execute_latency_ms = 10, 2.0
    families = _Families()
    latency_histograms(families, "t", bolt)
    family = families.families["squall_execute_latency_seconds"]
    assert [(s.labels["le"], s.value) for s in family.samples if s.name.endswith("_bucket")] == [
        ("+Inf", 10)
    ]
