"""Kafka connectors (Storm's storm-kafka-client), with confluent-kafka as the client
(``pip install 'squall[kafka]'``).
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
    "KafkaState",
    "KafkaStateFactory",
    "KafkaStateUpdater",
    "KafkaTridentSpout",
    "MalformedRecordError",
    "OffsetRange",
    "OpaqueKafkaTridentSpout",
    "RecordEncodingError",
    "TransactionalKafkaTridentSpout",
]
