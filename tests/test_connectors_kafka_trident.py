"""KafkaTridentSpout against a real broker: the emitters' offset ranges (a
transactional replay emits exactly the same records, an opaque batch continues after
the previous one, ``first_poll_offset="latest"``, batches of at most
``max_batch_records``), the partitions' numbering, malformed records left out, option
errors at submit, exact counts into transactional and opaque state on every engine, and
exact counts across a SIGKILL of the process in the middle of a transaction and a
restart."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from squall import Config, Fields, InvalidTopologyError, LocalCluster
from squall.connectors.errors import ConnectorError, ConnectorUnavailableError
from squall.connectors.kafka import (
    KafkaTridentSpout,
    OffsetRange,
    OpaqueKafkaTridentSpout,
    TransactionalKafkaTridentSpout,
)
from squall.connectors.kafka import trident as kafka_trident
from squall.connectors.kafka.trident import OpaqueOffsetEmitter, TransactionalOffsetEmitter
from squall.spark import SparkCluster
from squall.trident import (
    Count,
    OpaquePartitionedTridentSpout,
    PartitionedTridentSpout,
    TridentTopology,
)
from squall.trident.state import SqliteMapState, StateType
from tests.conftest import Engine, unique_name
from tests.connectors_kafka_topologies import (
    trident_counts,
    trident_crash_topology,
    true_counts,
    word_spout,
    word_values,
)
from tests.helpers import wait_until
from tests.kafka_broker import KafkaBroker, TansuBroker
from tests.servers import free_port

ROOT = Path(__file__).resolve().parent.parent


class Rows:
    """A Trident emitter's collector: the values emitted, the errors reported."""

    def __init__(self) -> None:
        self.rows: list[list[Any]] = []
        self.errors: list[BaseException] = []

    def emit(self, values: list[Any]) -> None:
        self.rows.append(list(values))

    def report_error(self, error: BaseException) -> None:
        self.errors.append(error)


class Context:
    component_id = "words"


def values(rows: Rows) -> list[Any]:
    """The ``value`` field of rows of the default fields."""
    return [row[4] for row in rows.rows]


def test_opaque_chooses_the_spout_kind_and_survives_copies() -> None:
    opaque = KafkaTridentSpout("h:9092", ["a", "b"])
    transactional = KafkaTridentSpout("h:9092", "a", False)
    assert isinstance(opaque, OpaqueKafkaTridentSpout)
    assert isinstance(opaque, OpaquePartitionedTridentSpout)
    assert isinstance(opaque, KafkaTridentSpout)
    assert isinstance(transactional, TransactionalKafkaTridentSpout)
    assert isinstance(transactional, PartitionedTridentSpout)
    assert transactional.topics == ["a"]
    for copied in (copy.deepcopy(opaque), pickle.loads(pickle.dumps(opaque))):
        assert type(copied) is OpaqueKafkaTridentSpout
        assert copied.topics == ["a", "b"]
    assert opaque.get_output_fields() == Fields("topic", "partition", "offset", "key", "value")


def test_a_transactional_replay_emits_exactly_the_recorded_range(
    kafka_broker: KafkaBroker,
) -> None:
    first = kafka_broker.create_topic(unique_name("words"), 2)
    second = kafka_broker.create_topic(unique_name("words"))
    kafka_broker.produce(first, [f"w{i}" for i in range(5)], partition=0)
    kafka_broker.produce(second, ["x"], keys=["k"], partition=0)
    spout = KafkaTridentSpout(
        kafka_broker.bootstrap, [first, second], opaque=False, max_batch_records=3
    )
    emitter = spout.get_emitter({}, Context())
    assert isinstance(emitter, TransactionalOffsetEmitter)

    batch = Rows()
    meta = emitter.emit_partition_batch_new(None, batch, 0, None)
    assert meta == OffsetRange(first, 0, 0, 3, 3)
    assert batch.rows == [[first, 0, i, None, f"w{i}"] for i in range(3)]
    kafka_broker.produce(first, ["late"], partition=0)  # after the batch was decided
    replay = Rows()
    emitter.emit_partition_batch(None, replay, 0, meta)
    assert replay.rows == batch.rows

    following = Rows()
    after = emitter.emit_partition_batch_new(None, following, 0, meta)
    assert after == OffsetRange(first, 0, 3, 6, 3)
    assert values(following) == ["w3", "w4", "late"]
    empty = Rows()
    assert emitter.emit_partition_batch_new(None, empty, 0, after) == OffsetRange(first, 0, 6, 6, 0)
    emitter.emit_partition_batch(None, empty, 0, OffsetRange(first, 0, 6, 6, 0))
    assert empty.rows == []

    # Partition 1 is the first topic's second partition (empty), 2 the second topic's.
    nothing = Rows()
    assert emitter.emit_partition_batch_new(None, nothing, 1, None) == OffsetRange(
        first, 1, 0, 0, 0
    )
    other = Rows()
    assert emitter.emit_partition_batch_new(None, other, 2, None) == OffsetRange(second, 0, 0, 1, 1)
    assert (nothing.rows, other.rows) == ([], [[second, 0, 0, "k", "x"]])
    emitter.close()


