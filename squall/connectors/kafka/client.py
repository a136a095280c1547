"""The Kafka client of a connector task (confluent-kafka, librdkafka's Python client),
and the option checks the Kafka connectors share.

confluent-kafka is imported when a connector first needs it (``pip install
'squall[kafka]'`` installs it); a topology with a Kafka component fails at submit, with
an error naming the component, on a machine that lacks it.

Offsets at the end of a partition: Apache Kafka answers ``ListOffsets(latest)`` with the
offset after the partition's last record. Some Kafka-protocol brokers answer with less
(Tansu 0.6: the base offset of the last record batch plus one), but every broker tells
the true end in its fetch responses (the high watermark). :func:`end_offsets` asks
``ListOffsets`` and then reads the partition from one offset before what it answered to
the end-of-partition event, whose offset is the true end: on Apache Kafka that reads one
record per partition; on such a broker, at most the last batch.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from squall.connectors.options import OptionChecker

#: How to install the client, for the error of a machine that lacks it.
INSTALL_HINT = "pip install 'squall[kafka]'"
#: Seconds a metadata or offsets request waits for the broker.
REQUEST_TIMEOUT = 10.0
#: Options squall sets itself on its consumers: given in ``consumer_conf`` they are
#: refused, naming the option to use instead.
CONSUMER_OWNED = {
    "bootstrap.servers": "bootstrap_servers",
    "group.id": "group_id",
    "enable.auto.commit": "processing_guarantee",
    "enable.auto.offset.store": "processing_guarantee",
}
#: Options squall sets itself on its producers.
PRODUCER_OWNED = {"bootstrap.servers": "bootstrap_servers"}
#: Consumer settings squall uses unless ``consumer_conf`` says otherwise.
CONSUMER_DEFAULTS: dict[str, Any] = {
    # Reconnect quickly after an outage (librdkafka's default waits up to 10 s).
    "reconnect.backoff.max.ms": 1000,
    "socket.connection.setup.timeout.ms": 10_000,
    # Records read ahead: enough for fast polls, not the 64 MB per partition default.
    "queued.max.messages.kbytes": 16_384,
}
#: Producer settings squall uses unless ``producer_conf`` says otherwise.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "reconnect.backoff.max.ms": 1000,
    "socket.connection.setup.timeout.ms": 10_000,
    "linger.ms": 5,
    # A record not confirmed within 30 s (the broker down) fails, so its tuple is
    # failed and replayed (librdkafka's default waits 5 minutes).
    "message.timeout.ms": 30_000,
}
#: Where librdkafka's own log lines go (connection failures, ...), unless the client
#: options give a ``logger`` of their own.
CLIENT_LOG = logging.getLogger("squall.connectors.kafka")
#: Settings whose values are secrets, hidden in errors and ``repr``.
SECRET_OPTIONS = ("sasl.password", "ssl.key.password", "ssl.keystore.password")


def kafka() -> Any:
    """The ``confluent_kafka`` module.

    Raises:
        ImportError: it is not installed; the message says how to install it.
    """
    try:
        import confluent_kafka
    except ImportError as error:  # pragma: no cover - the kafka extra installs it
        raise ImportError(
            f"the Kafka connectors need confluent-kafka ({INSTALL_HINT}): {error}"
        ) from error
    return confluent_kafka


def consumer_config(
    bootstrap_servers: str, group_id: str, conf: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The settings of a consumer of ``group_id`` that commits only when told."""
    return {
        "logger": CLIENT_LOG,
        **CONSUMER_DEFAULTS,
        **(conf or {}),
        "bootstrap.servers": bootstrap_servers,
        "group.id": group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
    }


def producer_config(bootstrap_servers: str, conf: Mapping[str, Any] | None) -> dict[str, Any]:
    """The settings of a producer."""
    return {
        "logger": CLIENT_LOG,
        **PRODUCER_DEFAULTS,
        **(conf or {}),
        "bootstrap.servers": bootstrap_servers,
    }


def redact_conf(conf: Mapping[str, Any] | None) -> dict[str, Any]:
    """``conf`` with its secrets replaced by ``***``."""
    return {
        name: ("***" if name in SECRET_OPTIONS else value) for name, value in (conf or {}).items()
    }


def one_line(error: BaseException | Any) -> str:
    """An error (an exception or a ``KafkaError``) on one line."""
    if hasattr(error, "str") and callable(error.str):
        text = str(error.str())
    elif isinstance(error, BaseException) and error.args and hasattr(error.args[0], "str"):
        text = str(error.args[0].str())
    else:
        text = str(error)
    return " ".join(text.split()) or type(error).__name__


