"""The checks that tell a KafkaSpout partition's new log from the one it read (unit
tests over stand-in records), and the start and end asked of the broker for the lag of
partitions not fetched yet."""

from __future__ import annotations

from typing import Any

import pytest

from squall.connectors.kafka import KafkaSpout
from squall.connectors.kafka.logcheck import (
    admin_config,
    committed_lost,
    end_before,
    record_changed,
)
from squall.connectors.kafka.offsets import PartitionOffsets, offset_metrics

pytest.importorskip("confluent_kafka")


class Record:
    """A stand-in for a confluent-kafka message."""

    def __init__(
        self, offset: int, timestamp: int = 1000, key: bytes | None = b"k", value: bytes = b"v"
    ) -> None:
        self._offset, self._timestamp, self._key, self._value = offset, timestamp, key, value

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, self._timestamp)

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes:
        return self._value


def test_the_same_record_at_the_position_is_the_same_log() -> None:
    assert record_changed(Record(299), ("record", Record(299)), None) is None


@pytest.mark.parametrize(
    "other", [Record(299, timestamp=2000), Record(299, key=None), Record(299, value=b"w")]
)
def test_another_record_at_the_position_is_a_new_log(other: Record) -> None:
    assert record_changed(Record(299), ("record", other), None) == (
        "the record at offset 299 is not the one the spout read"
    )


def test_a_log_ending_before_the_record_is_a_new_log() -> None:
    assert record_changed(Record(299), ("end", 120), None) == (
        "the log ends at offset 120, before the record at 299 the spout read"
    )


def test_a_record_dropped_by_compaction_or_retention_is_not_a_new_log() -> None:
    assert record_changed(Record(299), ("record", Record(305)), None) is None
    assert record_changed(Record(299), ("out of range", None), 400) is None
    assert record_changed(Record(299), ("out of range", None), 0) == (
        "offset 299, which the spout read, is out of the log's range"
    )


def test_the_end_and_the_committed_offset_against_the_position() -> None:
    assert end_before(("end", 0), 300) == "its end (0) is behind the spout's position (300)"
    assert end_before(("end", 300), 300) is None
    assert end_before(("record", Record(299)), 300) is None
    assert committed_lost(-1001, 300) == (
        "the group's committed offset is none where the broker had confirmed 300"
    )
    assert committed_lost(12, 300) == (
        "the group's committed offset is 12 where the broker had confirmed 300"
    )
    assert committed_lost(300, 300) is None
    assert committed_lost(450, 300) is None  # a commit sent before the outage, confirmed late


def test_the_admin_client_leaves_out_the_consumer_settings() -> None:
    conf = {"bootstrap.servers": "h:1", "group.id": "g", "enable.auto.commit": False, "x": 1}
    assert admin_config(conf) == {"bootstrap.servers": "h:1", "x": 1}


class Watermarks:
    """A client whose fetches gave ``cached``; asked, it answers ``listed``."""

    def __init__(
        self,
        cached: dict[tuple[str, int], tuple[int, int]],
        listed: dict[tuple[str, int], tuple[int, int]] | None = None,
    ) -> None:
        self.cached, self.listed = cached, listed or {}
        self.asked: list[tuple[str, int]] = []

    def get_watermark_offsets(
        self, partition: Any, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        tp = (partition.topic, partition.partition)
        if cached:
            return self.cached.get(tp, (-1001, -1001))
        self.asked.append(tp)
        return self.listed[tp]


def test_partitions_not_fetched_are_asked_of_the_broker_for_the_lag() -> None:
    spout = KafkaSpout("127.0.0.1:9092", "t", "g")
    parts = {("t", 0): PartitionOffsets(committed=10, next_offset=10), ("t", 1): PartitionOffsets()}
    spout._assigned = sorted(parts)
    spout._parts = parts
    spout._poll_timeout = spout._request_timeout = 1.0
    spout._outage = type("NoOutage", (), {"failures": 0})()  # type: ignore[assignment]
    spout._consumer = Watermarks({("t", 0): (0, 50)})
    spout._lister = Watermarks({}, {("t", 1): (100, 16_000)})
    spout._list_unfetched()
    assert spout._lister.asked == [("t", 1)]  # the fetched partition is not asked
    assert spout._listed == {("t", 1): (100, 16_000)}
    values = offset_metrics(spout._consumer, spout._assigned, parts, spout._listed)
    assert values["t/totalSpoutLag"] == 40 + 15_900


class Collector:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def report_error(self, error: BaseException) -> None:
        self.errors.append(str(error))


class Committed:
    """A consumer whose group committed ``offset`` for every partition asked."""

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        for partition in partitions:
            partition.offset = self.offset
        return partitions


def test_a_check_the_broker_refuses_is_reported_and_the_others_decide(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import confluent_kafka

    from squall.connectors.kafka import spoutpartitions

    def refused(*args: Any) -> dict[str, str]:
        error = confluent_kafka.KafkaError(
            confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED, "not allowed"
        )
        raise confluent_kafka.KafkaException(error)

    def unreachable(*args: Any) -> dict[str, str]:
        error = confluent_kafka.KafkaError(confluent_kafka.KafkaError._TRANSPORT, "down")
        raise confluent_kafka.KafkaException(error)

    monkeypatch.setattr(spoutpartitions, "probe", lambda *args: {})
    monkeypatch.setattr(spoutpartitions, "topic_ids", refused)
    spout = KafkaSpout("127.0.0.1:9092", "t", "g")
    spout._label, spout._reported = "KafkaSpout 'events'", {}
    spout.collector = Collector()  # type: ignore[assignment]
    spout._poll_timeout = spout._request_timeout = 1.0
    spout._outage = type("NoOutage", (), {"failures": 0})()  # type: ignore[assignment]
    spout._parts = {("t", 0): PartitionOffsets(committed=300, next_offset=300)}
    spout._topic_ids, spout._last, spout._admin = {"t": "id-1"}, {}, object()
    spout._consumer = Committed(-1001)
    assert spout._log_changes([("t", 0)]) == {
        ("t", 0): "the group's committed offset is none where the broker had confirmed 300"
    }
    assert spout.collector.errors == [
        "KafkaSpout 'events': could not read topic ids to check the logs: not allowed"
    ]
    monkeypatch.setattr(spoutpartitions, "topic_ids", unreachable)
    with pytest.raises(confluent_kafka.KafkaException):  # held, tried again after the back-off
        spout._log_changes([("t", 0)])