def test_an_opaque_batch_continues_after_the_previous_one(kafka_broker: KafkaBroker) -> None:
    topic = kafka_broker.create_topic(unique_name("words"))
    kafka_broker.produce(topic, [f"w{i}" for i in range(4)], partition=0)
    spout = KafkaTridentSpout(
        kafka_broker.bootstrap, topic, fields=("value", "offset"), max_batch_records=3
    )
    emitter = spout.get_emitter({}, Context())
    assert isinstance(emitter, OpaqueOffsetEmitter)
    batch = Rows()
    meta = emitter.emit_partition_batch(None, batch, 0, None)
    assert (meta, batch.rows) == (OffsetRange(topic, 0, 0, 3, 3), [["w0", 0], ["w1", 1], ["w2", 2]])
    kafka_broker.produce(topic, ["w4"], partition=0)
    retry = Rows()  # an opaque replay of the next transaction reads on from ``meta``
    assert emitter.emit_partition_batch(None, retry, 0, meta) == OffsetRange(topic, 0, 3, 5, 2)
    assert retry.rows == [["w3", 3], ["w4", 4]]
    emitter.close()


def test_first_poll_offset_latest_starts_at_the_true_end(kafka_broker: KafkaBroker) -> None:
    """The records already there are one record batch (where a broker's ``ListOffsets``
    may answer the batch's base offset + 1): the first batch starts after all of them."""
    topic = kafka_broker.create_topic(unique_name("words"))
    kafka_broker.produce(topic, ["old1", "old2", "old3"], partition=0)
    spout = KafkaTridentSpout(
        kafka_broker.bootstrap, topic, opaque=False, first_poll_offset="latest"
    )
    emitter = spout.get_emitter({}, Context())
    assert isinstance(emitter, TransactionalOffsetEmitter)
    nothing = Rows()
    meta = emitter.emit_partition_batch_new(None, nothing, 0, None)
    assert (meta, nothing.rows) == (OffsetRange(topic, 0, 3, 3, 0), [])
    kafka_broker.produce(topic, ["new"], partition=0)
    batch = Rows()
    assert emitter.emit_partition_batch_new(None, batch, 0, meta) == OffsetRange(topic, 0, 3, 4, 1)
    assert values(batch) == ["new"]
    emitter.close()


def test_malformed_records_are_left_out_counted_and_reported(kafka_broker: KafkaBroker) -> None:
    topic = kafka_broker.create_topic(unique_name("words"))
    kafka_broker.produce(
        topic, ['{"word": "a"}', "not json", '{"other": 1}', '{"word": "d"}'], partition=0
    )
    spout = KafkaTridentSpout(
        kafka_broker.bootstrap, topic, opaque=False, fields=("word",), value_format="json"
    )
    emitter = spout.get_emitter({}, Context())
    assert isinstance(emitter, TransactionalOffsetEmitter)
    batch = Rows()
    meta = emitter.emit_partition_batch_new(None, batch, 0, None)
    assert meta == OffsetRange(topic, 0, 0, 4, 4)  # the malformed records count
    assert batch.rows == [["a"], ["d"]]
    label = "TransactionalKafkaTridentSpout 'words'"
    assert [str(error) for error in batch.errors] == [
        f"{label}: record {topic}/0 offset 1 left out: the value is not JSON: Expecting "
        "value: line 1 column 1 (char 0)",
        f"{label}: record {topic}/0 offset 2 left out: the value has no field 'word'",
    ]
    replay = Rows()
    emitter.emit_partition_batch(None, replay, 0, meta)
    assert replay.rows == batch.rows
    emitter.close()


