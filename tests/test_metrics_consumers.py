"""Custom metrics (``context.register_metric``) and metrics consumers
(``Config.register_metrics_consumer``), as in Storm: every time bucket each task sends
its metrics' values on ``__metrics`` to a consumer bolt per registered consumer."""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

import pytest

from squall import (
    BasicBolt,
    ComponentError,
    Config,
    Fields,
    InvalidTopologyError,
    LocalCluster,
    ManualClock,
    TopologyBuilder,
)
from squall.metric import (
    AssignableMetric,
    CombinedMetric,
    CountMetric,
    DataPoint,
    ICombiner,
    IMetric,
    IMetricsConsumer,
    LoggingMetricsConsumer,
    MeanReducer,
    MultiCountMetric,
    MultiReducedMetric,
    ReducedMetric,
    TaskInfo,
)
from squall.model.metrics import format_data_points
from squall.testing import FixedTupleSpout
from squall.testing.shared import SharedRecord
from squall.trident.state import MemoryMapState
from tests.conftest import Engine, on_engines

WORDS = ["storm", "spark", "flink", "storm", "beam", "storm", "spark", "kafka", "redis", "sql"]


class RecordingConsumer(IMetricsConsumer):
    """Records ``(task_info, data_points)`` of each call in the record given as the
    registration argument, and ``cleanup``."""

    def prepare(self, conf, registration_argument, context, error_reporter) -> None:
        self.record: SharedRecord = registration_argument
        self.record.append("prepared", context.component_id)

    def handle_data_points(self, task_info, data_points) -> None:
        self.record.append("points", (task_info, list(data_points)))

    def cleanup(self) -> None:
        self.record.append("cleanup", True)


class FlakyConsumer(RecordingConsumer):
    """Raises on its first call; records the calls after it."""

    def prepare(self, conf, registration_argument, context, error_reporter) -> None:
        super().prepare(conf, registration_argument, context, error_reporter)
        self.calls = 0

    def handle_data_points(self, task_info, data_points) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("consumer broke on its first bucket")
        super().handle_data_points(task_info, data_points)


class CountingBolt(BasicBolt):
    """Counts its tuples in a ``CountMetric`` ``tuples`` (bucket ``bucket_secs``)."""

    outputs = ["word"]

    def __init__(self, bucket_secs: float = 10) -> None:
        self.bucket_secs = bucket_secs

    def prepare(self, conf, context) -> None:
        self.tuples = context.register_metric("tuples", CountMetric(), self.bucket_secs)

    def execute(self, tup, collector) -> None:
        self.tuples.incr()
        collector.emit([tup["word"]])


def counting_topology(bolt_tasks: int = 2, bucket_secs: float = 10) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("words", FixedTupleSpout([[w] for w in WORDS], fields=["word"]))
    builder.set_bolt("count", CountingBolt(bucket_secs), bolt_tasks).shuffle_grouping("words")
    return builder.create_topology()


def consumer_conf(record: SharedRecord, consumer: type = RecordingConsumer, **conf: Any) -> Config:
    config = Config(conf)
    config.register_metrics_consumer(consumer, record)
    return config


def points_of(record: SharedRecord, name: str) -> list[tuple[TaskInfo, DataPoint]]:
    """Every data point named ``name`` the consumer received, with its task info."""
    return [
        (info, point)
        for info, points in record.get("points")
        for point in points
        if point.name == name
    ]


def wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.005)


