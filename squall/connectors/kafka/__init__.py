"""Kafka connectors (Storm's storm-kafka-client), with confluent-kafka as the client
(``pip install 'squall[kafka]'``).

* :class:`KafkaSpout`: Storm's ``KafkaSpout``: partitions assigned by the spout itself,
  at-least-once (commits of the acked prefix, failed records replayed after a
  :class:`RetryBackoff`), at-most-once or no guarantee.
"""

from squall.connectors.kafka.records import (
    ERROR_FIELDS,
    ERRORS_STREAM,
    RECORD_FIELDS,
    KafkaRecord,
    MalformedRecordError,
)
from squall.connectors.kafka.retry import RetryBackoff
from squall.connectors.kafka.spout import KafkaSpout

__all__ = [
    "ERRORS_STREAM",
    "ERROR_FIELDS",
    "RECORD_FIELDS",
    "KafkaRecord",
    "KafkaSpout",
    "MalformedRecordError",
    "RetryBackoff",
]