def test_partitions_follow_the_topics_order_and_new_topics_at_the_end(
    kafka_broker: KafkaBroker,
) -> None:
    """The coordinator counts the partitions of the topics that exist, up to the first
    missing one; an emitter given another partition's batch fails naming both."""
    a, b, c = (unique_name("words") for _ in range(3))
    kafka_broker.create_topic(a, 2)
    kafka_broker.create_topic(c, 1)
    spout = KafkaTridentSpout(kafka_broker.bootstrap, [a, b, c])
    coordinator = spout.get_coordinator({}, Context())
    assert coordinator.is_ready()
    assert coordinator.number_of_partitions() == 2  # b is missing: c waits for it
    kafka_broker.create_topic(b, 3)
    assert coordinator.number_of_partitions() == 6
    coordinator.close()

    emitter = spout.get_emitter({}, Context())
    assert isinstance(emitter, OpaqueOffsetEmitter)
    assert [emitter.kafka_partition(i, None) for i in range(6)] == [
        (a, 0),
        (a, 1),
        (b, 0),
        (b, 1),
        (b, 2),
        (c, 0),
    ]
    with pytest.raises(ConnectorError) as raised:  # topics reordered since the batch
        emitter.emit_partition_batch(None, Rows(), 2, OffsetRange(c, 0, 0, 0, 0))
    assert str(raised.value) == (
        f"OpaqueKafkaTridentSpout 'words': partition 2 is now Kafka partition {b}/0, but "
        f"its batches so far read {c}/0: the order of topics changed (keep it, and add "
        "topics only at the end)"
    )
    emitter.close()


def test_an_unreachable_broker_fails_the_batch_naming_the_spout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kafka_trident, "REQUEST_TIMEOUT", 0.5)
    bootstrap = f"127.0.0.1:{free_port()}"  # nothing listens
    spout = KafkaTridentSpout(bootstrap, "t", opaque=False)
    emitter = spout.get_emitter({}, Context())
    assert isinstance(emitter, TransactionalOffsetEmitter)
    with pytest.raises(ConnectorUnavailableError) as raised:
        emitter.emit_partition_batch_new(None, Rows(), 3, None)
    assert str(raised.value).startswith(
        f"TransactionalKafkaTridentSpout 'words' cannot reach the Kafka brokers {bootstrap} "
        "for partition 3: "
    )
    assert str(raised.value).endswith("; the batch is replayed")
    emitter.close()


