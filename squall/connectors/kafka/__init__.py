"""Kafka connectors (Storm's storm-kafka-client), with confluent-kafka as the client
(``pip install 'squall[kafka]'``).
"""

from squall.connectors.kafka.records import (
    ERROR_FIELDS,
    ERRORS_STREAM,
    RECORD_FIELDS,
    KafkaRecord,
    MalformedRecordError,
)
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
    "KafkaRecord",
    "KafkaTridentSpout",
    "MalformedRecordError",
    "OffsetRange",
    "OpaqueKafkaTridentSpout",
    "TransactionalKafkaTridentSpout",
]
