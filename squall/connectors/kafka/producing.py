"""What the Kafka sinks share about their producer: the settings they check, how
long a record may wait for its delivery report, ``produce`` with a full queue, and the
errors they report.

Runs where the sink runs (a bolt's task, a Trident state's task); not thread-safe.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from squall.connectors.errors import ConnectorError, ConnectorUnavailableError
from squall.connectors.kafka.client import (
    PRODUCER_DEFAULTS,
    PRODUCER_OWNED,
    check_bootstrap,
    check_client_conf,
    check_conf,
    check_installed,
    is_unreachable,
    one_line,
    producer_config,
)
from squall.connectors.options import OptionChecker

#: Producer settings a sink may not change: it needs every record's delivery report.
SINK_OWNED = {
    "delivery.report.only.error": "the sink acks a tuple on its record's delivery report",
    "dr_cb": "the sink sets its own delivery callback",
    "dr_msg_cb": "the sink sets its own delivery callback",
    "on_delivery": "the sink sets its own delivery callback",
}
#: Seconds a sink waits for delivery reports past ``message.timeout.ms`` before it
#: gives up on a record (librdkafka reports every record by then).
REPORT_MARGIN_SECS = 5.0
#: Seconds ``produce`` polls for room at a time while the producer's queue is full.
QUEUE_FULL_POLL_SECS = 0.1


def check_producer(
    checker: OptionChecker, bootstrap_servers: Any, producer_conf: Any
) -> dict[str, Any]:
    """Check the producer's options (and have librdkafka check its settings); the
    producer's settings."""
    check_installed(checker)
    check_bootstrap(checker, bootstrap_servers)
    conf = check_conf(checker, "producer_conf", producer_conf, PRODUCER_OWNED)
    for option, why in SINK_OWNED.items():
        if option in conf:
            raise checker.fail(f"producer_conf may not set {option!r}: {why}")
    settings = producer_config(bootstrap_servers, conf)
    check_client_conf(checker, "producer_conf", settings)
    return settings


def report_wait_secs(settings: dict[str, Any]) -> float:
    """The longest a record waits for its delivery report: its ``message.timeout.ms``
    (or ``delivery.timeout.ms``) plus :data:`REPORT_MARGIN_SECS`."""
    timeout_ms = settings.get(
        "delivery.timeout.ms",
        settings.get("message.timeout.ms", PRODUCER_DEFAULTS["message.timeout.ms"]),
    )
    try:
        timeout = float(timeout_ms) / 1000.0
    except (TypeError, ValueError):
        timeout = PRODUCER_DEFAULTS["message.timeout.ms"] / 1000.0
    if timeout <= 0:  # 0: librdkafka retries forever
        timeout = PRODUCER_DEFAULTS["message.timeout.ms"] / 1000.0
    return timeout + REPORT_MARGIN_SECS


def produce(
    producer: Any,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    on_delivery: Callable[[Any, Any], None],
) -> None:
    """``producer.produce`` the record; while the producer's queue is full
    (``BufferError``), serve delivery reports (``poll``) until there is room.

    Raises:
        KafkaException: librdkafka refused the record at once (e.g. larger than
            ``message.max.bytes``).
    """
    while True:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
            return
        except BufferError:
            producer.poll(QUEUE_FULL_POLL_SECS)


def wait_for_reports(producer: Any, pending: Callable[[], int], timeout: float) -> None:
    """Serve delivery reports until ``pending()`` is 0 or ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while pending():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        producer.flush(min(left, 1.0))


def delivery_error(
    label: str, bootstrap: str, topic: str, count: int, error: Any, outcome: str
) -> ConnectorError:
    """The error reported for ``count`` records to ``topic`` that failed with ``error``:
    a :class:`ConnectorUnavailableError` if the broker could not be reached."""
    records = "1 record" if count == 1 else f"{count} records"
    if is_unreachable(error):
        return ConnectorUnavailableError(
            f"{label} cannot reach {bootstrap}: {records} to topic {topic!r} not delivered: "
            f"{one_line(error)}; {outcome}"
        )
    return ConnectorError(
        f"{label}: {records} to topic {topic!r} not delivered: {one_line(error)}; {outcome}"
    )


__all__ = [
    "QUEUE_FULL_POLL_SECS",
    "REPORT_MARGIN_SECS",
    "SINK_OWNED",
    "check_producer",
    "delivery_error",
    "produce",
    "report_wait_secs",
    "wait_for_reports",
]
