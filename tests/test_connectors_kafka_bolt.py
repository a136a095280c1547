"""KafkaBolt against a real broker: the records hold exactly the tuples' keys and
values in each format; a topic selector routes tuples to two topics and skips those it
returns None for (acked, counted); a tuple is acked once its record is confirmed and
failed on a delivery error, then replayed and delivered (also after the broker was
down); ``fire_and_forget`` acks at once; a tuple that cannot be written is failed alone;
wrong options are refused at submit."""

from __future__ import annotations

import json
import pickle
from types import SimpleNamespace
from typing import Any

import pytest

from squall import InvalidTopologyError, LocalCluster, Spout, TopologyBuilder
from squall.connectors.kafka import KafkaBolt
from squall.model.declarer import OutputFieldsDeclarer
from squall.runtime.collectors import SpoutOutputCollector
from squall.runtime.context import TopologyContext
from squall.testing import FixedTupleSpout, SharedRecord
from tests.conftest import Engine, unique_name
from tests.helpers import wait_until
from tests.kafka_broker import KafkaBroker, TansuBroker
from tests.servers import free_port


class RowSpout(Spout):
    """Emits the rows given (msg id: the row's index) once the test released them
    (all at once unless ``gated``); replays a failed row. Records ``acked`` and
    ``failed`` msg ids."""

    def __init__(self, rows: list[list[Any]], fields: list[str], gated: bool = False) -> None:
        self.rows = rows
        self.fields = list(fields)
        self.gated = gated
        self.record = SharedRecord()

    def release(self) -> None:
        """Let the rows out (a gated spout)."""
        self.record.append("released", True)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(self.fields)

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self.collector = collector
        self.next_row = 0
        self.replay: list[int] = []
        self.released = not self.gated

    def next_tuple(self) -> None:
        if self.replay:
            index = self.replay.pop(0)
        else:
            if not self.released:
                self.released = bool(self.record.get("released"))
            if not self.released or self.next_row >= len(self.rows):
                return
            index = self.next_row
            self.next_row += 1
        self.collector.emit(self.rows[index], msg_id=index)

    def ack(self, msg_id: Any) -> None:
        self.record.append("acked", msg_id)

    def fail(self, msg_id: Any) -> None:
        self.record.append("failed", msg_id)
        self.replay.append(msg_id)

    def acked(self) -> list[int]:
        return sorted(self.record.get("acked"))

    def failed(self) -> list[int]:
        return sorted(self.record.get("failed"))


def topology(spout: Any, **bolts: KafkaBolt) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("rows", spout)
    for name, bolt in bolts.items():
        builder.set_bolt(name, bolt).shuffle_grouping("rows")
    return builder.create_topology()


def records(broker: KafkaBroker, topic: str, count: int) -> list[tuple[bytes | None, bytes | None]]:
    """The ``(key, value)`` of the topic's ``count`` records, sorted."""
    read = broker.read(topic, count, timeout=30.0)
    return sorted(((key, value) for _, _, key, value in read), key=repr)


def nothing_more(broker: KafkaBroker, topic: str, count: int) -> None:
    """The topic holds no record past its first ``count``."""
    with pytest.raises(AssertionError, match=f"read {count} of {count + 1} records"):
        broker.read(topic, count + 1, timeout=1.0)


KEYS: list[Any] = ["k-str", b"k-bytes", None, 42]
KEY_BYTES = [b"k-str", b"k-bytes", None, b"42"]
DOCS: list[Any] = [{"a": [1, 2]}, "text", 2.5, None]
FIELDS = ["n", "key", "text", "blob", "doc"]
FORMATS = ("str", "bytes", "json")


def format_rows(count: int) -> list[list[Any]]:
    return [
        [n, KEYS[n % 4], f"é-{n}" if n % 3 else n, bytes([n, 255]), DOCS[n % 4]]
        for n in range(count)
    ]


