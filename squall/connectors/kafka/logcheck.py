"""Whether a partition's log is still the one a ``KafkaSpout`` task was reading: asked
after the broker could not be reached, because a broker that lost its data (an
in-memory broker restarted, a topic deleted and made again meanwhile) may hold a new
log under the same name, whose offsets mean other records.

What the broker holds now is compared with what the task saw: the topic's id (where the
broker gives one), the group's committed offset (never below one the broker confirmed),
and the record at the task's position (the last record it handled: same offset, same
timestamp, key and value; the log not ending before it). Each check answers why the log
is a new one, or None when it found nothing against it.

Runs on the spout task's thread, with short-lived clients of its own; each request
waits at most the given timeout.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from squall.connectors.kafka.client import kafka

Tp = tuple[str, int]

#: What a probe found at an offset: ``("record", message)``, ``("end", end offset)`` or
#: ``("out of range", None)``.
Found = tuple[str, Any]


def admin_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of an admin client from a consumer's: the consumer-only settings
    left out."""
    consumer_only = {"group.id", "enable.auto.commit", "enable.auto.offset.store"}
    return {name: value for name, value in conf.items() if name not in consumer_only}


def topic_ids(admin: Any, topics: Iterable[str], timeout: float) -> dict[str, str]:
    """The ids of ``topics`` that exist and that the broker gives an id for (a broker
    without topic ids, or a topic missing, leaves its name out).

    Raises:
        KafkaException: the broker could not be reached or did not answer in time.
    """
    confluent = kafka()
    names = sorted(set(topics))
    if not names:
        return {}
    futures = admin.describe_topics(
        confluent.TopicCollection(names), request_timeout=max(timeout, 0.001)
    )
    ids: dict[str, str] = {}
    for name, future in futures.items():
        try:
            described = future.result(timeout=timeout + 1.0)
        except confluent.KafkaException as error:
            code = error.args[0].code() if error.args and hasattr(error.args[0], "code") else None
            if code in (
                confluent.KafkaError.UNKNOWN_TOPIC_OR_PART,
                confluent.KafkaError.UNKNOWN_TOPIC_ID,
                confluent.KafkaError.TOPIC_AUTHORIZATION_FAILED,
            ):
                continue
            raise
        topic_id = getattr(described, "topic_id", None)
        text = str(topic_id) if topic_id is not None else ""
        if text and set(text) not in ({"A"}, {"A", "="}):  # an all-zero id: none given
            ids[name] = text
    return ids


def probe(conf: Mapping[str, Any], offsets: Mapping[Tp, int], timeout: float) -> dict[Tp, Found]:
    """What each partition holds at its offset in ``offsets``: the first record at or
    after it, the end of the partition if it ends at or before it, or that the offset
    is out of the log's range.

    Runs with a consumer of its own made from ``conf`` (nothing is committed).

    Raises:
        KafkaException: the broker did not answer for every partition within
            ``timeout`` seconds.
    """
    confluent = kafka()
    if not offsets:
        return {}
    consumer = confluent.Consumer(
        {
            **conf,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
        }
    )
    try:
        consumer.assign([confluent.TopicPartition(t, p, o) for (t, p), o in offsets.items()])
        found: dict[Tp, Found] = {}
        deadline = time.monotonic() + timeout
        out_of_range = (
            confluent.KafkaError._AUTO_OFFSET_RESET,
            confluent.KafkaError.OFFSET_OUT_OF_RANGE,
        )
        while len(found) < len(offsets):
            if time.monotonic() > deadline:
                missing = sorted(f"{t}/{p}" for t, p in offsets if (t, p) not in found)
                raise confluent.KafkaException(
                    confluent.KafkaError(
                        confluent.KafkaError._TIMED_OUT,
                        f"no answer for {missing} within {timeout:g} s",
                    )
                )
            for message in consumer.consume(100, 0.1):
                tp = (message.topic(), message.partition())
                if tp not in offsets or tp in found:
                    continue
                error = message.error()
                if error is None:
                    found[tp] = ("record", message)
                elif error.code() == confluent.KafkaError._PARTITION_EOF:
                    found[tp] = ("end", message.offset())
                elif error.code() in out_of_range:
                    found[tp] = ("out of range", None)
                elif error.fatal() or not error.retriable():
                    raise confluent.KafkaException(error)
        return found
    finally:
        consumer.close()


def record_changed(last: Any, found: Found, low: int | None) -> str | None:
    """Why the log no longer holds ``last`` (the last record the task handled), from
    what a :func:`probe` at its offset found; None if nothing says so (the record
    itself, or records after it: compaction may drop a record).

    Args:
        last: the record (a confluent-kafka message) the task handled last.
        found: the probe's answer at ``last``'s offset.
        low: the log's start now (needed when the offset is out of range), or None.
    """
    offset = last.offset()
    kind, value = found
    if kind == "end":
        return f"the log ends at offset {value}, before the record at {offset} the spout read"
    if kind == "out of range":
        if low is not None and low > offset:
            return None  # older records deleted by retention: the same log
        return f"offset {offset}, which the spout read, is out of the log's range"
    if value.offset() != offset:
        return None
    if (
        value.timestamp() != last.timestamp()
        or value.key() != last.key()
        or value.value() != last.value()
    ):
        return f"the record at offset {offset} is not the one the spout read"
    return None


def end_before(found: Found, position: int) -> str | None:
    """Why the log is a new one when the task has a position but no record of it: the
    log ends before the record before that position."""
    kind, value = found
    if kind == "end" and value < position:
        return f"its end ({value}) is behind the spout's position ({position})"
    return None


def committed_lost(found: int, committed: int) -> str | None:
    """Why the log is a new one when the group's committed offset is ``found`` (negative:
    none) where the broker confirmed ``committed`` to the task."""
    if found < committed:
        shown = found if found >= 0 else "none"
        return f"the group's committed offset is {shown} where the broker had confirmed {committed}"
    return None


__all__ = [
    "Found",
    "admin_config",
    "committed_lost",
    "end_before",
    "probe",
    "record_changed",
    "topic_ids",
]
