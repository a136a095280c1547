"""What the Kafka connectors share: the true end of a partition, the topics a selection
reads, and records as tuple values."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest

from squall.connectors.kafka.client import (
    TopicSelection,
    check_bootstrap,
    check_conf,
    end_offsets,
    list_partitions,
    redact_conf,
)
from squall.connectors.kafka.records import (
    ERRORS_STREAM,
    KafkaRecord,
    MalformedRecordError,
    RecordReader,
    decode,
    error_values,
)
from squall.connectors.options import OptionChecker
from squall.model.errors import InvalidTopologyError
from tests.conftest import unique_name
from tests.kafka_broker import KafkaBroker

CHECKER = OptionChecker("events", "KafkaSpout")


def test_the_end_of_a_partition_is_the_offset_after_its_last_record(
    kafka_broker: KafkaBroker,
) -> None:
    topic = kafka_broker.create_topic(unique_name("ends"), 3)
    # Partition 0: 40 records written in few batches; 1: one batch per record; 2: none.
    kafka_broker.produce(topic, [f"a{i}" for i in range(40)], partition=0)
    kafka_broker.produce(topic, ["b0", "b1", "b2"], partition=1, one_batch_each=True)
    conf = {"bootstrap.servers": kafka_broker.bootstrap, "group.id": unique_name("ends")}
    partitions = [(topic, 0), (topic, 1), (topic, 2)]
    assert end_offsets(conf, partitions) == {(topic, 0): 40, (topic, 1): 3, (topic, 2): 0}
    assert end_offsets(conf, []) == {}


def test_a_selection_lists_the_sorted_partitions_of_its_topics(kafka_broker: KafkaBroker) -> None:
    prefix = unique_name("listed")
    first = kafka_broker.create_topic(f"{prefix}-b", 2)
    second = kafka_broker.create_topic(f"{prefix}-a", 1)
    admin = kafka_broker.admin()
    named = TopicSelection.of(CHECKER, [first, second, f"{prefix}-missing"])
    assert list_partitions(admin, named) == [(second, 0), (first, 0), (first, 1)]
    pattern = TopicSelection.of(CHECKER, re.compile(re.escape(prefix) + "-.*"))
    assert list_partitions(admin, pattern) == [(second, 0), (first, 0), (first, 1)]
    assert list_partitions(admin, TopicSelection.of(CHECKER, first)) == [(first, 0), (first, 1)]


def test_a_pattern_matches_whole_topic_names() -> None:
    selection = TopicSelection.of(CHECKER, re.compile("orders-[0-9]+"))
    assert selection.matches("orders-12")
    assert not selection.matches("orders-12-dead")
    assert selection.describe() == "/orders-[0-9]+/"
    assert TopicSelection.of(CHECKER, ["b", "a"]).describe() == "a, b"


@pytest.mark.parametrize(
    ("topics", "message"),
    [
        ([], "topics must be a topic name, a non-empty list of names or a re.Pattern"),
        (["a", "a"], "topics names a topic twice"),
        (["a", ""], "a topic of topics must be a non-empty string"),
        (3, "topics must be a topic name"),
    ],
)
def test_wrong_topics_are_refused_naming_the_component(topics: Any, message: str) -> None:
    with pytest.raises(InvalidTopologyError, match=re.escape(message)) as raised:
        TopicSelection.of(CHECKER, topics)
    assert "component 'events' (KafkaSpout)" in str(raised.value)


@pytest.mark.parametrize("servers", ["", "localhost", "a:1,b", "a:1, :2", 9092])
def test_wrong_bootstrap_servers_are_refused(servers: Any) -> None:
    with pytest.raises(InvalidTopologyError, match="bootstrap_servers must be 'host:port"):
        check_bootstrap(CHECKER, servers)
    assert check_bootstrap(CHECKER, "a:1,b.example:9093") == "a:1,b.example:9093"


def test_client_options_squall_sets_are_refused_naming_the_option_to_use() -> None:
    owned = {"group.id": "group_id"}
    with pytest.raises(
        InvalidTopologyError, match=re.escape("may not set 'group.id': use group_id")
    ):
        check_conf(CHECKER, "consumer_conf", {"group.id": "x"}, owned)
    with pytest.raises(InvalidTopologyError, match="must be a dict of client options"):
        check_conf(CHECKER, "consumer_conf", [("a", 1)], owned)
    assert check_conf(CHECKER, "consumer_conf", None, owned) == {}
    assert redact_conf({"sasl.password": "s3cret", "linger.ms": 5}) == {
        "sasl.password": "***",
        "linger.ms": 5,
    }


@dataclass
class Message:
    """A stand-in for a confluent-kafka message."""

    key_bytes: bytes | None
    value_bytes: bytes | None
    topic_name: str = "orders"
    partition_number: int = 2
    offset_number: int = 17
    timestamp_ms: int = 1_700_000_000_000

    def key(self) -> bytes | None:
        return self.key_bytes

    def value(self) -> bytes | None:
        return self.value_bytes

    def topic(self) -> str:
        return self.topic_name

    def partition(self) -> int:
        return self.partition_number

    def offset(self) -> int:
        return self.offset_number

    def timestamp(self) -> tuple[int, int]:
        return (1, self.timestamp_ms)

    def headers(self) -> list[tuple[str, bytes]]:
        return [("source", b"web")]


def test_the_default_fields_are_storms_five() -> None:
    reader = RecordReader(("topic", "partition", "offset", "key", "value"), "str", "str", None)
    assert reader.read(Message(b"k", "é".encode())) == ("default", ["orders", 2, 17, "k", "é"])
    raw = RecordReader(("topic", "partition", "offset", "key", "value"), "bytes", "bytes", None)
    assert raw.read(Message(None, b"\xff")) == ("default", ["orders", 2, 17, None, b"\xff"])


def test_other_fields_come_from_the_record_or_its_json_value() -> None:
    reader = RecordReader(("offset", "user", "timestamp", "headers"), "str", "json", None)
    assert reader.read(Message(None, b'{"user": "ann", "n": 1}')) == (
        "default",
        [17, "ann", 1_700_000_000_000, [("source", b"web")]],
    )
    with pytest.raises(MalformedRecordError, match="the value has no field 'user'"):
        reader.read(Message(None, b'{"name": "ann"}'))
    with pytest.raises(MalformedRecordError, match="not a JSON object: list"):
        reader.read(Message(None, b"[1, 2]"))


@pytest.mark.parametrize(
    ("data", "fmt", "message"),
    [
        (b"\xff\xfe", "str", "the value is not UTF-8 text"),
        (b"{oops", "json", "the value is not JSON"),
    ],
)
def test_undecodable_values_are_malformed(data: bytes, fmt: str, message: str) -> None:
    with pytest.raises(MalformedRecordError, match=message):
        decode(data, fmt, "value")
    assert decode(None, fmt, "value") is None


def test_a_translator_maps_skips_and_routes_records() -> None:
    def upper(record: KafkaRecord) -> list[Any] | None:
        if record.value == "skip":
            return None
        return [record.key, record.value.upper(), record.headers]

    reader = RecordReader(("key", "shout", "headers"), "str", "str", upper)
    assert reader.read(Message(b"k", b"hey")) == ("default", ["k", "HEY", (("source", b"web"),)])
    assert reader.read(Message(b"k", b"skip")) is None
    assert reader.output_streams() == {"default": ("key", "shout", "headers")}

    class Router:
        output_fields = {"small": ["n"], "large": ["n", "digits"]}

        def __call__(self, record: KafkaRecord) -> tuple[str, list[Any]]:
            n = int(record.value)
            return ("large", [n, len(record.value)]) if n >= 100 else ("small", [n])

    routed = RecordReader(("n",), "str", "str", Router())
    assert routed.read(Message(None, b"7")) == ("small", [7])
    assert routed.read(Message(None, b"700")) == ("large", [700, 3])
    assert routed.output_streams() == {"small": ("n",), "large": ("n", "digits")}
    with pytest.raises(MalformedRecordError, match="translator Router raised ValueError"):
        routed.read(Message(None, b"seven"))


def test_a_malformed_record_goes_out_with_its_bytes_as_text() -> None:
    error = MalformedRecordError("the value is not JSON")
    message = Message(b"k", b"{oops")
    assert error_values(message, error) == ["orders", 2, 17, "k", "{oops", str(error)]
    binary = Message(None, b"caf\xc3\xa9 \xff")
    assert error_values(binary, error) == ["orders", 2, 17, None, "café \\xff", str(error)]
    assert ERRORS_STREAM == "errors"