def test_a_coordinator_that_cannot_list_keeps_what_it_knew(
    kafka_broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before any listing no batch starts (not ready); after one, an outage keeps the
    number of partitions last seen."""
    monkeypatch.setattr(kafka_trident, "REQUEST_TIMEOUT", 0.5)
    down = KafkaTridentSpout(f"127.0.0.1:{free_port()}", "t").get_coordinator({}, Context())
    assert (down.is_ready(), down.number_of_partitions()) == (False, 0)
    down.close()

    topic = kafka_broker.create_topic(unique_name("words"), 2)
    coordinator = KafkaTridentSpout(kafka_broker.bootstrap, topic).get_coordinator({}, Context())
    assert (coordinator.is_ready(), coordinator.number_of_partitions()) == (True, 2)
    coordinator.close()
    coordinator.conf = {**coordinator.conf, "bootstrap.servers": f"127.0.0.1:{free_port()}"}
    assert (coordinator.is_ready(), coordinator.number_of_partitions()) == (True, 2)
    coordinator.close()


def count_words(spout: KafkaTridentSpout, factory: Any) -> TridentTopology:
    topology = TridentTopology()
    topology.new_stream("words", spout).parallelism_hint(2).group_by(
        Fields("word")
    ).persistent_aggregate(factory, Count(), Fields("count")).parallelism_hint(2)
    return topology


@pytest.mark.parametrize("kind", ["TRANSACTIONAL", "OPAQUE"])
def test_counts_are_exact_in_transactional_and_opaque_state(
    engine: Engine, kafka_broker: KafkaBroker, tmp_path: Path, kind: str
) -> None:
    """3 partitions of 10 records, batches of at most 4 records per partition (so
    several batches); partition 0 also holds a malformed record (not JSON): it is left
    out of the counts, reported in the emitter's errors on the local engine, only
    logged on Spark (where a Trident emitter's reported error would fail the
    micro-batch)."""
    topic = kafka_broker.create_topic(unique_name("words"), 3)
    for partition in range(3):
        kafka_broker.produce(topic, word_values(partition, 10), partition=partition)
    kafka_broker.produce(topic, ["{oops"], partition=0)
    spout = word_spout(kafka_broker.bootstrap, [topic], kind, 4)
    factory = SqliteMapState.factory(str(tmp_path / "counts.db"), StateType[kind])
    expected = true_counts(3, 10)

    def counted() -> dict[str, int]:
        return {key[0]: value for key, value in SqliteMapState.contents(factory).items()}

    with engine.running(count_words(spout, factory), name="counts") as run:
        run.drain()
        run.wait_until(lambda: counted() == expected, engine.timeout)
        errors = run.errors()
    left_out = (
        f"MalformedRecordError: {type(spout).__name__} 'words': record {topic}/0 offset 10 "
        "left out: the value is not JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)"
    )
    if engine.is_spark:
        assert errors == {}
    else:
        assert list(errors) == ["words"]
        assert [left_out in error.error.splitlines() for error in errors["words"]] == [True]


def test_a_broker_outage_fails_batches_that_are_replayed_with_exact_counts(
    durable_kafka_broker: TansuBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker is killed while the topology runs and started again: the batches that
    could not read fail naming the spout and the broker, are replayed, and every record
    is counted once (the clients wait 2 s for the broker, not 10)."""
    monkeypatch.setattr(kafka_trident, "REQUEST_TIMEOUT", 2.0)
    broker = durable_kafka_broker
    topic = broker.create_topic(unique_name("words"), 2)
    for partition in range(2):
        broker.produce(topic, word_values(partition, 10), partition=partition)
    spout = word_spout(broker.bootstrap, [topic], "TRANSACTIONAL", 4)
    factory = SqliteMapState.factory(str(tmp_path / "counts.db"), StateType.TRANSACTIONAL)
    conf = {
        Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 1,
        "topology.trident.batch.retry.max.millis": 200,
    }

    def counted() -> dict[str, int]:
        return {key[0]: value for key, value in SqliteMapState.contents(factory).items()}

    def unreachable() -> bool:
        errors = cluster.get_topology_info("outage").components["words"].errors
        return any("cannot reach the Kafka brokers" in error.error for error in errors)

    with LocalCluster() as cluster:
        cluster.submit_topology("outage", conf, count_words(spout, factory).build())
        wait_until(lambda: counted() == true_counts(2, 10), timeout=20.0)
        broker.kill()
        wait_until(unreachable, timeout=60.0)
        broker.start()
        for partition in range(2):
            broker.produce(topic, word_values(partition, 20)[10:], partition=partition)
        wait_until(lambda: counted() == true_counts(2, 20), timeout=60.0)
        cluster.kill_topology("outage")


def test_wrong_options_are_refused_at_submit_naming_the_stream(
    engine: Engine, tmp_path: Path
) -> None:
    spout = KafkaTridentSpout("127.0.0.1:1", ["a"], max_batch_records=0, fields=["word"])
    factory = SqliteMapState.factory(str(tmp_path / "counts.db"), StateType.OPAQUE)
    with pytest.raises(InvalidTopologyError) as raised, engine.running(count_words(spout, factory)):
        pass
    assert str(raised.value) == (
        "component 'words' (OpaqueKafkaTridentSpout): max_batch_records must be an int > 0, got 0"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topics": []}, "topics must be a topic name or a non-empty list of names, got []"),
        ({"topics": ["a", "a"]}, "topics names a topic twice: ['a', 'a']"),
        ({"bootstrap_servers": "h"}, "bootstrap_servers must be 'host:port[,host:port]', got 'h'"),
        (
            {"first_poll_offset": "uncommitted_earliest"},
            "first_poll_offset must be one of 'earliest', 'latest', got 'uncommitted_earliest'",
        ),
        ({"value_format": "xml"}, "value_format must be one of 'str', 'bytes', 'json', got 'xml'"),
        ({"fields": []}, "fields must be a non-empty list of field names, got ()"),
        (
            {"consumer_conf": {"group.id": "g"}},
            "consumer_conf may not set 'group.id': the spout's consumers use a group id of "
            "their own and commit nothing",
        ),
        (
            {"consumer_conf": {"auto.offset.reset": "latest"}},
            "consumer_conf may not set 'auto.offset.reset': use first_poll_offset",
        ),
        (
            {"consumer_conf": {"no.such.option": 1}},
            'consumer_conf: No such configuration property: "no.such.option"',
        ),
    ],
)
def test_wrong_options_name_the_option(options: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"bootstrap_servers": "127.0.0.1:1", "topics": ["a"]}
    arguments.update(options)
    spout = KafkaTridentSpout(**arguments)
    with pytest.raises(InvalidTopologyError) as raised:
        spout.validate_submission("words", {})
    assert str(raised.value) == f"component 'words' (OpaqueKafkaTridentSpout): {message}"