def test_custom_count_metric_reaches_the_consumer_each_bucket(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    record = SharedRecord()
    submitted_at = int(time.time())
    manual_cluster.submit_topology("counts", consumer_conf(record), counting_topology())
    assert manual_cluster.wait_idle("counts")
    assert record.get("points") == []  # no bucket has ended yet
    clock.advance_secs(10)
    wait_for(lambda: len(record.get("points")) == 2)
    info = manual_cluster.get_topology_info("counts")
    tasks = info.components["count"].tasks
    points = points_of(record, "tuples")
    # Only the bolt registered a metric of this bucket; one data point per task.
    assert sorted(i.src_task_id for i, _ in points) == tasks
    assert {i.src_task_id: p.value for i, p in points} == {
        task: info.components["count"].task_stats[task]["executed"] for task in tasks
    }
    assert sum(p.value for _, p in points) == 10
    for task_info, _ in points:
        assert task_info.src_component_id == "count"
        assert task_info.src_worker_host == socket.gethostname()
        assert task_info.src_worker_port == 0
        assert task_info.update_interval_secs == 10
        assert submitted_at <= task_info.timestamp <= int(time.time())
    # The next bucket: the counts were reset.
    clock.advance_secs(10)
    wait_for(lambda: len(record.get("points")) == 4)
    assert sorted(p.value for _, p in points_of(record, "tuples")[2:]) == [0, 0]
    consumer = manual_cluster.get_topology_info("counts").components["__metrics_RecordingConsumer"]
    assert consumer.kind == "bolt" and len(consumer.tasks) == 1
    assert consumer.executed == 4 and consumer.errors_total == 0
    manual_cluster.kill_topology("counts")
    assert record.get("prepared") == ["__metrics_RecordingConsumer"]
    assert record.get("cleanup") == [True]


def test_builtin_metrics_equal_the_reported_figures(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    record = SharedRecord()
    conf = consumer_conf(record, **{Config.TOPOLOGY_BUILTIN_METRICS_BUCKET_SIZE_SECS: 5})
    # The bolt's own metric (60 s) ends no bucket here: only the built-ins (5 s) are sent.
    topology = counting_topology(bolt_tasks=1, bucket_secs=60)
    manual_cluster.submit_topology("builtins", conf, topology)
    assert manual_cluster.wait_idle("builtins")
    clock.advance_secs(5)
    wait_for(lambda: len(record.get("points")) == 2)  # the spout's and the bolt's
    info = manual_cluster.get_topology_info("builtins")
    by_component = {
        i.src_component_id: {p.name: p.value for p in ps} for i, ps in record.get("points")
    }
    spout, bolt = by_component["words"], by_component["count"]
    assert set(spout) == {
        "__emit-count",
        "__transfer-count",
        "__ack-count",
        "__fail-count",
        "__complete-latency",
    }
    assert (spout["__emit-count"], spout["__transfer-count"]) == ({"default": 10}, {"default": 10})
    assert (spout["__ack-count"], spout["__fail-count"]) == (10, 0)
    assert spout["__complete-latency"] == info.components["words"].complete_latency_ms == 0.0
    assert set(bolt) == {
        "__emit-count", "__transfer-count", "__ack-count", "__fail-count",
        "__execute-count", "__execute-latency", "__process-latency",
    }  # fmt: skip
    count = info.components["count"]
    assert (
        (bolt["__execute-count"], bolt["__ack-count"], bolt["__fail-count"])
        == (
            count.executed,
            count.acked,
            count.failed,
        )
        == (10, 10, 0)
    )
    assert bolt["__emit-count"] == {"default": 10} and bolt["__transfer-count"] == {"default": 0}
    assert bolt["__execute-latency"] == pytest.approx(count.execute_latency_ms)
    assert bolt["__process-latency"] == pytest.approx(count.process_latency_ms)
    # The next bucket: nothing happened; counts are 0, latencies (no tuples) are left out.
    clock.advance_secs(5)
    wait_for(lambda: len(record.get("points")) == 4)
    later = {
        i.src_component_id: {p.name: p.value for p in ps} for i, ps in record.get("points")[2:]
    }
    assert later["count"] == {
        "__emit-count": {"default": 0}, "__transfer-count": {"default": 0},
        "__ack-count": 0, "__fail-count": 0, "__execute-count": 0,
    }  # fmt: skip
    assert later["words"] == {
        "__emit-count": {"default": 0}, "__transfer-count": {"default": 0},
        "__ack-count": 0, "__fail-count": 0,
    }  # fmt: skip
    manual_cluster.kill_topology("builtins")


class EveryMetricBolt(BasicBolt):
    """Registers one metric of each kind (bucket 1 s) and updates them per tuple."""

    outputs = ["word"]

    def prepare(self, conf, context) -> None:
        self.by_word = context.register_metric("by_word", MultiCountMetric(), 1)
        self.mean_length = context.register_metric("mean_length", ReducedMetric(MeanReducer()), 1)
        self.longest = context.register_metric("longest", CombinedMetric(Longest()), 1)
        self.last = context.register_metric("last", AssignableMetric(), 1)
        assert context.get_registered_metric_by_name("last") is self.last
        self.executed = 0
        context.register_metric("executed", lambda: self.executed, 1)  # Storm's lambda form

    def execute(self, tup, collector) -> None:
        word = tup["word"]
        self.by_word.scope(word).incr()
        self.mean_length.update(len(word))
        self.longest.update(word)
        self.last.set_value(word)
        self.executed += 1


class Longest(ICombiner):
    def identity(self) -> str:
        return ""

    def combine(self, a: str, b: str) -> str:
        return b if len(b) > len(a) else a


def test_every_metric_kind_reports_its_value(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    record = SharedRecord()
    builder = TopologyBuilder()
    builder.set_spout("words", FixedTupleSpout([[w] for w in WORDS], fields=["word"]))
    builder.set_bolt("every", EveryMetricBolt()).shuffle_grouping("words")
    manual_cluster.submit_topology("every", consumer_conf(record), builder.create_topology())
    assert manual_cluster.wait_idle("every")
    clock.advance_secs(1)
    wait_for(lambda: len(record.get("points")) == 1)
    ((_, points),) = record.get("points")
    assert points == [
        DataPoint("by_word", {"storm": 3, "spark": 2, "flink": 1, "beam": 1, "kafka": 1,
                              "redis": 1, "sql": 1}),
        DataPoint("mean_length", sum(len(w) for w in WORDS) / len(WORDS)),
        DataPoint("longest", "storm"),
        DataPoint("last", "sql"),
        DataPoint("executed", 10),
    ]  # fmt: skip
    clock.advance_secs(1)
    wait_for(lambda: len(record.get("points")) == 2)
    # A new bucket: counts 0 per key; no mean without values (left out); the combiner's
    # identity; the assigned value stays.
    assert record.get("points")[1][1] == [
        DataPoint("by_word", dict.fromkeys(["storm", "spark", "flink", "beam", "kafka",
                                            "redis", "sql"], 0)),
        DataPoint("longest", ""),
        DataPoint("last", "sql"),
        DataPoint("executed", 10),
    ]  # fmt: skip
    manual_cluster.kill_topology("every")


def test_metric_types() -> None:
    count = CountMetric()
    count.incr()
    count.incr_by(4)
    assert (count.get_value_and_reset(), count.get_value_and_reset()) == (5, 0)
    multi = MultiCountMetric()
    multi.scope("a").incr()
    multi.scope("b").incr_by(2)
    multi.scope("a").incr()
    assert multi.get_value_and_reset() == {"a": 2, "b": 2}
    assert multi.get_value_and_reset() == {"a": 0, "b": 0}
    mean = ReducedMetric(MeanReducer())
    assert mean.get_value_and_reset() is None
    for value in (1, 2.5, 4):
        mean.update(value)
    assert mean.get_value_and_reset() == 2.5
    with pytest.raises(TypeError, match=r"MeanReducer.reduce was given '3' of type str"):
        mean.update("3")
    means = MultiReducedMetric(MeanReducer())
    means.scope("x").update(2)
    means.scope("y")
    assert means.get_value_and_reset() == {"x": 2.0}
    assigned = AssignableMetric(7)
    assert (assigned.get_value_and_reset(), assigned.get_value_and_reset()) == (7, 7)
    assert isinstance(CombinedMetric(Longest()), IMetric)


def test_logging_metrics_consumer_uses_storms_format(
    manual_cluster: LocalCluster, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    info = TaskInfo("host-1", 0, "count", 3, 1_700_000_000, 10)
    points = [DataPoint("tuples", 10), DataPoint("a-very-long-metric-name-cut-here", {"x": 1})]
    assert list(format_data_points(info, points)) == [
        "1700000000\t         host-1:0   \t  3:count      \ttuples                 \t10",
        "1700000000\t         host-1:0   \t  3:count      \ta-very-long-metric-name\t{'x': 1}",
    ]
    caplog.set_level(logging.INFO, logger="squall.metrics")
    conf = Config()
    conf.register_metrics_consumer(LoggingMetricsConsumer)
    manual_cluster.submit_topology("logged", conf, counting_topology(bolt_tasks=1))
    assert manual_cluster.wait_idle("logged")
    clock.advance_secs(10)
    task = manual_cluster.get_topology_info("logged").components["count"].tasks[0]
    host = socket.gethostname()

    def logged() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "squall.metrics"]

    wait_for(lambda: len(logged()) == 1)
    (line,) = logged()
    stamp, *rest = line.split("\t")
    assert rest == [f"{host:>15}:0   ", f"{task:>3}:count      ", f"{'tuples':<23}", "10"]
    assert abs(int(stamp) - time.time()) < 60
    manual_cluster.kill_topology("logged")


class LateRegistration(BasicBolt):
    outputs = ["word"]

    def prepare(self, conf, context) -> None:
        self.context = context

    def execute(self, tup, collector) -> None:
        self.context.register_metric("late", CountMetric(), 10)


class Registers(BasicBolt):
    """Registers ``metrics`` (name, metric, bucket) in prepare."""

    outputs = ["word"]

    def __init__(self, *metrics: tuple[str, Any, Any]) -> None:
        self.metrics = metrics

    def prepare(self, conf, context) -> None:
        for name, metric, bucket in self.metrics:
            context.register_metric(name, metric, bucket)

    def execute(self, tup, collector) -> None:
        pass


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        (
            [("n", CountMetric(), 10), ("n", CountMetric(), 5)],
            "component 'bolt' task 3: the same metric name 'n' was registered twice",
        ),
        (
            [("__ack-count", CountMetric(), 10)],
            "the same metric name '__ack-count' was registered twice",
        ),
        ([("n", CountMetric(), 0)], "metric 'n' has time bucket 0: it must be a number of"),
        (
            [("n", 5, 10)],
            "metric 'n' must be an IMetric (with get_value_and_reset) or a function of no "
            "arguments, not int",
        ),
    ],
)
def test_bad_registrations_fail_the_submission(
    cluster: LocalCluster, metrics: list[tuple[str, Any, Any]], message: str
) -> None:
    builder = TopologyBuilder()
    builder.set_spout("words", FixedTupleSpout([[w] for w in WORDS], fields=["word"]))
    builder.set_bolt("bolt", Registers(*metrics)).shuffle_grouping("words")
    with pytest.raises(ComponentError, match="prepare raised") as raised:
        cluster.submit_topology("bad", consumer_conf(SharedRecord()), builder.create_topology())
    assert message in str(raised.value)


def test_registering_after_prepare_is_an_error(cluster: LocalCluster) -> None:
    builder = TopologyBuilder()
    builder.set_spout("words", FixedTupleSpout([["storm"]], fields=["word"]))
    builder.set_bolt("late", LateRegistration()).shuffle_grouping("words")
    cluster.submit_topology("late", {}, builder.create_topology())
    assert cluster.wait_idle("late")
    (error,) = cluster.get_topology_info("late").components["late"].errors
    assert error.error == (
        "SquallError: component 'late' task 2: register_metric('late') can only be called "
        "from within open() or prepare()"
    )
    cluster.kill_topology("late")


def test_a_failing_consumer_is_reported_and_keeps_receiving(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    record = SharedRecord()
    conf = consumer_conf(record, FlakyConsumer)
    manual_cluster.submit_topology("flaky", conf, counting_topology(bolt_tasks=1))
    assert manual_cluster.wait_idle("flaky")
    clock.advance_secs(10)

    def errors() -> list[Any]:
        return (
            manual_cluster.get_topology_info("flaky").components["__metrics_FlakyConsumer"].errors
        )

    wait_for(lambda: len(errors()) == 1)
    assert errors()[0].error == "RuntimeError: consumer broke on its first bucket"
    clock.advance_secs(10)
    wait_for(lambda: len(record.get("points")) == 1)
    assert [p for _, p in points_of(record, "tuples")] == [DataPoint("tuples", 0)]
    info = manual_cluster.get_topology_info("flaky")
    assert info.status == "ACTIVE" and info.components["count"].errors_total == 0
    manual_cluster.kill_topology("flaky")


def test_register_metrics_consumer_spellings_and_consumer_components(
    cluster: LocalCluster,
) -> None:
    conf: dict[str, Any] = {}
    Config.register_metrics_consumer(conf, RecordingConsumer, "arg", 2)  # Storm's static form
    config = Config(conf)
    config.register_metrics_consumer(RecordingConsumer(), parallelism_hint=1)
    config.register_metrics_consumer("squall.metric.LoggingMetricsConsumer")
    assert config[Config.TOPOLOGY_METRICS_CONSUMER_REGISTER][0] == {
        "class": RecordingConsumer,
        "argument": "arg",
        "parallelism.hint": 2,
    }
    conf = config
    conf[Config.TOPOLOGY_METRICS_CONSUMER_REGISTER][0]["argument"] = SharedRecord()
    conf[Config.TOPOLOGY_METRICS_CONSUMER_REGISTER][1]["argument"] = SharedRecord()
    cluster.submit_topology("spellings", conf, counting_topology())
    components = cluster.get_topology_info("spellings").components
    consumers = {cid: len(c.tasks) for cid, c in components.items() if cid.startswith("__metrics")}
    assert consumers == {
        "__metrics_RecordingConsumer": 2,
        "__metrics_RecordingConsumer#2": 1,
        "__metrics_LoggingMetricsConsumer": 1,
    }
    cluster.kill_topology("spellings")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"class": "squall.metric.Nothing"}, "cannot import class 'squall.metric.Nothing'"),
        ({"class": CountMetric}, "is not an IMetricsConsumer class or instance"),
        ({"class": RecordingConsumer, "parallelism.hint": 0}, "parallelism.hint 0 is not a whole"),
        ("LoggingMetricsConsumer", "is not a dict with a 'class'"),
    ],
)
def test_bad_consumer_registrations_fail_the_submission(
    cluster: LocalCluster, entry: Any, message: str
) -> None:
    conf = {Config.TOPOLOGY_METRICS_CONSUMER_REGISTER: [entry]}
    with pytest.raises(InvalidTopologyError, match="metrics consumer 1 of") as raised:
        cluster.submit_topology("bad", conf, counting_topology())
    assert message in str(raised.value)


