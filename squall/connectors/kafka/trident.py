"""``KafkaTridentSpout``: Kafka topics as a partitioned Trident spout (Storm's
``KafkaTridentSpoutOpaque`` and ``KafkaTridentSpoutTransactional``).

Partitions: one Trident partition per Kafka partition, numbered topic by topic in the
order ``topics`` lists them, then by partition number (``topics=["a", "b"]`` with 2
partitions each: 0 = a/0, 1 = a/1, 2 = b/0, 3 = b/1). The coordinator counts the
partitions that exist at each batch, so partitions added to the last topic, and a
topic at the end of the list created later, are read from their next batch on. A topic
that does not exist yet holds back the topics listed after it (their numbers would
change when it is created). Keep the order of ``topics`` across restarts and add
topics only at the end: an emitter whose partition number now names another Kafka
partition than its batches so far read fails the batch, naming both.

A partition's batch is an offset range read without a consumer group's offsets (the
consumer ``assign``\\ s the partition; the position lives in Trident's coordination
store or the Spark checkpoint), recorded as the batch's metadata :class:`OffsetRange`
(topic, partition, first offset read from, the offset after the range, records read).
A new range starts at the previous range's end (a partition's first batch: its first
record with ``first_poll_offset="earliest"``, or its true end at that moment with
``"latest"``, looked up again by each attempt of an opaque spout) and ends after
``max_batch_records`` records or at the partition's end at that moment (the
end-of-partition event of the fetch: the consumer never waits for records).

Guarantee, with a transactional or opaque Trident state: **exactly-once**.

* ``opaque=False``: a transactional spout (Storm's ``IPartitionedTridentSpout``): a
  replayed transaction reads exactly its recorded range again, so it emits the same
  records (provided retention has not deleted them: a record missing from a replay is
  logged).
* ``opaque=True`` (the default): an opaque spout (Storm's
  ``IOpaquePartitionedTridentSpout``): every attempt reads on from the end of the
  latest earlier transaction's range, so a replay may hold more records than the first
  attempt but each record ends up in exactly one committed batch.

A topology restarted with the same ``topology.transactional.state.dir`` (local engine)
or checkpoint directory (Spark) continues after the last committed ranges.

Tuples: a record becomes a tuple with :class:`~squall.connectors.kafka.records.RecordReader`
(``fields``, ``translator``, ``key_format``, ``value_format``, as the core Kafka spout).
Trident has no error stream: a malformed record is left out of the batch (it still
counts in the range, so a replay leaves it out alike), logged as a warning on the
``squall`` logger naming the topic, partition, offset and what is wrong, and reported
through the collector where the engine keeps a batch's reported errors without failing
it (the local engine: the emitter component's errors; on Spark, where a Trident
emitter's reported error fails the micro-batch, it is only logged).

Where it runs: the spout carries only options and pickles. The coordinator runs in the
coordinator task (on Spark, the source's driver-side process) with a consumer of its
own that only reads metadata. Emitters run in the emitter tasks (on Spark, in
executors, one Spark partition per Kafka partition), each with its own consumer
(``assign`` only, a group id of its own, nothing committed), made at its first batch.
Partitions are spread over the emitter tasks (``new_stream(...).parallelism_hint(n)``).

Failures: a broker that cannot be reached fails the batch with
:class:`~squall.connectors.errors.ConnectorUnavailableError` naming the spout, its
stream id, the partition and the bootstrap servers; the engine replays the batch after
its back-off (``topology.trident.batch.retry.*``; on Spark, up to
``topology.spark.batch.retries`` runs of the micro-batch). While the coordinator cannot
list the partitions it keeps the number it last saw (none yet: no batch starts).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from squall.connectors.errors import ConnectorError, ConnectorUnavailableError
from squall.connectors.kafka.client import (
    REQUEST_TIMEOUT,
    check_bootstrap,
    check_client_conf,
    check_conf,
    check_installed,
    consumer_config,
    end_offsets,
    is_unreachable,
    kafka,
    one_line,
    redact_conf,
)
from squall.connectors.kafka.records import (
    FORMATS,
    RECORD_FIELDS,
    MalformedRecordError,
    RecordReader,
    Translator,
)
from squall.connectors.options import OptionChecker
from squall.model.context import TopologyContext
from squall.model.fields import Fields
from squall.model.hooks import ValidatesSubmission
from squall.trident.collector import Collector
from squall.trident.spouts import OpaquePartitionedTridentSpout, PartitionedTridentSpout

logger = logging.getLogger("squall")

#: Records per partition and batch, by default.
DEFAULT_MAX_BATCH_RECORDS = 1000
#: Where a partition's first batch starts.
FIRST_POLL_OFFSETS = ("earliest", "latest")
#: Consumer settings the spout sets itself: given in ``consumer_conf`` they are
#: refused, with the reason.
OWNED = {
    "bootstrap.servers": "use bootstrap_servers",
    "group.id": "the spout's consumers use a group id of their own and commit nothing",
    "enable.auto.commit": "the spout's consumers commit nothing",
    "enable.auto.offset.store": "the spout's consumers commit nothing",
    "enable.partition.eof": "the spout ends a batch at the partition's end",
    "auto.offset.reset": "use first_poll_offset",
}
#: Consumer settings the spout uses unless ``consumer_conf`` says otherwise.
TRIDENT_CONSUMER_DEFAULTS: dict[str, Any] = {
    # A fetch at the end of a partition answers (the end-of-partition event) after at
    # most this long: a batch of an idle partition takes about that.
    "fetch.wait.max.ms": 100,
}
#: Seconds between two polls of the consumer while a batch is read.
POLL_SECONDS = 0.05
#: Records asked of the consumer per poll, at most.
POLL_RECORDS = 500


@dataclass(frozen=True)
class OffsetRange:
    """The metadata of one partition's batch.

    Attributes:
        topic: the Kafka topic.
        partition: the Kafka partition (of ``topic``).
        first: the offset the batch read from (its first record's offset or less).
        next: the offset after the range: where the next batch reads from.
        count: the records read (malformed ones included).
    """

    topic: str
    partition: int
    first: int
    next: int
    count: int


def ordered_partitions(client: Any, topics: Sequence[str], timeout: float) -> list[tuple[str, int]]:
    """The Trident partitions of ``topics``: their Kafka partitions, topic by topic in
    the order given, then by partition number, up to the first topic that does not
    exist (see the module docstring).

    Args:
        client: a consumer (anything with ``list_topics``).
        topics: the topics, in order.
        timeout: seconds to wait for the broker.

    Raises:
        KafkaException: the broker did not answer within ``timeout``.
    """
    metadata = client.list_topics(timeout=timeout)
    found: list[tuple[str, int]] = []
    for topic in topics:
        described = metadata.topics.get(topic)
        if described is None or described.error is not None or not described.partitions:
            break
        found.extend((topic, partition) for partition in sorted(described.partitions))
    return found


class KafkaPartitionCoordinator:
    """The coordinator: counts the partitions of the topics at each batch (see the
    module docstring). Runs in the coordinator task (Spark: the driver-side source);
    its consumer only reads metadata."""

    def __init__(self, spout: KafkaTridentSpout, component: str) -> None:
        self.spout = spout
        self.label = f"{type(spout).__name__} {component!r}"
        self.conf = spout.consumer_settings(component)
        self._consumer: Any = None
        #: The most partitions seen so far (None: never listed).
        self.count: int | None = None
        self._failing = False

    def _list(self) -> int | None:
        if self._consumer is None:
            self._consumer = kafka().Consumer(self.conf)
        try:
            listed = len(ordered_partitions(self._consumer, self.spout.topics, REQUEST_TIMEOUT))
        except kafka().KafkaException as error:
            if not self._failing:
                self._failing = True
                logger.warning(
                    "%s cannot list the partitions of %s at %s: %s; %s",
                    self.label,
                    ", ".join(self.spout.topics),
                    self.spout.bootstrap_servers,
                    one_line(error),
                    "no batch starts until it can"
                    if self.count is None
                    else f"keeping the {self.count} partitions known",
                )
            return self.count
        self._failing = False
        self.count = max(listed, self.count or 0)
        return self.count

    def number_of_partitions(self) -> int:
        """The partitions now (those known so far while the broker cannot be reached)."""
        return self._list() or 0

    def is_ready(self) -> bool:
        """Whether the partitions were ever listed (they are, if not yet)."""
        return self.count is not None or self._list() is not None

    def close(self) -> None:
        """Close the consumer."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with contextlib.suppress(Exception):
                consumer.close()


class KafkaTridentSpout(ValidatesSubmission):
    """A partitioned Trident spout over Kafka topics, one partition per Kafka partition.

    ``KafkaTridentSpout(..., opaque=True)`` makes an :class:`OpaqueKafkaTridentSpout`,
    ``opaque=False`` a :class:`TransactionalKafkaTridentSpout` (both are instances of
    this class); see the module docstring for their guarantees.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> KafkaTridentSpout:
        if cls is KafkaTridentSpout:
            opaque = kwargs.get("opaque", args[2] if len(args) > 2 else True)
            cls = OpaqueKafkaTridentSpout if opaque else TransactionalKafkaTridentSpout
        return object.__new__(cls)

    def __init__(
        self,
        bootstrap_servers: str,
        topics: str | Sequence[str],
        opaque: bool = True,
        *,
        fields: Sequence[str] = RECORD_FIELDS,
        translator: Translator | None = None,
        key_format: str = "str",
        value_format: str = "str",
        first_poll_offset: str = "earliest",
        max_batch_records: int = DEFAULT_MAX_BATCH_RECORDS,
        consumer_conf: Mapping[str, Any] | None = None,
    ) -> None:
        """Keep the options; they are checked when the topology is submitted.

        Args:
            bootstrap_servers: the brokers, ``host:port[,host:port...]``.
            topics: the topics (a name: one topic), in partition order (see the module
                docstring); keep the order across restarts.
            opaque: an opaque spout (True) or a transactional one (False).
            fields: the tuple's fields (see :mod:`squall.connectors.kafka.records`).
            translator: ``record -> values`` (or None to skip the record) instead of
                ``fields``' default mapping; one stream only.
            key_format: how keys are decoded: ``"str"``, ``"bytes"`` or ``"json"``.
            value_format: how values are decoded: ``"str"``, ``"bytes"`` or ``"json"``.
            first_poll_offset: where a partition's first batch starts: ``"earliest"``
                (its first record) or ``"latest"`` (its end at that moment).
            max_batch_records: the most records a partition gives one batch.
            consumer_conf: more librdkafka consumer settings (security, timeouts).
        """
        self.bootstrap_servers = bootstrap_servers
        self.topics = [topics] if isinstance(topics, str) else topics
        if isinstance(self.topics, (list, tuple)):
            self.topics = list(self.topics)
        self.opaque = opaque
        self.fields = tuple(fields) if isinstance(fields, (list, tuple)) else fields
        self.translator = translator
        self.key_format = key_format
        self.value_format = value_format
        self.first_poll_offset = first_poll_offset
        self.max_batch_records = max_batch_records
        self.consumer_conf = (
            dict(consumer_conf) if isinstance(consumer_conf, Mapping) else consumer_conf
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(bootstrap_servers={self.bootstrap_servers!r}, "
            f"topics={self.topics!r}, consumer_conf={redact_conf(self.consumer_conf)!r})"
        )

    def check_options(self, checker: OptionChecker) -> None:
        """Check every option; raise the checker's error at the first wrong one."""
        check_installed(checker)
        check_bootstrap(checker, self.bootstrap_servers)
        topics = self.topics
        if isinstance(topics, re.Pattern):
            raise checker.fail(
                "topics must name the topics (patterns are not supported: the partitions' "
                f"numbers follow the order of the names), got {topics!r}"
            )
        if not isinstance(topics, list) or not topics:
            raise checker.fail(
                f"topics must be a topic name or a non-empty list of names, got {topics!r}"
            )
        for topic in topics:
            checker.text("a topic of topics", topic)
        if len(set(topics)) != len(topics):
            raise checker.fail(f"topics names a topic twice: {topics}")
        if not isinstance(self.opaque, bool):
            raise checker.fail(f"opaque must be True or False, got {self.opaque!r}")
        checker.field_names("fields", self.fields)
        if self.translator is not None:
            if not callable(self.translator):
                raise checker.fail(f"translator must be callable, got {self.translator!r}")
            if hasattr(self.translator, "output_fields"):
                raise checker.fail(
                    "translator may not declare output_fields: a Trident spout emits one "
                    "stream, with fields"
                )
        checker.choice("key_format", self.key_format, FORMATS)
        checker.choice("value_format", self.value_format, FORMATS)
        checker.choice("first_poll_offset", self.first_poll_offset, FIRST_POLL_OFFSETS)
        checker.positive_int("max_batch_records", self.max_batch_records)
        if isinstance(self.consumer_conf, Mapping):
            for option in self.consumer_conf:
                if option in OWNED:
                    raise checker.fail(f"consumer_conf may not set {option!r}: {OWNED[option]}")
        check_conf(checker, "consumer_conf", self.consumer_conf, {})
        check_client_conf(checker, "consumer_conf", self.consumer_settings("check"))

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Check the options where the topology is submitted (``component_id``: the
        stream id given to ``new_stream``).

        Raises:
            InvalidTopologyError: an option is wrong; the message names the stream id.
        """
        self.check_options(OptionChecker(component_id, type(self).__name__))

    def consumer_settings(self, component: str) -> dict[str, Any]:
        """The settings of the consumers of component ``component``: no commits, the
        end-of-partition event on, a group id of their own (never joined)."""
        conf = consumer_config(
            self.bootstrap_servers,
            f"squall-trident-{component}",
            {**TRIDENT_CONSUMER_DEFAULTS, **(self.consumer_conf or {})},
        )
        conf["enable.partition.eof"] = True
        conf["auto.offset.reset"] = "earliest"
        return conf

    def get_output_fields(self) -> Fields:
        """The tuple's fields."""
        return Fields(list(self.fields))

    def get_coordinator(
        self, conf: dict[str, Any], context: TopologyContext
    ) -> KafkaPartitionCoordinator:
        """The coordinator (in the coordinator task): counts the partitions."""
        return KafkaPartitionCoordinator(self, context.component_id)

    def get_emitter(self, conf: dict[str, Any], context: TopologyContext) -> KafkaRangeReader:
        """The emitter of a task: an :class:`OpaqueOffsetEmitter` for an opaque spout,
        else a :class:`TransactionalOffsetEmitter`. Runs in the emitter task."""
        if self.opaque:
            return OpaqueOffsetEmitter(self, context)
        return TransactionalOffsetEmitter(self, context)


class KafkaRangeReader:
    """Reads offset ranges of the spout's partitions and emits their records; the base
    of the emitters. Runs in an emitter task; makes its consumer at its first batch."""

    def __init__(self, spout: KafkaTridentSpout, context: TopologyContext) -> None:
        self.spout = spout
        self.component = context.component_id
        self.label = f"{type(spout).__name__} {self.component!r}"
        self.reader = RecordReader(
            spout.fields, spout.key_format, spout.value_format, spout.translator
        )
        self.width = len(spout.fields)
        self.conf = spout.consumer_settings(self.component)
        self._consumer: Any = None
        self._partitions: list[tuple[str, int]] = []
        #: The records the last read returned.
        self.records: list[Any] = []

    # --- the consumer ------------------------------------------------------------------

    def _unavailable(self, index: int, error: Any, where: str = "") -> ConnectorUnavailableError:
        at = f"partition {index}{f' ({where})' if where else ''}"
        return ConnectorUnavailableError(
            f"{self.label} cannot reach the Kafka brokers {self.spout.bootstrap_servers} "
            f"for {at}: {one_line(error)}; the batch is replayed"
        )

    def _client(self) -> Any:
        if self._consumer is None:
            self._consumer = kafka().Consumer(self.conf)
        return self._consumer

    def kafka_partition(self, index: int, meta: OffsetRange | None) -> tuple[str, int]:
        """The Kafka partition of Trident partition ``index``.

        Raises:
            ConnectorUnavailableError: the partitions cannot be listed.
            ConnectorError: no Kafka partition has that number, or ``meta`` (the
                partition's earlier batch) read another one.
        """
        if index >= len(self._partitions):
            try:
                listed = ordered_partitions(self._client(), self.spout.topics, REQUEST_TIMEOUT)
            except kafka().KafkaException as error:
                raise self._unavailable(index, error) from error
            if len(listed) >= len(self._partitions):
                self._partitions = listed
        if index >= len(self._partitions):
            raise ConnectorError(
                f"{self.label}: no Kafka partition is partition {index}: topics "
                f"{', '.join(self.spout.topics)} have {len(self._partitions)} (was a topic "
                "deleted?)"
            )
        found = self._partitions[index]
        if meta is not None and (meta.topic, meta.partition) != found:
            raise ConnectorError(
                f"{self.label}: partition {index} is now Kafka partition {found[0]}/"
                f"{found[1]}, but its batches so far read {meta.topic}/{meta.partition}: the "
                "order of topics changed (keep it, and add topics only at the end)"
            )
        return found

    def _read(
        self, index: int, topic: str, partition: int, start: int, limit: int, until: int | None
    ) -> tuple[list[Any], int]:
        """Read ``topic``/``partition`` from ``start``: at most ``limit`` records, none
        at or after ``until``, stopping at the partition's end. Returns the records and
        the offset after what was read."""
        confluent = kafka()
        consumer = self._client()
        where = f"{topic}/{partition}"
        try:
            consumer.assign([confluent.TopicPartition(topic, partition, start)])
        except confluent.KafkaException as error:
            raise self._unavailable(index, error, where) from error
        records: list[Any] = []
        deadline = time.monotonic() + REQUEST_TIMEOUT
        while True:
            try:
                polled = consumer.consume(min(POLL_RECORDS, limit - len(records)), POLL_SECONDS)
            except confluent.KafkaException as error:
                raise self._unavailable(index, error, where) from error
            if polled:
                deadline = time.monotonic() + REQUEST_TIMEOUT
            for message in polled:
                problem = message.error()
                if problem is not None:
                    if problem.code() == confluent.KafkaError._PARTITION_EOF:
                        return records, int(message.offset())
                    if is_unreachable(problem):
                        raise self._unavailable(index, problem, where)
                    raise ConnectorError(
                        f"{self.label}: reading {where} (partition {index}) failed: "
                        f"{one_line(problem)}"
                    )
                offset = int(message.offset())
                if until is not None and offset >= until:
                    return records, until
                records.append(message)
                if len(records) >= limit:
                    return records, offset + 1
            if time.monotonic() > deadline:
                raise self._unavailable(
                    index,
                    f"no records and no end of partition within {REQUEST_TIMEOUT:g} s",
                    where,
                )

    def start_offset(self, index: int, topic: str, partition: int) -> int:
        """Where a partition's first batch reads from: ``OFFSET_BEGINNING``, or the
        partition's true end for ``first_poll_offset="latest"``."""
        if self.spout.first_poll_offset == "earliest":
            return int(kafka().OFFSET_BEGINNING)
        try:
            return end_offsets(self.conf, [(topic, partition)])[(topic, partition)]
        except kafka().KafkaException as error:
            raise self._unavailable(index, error, f"{topic}/{partition}") from error

    def read_after(self, index: int, last: OffsetRange | None) -> OffsetRange:
        """Read the next records of partition ``index`` after ``last`` (at most
        ``max_batch_records``, up to the partition's end) into :attr:`records`; their
        range."""
        topic, partition = self.kafka_partition(index, last)
        start = last.next if last is not None else self.start_offset(index, topic, partition)
        limit = self.spout.max_batch_records
        records, end = self._read(index, topic, partition, start, limit, None)
        self.records = records
        if start < 0:  # the beginning: the range starts where the records do
            start = int(records[0].offset()) if records else end
        return OffsetRange(topic, partition, start, end, len(records))

    def read_range(self, index: int, meta: OffsetRange) -> list[Any]:
        """The records of ``meta``'s range again."""
        self.kafka_partition(index, meta)
        if meta.count == 0:
            return []
        records, _ = self._read(
            index, meta.topic, meta.partition, meta.first, meta.count, meta.next
        )
        if len(records) != meta.count:
            logger.warning(
                "%s: %s/%s lost records of a batch being replayed: %d of %d in offsets "
                "%d..%d are left (deleted by retention?)",
                self.label,
                meta.topic,
                meta.partition,
                len(records),
                meta.count,
                meta.first,
                meta.next - 1,
            )
        return records

    # --- emitting ----------------------------------------------------------------------

    def emit(self, collector: Collector, records: list[Any]) -> None:
        """Emit the records' tuples; set malformed ones aside (see the module docstring)."""
        read = self.reader.read
        for message in records:
            try:
                row = read(message)
                if row is not None and len(row[1]) != self.width:
                    raise MalformedRecordError(
                        f"translator returned {len(row[1])} values for {self.width} fields "
                        f"{list(self.spout.fields)}"
                    )
            except MalformedRecordError as error:
                self._set_aside(collector, message, error)
                continue
            if row is not None:
                collector.emit(row[1])

    def _set_aside(self, collector: Collector, message: Any, error: MalformedRecordError) -> None:
        text = (
            f"{self.label}: record {message.topic()}/{message.partition()} offset "
            f"{message.offset()} left out: {error}"
        )
        logger.warning("%s", text)
        # An engine that fails the batch of an emitter that reports (Spark) raises the
        # error back: the record is then only logged.
        with contextlib.suppress(MalformedRecordError):
            collector.report_error(MalformedRecordError(text))

    def close(self) -> None:
        """Close the consumer."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with contextlib.suppress(Exception):
                consumer.close()


class TransactionalOffsetEmitter(KafkaRangeReader):
    """A transactional emitter: a new batch reads on after the previous range and is
    recorded; a replay reads its recorded range again."""

    def emit_partition_batch_new(
        self, attempt: Any, collector: Collector, partition: int, last_meta: OffsetRange | None
    ) -> OffsetRange:
        """Emit the partition's next records; return their range."""
        meta = self.read_after(partition, last_meta)
        self.emit(collector, self.records)
        return meta

    def emit_partition_batch(
        self, attempt: Any, collector: Collector, partition: int, meta: OffsetRange
    ) -> None:
        """Emit the records of ``meta``'s range again."""
        self.emit(collector, self.read_range(partition, meta))


class OpaqueOffsetEmitter(KafkaRangeReader):
    """An opaque emitter: every attempt reads on after the latest earlier range."""

    def emit_partition_batch(
        self, attempt: Any, collector: Collector, partition: int, last_meta: OffsetRange | None
    ) -> OffsetRange:
        """Emit the partition's next records after ``last_meta``; return their range."""
        meta = self.read_after(partition, last_meta)
        self.emit(collector, self.records)
        return meta


class TransactionalKafkaTridentSpout(KafkaTridentSpout, PartitionedTridentSpout):
    """``KafkaTridentSpout(..., opaque=False)``: replays are identical (Storm's
    ``KafkaTridentSpoutTransactional``)."""


class OpaqueKafkaTridentSpout(KafkaTridentSpout, OpaquePartitionedTridentSpout):
    """``KafkaTridentSpout(..., opaque=True)``: replays read on from the latest earlier
    range (Storm's ``KafkaTridentSpoutOpaque``)."""


__all__ = [
    "DEFAULT_MAX_BATCH_RECORDS",
    "FIRST_POLL_OFFSETS",
    "KafkaPartitionCoordinator",
    "KafkaRangeReader",
    "KafkaTridentSpout",
    "OffsetRange",
    "OpaqueKafkaTridentSpout",
    "OpaqueOffsetEmitter",
    "TransactionalKafkaTridentSpout",
    "TransactionalOffsetEmitter",
    "ordered_partitions",
]
