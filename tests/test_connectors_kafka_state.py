"""KafkaState (``partition_persist`` with KafkaStateUpdater) against a real broker: a
Trident stream's tuples become exactly one record each, on both engines; a batch with
a record that is not delivered fails and its replay writes the batch again (the
records of the failed attempt that were delivered appear twice: at-least-once);
directly: a tuple that cannot be written fails the batch before any record is written,
a record that is not delivered raises naming the topic, wrong options are refused and
the factory pickles."""

from __future__ import annotations

import pickle
from collections import Counter
from typing import Any

import pytest

from squall import Fields, InvalidTopologyError, LocalCluster
from squall.connectors.errors import ConnectorUnavailableError
from squall.connectors.kafka import KafkaState, KafkaStateUpdater, RecordEncodingError
from squall.testing import SharedRecord
from squall.trident import TridentCollector, TridentTopology, TridentTuple
from squall.trident.spouts import FixedBatchSpout
from squall.trident.state import MemoryMapState, StateType
from tests.conftest import ENGINE_SETTINGS, SPARK_RETRIES, Engine, EngineSettings, unique_name
from tests.helpers import wait_until
from tests.kafka_broker import KafkaBroker, TansuBroker
from tests.servers import free_port

WORDS = ["apple", "pear", "fig"]


@pytest.fixture
def engine_settings() -> dict[str, EngineSettings]:
    """On Spark, runs of a failed micro-batch again (a test fails one attempt)."""
    return {
        "local": ENGINE_SETTINGS["local"],
        "spark": ENGINE_SETTINGS["spark"].tuned({SPARK_RETRIES: 3}),
    }


def rows(count: int) -> list[list[Any]]:
    return [[n, WORDS[n % len(WORDS)]] for n in range(count)]


def trident(factory: Any, count: int, batch: int = 3) -> TridentTopology:
    topology = TridentTopology()
    spout = FixedBatchSpout(Fields(["n", "word"]), batch, *rows(count))
    stream = topology.new_stream("numbers", spout)
    stream.partition_persist(factory, Fields(["n", "word"]), KafkaStateUpdater())
    return topology


def values(
    broker: KafkaBroker, topic: str, count: int, timeout: float
) -> list[tuple[bytes | None, bytes | None]]:
    """The (key, value) of the topic's first ``count`` records, sorted."""
    return sorted((key, value) for _, _, key, value in broker.read(topic, count, timeout=timeout))


def nothing_more(broker: KafkaBroker, topic: str, count: int) -> None:
    with pytest.raises(AssertionError, match=f"read {count} of {count + 1} records"):
        broker.read(topic, count + 1, timeout=1.0)


def test_a_trident_stream_writes_one_record_per_tuple(
    engine: Engine, kafka_broker: KafkaBroker
) -> None:
    count = 10
    out = kafka_broker.create_topic(unique_name("out"))
    factory = KafkaState.factory(
        kafka_broker.bootstrap, out, key_field="word", value_field="n", value_format="json"
    )
    with engine.running(trident(factory, count), name="kstate"):
        written = values(kafka_broker, out, count, engine.timeout)
    assert written == sorted((WORDS[n % 3].encode(), str(n).encode()) for n in range(count))
    nothing_more(kafka_broker, out, count)


class FailFirstOf:
    """A topic selector: the first attempt of the tuples whose ``n`` is in ``first``
    goes to an invalid topic name (the broker refuses the record: a delivery error),
    every other to ``topic``."""

    def __init__(self, topic: str, first: set[int]) -> None:
        self.topic = topic
        self.first = first
        self.record = SharedRecord()

    def __call__(self, tup: Any) -> str:
        n = tup["n"]
        self.record.append("seen", n)
        if n in self.first and n not in self.record.get("sent_wrong"):
            self.record.append("sent_wrong", n)
            return "no such topic!"
        return self.topic


def test_a_batch_with_a_record_not_delivered_is_replayed(
    engine: Engine, kafka_broker: KafkaBroker
) -> None:
    """n=5's first record goes to an invalid topic name (refused by the broker, or at
    once by librdkafka): its batch (3, 4, 5) fails and is replayed; the topic holds
    every tuple, and the failed attempt's 3 and 4 twice."""
    count = 9
    out = kafka_broker.create_topic(unique_name("out"))
    selector = FailFirstOf(out, {5})
    factory = KafkaState.factory(kafka_broker.bootstrap, selector, value_field="n")
    with engine.running(trident(factory, count), name="kreplay"):
        written = values(kafka_broker, out, count + 2, engine.timeout)
    assert Counter(value for _, value in written) == Counter(
        {str(n).encode(): 2 if n in (3, 4) else 1 for n in range(count)}
    )
    nothing_more(kafka_broker, out, count + 2)
    assert Counter(selector.record.get("seen"))[5] == 2


def test_a_tuple_that_cannot_be_written_fails_the_batch_before_any_record(
    kafka_broker: KafkaBroker,
) -> None:
    out = kafka_broker.create_topic(unique_name("out"))
    factory = KafkaState.factory(kafka_broker.bootstrap, out, value_field="v", value_format="bytes")
    state = factory.make_state({}, None, 0, 1)
    fields = Fields(["v"])
    try:
        state.begin_commit(7)
        with pytest.raises(RecordEncodingError) as raised:
            KafkaStateUpdater().update_state(
                state,
                [TridentTuple([b"one"], fields), TridentTuple(["two"], fields)],
                TridentCollector([]),
            )
        assert str(raised.value) == (
            "KafkaState: cannot write a tuple of batch 7: field 'v' holds a str, not bytes "
            '(value_format="bytes" writes bytes or bytearray only); the batch fails and is '
            "replayed"
        )
        with pytest.raises(RecordEncodingError, match="the tuple has no field 'v'"):
            state.write([TridentTuple([b"x"], Fields(["w"]))])
        state.begin_commit(7)
        assert state.write([TridentTuple([b"one"], fields), TridentTuple([b"two"], fields)]) == 2
        state.commit(7)
    finally:
        state.close()
    assert values(kafka_broker, out, 2, 30.0) == [(None, b"one"), (None, b"two")]
    nothing_more(kafka_broker, out, 2)