def test_without_consumers_no_metrics_stream(cluster: LocalCluster) -> None:
    cluster.submit_topology("plain", {}, counting_topology())
    assert cluster.wait_idle("plain")
    components = cluster.get_topology_info("plain").components
    assert sorted(components) == ["__acker", "count", "words"]
    assert "__metrics" not in components["count"].streams
    cluster.kill_topology("plain")


@pytest.mark.parametrize("engine", on_engines(), indirect=True)
def test_custom_metric_on_every_engine(engine: Engine) -> None:
    """On the real clock (worker processes and Spark cannot follow a manual one): a
    1-second bucket; the counts of every bucket add up to the tuples."""
    record = SharedRecord()
    # On Spark, a task sends its buckets when a micro-batch wakes it: an idle topology
    # runs one every built-in bucket.
    conf = consumer_conf(record, **{Config.TOPOLOGY_BUILTIN_METRICS_BUCKET_SIZE_SECS: 1})
    with engine.running(counting_topology(bucket_secs=1), conf) as run:
        run.wait_idle()
        run.wait_until(lambda: sum(p.value for _, p in points_of(record, "tuples")) == 10, 30)

        def total(name: str, component: str) -> int:
            return sum(
                p.value for i, p in points_of(record, name) if i.src_component_id == component
            )

        # The built-ins of all buckets add up to the figures (the spout's acks follow
        # its trees' completion).
        run.wait_until(lambda: total("__ack-count", "words") == 10, 30)
        run.wait_until(lambda: total("__execute-count", "count") == 10, 30)
        info = run.info()
    assert info.components["words"].acked == 10 and info.components["count"].executed == 10
    assert total("__ack-count", "count") == 10 and total("__fail-count", "words") == 0
    assert info.components["__metrics_RecordingConsumer"].errors_total == 0
    tasks = info.components["count"].tasks
    points = points_of(record, "tuples")
    assert {i.src_task_id for i, _ in points} == set(tasks)
    assert {i.src_component_id for i, _ in points} == {"count"}
    for task in tasks:
        assert (
            sum(p.value for i, p in points if i.src_task_id == task)
            == (info.components["count"].task_stats[task]["executed"])
        )


def test_spark_refuses_consumers_in_batch_topologies() -> None:
    """Trident and transactional topologies on Spark run no metrics consumer: said at
    submission (LocalCluster runs them)."""
    from squall.spark.plan.batch import query_plans
    from squall.trident import Count, FixedBatchSpout, TridentTopology

    topology = TridentTopology()
    spout = FixedBatchSpout(Fields("word"), 2, ["a"], ["b"])
    topology.new_stream("words", spout).group_by(Fields("word")).persistent_aggregate(
        MemoryMapState.factory(), Count(), Fields("count")
    )
    conf = consumer_conf(SharedRecord())
    with pytest.raises(InvalidTopologyError, match="the Spark engine does not run metrics"):
        query_plans(topology.build(), conf)
