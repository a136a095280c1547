"""KafkaSpout against a real broker: each processing guarantee with exact counts,
failed records replayed (and their retries exhausted), a restart resuming after the
committed offsets, partitions split over tasks, topics created while running, each
first-poll strategy, the bound on uncommitted records, malformed records, the metrics,
and wrong options refused at submit.

The first test runs on every engine (LocalCluster with threads or worker processes,
SparkCluster) with the same assertions."""

from __future__ import annotations

import pickle
import re
from typing import Any

import pytest

from squall import InvalidTopologyError, LocalCluster
from squall.connectors.kafka import KafkaSpout, RetryBackoff
from tests.conftest import Engine, unique_name
from tests.connectors_kafka_spout_topologies import Recorder, records, topology
from tests.helpers import wait_until
from tests.kafka_broker import KafkaBroker

FAST = {"commit_period_ms": 50, "partition_refresh_ms": 100, "poll_timeout_ms": 50}


def values(count: int, prefix: str = "v") -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


def test_at_least_once_replays_each_failed_record_and_nothing_else(
    engine: Engine, kafka_broker: KafkaBroker
) -> None:
    topic, group = kafka_broker.create_topic(unique_name("events"), 2), unique_name("group")
    written = values(30)
    kafka_broker.produce(topic, written, partition=[i % 2 for i in range(30)])
    failing = frozenset(written[0:30:4])
    recorder = Recorder(fail_once=failing)
    spout = KafkaSpout(kafka_broker.bootstrap, topic, group, **FAST)  # type: ignore[arg-type]
    with engine.running(topology(spout, recorder), name="alo") as run:
        run.wait_until(lambda: len(recorder.seen()) >= 30 + len(failing), engine.timeout)
        run.wait_idle()
        wait_until(lambda: kafka_broker.committed(group, topic, 2) == [15, 15], timeout=20.0)
        stats = run.info().components["events"]
        assert (stats.acked, stats.failed) == (30, len(failing))
        completed = [f"{topic}/partition_{p}/latestCompletedOffset" for p in (0, 1)]
        run.wait_until(
            lambda: [run.info().components["events"].custom.get(n) for n in completed] == [15, 15],
            engine.timeout,
        )
        custom = run.info().components["events"].custom
    expected = [[topic, i % 2, i // 2, None, value] for i, value in enumerate(written)]
    again = [row for row in expected if row[4] in failing]
    assert sorted(recorder.seen()) == sorted(expected + again)
    assert sorted(recorder.record.get("failed")) == sorted(failing)
    assert recorder.seen("errors") == []
    for partition in (0, 1):
        prefix = f"{topic}/partition_{partition}"
        assert custom[f"{prefix}/latestTimeOffset"] == 15
        assert custom[f"{prefix}/latestCompletedOffset"] == 15
        assert custom[f"{prefix}/latestEmittedOffset"] == 14
        assert custom[f"{prefix}/spoutLag"] == 0
    assert custom[f"{topic}/totalSpoutLag"] == 0
    assert (custom["replayed"], custom["in_flight"], custom["malformed"]) == (
        len(failing),
        0,
        0,
    )
    assert custom["retries_exhausted"] == 0


def test_a_record_whose_retries_are_exhausted_counts_as_done(kafka_broker: KafkaBroker) -> None:
    topic, group = kafka_broker.create_topic(unique_name("events")), unique_name("group")
    kafka_broker.produce(topic, values(6))
    recorder = Recorder(fail_always=frozenset({"v2"}))
    retry = RetryBackoff(initial_ms=0, period_ms=1, max_retries=2)
    spout = KafkaSpout(kafka_broker.bootstrap, topic, group, retry=retry, **FAST)  # type: ignore[arg-type]
    with LocalCluster() as cluster:
        cluster.submit_topology("exhausted", {}, topology(spout, recorder))
        wait_until(lambda: len(recorder.seen()) >= 8, timeout=10.0)
        assert cluster.wait_idle("exhausted")
        wait_until(lambda: kafka_broker.committed(group, topic, 1) == [6], timeout=10.0)
        wait_until(
            lambda: (
                cluster.get_topology_info("exhausted")
                .components["events"]
                .custom.get("retries_exhausted")
                == 1
            ),
            timeout=10.0,
        )
        stats = cluster.get_topology_info("exhausted").components["events"]
        cluster.kill_topology("exhausted")
    assert (stats.acked, stats.failed) == (5, 3)
    assert sorted(row[4] for row in recorder.seen()) == sorted([*values(6), "v2", "v2"])
    assert stats.custom["replayed"] == 2
    assert any(
        f"KafkaSpout 'events': record {topic}/0@2 failed 2 retries; counted as done" in e.error
        for e in stats.errors
    )


def test_at_most_once_commits_before_emitting_and_never_replays(
    kafka_broker: KafkaBroker,
) -> None:
    topic, group = kafka_broker.create_topic(unique_name("events")), unique_name("group")
    written = values(10)
    kafka_broker.produce(topic, written)
    recorder = Recorder(
        fail_once=frozenset({"v3"}), check=(kafka_broker.bootstrap, group, topic, 1)
    )
    spout = KafkaSpout(
        kafka_broker.bootstrap,
        topic,
        group,
        processing_guarantee="at_most_once",
        **FAST,  # type: ignore[arg-type]
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("amo", {}, topology(spout, recorder))
        wait_until(lambda: len(recorder.seen()) >= 10, timeout=10.0)
        assert cluster.wait_idle("amo")
        stats = cluster.get_topology_info("amo").components["events"]
        cluster.kill_topology("amo")
    assert recorder.seen() == records(topic, written)
    assert recorder.record.get("failed") == ["v3"]
    assert (stats.acked, stats.failed) == (0, 0)  # emitted without message ids
    # Each record's offset was committed (the offset after it, or later) before it came.
    assert all(committed > offset for offset, committed in recorder.record.get("committed"))
    assert kafka_broker.committed(group, topic, 1) == [10]


def test_no_guarantee_emits_once_and_commits_the_position(kafka_broker: KafkaBroker) -> None:
    topic, group = kafka_broker.create_topic(unique_name("events"), 2), unique_name("group")
    written = values(12)
    kafka_broker.produce(topic, written, partition=[0] * 5 + [1] * 7)
    recorder = Recorder(fail_once=frozenset({"v1"}))
    spout = KafkaSpout(
        kafka_broker.bootstrap,
        topic,
        group,
        processing_guarantee="no_guarantee",
        **FAST,  # type: ignore[arg-type]
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("ng", {}, topology(spout, recorder))
        wait_until(lambda: len(recorder.seen()) >= 12, timeout=10.0)
        wait_until(lambda: kafka_broker.committed(group, topic, 2) == [5, 7], timeout=10.0)
        assert cluster.wait_idle("ng")
        cluster.kill_topology("ng")
    expected = records(topic, written[:5]) + records(topic, written[5:], partition=1)
    assert sorted(recorder.seen()) == sorted(expected)


def test_a_restarted_topology_resumes_after_the_committed_offsets(
    kafka_broker: KafkaBroker,
) -> None:
    topic, group = kafka_broker.create_topic(unique_name("events")), unique_name("group")
    kafka_broker.produce(topic, values(10))
    first = Recorder()
    with LocalCluster() as cluster:
        spout = KafkaSpout(kafka_broker.bootstrap, topic, group, **FAST)  # type: ignore[arg-type]
        cluster.submit_topology("resume", {}, topology(spout, first))
        wait_until(lambda: kafka_broker.committed(group, topic, 1) == [10], timeout=10.0)
        cluster.kill_topology("resume")
    kafka_broker.produce(topic, values(5, prefix="w"))
    second = Recorder()
    with LocalCluster() as cluster:
        spout = KafkaSpout(kafka_broker.bootstrap, topic, group, **FAST)  # type: ignore[arg-type]
        cluster.submit_topology("resume", {}, topology(spout, second))
        wait_until(lambda: kafka_broker.committed(group, topic, 1) == [15], timeout=10.0)
        assert cluster.wait_idle("resume")
        cluster.kill_topology("resume")
    assert first.seen() == records(topic, values(10))
    assert second.seen() == records(topic, values(5, prefix="w"), start=10)


class TaskRecorder(Recorder):
    def execute(self, tup: Any) -> None:
        self.record.append("task", [tup.values[1], tup.source_task])
        super().execute(tup)


def test_two_tasks_over_three_partitions_read_each_partition_once(
    kafka_broker: KafkaBroker,
) -> None:
    topic, group = kafka_broker.create_topic(unique_name("events"), 3), unique_name("group")
    written = values(30)
    kafka_broker.produce(topic, written, partition=[i % 3 for i in range(30)])
    recorder = TaskRecorder()
    spout = KafkaSpout(kafka_broker.bootstrap, topic, group, **FAST)  # type: ignore[arg-type]
    with LocalCluster() as cluster:
        cluster.submit_topology("tasks", {}, topology(spout, recorder, parallelism=2))
        wait_until(lambda: kafka_broker.committed(group, topic, 3) == [10, 10, 10], timeout=10.0)
        assert cluster.wait_idle("tasks")
        tasks = cluster.get_topology_info("tasks").components["events"].tasks
        cluster.kill_topology("tasks")
    expected = [[topic, i % 3, i // 3, None, value] for i, value in enumerate(written)]
    assert sorted(recorder.seen()) == sorted(expected)
    readers: dict[int, set[int]] = {}
    for partition, task in recorder.record.get("task"):
        readers.setdefault(partition, set()).add(task)
    first, second = sorted(tasks)
    assert readers == {0: {first}, 1: {second}, 2: {first}}


@pytest.mark.parametrize("kind", ["list", "pattern"])
def test_a_topic_created_while_running_is_read(kafka_broker: KafkaBroker, kind: str) -> None:
    base, group = unique_name("created"), unique_name("group")
    early, late = kafka_broker.create_topic(f"{base}-a"), f"{base}-b"
    kafka_broker.produce(early, values(3))
    topics: Any = [early, late] if kind == "list" else re.compile(re.escape(base) + "-.*")
    recorder = Recorder()
    spout = KafkaSpout(kafka_broker.bootstrap, topics, group, **FAST)  # type: ignore[arg-type]
    with LocalCluster() as cluster:
        cluster.submit_topology("created", {}, topology(spout, recorder))
        wait_until(lambda: len(recorder.seen()) >= 3, timeout=10.0)
        kafka_broker.create_topic(late)
        kafka_broker.produce(late, values(4, prefix="late"))
        wait_until(lambda: len(recorder.seen()) >= 7, timeout=10.0)
        wait_until(lambda: kafka_broker.committed(group, late, 1) == [4], timeout=10.0)
        assert cluster.wait_idle("created")
        cluster.kill_topology("created")
    expected = records(early, values(3)) + records(late, values(4, prefix="late"))
    assert sorted(recorder.seen()) == sorted(expected)


def test_a_partition_added_while_running_is_read(kafka_broker: KafkaBroker) -> None:
    """Apache Kafka adds partitions to a topic (CreatePartitions); a broker without it
    (Tansu 0.6) skips the test: a topic created while running covers the same refresh."""
    import confluent_kafka.admin

    topic, group = kafka_broker.create_topic(unique_name("grown"), 1), unique_name("group")
    kafka_broker.produce(topic, values(3), partition=0)
    recorder = Recorder()
    spout = KafkaSpout(kafka_broker.bootstrap, topic, group, **FAST)  # type: ignore[arg-type]
    with LocalCluster() as cluster:
        cluster.submit_topology("grown", {}, topology(spout, recorder))
        wait_until(lambda: len(recorder.seen()) >= 3, timeout=10.0)
        admin = kafka_broker.admin()
        grown = admin.create_partitions([confluent_kafka.admin.NewPartitions(topic, 2)])
        try:
            grown[topic].result(timeout=30)
        except confluent_kafka.KafkaException as error:
            cluster.kill_topology("grown")
            if error.args[0].code() == confluent_kafka.KafkaError._UNSUPPORTED_FEATURE:
                pytest.skip(f"the broker cannot add partitions: {error}")
            raise
        kafka_broker.produce(topic, values(4, prefix="new"), partition=1)
        wait_until(lambda: len(recorder.seen()) >= 7, timeout=20.0)
        wait_until(lambda: kafka_broker.committed(group, topic, 2) == [3, 4], timeout=10.0)
        cluster.kill_topology("grown")
    expected = records(topic, values(3)) + records(topic, values(4, prefix="new"), partition=1)
    assert sorted(recorder.seen()) == sorted(expected)


def commit_offset(broker: KafkaBroker, group: str, topic: str, offset: int) -> None:
    """Commit ``offset`` for ``group`` on partition 0, as another program would."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[confluent_kafka.TopicPartition(topic, 0, offset)], asynchronous=False
        )
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("strategy", "commit", "first"),
    [
        ("earliest", 3, 0),
        ("uncommitted_earliest", 3, 3),
        ("uncommitted_earliest", None, 0),
        ("uncommitted_latest", 3, 3),
        ("uncommitted_latest", None, None),
        ("latest", 3, None),
    ],
)
def test_first_poll_offset_strategies(
    kafka_broker: KafkaBroker, strategy: str, commit: int | None, first: int | None
) -> None:
    """Five records, maybe a commit at 3 by another program; ``first`` is the first
    record read (None: only records written after the spout is positioned)."""
    topic, group = kafka_broker.create_topic(unique_name("events")), unique_name("group")
    kafka_broker.produce(topic, values(5))
    if commit is not None:
        commit_offset(kafka_broker, group, topic, commit)
    recorder = Recorder()
    spout = KafkaSpout(
        kafka_broker.bootstrap,
        topic,
        group,
        first_poll_offset=strategy,
        **FAST,  # type: ignore[arg-type]
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("strategy", {}, topology(spout, recorder))
        # Positioned at the end, the spout commits it; else it reads to the end.
        wait_until(lambda: kafka_broker.committed(group, topic, 1) == [5], timeout=10.0)
        kafka_broker.produce(topic, values(2, prefix="after"))
        wait_until(lambda: kafka_broker.committed(group, topic, 1) == [7], timeout=10.0)
        assert cluster.wait_idle("strategy")
        cluster.kill_topology("strategy")
    before = [] if first is None else records(topic, values(5)[first:], start=first)
    assert recorder.seen() == before + records(topic, values(2, prefix="after"), start=5)


def test_at_most_max_uncommitted_offsets_records_past_the_commit_are_emitted(
    kafka_broker: KafkaBroker,
) -> None:
    topic, group = kafka_broker.create_topic(unique_name("events")), unique_name("group")
    kafka_broker.produce(topic, values(20))
    recorder = Recorder(check=(kafka_broker.bootstrap, group, topic, 1))
    spout = KafkaSpout(
        kafka_broker.bootstrap,
        topic,
        group,
        max_uncommitted_offsets=5,
        **FAST,  # type: ignore[arg-type]
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("bound", {}, topology(spout, recorder))
        wait_until(lambda: kafka_broker.committed(group, topic, 1) == [20], timeout=20.0)
        assert cluster.wait_idle("bound")
        cluster.kill_topology("bound")
    assert recorder.seen() == records(topic, values(20))
    seen = recorder.record.get("committed")
    assert all(offset < max(committed, 0) + 5 for offset, committed in seen), seen
    assert any(offset == max(committed, 0) + 4 for offset, committed in seen), seen


def test_malformed_records_go_to_the_errors_stream_and_skipped_ones_are_done(
    kafka_broker: KafkaBroker,
) -> None:
    topic, group = kafka_broker.create_topic(unique_name("events")), unique_name("group")
    kafka_broker.produce(topic, ['{"n": 1}', "not json", '{"skip": true}', '{"n": 4}'])

    def translate(record: Any) -> Any:
        return None if record.value.get("skip") else [record.offset, record.value["n"]]

    recorder = Recorder()
    spout = KafkaSpout(
        kafka_broker.bootstrap,
        topic,
        group,
        fields=("offset", "n"),
        value_format="json",
        translator=translate,
        **FAST,  # type: ignore[arg-type]
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("malformed", {}, topology(spout, recorder))
        wait_until(lambda: kafka_broker.committed(group, topic, 1) == [4], timeout=10.0)
        assert cluster.wait_idle("malformed")
        wait_until(
            lambda: (
                cluster.get_topology_info("malformed").components["events"].custom.get("malformed")
                == 1
            ),
            timeout=10.0,
        )
        stats = cluster.get_topology_info("malformed").components["events"]
        cluster.kill_topology("malformed")
    assert recorder.seen() == [[0, 1], [3, 4]]
    assert recorder.seen("errors") == [
        [
            topic,
            0,
            1,
            None,
            "not json",
            "the value is not JSON: Expecting value: line 1 column 1 (char 0)",
        ]
    ]
    assert stats.acked == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bootstrap_servers": "nohost"}, "bootstrap_servers must be 'host:port[,host:port]'"),
        ({"topics": []}, "topics must be a topic name, a non-empty list of names or a re.Pattern"),
        ({"group_id": ""}, "group_id must be a non-empty string"),
        ({"processing_guarantee": "exactly_once"}, "processing_guarantee must be one of"),
        ({"first_poll_offset": "newest"}, "first_poll_offset must be one of"),
        ({"fields": ("value", "n")}, "fields ['n'] are read from the value, which needs"),
        ({"value_format": "xml"}, "value_format must be one of 'str', 'bytes', 'json'"),
        ({"key_format": None}, "key_format must be one of"),
        ({"translator": 5}, "translator must be callable, got 5"),
        ({"commit_period_ms": 0}, "commit_period_ms must be an int > 0, got 0"),
        ({"max_uncommitted_offsets": -1}, "max_uncommitted_offsets must be an int > 0"),
        ({"poll_timeout_ms": 1.5}, "poll_timeout_ms must be an int > 0, got 1.5"),
        ({"partition_refresh_ms": 0}, "partition_refresh_ms must be an int > 0"),
        ({"retry": {"initial_ms": 1}}, "retry must be a RetryBackoff"),
        ({"retry": RetryBackoff(max_ms=-5)}, "retry.max_ms must be an int >= 0, got -5"),
        (
            {"consumer_conf": {"group.id": "x"}},
            "consumer_conf may not set 'group.id': use group_id instead",
        ),
        (
            {"consumer_conf": {"auto.offset.reset": "earliest"}},
            "consumer_conf may not set 'auto.offset.reset': use first_poll_offset instead",
        ),
        ({"consumer_conf": {"no.such.option": 1}}, "consumer_conf: No such configuration"),
        ({"consumer_conf": {"fetch.min.bytes": "lots"}}, "consumer_conf: Invalid value"),
    ],
)
def test_wrong_options_are_refused_at_submit(options: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {
        "bootstrap_servers": "127.0.0.1:9",
        "topics": "events",
        "group_id": "group",
    }
    positional = {key: options.pop(key) for key in list(options) if key in arguments}
    arguments.update(positional)
    spout = KafkaSpout(**arguments, **options)
    with LocalCluster() as cluster, pytest.raises(InvalidTopologyError) as raised:
        cluster.submit_topology("options", {}, topology(spout, Recorder()))
    assert str(raised.value).startswith("component 'events' (KafkaSpout): ")
    assert message in str(raised.value)


class ListCollector:
    """What a spout emits through: ``(stream, values, msg_id)`` of each emit."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, list[Any], Any]] = []
        self.errors: list[BaseException] = []

    def emit(self, values: list[Any], msg_id: Any = None, stream: str = "default") -> list[int]:
        self.emitted.append((stream, values, msg_id))
        return [1]

    def report_error(self, error: BaseException) -> None:
        self.errors.append(error)


class Context:
    component_id = "events"
    topology_name = "snapshots"
    task_id = 1
    task_index = 0

    def get_component_tasks(self, component_id: str) -> list[int]:
        return [1]


def emit_until(spout: KafkaSpout, collector: ListCollector, count: int) -> None:
    wait_until(lambda: spout.next_tuple() is None and len(collector.emitted) >= count, 10.0)


def test_a_task_restored_from_a_snapshot_goes_on_from_its_positions(
    kafka_broker: KafkaBroker,
) -> None:
    """Spark pickles a spout task after each batch and restores the newest snapshot
    after a failure: the restored task keeps its records in flight and its retries, and
    reads on from its position (no record emitted twice, none lost)."""
    topic, group = kafka_broker.create_topic(unique_name("events")), unique_name("group")
    written = values(10)
    kafka_broker.produce(topic, written)
    spout = KafkaSpout(kafka_broker.bootstrap, topic, group, **FAST)  # type: ignore[arg-type]
    collector = ListCollector()
    spout.open({}, Context(), collector)  # type: ignore[arg-type]
    emit_until(spout, collector, 6)
    assert [row[1] for row in collector.emitted[:6]] == records(topic, written[:6])
    for _, row, msg_id in collector.emitted[:6]:
        if row[2] < 3:
            spout.ack(msg_id)
        elif row[2] == 3:
            spout.fail(msg_id)  # replayed at once (initial_ms=0)
    snapshot = pickle.dumps(spout)
    spout._consumer.close()  # the process dies: no last commit
    spout._lister.close()
    restored = pickle.loads(snapshot)
    again = ListCollector()
    restored.collector = again
    emit_until(restored, again, 5)
    emitted = [row for _, row, _ in again.emitted]
    assert emitted[0] == records(topic, written)[3]  # the replay first
    assert emitted[1:] == records(topic, written[6:], start=6)
    wait_until(lambda: restored.next_tuple() is None and restored.metrics()["replayed"] == 1, 10.0)
    assert len(again.emitted) == 5
    for _, _, msg_id in collector.emitted[4:6] + again.emitted:
        restored.ack(msg_id)
    wait_until(
        lambda: restored.next_tuple() is None and kafka_broker.committed(group, topic, 1) == [10],
        10.0,
    )
    restored.close()
    assert again.errors == collector.errors == []


def test_killing_the_topology_commits_what_is_done(kafka_broker: KafkaBroker) -> None:
    """A commit period far longer than the test: only the last commit, at deactivate
    and close, can commit the records."""
    topic, group = kafka_broker.create_topic(unique_name("events")), unique_name("group")
    kafka_broker.produce(topic, values(5))
    recorder = Recorder()
    spout = KafkaSpout(
        kafka_broker.bootstrap, topic, group, commit_period_ms=600_000, poll_timeout_ms=50
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("last", {}, topology(spout, recorder))
        wait_until(lambda: len(recorder.seen()) >= 5, timeout=10.0)
        assert cluster.wait_idle("last")
        assert kafka_broker.committed(group, topic, 1) == [-1001]
        cluster.kill_topology("last")
    assert kafka_broker.committed(group, topic, 1) == [5]


def test_a_topology_is_not_idle_while_its_spout_has_records_to_read(
    kafka_broker: KafkaBroker,
) -> None:
    """Idle (what ``squall run --until-idle`` waits for) means every record was read
    and processed: a spout whose client has not fetched the records yet is not idle.
    The broker is asked to hold fetches for up to a second (its client's first fetch
    then comes late, as on a busy machine)."""
    topic, group = kafka_broker.create_topic(unique_name("idle"), 2), unique_name("group")
    kafka_broker.produce(topic, values(40), partition=[i % 2 for i in range(40)])
    recorder = Recorder()
    slow = {"fetch.min.bytes": 10_000_000, "fetch.wait.max.ms": 1000}
    spout = KafkaSpout(kafka_broker.bootstrap, topic, group, consumer_conf=slow)
    with LocalCluster() as cluster:
        cluster.submit_topology("idle", {}, topology(spout, recorder))
        assert cluster.wait_idle("idle", timeout_secs=30.0)
        seen = len(recorder.seen())
        cluster.kill_topology("idle")
    assert seen == 40