def test_records_hold_the_keys_and_values_in_each_format_and_acks_follow_delivery(
    engine: Engine, kafka_broker: KafkaBroker
) -> None:
    """One spout, three bolts (value_format str, bytes, json, keys from one field):
    every tuple is acked (once all three records are confirmed) and each topic holds
    exactly one record per tuple, key and value encoded as documented."""
    count = 12
    topics = {fmt: kafka_broker.create_topic(unique_name(f"out-{fmt}")) for fmt in FORMATS}
    spout = RowSpout(format_rows(count), FIELDS)
    bolts = {
        "as_str": KafkaBolt(kafka_broker.bootstrap, topics["str"], key_field="key",
                            value_field="text"),
        "as_bytes": KafkaBolt(kafka_broker.bootstrap, topics["bytes"], key_field="key",
                              value_field="blob", value_format="bytes"),
        "as_json": KafkaBolt(kafka_broker.bootstrap, topics["json"], value_field="doc",
                             value_format="json"),
    }  # fmt: skip
    with engine.running(topology(spout, **bolts), name="formats") as run:
        run.wait_until(lambda: len(spout.acked()) >= count, engine.timeout)
        run.wait_idle()
        components = run.info().components
        metrics = {name: components[name].custom for name in bolts}
        errors = run.errors()
    assert spout.acked() == list(range(count)) and spout.failed() == []
    assert errors == {}
    for name in bolts:
        assert metrics[name] == {"delivered": count, "failed": 0, "skipped": 0, "in_flight": 0}
    assert records(kafka_broker, topics["str"], count) == sorted(
        ((KEY_BYTES[n % 4], (f"é-{n}" if n % 3 else str(n)).encode()) for n in range(count)),
        key=repr,
    )
    assert records(kafka_broker, topics["bytes"], count) == sorted(
        ((KEY_BYTES[n % 4], bytes([n, 255])) for n in range(count)), key=repr
    )
    expected_docs = [b'{"a": [1, 2]}', b'"text"', b"2.5", None]
    assert records(kafka_broker, topics["json"], count) == sorted(
        ((None, expected_docs[n % 4]) for n in range(count)), key=repr
    )
    for topic in topics.values():
        nothing_more(kafka_broker, topic, count)


class ByParity:
    """A topic selector: even ``n`` to ``even``, odd to ``odd``, multiples of 5 to
    None (skipped)."""

    def __init__(self, even: str, odd: str) -> None:
        self.even = even
        self.odd = odd

    def __call__(self, tup: Any) -> str | None:
        n = tup["n"]
        if n % 5 == 0:
            return None
        return self.even if n % 2 == 0 else self.odd


def test_a_topic_selector_routes_to_two_topics_and_none_skips_and_acks(
    engine: Engine, kafka_broker: KafkaBroker
) -> None:
    count = 20
    even = kafka_broker.create_topic(unique_name("even"))
    odd = kafka_broker.create_topic(unique_name("odd"))
    spout = RowSpout([[n, f"v{n}"] for n in range(count)], ["n", "value"])
    bolt = KafkaBolt(kafka_broker.bootstrap, ByParity(even, odd))
    with engine.running(topology(spout, sink=bolt), name="selector") as run:
        run.wait_until(lambda: len(spout.acked()) >= count, engine.timeout)
        run.wait_idle()
        stats = run.info().components["sink"]
    assert spout.acked() == list(range(count)) and spout.failed() == []
    assert (stats.acked, stats.failed, stats.errors_total) == (count, 0, 0)
    assert stats.custom == {"delivered": 16, "failed": 0, "skipped": 4, "in_flight": 0}
    evens = [n for n in range(count) if n % 2 == 0 and n % 5]
    odds = [n for n in range(count) if n % 2 and n % 5]
    assert records(kafka_broker, even, 8) == sorted((None, f"v{n}".encode()) for n in evens)
    assert records(kafka_broker, odd, 8) == sorted((None, f"v{n}".encode()) for n in odds)
    nothing_more(kafka_broker, even, 8)
    nothing_more(kafka_broker, odd, 8)


