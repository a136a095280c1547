"""Kafka connectors (Storm's storm-kafka-client), with confluent-kafka as the client
(``pip install 'squall[kafka]'``).

* :class:`KafkaSpout`: Storm's ``KafkaSpout``: partitions assigned by the spout itself,
  at-least-once (commits of the acked prefix, failed records replayed after a
  :class:`RetryBackoff`), at-most-once or no guarantee.
* :class:`KafkaBolt`: writes each tuple as a record, acking it once the broker confirms
  it: at-least-once.
* :class:`KafkaTridentSpout`: a partitioned Trident spout, a partition per Kafka
  partition, batches remembered as :class:`OffsetRange`\\ s: exactly-once into
  transactional or opaque state (``opaque=False``: transactional, identical replays).
* :class:`KafkaState` with :class:`KafkaStateUpdater`: a Trident state writing each
  tuple of a batch as a record (Storm's ``TridentKafkaState``): at-least-once.

Each module's docstring states the guarantee, where each method runs and the options.
"""

from squall.connectors.kafka.bolt import KafkaBolt
from squall.connectors.kafka.encoding import RecordEncodingError
from squall.connectors.kafka.records import (
    ERROR_FIELDS,
    ERRORS_STREAM,
    RECORD_FIELDS,
    KafkaRecord,
    MalformedRecordError,
)
from squall.connectors.kafka.retry import RetryBackoff
from squall.connectors.kafka.spout import KafkaSpout
from squall.connectors.kafka.state import KafkaState, KafkaStateFactory, KafkaStateUpdater
from squall.connectors.kafka.trident import (
    KafkaTridentSpout,
    OffsetRange,
    OpaqueKafkaTridentSpout,
    TransactionalKafkaTridentSpout,
)

__all__ = [
    "ERRORS_STREAM",
    "ERROR_FIELDS",
    "RECORD_FIELDS",
    "KafkaBolt",
    "KafkaRecord",
    "KafkaSpout",
    "KafkaState",
    "KafkaStateFactory",
    "KafkaStateUpdater",
    "KafkaTridentSpout",
    "MalformedRecordError",
    "OffsetRange",
    "OpaqueKafkaTridentSpout",
    "RecordEncodingError",
    "RetryBackoff",
    "TransactionalKafkaTridentSpout",
]