# --- option checks -------------------------------------------------------------------


def check_installed(checker: OptionChecker) -> None:
    """Fail when confluent-kafka is not installed."""
    try:
        kafka()
    except ImportError as error:
        raise checker.fail(str(error)) from None


_SERVER = re.compile(r"^[^\s,:]+:\d+$")


def check_bootstrap(checker: OptionChecker, value: Any) -> str:
    """``value`` if it is ``host:port[,host:port...]``."""
    if not isinstance(value, str) or not value:
        raise checker.fail(f"bootstrap_servers must be 'host:port[,host:port]', got {value!r}")
    for server in value.split(","):
        if not _SERVER.match(server.strip()):
            raise checker.fail(f"bootstrap_servers must be 'host:port[,host:port]', got {value!r}")
    return value


def check_conf(
    checker: OptionChecker, name: str, conf: Any, owned: Mapping[str, str]
) -> dict[str, Any]:
    """``conf`` if it is None or a mapping of librdkafka option names to values, none of
    them one that squall sets itself."""
    if conf is None:
        return {}
    if not isinstance(conf, Mapping):
        raise checker.fail(f"{name} must be a dict of client options, got {conf!r}")
    for option, value in conf.items():
        if not isinstance(option, str) or not option:
            raise checker.fail(f"{name} must map option names to values, got {option!r}")
        if option in owned:
            raise checker.fail(f"{name} may not set {option!r}: use {owned[option]} instead")
        if not isinstance(value, (str, int, float, bool)) and not callable(value):
            raise checker.fail(
                f"{name}[{option!r}] must be a string, number, bool or callable, got {value!r}"
            )
    return dict(conf)


def check_client_conf(checker: OptionChecker, name: str, conf: dict[str, Any]) -> None:
    """Have librdkafka check the settings (unknown options, wrong values) by making a
    client of them; nothing is sent to the broker."""
    confluent = kafka()
    maker = confluent.Producer if "group.id" not in conf else confluent.Consumer
    try:
        client = maker(dict(conf))
    except confluent.KafkaException as error:
        raise checker.fail(f"{name}: {one_line(error)}") from None
    except (TypeError, ValueError) as error:
        raise checker.fail(f"{name}: {error}") from None
    close = getattr(client, "close", None)
    if close is not None:
        close()


# --- topics and partitions -----------------------------------------------------------


@dataclass(frozen=True)
class TopicSelection:
    """The topics a spout reads: a list of names, or a regular expression matched
    (``fullmatch``) against every topic's name (Storm's ``PatternTopicFilter``).

    Attributes:
        names: the topics named, sorted; empty with a pattern.
        pattern: the expression's source; None with names.
    """

    names: tuple[str, ...] = ()
    pattern: str | None = None

    @classmethod
    def of(cls, checker: OptionChecker, topics: Any) -> TopicSelection:
        """The selection ``topics`` gives (a name, a list of names or a compiled
        ``re.Pattern``); raises the checker's error if it is none of those."""
        if isinstance(topics, re.Pattern):
            return cls(pattern=str(topics.pattern))
        if isinstance(topics, str):
            topics = [topics]
        if isinstance(topics, Sequence) and topics:
            for topic in topics:
                checker.text("a topic of topics", topic)
            if len(set(topics)) != len(topics):
                raise checker.fail(f"topics names a topic twice: {list(topics)}")
            return cls(names=tuple(sorted(topics)))
        raise checker.fail(
            f"topics must be a topic name, a non-empty list of names or a re.Pattern, "
            f"got {topics!r}"
        )

    def matches(self, topic: str) -> bool:
        """Whether the selection reads ``topic``."""
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.names

    def describe(self) -> str:
        """The names, or ``/pattern/``."""
        return f"/{self.pattern}/" if self.pattern is not None else ", ".join(self.names)


def list_partitions(
    client: Any, selection: TopicSelection, timeout: float = REQUEST_TIMEOUT
) -> list[tuple[str, int]]:
    """The ``(topic, partition)`` pairs of the selected topics that exist now, sorted.

    Args:
        client: a consumer or admin client (anything with ``list_topics``).
        selection: the topics.
        timeout: seconds to wait for the broker.

    Raises:
        KafkaException: the broker did not answer within ``timeout`` seconds.
    """
    if selection.pattern is None and len(selection.names) == 1:
        metadata = client.list_topics(selection.names[0], timeout=timeout)
    else:
        metadata = client.list_topics(timeout=timeout)
    found: list[tuple[str, int]] = []
    for topic, described in metadata.topics.items():
        if described.error is not None or not selection.matches(topic):
            continue
        found.extend((topic, partition) for partition in described.partitions)
    return sorted(found)