class FailFirstOf:
    """A topic selector that sends the first attempt of the tuples whose ``n`` is in
    ``first`` to an invalid topic name of its own (the broker refuses the record: a
    delivery error; a second record to a name librdkafka knows is invalid would be
    refused at once instead), and every other to ``topic``."""

    def __init__(self, topic: str, first: set[int]) -> None:
        self.topic = topic
        self.first = first
        self.record = SharedRecord()

    def __call__(self, tup: Any) -> str:
        n = tup["n"]
        if n in self.first and n not in self.record.get("sent_wrong"):
            self.record.append("sent_wrong", n)
            return f"no such topic {n}!"
        return self.topic


def test_a_delivery_error_fails_the_tuple_and_its_replay_is_delivered(
    engine: Engine, kafka_broker: KafkaBroker
) -> None:
    count = 10
    out = kafka_broker.create_topic(unique_name("out"))
    spout = RowSpout([[n, f"v{n}"] for n in range(count)], ["n", "value"])
    bolt = KafkaBolt(kafka_broker.bootstrap, FailFirstOf(out, {3, 7}))
    with engine.running(topology(spout, sink=bolt), name="replay") as run:
        run.wait_until(lambda: len(spout.acked()) >= count, engine.timeout)
        run.wait_idle()
        stats = run.info().components["sink"]
    assert spout.acked() == list(range(count)) and spout.failed() == [3, 7]
    assert stats.custom == {"delivered": count, "failed": 2, "skipped": 0, "in_flight": 0}
    assert stats.failed == 2
    # librdkafka reports the record failed, or (when it already learnt from the
    # broker's metadata that the name is invalid) refuses it at once
    reports = [error.error.splitlines()[-1] for error in stats.errors]
    assert len(reports) == 2
    for n in (3, 7):
        (report,) = [report for report in reports if f"'no such topic {n}!'" in report]
        assert report in (
            f"ConnectorError: KafkaBolt 'sink': 1 record to topic 'no such topic {n}!' not "
            "delivered: Broker: Invalid topic; the tuples are failed",
            f"ConnectorError: KafkaBolt 'sink': cannot write a tuple: topic 'no such topic "
            f"{n}!' refused the record: Unable to produce message: Local: Unknown topic; the "
            "tuple is failed",
        )
    expected = sorted((None, f"v{n}".encode()) for n in range(count))
    assert records(kafka_broker, out, count) == expected
    nothing_more(kafka_broker, out, count)


def test_records_time_out_while_the_broker_is_down_and_replays_are_delivered_after(
    durable_kafka_broker: TansuBroker,
) -> None:
    """Broker stopped: no tuple is acked, each is failed once its record times out
    (message.timeout.ms) and replayed; once the broker is back, every replay is
    delivered, each record exactly once."""
    broker = durable_kafka_broker
    count = 6
    out = broker.create_topic(unique_name("out"))
    spout = RowSpout([[n, f"v{n}"] for n in range(count)], ["n", "value"], gated=True)
    bolt = KafkaBolt(broker.bootstrap, out, producer_conf={"message.timeout.ms": 1000})
    with LocalCluster() as cluster:
        cluster.submit_topology("outage", {}, topology(spout, sink=bolt))
        broker.stop()
        spout.release()

        def in_flight() -> float:
            return float(cluster.get_topology_info("outage").components["sink"].custom["in_flight"])

        wait_until(lambda: in_flight() == count, timeout=30.0)  # awaiting their reports
        wait_until(lambda: set(spout.failed()) == set(range(count)), timeout=30.0)
        assert spout.acked() == []
        broker.start()
        wait_until(lambda: spout.acked() == list(range(count)), timeout=60.0)
        stats = cluster.get_topology_info("outage").components["sink"]
        cluster.kill_topology("outage")
    assert stats.custom["delivered"] == count and stats.custom["in_flight"] == 0
    assert stats.custom["failed"] >= count
    assert any(
        f"ConnectorUnavailableError: KafkaBolt 'sink' cannot reach {broker.bootstrap}: "
        in error.error
        and f"to topic {out!r} not delivered: Local: Message timed out; the tuples are failed"
        in error.error
        for error in stats.errors
    )
    assert records(broker, out, count) == sorted((None, f"v{n}".encode()) for n in range(count))
    nothing_more(broker, out, count)