def test_patterns_and_routing_translators_are_refused() -> None:
    import re

    class Routing:
        output_fields = {"a": ["x"]}

        def __call__(self, record: Any) -> Any:
            return "a", [record.value]

    cases: list[tuple[dict[str, Any], str]] = [
        (
            {"topics": re.compile("a.*")},
            "topics must name the topics (patterns are not supported: the partitions' "
            "numbers follow the order of the names), got re.compile('a.*')",
        ),
        (
            {"topics": "a", "translator": Routing()},
            "translator may not declare output_fields: a Trident spout emits one stream, "
            "with fields",
        ),
    ]
    for options, message in cases:
        spout = KafkaTridentSpout("127.0.0.1:1", **options)
        with pytest.raises(InvalidTopologyError) as raised:
            spout.validate_submission("words", {})
        assert str(raised.value) == f"component 'words' (OpaqueKafkaTridentSpout): {message}"


@pytest.mark.parametrize(
    ("engine_name", "kind", "point"),
    [
        ("local", "TRANSACTIONAL", "mid-batch"),
        ("local", "OPAQUE", "mid-batch"),
        ("local", "TRANSACTIONAL", "between-batches"),
        pytest.param("spark", "TRANSACTIONAL", "mid-batch", marks=pytest.mark.spark),
        pytest.param("spark", "OPAQUE", "between-batches", marks=pytest.mark.spark),
    ],
)
def test_a_process_killed_mid_transaction_restarts_with_exact_counts(
    request: pytest.FixtureRequest,
    kafka_broker: KafkaBroker,
    tmp_path: Path,
    engine_name: str,
    kind: str,
    point: str,
) -> None:
    """The process running the topology is killed (SIGKILL) while transaction 2 is half
    applied (``mid-batch``: one state partition has written it, the other not), or as
    the spout reads transaction 3, transaction 2 committed (``between-batches``). The
    topology started again on the same coordination store (local) or checkpoint (Spark)
    replays the transaction from its recorded ranges; the counts equal the true counts."""
    topic = kafka_broker.create_topic(unique_name("words"), 3)
    for partition in range(3):
        kafka_broker.produce(topic, word_values(partition, 12), partition=partition)
    directory, database, flag = (str(tmp_path / n) for n in ("dir", "s.db", "kill"))
    Path(flag).touch()
    arguments = [engine_name, kafka_broker.bootstrap, topic, directory, database, flag]
    child = subprocess.run(
        [sys.executable, "-m", "tests.connectors_kafka_topologies", *arguments, kind, point],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=180,
        start_new_session=True,
    )
    assert child.returncode == -9, child.stderr[-3000:]
    partial = trident_counts(database, kind)
    expected = true_counts(3, 12)
    if point == "mid-batch":
        assert partial and partial != expected  # transaction 2 was half written
    else:
        assert partial == true_counts(3, 8)  # transactions 1 and 2 (4 records each)

    os.remove(flag)
    topology = trident_crash_topology(
        kafka_broker.bootstrap, topic, database, flag, kind, point
    ).build()
    if engine_name == "local":
        conf = {
            Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR: directory,
            Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 1,
        }
        with LocalCluster() as cluster:
            cluster.submit_topology("crash", conf, topology)
            wait_until(lambda: trident_counts(database, kind) == expected, timeout=30.0)
            cluster.kill_topology("crash")
        return
    spark = SparkCluster(spark=request.getfixturevalue("spark"), checkpoint_dir=directory)
    try:
        spark.submit_topology("crash", {"topology.spark.batch.interval.millis": 50}, topology)
        assert spark.wait_idle("crash")
        assert trident_counts(database, kind) == expected
    finally:
        spark.shutdown()