def test_records_not_delivered_raise_naming_the_broker_and_topic() -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    factory = KafkaState.factory(nowhere, "out", producer_conf={"message.timeout.ms": 300})
    state = factory.make_state({}, None, 0, 1)
    try:
        state.begin_commit(3)
        with pytest.raises(ConnectorUnavailableError) as raised:
            state.write([TridentTuple(["a"], Fields(["value"]))] * 2)
    finally:
        state.close()
    assert str(raised.value) == (
        f"KafkaState cannot reach {nowhere}: 2 records to topic 'out' not delivered: "
        "Local: Message timed out; batch 3 fails and is replayed"
    )


def test_the_factory_pickles_and_skips_tuples_its_selector_returns_none_for(
    kafka_broker: KafkaBroker,
) -> None:
    out = kafka_broker.create_topic(unique_name("out"))
    factory = KafkaState.factory(
        kafka_broker.bootstrap, Only(out), producer_conf={"sasl.password": "secret"}
    )
    copy = pickle.loads(pickle.dumps(factory))
    assert copy == factory and "secret" not in repr(factory)
    state = copy.make_state({}, None, 0, 1)
    fields = Fields(["value"])
    try:
        state.begin_commit(1)
        assert state.write([TridentTuple([w], fields) for w in ["keep", "skip", "keep"]]) == 2
        assert state.skipped == 1
    finally:
        state.close()
    assert values(kafka_broker, out, 2, 30.0) == [(None, b"keep")] * 2
    nothing_more(kafka_broker, out, 2)


class Only:
    """A picklable selector: tuples whose value is ``"keep"`` to ``topic``."""

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Only) and other.topic == self.topic

    __hash__ = None  # type: ignore[assignment]

    def __call__(self, tup: Any) -> str | None:
        return self.topic if tup["value"] == "keep" else None


def test_the_updater_refuses_another_state() -> None:
    state = MemoryMapState.factory(StateType.OPAQUE).make_state({}, None, 0, 1)
    with pytest.raises(TypeError) as raised:
        KafkaStateUpdater().update_state(state, [], TridentCollector([]))
    assert str(raised.value) == (
        f"KafkaStateUpdater updates a KafkaState (from KafkaState.factory), got "
        f"{type(state).__name__}"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bootstrap_servers": "nohost"}, "bootstrap_servers must be 'host:port[,host:port]'"),
        ({"topic": ""}, "topic must be a non-empty string, got ''"),
        ({"key_field": 5}, "key_field must be a non-empty string, got 5"),
        ({"value_format": "xml"}, "value_format must be one of 'str', 'bytes', 'json'"),
        ({"producer_conf": {"linger.ms": "soon"}}, "producer_conf: Invalid value"),
        (
            {"producer_conf": {"on_delivery": print}},
            "producer_conf may not set 'on_delivery': the sink sets its own delivery callback",
        ),
    ],
)
def test_wrong_options_are_refused_by_the_factory(options: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"bootstrap_servers": "127.0.0.1:1", "topic": "out"}
    arguments.update(options)
    with pytest.raises(InvalidTopologyError) as raised:
        KafkaState.factory(**arguments)
    assert str(raised.value).startswith("KafkaState.factory: ")
    assert message in str(raised.value)


class Counting:
    """A topic selector to ``topic`` that records each tuple's ``n`` it sees."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.record = SharedRecord()

    def __call__(self, tup: Any) -> str:
        self.record.append("seen", tup["n"])
        return self.topic


def test_batches_fail_while_the_broker_is_down_and_are_written_once_it_is_back(
    durable_kafka_broker: TansuBroker,
) -> None:
    """Broker stopped: the first batch's records time out, the batch fails and is
    replayed (again and again); once the broker is back every tuple is written, once
    (nothing of a failed attempt reached the broker)."""
    broker = durable_kafka_broker
    count = 6
    out = broker.create_topic(unique_name("out"))
    selector = Counting(out)
    factory = KafkaState.factory(
        broker.bootstrap, selector, value_field="n", producer_conf={"message.timeout.ms": 500}
    )
    broker.stop()
    with LocalCluster() as cluster:
        cluster.submit_topology(
            "koutage", dict(ENGINE_SETTINGS["local"].conf), trident(factory, count).build()
        )
        wait_until(lambda: Counter(selector.record.get("seen"))[0] >= 2, timeout=30.0)
        broker.start()
        written = values(broker, out, count, 60.0)
        components = cluster.get_topology_info("koutage").components
        cluster.kill_topology("koutage")
    assert written == sorted((None, str(n).encode()) for n in range(count))
    nothing_more(broker, out, count)
    errors = "\n".join(e.error for stats in components.values() for e in stats.errors)
    assert (
        f"ConnectorUnavailableError: KafkaState 'b1-partition_persist(KafkaStateUpdater)' "
        f"cannot reach {broker.bootstrap}: 3 records to topic {out!r} not delivered: Local: "
        "Message timed out; batch 1 fails and is replayed"
    ) in errors