def test_fire_and_forget_acks_at_once_and_reports_the_records_lost() -> None:
    """Nothing listens at the address: the fire-and-forget bolt acks every tuple at
    once and reports the lost records; the reliable one fails every tuple."""
    nowhere = f"127.0.0.1:{free_port()}"
    rows = [[n, f"v{n}"] for n in range(5)]
    quick = {"message.timeout.ms": 500}
    forget = FixedTupleSpout(rows, ["n", "value"])
    reliable = FixedTupleSpout(rows, ["n", "value"])
    builder = TopologyBuilder()
    builder.set_spout("forget_rows", forget)
    builder.set_spout("reliable_rows", reliable)
    builder.set_bolt(
        "forget", KafkaBolt(nowhere, "out", producer_conf=quick, fire_and_forget=True)
    ).shuffle_grouping("forget_rows")
    builder.set_bolt("reliable", KafkaBolt(nowhere, "out", producer_conf=quick)).shuffle_grouping(
        "reliable_rows"
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("forget", {}, builder.create_topology())
        wait_until(lambda: sorted(forget.acked) == list(range(5)), timeout=10.0)
        wait_until(lambda: sorted(reliable.failed) == list(range(5)), timeout=30.0)
        wait_until(
            lambda: cluster.get_topology_info("forget").components["forget"].custom["failed"] == 5,
            timeout=30.0,
        )
        components = cluster.get_topology_info("forget").components
        cluster.kill_topology("forget")
    assert forget.failed == [] and reliable.acked == []
    assert components["forget"].custom == {
        "delivered": 0,
        "failed": 5,
        "skipped": 0,
        "in_flight": 0,
    }
    assert components["reliable"].custom["failed"] == 5
    lost = "\n".join(error.error for error in components["forget"].errors)
    assert f"ConnectorUnavailableError: KafkaBolt 'forget' cannot reach {nowhere}: " in lost
    assert (
        "not delivered: Local: Message timed out; the tuples were acked already "
        "(fire_and_forget): the records are lost"
    ) in lost
    failed = "\n".join(error.error for error in components["reliable"].errors)
    assert "Local: Message timed out; the tuples are failed" in failed


def test_a_tuple_that_cannot_be_written_is_failed_alone(kafka_broker: KafkaBroker) -> None:
    """A tuple lacking the value field (another stream), a str value with
    value_format="bytes" and a record larger than message.max.bytes are each failed
    and reported; the others are acked and written."""
    out = kafka_broker.create_topic(unique_name("out"))
    spout = FixedTupleSpout(
        {
            "default": [[0, b"zero"], [1, "not bytes"], [2, b"x" * 5000], [3, b"three"]],
            "other": [[4]],
        },
        streams={"default": ["n", "value"], "other": ["n"]},
    )
    builder = TopologyBuilder()
    builder.set_spout("rows", spout)
    bolt = KafkaBolt(
        kafka_broker.bootstrap,
        out,
        value_format="bytes",
        producer_conf={"message.max.bytes": 2000},
    )
    builder.set_bolt("sink", bolt).shuffle_grouping("rows").shuffle_grouping("rows", "other")
    with LocalCluster() as cluster:
        cluster.submit_topology("bad", {}, builder.create_topology())
        wait_until(lambda: len(spout.acked) + len(spout.failed) == 5, timeout=10.0)
        stats = cluster.get_topology_info("bad").components["sink"]
        cluster.kill_topology("bad")
    assert sorted(spout.acked) == [0, 3] and sorted(spout.failed) == [1, 2, 4]
    assert stats.custom == {"delivered": 2, "failed": 3, "skipped": 0, "in_flight": 0}
    errors = "\n".join(error.error for error in stats.errors)
    assert (
        "KafkaBolt 'sink': cannot write a tuple: field 'value' holds a str, not bytes "
        '(value_format="bytes" writes bytes or bytearray only); the tuple is failed'
    ) in errors
    assert (
        f"KafkaBolt 'sink': cannot write a tuple: topic {out!r} refused the record: "
        "Unable to produce message: Broker: Message size too large; the tuple is failed"
    ) in errors
    assert (
        "KafkaBolt 'sink': cannot write a tuple: the tuple has no field 'value' "
        "(its fields: ['n']); the tuple is failed"
    ) in errors
    assert records(kafka_broker, out, 2) == [(None, b"three"), (None, b"zero")]
    nothing_more(kafka_broker, out, 2)


class Unruly:
    """A topic selector that raises for n=0, returns 42 for n=1 and ``topic`` else."""

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def __call__(self, tup: Any) -> Any:
        if tup["n"] == 0:
            raise ValueError("no topic for zero")
        return 42 if tup["n"] == 1 else self.topic


def test_a_selector_that_raises_or_returns_no_topic_name_fails_its_tuple(
    kafka_broker: KafkaBroker,
) -> None:
    out = kafka_broker.create_topic(unique_name("out"))
    spout = FixedTupleSpout([[n, f"v{n}"] for n in range(3)], ["n", "value"])
    with LocalCluster() as cluster:
        cluster.submit_topology(
            "unruly", {}, topology(spout, sink=KafkaBolt(kafka_broker.bootstrap, Unruly(out)))
        )
        wait_until(lambda: len(spout.acked) + len(spout.failed) == 3, timeout=10.0)
        stats = cluster.get_topology_info("unruly").components["sink"]
        cluster.kill_topology("unruly")
    assert spout.acked == [2] and sorted(spout.failed) == [0, 1]
    assert stats.custom == {"delivered": 1, "failed": 2, "skipped": 0, "in_flight": 0}
    reports = [error.error.splitlines()[-1] for error in stats.errors]
    assert sorted(reports) == [
        "ConnectorError: KafkaBolt 'sink': cannot write a tuple: topic selector Unruly "
        "raised ValueError: no topic for zero; the tuple is failed",
        "ConnectorError: KafkaBolt 'sink': cannot write a tuple: topic selector Unruly "
        "returned 42, not a topic name (or None to skip the tuple); the tuple is failed",
    ]
    assert records(kafka_broker, out, 1) == [(None, b"v2")]
    nothing_more(kafka_broker, out, 1)


def test_a_full_producer_queue_waits_for_room(kafka_broker: KafkaBroker) -> None:
    """A queue of one record: each produce waits until the previous record's report
    made room; every tuple is acked and written once."""
    count = 20
    out = kafka_broker.create_topic(unique_name("out"))
    spout = FixedTupleSpout([[n, f"v{n}"] for n in range(count)], ["n", "value"])
    bolt = KafkaBolt(kafka_broker.bootstrap, out, producer_conf={"queue.buffering.max.messages": 1})
    with LocalCluster() as cluster:
        cluster.submit_topology("full", {}, topology(spout, sink=bolt))
        wait_until(lambda: len(spout.acked) + len(spout.failed) == count, timeout=20.0)
        stats = cluster.get_topology_info("full").components["sink"]
        cluster.kill_topology("full")
    assert sorted(spout.acked) == list(range(count)) and spout.failed == []
    assert stats.errors_total == 0
    expected = sorted((None, f"v{n}".encode()) for n in range(count))
    assert records(kafka_broker, out, count) == expected
    nothing_more(kafka_broker, out, count)


class Collected:
    """A picklable stand-in for a task's collector (a Spark snapshot replaces the
    engine's own by a reference)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def ack(self, tup: Any) -> None:
        self.calls.append(("ack", tup))

    def fail(self, tup: Any) -> None:
        self.calls.append(("fail", tup))

    def report_error(self, error: BaseException) -> None:
        self.calls.append(("error", str(error)))


def test_a_prepared_bolt_pickles_without_its_producer(kafka_broker: KafkaBroker) -> None:
    """What a Spark snapshot of a task holds: options and counters, not the producer;
    the copy makes a producer of its own when it next writes."""
    collector = Collected()
    bolt = KafkaBolt(kafka_broker.bootstrap, "out")
    bolt.prepare({}, SimpleNamespace(component_id="sink"), collector)  # type: ignore[arg-type]
    copy = pickle.loads(pickle.dumps(bolt))
    assert copy._producer is None and copy._pending == {}
    assert copy.metrics() == {"delivered": 0, "failed": 0, "skipped": 0, "in_flight": 0}
    assert copy._client() is not None
    bolt.cleanup()
    copy.cleanup()


def selector(tup: Any) -> str:
    return "out"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bootstrap_servers": "localhost"}, "bootstrap_servers must be 'host:port[,host:port]'"),
        ({"topic": ""}, "topic must be a non-empty string, got ''"),
        ({"topic": 3}, "topic must be a non-empty string, got 3"),
        ({"key_field": ""}, "key_field must be a non-empty string, got ''"),
        ({"value_field": ""}, "value_field must be a non-empty string, got ''"),
        (
            {"value_field": None},
            "value_field=None writes the whole tuple as a JSON object: it needs "
            'value_format="json"',
        ),
        ({"value_format": "avro"}, "value_format must be one of 'str', 'bytes', 'json'"),
        ({"fire_and_forget": "yes"}, "fire_and_forget must be True or False, got 'yes'"),
        ({"tick_secs": 0}, "tick_secs must be a number > 0, got 0"),
        ({"producer_conf": "acks=all"}, "producer_conf must be a dict of client options"),
        (
            {"producer_conf": {"bootstrap.servers": "x:1"}},
            "producer_conf may not set 'bootstrap.servers': use bootstrap_servers instead",
        ),
        (
            {"producer_conf": {"delivery.report.only.error": True}},
            "producer_conf may not set 'delivery.report.only.error': the sink acks a tuple",
        ),
        ({"producer_conf": {"no.such.option": 1}}, "producer_conf: No such configuration"),
        ({"producer_conf": {"acks": "some"}}, "producer_conf: Invalid value"),
    ],
)
def test_wrong_options_are_refused_at_submit_naming_the_component(
    options: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {"bootstrap_servers": "127.0.0.1:1", "topic": selector}
    arguments.update(options)
    spout = FixedTupleSpout([[1, "x"]], ["n", "value"])
    bolt = KafkaBolt(arguments.pop("bootstrap_servers"), arguments.pop("topic"), **arguments)
    with LocalCluster() as cluster, pytest.raises(InvalidTopologyError) as raised:
        cluster.submit_topology("wrong", {}, topology(spout, sink=bolt))
    assert str(raised.value).startswith("component 'sink' (KafkaBolt): ")
    assert message in str(raised.value)


def test_the_json_format_names_a_value_it_cannot_write() -> None:
    from squall.connectors.kafka.encoding import RecordEncoder, RecordEncodingError

    encoder = RecordEncoder("out", "key", "value", "json")

    class Row(dict[str, Any]):
        fields = ["key", "value"]

    assert encoder.encode(Row(key=7, value={"a": 1})) == ("out", b"7", b'{"a": 1}')
    with pytest.raises(RecordEncodingError, match="field 'value' cannot be written as JSON"):
        encoder.encode(Row(key=None, value={1, 2}))
    assert json.loads(encoder.encode(Row(key=None, value=[None]))[2] or b"") == [None]


def test_without_a_value_field_the_value_is_the_whole_tuple_as_json() -> None:
    from squall.connectors.kafka.encoding import RecordEncoder
    from squall.model.fields import Fields
    from squall.trident.tuple import TridentTuple

    encoder = RecordEncoder("out", "product", None, "json")
    row = TridentTuple([1_000, "p-1", 3], Fields(["window_end", "product", "actions"]))
    assert encoder.encode(row) == (
        "out",
        b"p-1",
        b'{"window_end": 1000, "product": "p-1", "actions": 3}',
    )


def test_the_bolt_asks_for_ticks_of_its_period_or_none() -> None:
    from squall import Config

    ticks = Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS
    assert KafkaBolt("b:1", "out").get_component_configuration() == {ticks: 0.1}
    assert KafkaBolt("b:1", "out", tick_secs=2.5).get_component_configuration() == {ticks: 2.5}
    assert KafkaBolt("b:1", "out", tick_secs=None).get_component_configuration() is None