def end_offsets(
    conf: Mapping[str, Any], partitions: Iterable[tuple[str, int]], timeout: float = REQUEST_TIMEOUT
) -> dict[tuple[str, int], int]:
    """The offset after the last record of each partition (see the module docstring).

    Runs in the caller's thread, with a consumer of its own made from ``conf`` (a
    consumer configuration; nothing is committed).

    Raises:
        KafkaException: the broker did not answer within ``timeout`` seconds.
    """
    confluent = kafka()
    wanted = list(partitions)
    if not wanted:
        return {}
    consumer = confluent.Consumer(
        {**conf, "enable.partition.eof": True, "enable.auto.commit": False}
    )
    try:
        ends: dict[tuple[str, int], int] = {}
        probes = []
        for topic, partition in wanted:
            _, reported = consumer.get_watermark_offsets(
                confluent.TopicPartition(topic, partition), timeout=timeout
            )
            if reported <= 0:
                ends[(topic, partition)] = max(reported, 0)
            else:
                probes.append(confluent.TopicPartition(topic, partition, reported - 1))
        if probes:
            ends.update(_read_to_end(consumer, confluent, probes, timeout))
        return ends
    finally:
        consumer.close()


def _read_to_end(
    consumer: Any, confluent: Any, probes: list[Any], timeout: float
) -> dict[tuple[str, int], int]:
    """Read each probe's partition from its offset to the end-of-partition event."""
    ends: dict[tuple[str, int], int] = {}
    last: dict[tuple[str, int], int] = {}
    consumer.assign(probes)
    deadline = time.monotonic() + timeout
    while len(ends) < len(probes):
        if time.monotonic() > deadline:
            missing = [
                f"{p.topic}/{p.partition}" for p in probes if (p.topic, p.partition) not in ends
            ]
            raise confluent.KafkaException(
                confluent.KafkaError(
                    confluent.KafkaError._TIMED_OUT,
                    f"no end of partition from the broker within {timeout:g} s: {missing}",
                )
            )
        for message in consumer.consume(10_000, 0.2):
            key = (message.topic(), message.partition())
            error = message.error()
            if error is None:
                last[key] = message.offset()
            elif error.code() == confluent.KafkaError._PARTITION_EOF:
                ends[key] = max(message.offset(), last.get(key, -1) + 1)
            elif error.fatal() or not error.retriable():
                raise confluent.KafkaException(error)
    return ends


#: librdkafka error codes that mean the broker cannot be reached (or did not answer in
#: time): the connector backs off and tries again.
_UNREACHABLE_NAMES = (
    "_TRANSPORT",
    "_ALL_BROKERS_DOWN",
    "_TIMED_OUT",
    "_MSG_TIMED_OUT",
    "_RESOLVE",
    "REQUEST_TIMED_OUT",
    "NETWORK_EXCEPTION",
    "BROKER_NOT_AVAILABLE",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_FOR_PARTITION",
    "NOT_COORDINATOR",
    "COORDINATOR_NOT_AVAILABLE",
    "COORDINATOR_LOAD_IN_PROGRESS",
)


def is_unreachable(error: Any) -> bool:
    """Whether a ``KafkaError`` (or a ``KafkaException`` holding one) means the broker
    cannot be reached now (worth retrying after a back-off)."""
    if isinstance(error, BaseException):
        error = error.args[0] if error.args else None
    if error is None or not hasattr(error, "code"):
        return False
    codes = kafka().KafkaError
    return any(error.code() == getattr(codes, name, None) for name in _UNREACHABLE_NAMES)


__all__ = [
    "CLIENT_LOG",
    "CONSUMER_DEFAULTS",
    "CONSUMER_OWNED",
    "INSTALL_HINT",
    "PRODUCER_DEFAULTS",
    "PRODUCER_OWNED",
    "REQUEST_TIMEOUT",
    "SECRET_OPTIONS",
    "TopicSelection",
    "check_bootstrap",
    "check_client_conf",
    "check_conf",
    "check_installed",
    "consumer_config",
    "end_offsets",
    "is_unreachable",
    "kafka",
    "list_partitions",
    "one_line",
    "producer_config",
    "redact_conf",
]
