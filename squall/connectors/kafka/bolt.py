"""``KafkaBolt``: writes each tuple as a record to a Kafka topic (Storm's ``KafkaBolt``).

Guarantee: **at-least-once**. A tuple is acked when the broker confirms its record (the
record's delivery report) and failed when the record cannot be delivered, so a reliable
spout replays it. A record the broker stored but whose confirmation was lost (the
connection broke) is written again by the replay: the topic may hold a record twice.
With ``fire_and_forget=True`` a tuple is acked as soon as its record is handed to the
producer (Storm's ``fireAndForget``): a record that then fails is counted and reported
but lost (at-most-once).

Records: see :mod:`squall.connectors.kafka.encoding` (topic or topic selector, key
from ``key_field``, value from ``value_field`` by ``value_format``). A tuple whose
selector returns None is acked without a record and counted in ``skipped`` (Storm's
KafkaBolt does the same). A tuple that cannot be written (a field it lacks, a value its
format refuses, a failing selector, a record librdkafka refuses at once such as one
larger than ``message.max.bytes``) is failed alone and reported.

Where it runs: the bolt carries only options. Each task makes its own producer in
``prepare`` (a local engine worker thread; on Spark an executor's Python worker; the
producer connects in the background). Delivery reports are served on the task's thread,
by ``producer.poll(0)`` after every :data:`SERVE_EVERY` tuples and on a tick tuple every
``tick_secs`` (:data:`TICK_SECS` by default, so the last tuples' acks never wait for
more input), and by waiting
for every record in flight at the end of each Spark micro-batch (trees complete within
their micro-batch there), before a checkpoint of a topology with stateful bolts, and at
clean-up (at most :data:`CLEANUP_WAIT_SECS`). A full producer queue (``BufferError``)
makes the task serve reports until there is room.

Failures: a broker that cannot be reached never stops the topology: librdkafka keeps
each record for ``message.timeout.ms`` (30 s unless ``producer_conf`` says otherwise),
then reports it failed, and its tuple is failed and replayed. The errors of one round of
delivery reports are reported once per topic and error, e.g.
``KafkaBolt 'sink' cannot reach host:9092: 12 records to topic 'out' not delivered:
Local: Message timed out; the tuples are failed``.

``metrics()``: ``delivered`` (records confirmed), ``failed`` (records or tuples that
could not be written), ``skipped`` (tuples the selector skipped), ``in_flight`` (records
awaiting their delivery report).
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from squall.connectors.errors import ConnectorError
from squall.connectors.kafka.client import kafka, one_line, producer_config, redact_conf
from squall.connectors.kafka.encoding import (
    RecordEncoder,
    RecordEncodingError,
    TopicSelector,
    check_encoding,
)
from squall.connectors.kafka.producing import (
    check_producer,
    delivery_error,
    produce,
    report_wait_secs,
    wait_for_reports,
)
from squall.connectors.options import OptionChecker
from squall.model.components import Bolt
from squall.model.config import Config
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.hooks import ReportsMetrics, SettlesBatch, ValidatesSubmission
from squall.model.tuple import Tuple, is_tick_tuple

if TYPE_CHECKING:
    from squall.runtime.collectors import OutputCollector
    from squall.runtime.context import TopologyContext

logger = logging.getLogger("squall")

#: Seconds between the tick tuples that serve delivery reports while no tuple comes.
TICK_SECS = 0.1
#: Tuples handed to the producer between two servings of delivery reports (serving
#: after every tuple cost a sixth of the bolt's time).
SERVE_EVERY = 64
#: Seconds clean-up waits for the records in flight.
CLEANUP_WAIT_SECS = 5.0


def _shown(conf: Any) -> Any:
    """Producer settings as a ``repr`` shows them: secrets hidden."""
    return redact_conf(conf) if isinstance(conf, Mapping) else conf


class KafkaBolt(Bolt, ValidatesSubmission, SettlesBatch, ReportsMetrics):
    """Writes each tuple as a record of ``topic``; acks it once the broker confirmed
    the record (see the module docstring). Declares no output stream."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str | TopicSelector,
        *,
        key_field: str | None = None,
        value_field: str | None = "value",
        value_format: str = "str",
        producer_conf: dict[str, Any] | None = None,
        fire_and_forget: bool = False,
        tick_secs: float | None = TICK_SECS,
    ) -> None:
        """Keep the options; they are checked when the topology is submitted.

        Args:
            bootstrap_servers: ``host:port[,host:port...]`` of the brokers.
            topic: the topic, or a callable ``tuple -> topic name or None`` (None: the
                tuple is acked without a record).
            key_field: the field holding the record's key; None: records without key.
            value_field: the field holding the record's value; None: the whole tuple as
                a JSON object of its fields (with ``value_format="json"``).
            value_format: ``"str"``, ``"bytes"`` or ``"json"`` (see
                :mod:`squall.connectors.kafka.encoding`).
            producer_conf: librdkafka producer settings over squall's (e.g.
                ``{"message.timeout.ms": 10000, "compression.type": "lz4"}``);
                ``bootstrap.servers`` and the delivery report settings are the bolt's.
            fire_and_forget: ack each tuple once its record is handed to the producer,
                without waiting for the broker (records that fail are lost).
            tick_secs: the period of the tick tuples that serve delivery reports while
                no tuple comes; None: no ticks (the last tuples' acks then wait for the
                next tuple, the end of a Spark micro-batch or the clean-up). On Spark,
                where every micro-batch ends by waiting for its records, None spares an
                idle topology the empty micro-batches that ticks cause.
        """
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.key_field = key_field
        self.value_field = value_field
        self.value_format = value_format
        self.producer_conf = (
            dict(producer_conf) if isinstance(producer_conf, Mapping) else producer_conf
        )
        self.fire_and_forget = fire_and_forget
        self.tick_secs = tick_secs
        #: Whether ``prepare`` ran; the task's counters and what is in flight.
        self._prepared = False
        self._delivered = 0
        self._failed = 0
        self._skipped = 0
        self._forget_in_flight()

    def __repr__(self) -> str:
        topic = self.topic if isinstance(self.topic, str) else "<selector>"
        return (
            f"KafkaBolt(bootstrap_servers={self.bootstrap_servers!r}, topic={topic!r}, "
            f"producer_conf={_shown(self.producer_conf)!r})"
        )

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the producer and the records in flight (a Spark snapshot is
        taken once every record of the micro-batch was confirmed)."""
        state = dict(vars(self))
        for name in ("_producer", "_pending", "_errors", "_error_of"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self._forget_in_flight()  # a producer of its own, made on use

    def _forget_in_flight(self) -> None:
        """No producer yet, nothing in flight (the attributes a snapshot leaves out)."""
        self._producer: Any = None
        self._pending: dict[int, Tuple | None] = {}
        self._errors: Counter[tuple[str, str]] = Counter()
        self._error_of: dict[tuple[str, str], Any] = {}

    # --- options ----------------------------------------------------------------------

    def check_options(self, checker: OptionChecker) -> None:
        """Check every option; raise the checker's error at the first wrong one."""
        check_producer(checker, self.bootstrap_servers, self.producer_conf)
        check_encoding(checker, self.topic, self.key_field, self.value_field, self.value_format)
        if not isinstance(self.fire_and_forget, bool):
            raise checker.fail(
                f"fire_and_forget must be True or False, got {self.fire_and_forget!r}"
            )
        if self.tick_secs is not None:
            checker.positive_number("tick_secs", self.tick_secs)

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Check the options where the topology is submitted.

        Raises:
            InvalidTopologyError: an option is wrong; the message names the component.
        """
        self.check_options(OptionChecker(component_id, type(self).__name__))

    # --- the task ---------------------------------------------------------------------

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """No output streams."""

    def get_component_configuration(self) -> dict[str, Any] | None:
        """Tick tuples every ``tick_secs`` (they serve delivery reports); none with
        ``tick_secs=None``."""
        if self.tick_secs is None:
            return None
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: self.tick_secs}

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        """Make the task's producer (it connects in the background). Runs once per
        task, in the task's process."""
        self._prepared = True
        self.collector = collector
        self.label = f"KafkaBolt {context.component_id!r}"
        self._settings = producer_config(self.bootstrap_servers, self.producer_conf)
        self._report_wait = report_wait_secs(self._settings)
        self._encoder = RecordEncoder(
            self.topic, self.key_field, self.value_field, self.value_format
        )
        self._pending = {}
        self._next_id = 0
        self._delivered = 0
        self._failed = 0
        self._skipped = 0
        self._warned_skip = False
        self._errors = Counter()
        self._error_of = {}
        self._producer = kafka().Producer(dict(self._settings))

    def _client(self) -> Any:
        if self._producer is None:
            self._producer = kafka().Producer(dict(self._settings))
        return self._producer

    def execute(self, tup: Tuple) -> None:
        """Hand the tuple's record to the producer (ack it at once with
        ``fire_and_forget``); every :data:`SERVE_EVERY` records, serve the delivery
        reports that arrived. A tick tuple only serves them. Runs once per input tuple,
        on the task's thread."""
        producer = self._client()
        if is_tick_tuple(tup):
            self._serve(0)
            return
        try:
            topic, key, value = self._encoder.encode(tup)
        except RecordEncodingError as error:
            self._refuse(tup, error)
            return
        if topic is None:
            self._skip(tup)
            return
        record_id = self._next_id
        self._next_id = record_id + 1
        reported = None if self.fire_and_forget else tup
        self._pending[record_id] = reported
        try:
            produce(producer, topic, key, value, functools.partial(self._on_delivery, record_id))
        except kafka().KafkaException as error:
            self._pending.pop(record_id, None)
            refused = f"topic {topic!r} refused the record: {one_line(error)}"
            self._refuse(tup, ConnectorError(refused))
            return
        finally:
            self._report()
        if self.fire_and_forget:
            self.collector.ack(tup)
        if record_id % SERVE_EVERY == 0:
            self._serve(0)

    def _refuse(self, tup: Tuple, error: Exception) -> None:
        self._failed += 1
        self.collector.report_error(
            ConnectorError(f"{self.label}: cannot write a tuple: {error}; the tuple is failed")
        )
        self.collector.fail(tup)

    def _skip(self, tup: Tuple) -> None:
        self._skipped += 1
        if not self._warned_skip:
            self._warned_skip = True
            logger.warning(
                "%s: the topic selector returned None: tuples it skips are acked without "
                "a record (counted in the metric 'skipped')",
                self.label,
            )
        self.collector.ack(tup)

    def _on_delivery(self, record_id: int, error: Any, message: Any) -> None:
        """A delivery report (on the task's thread, within ``poll``/``flush``)."""
        if record_id not in self._pending:  # given up on: its tuple was failed then
            if error is None:
                self._delivered += 1
            return
        tup = self._pending.pop(record_id)
        if error is None:
            self._delivered += 1
            if tup is not None:
                self.collector.ack(tup)
            return
        self._failed += 1
        key = (str(message.topic()), one_line(error))
        self._errors[key] += 1
        self._error_of[key] = error
        if tup is not None:
            self.collector.fail(tup)

    def _serve(self, timeout: float) -> None:
        """Serve the delivery reports that arrived (waiting at most ``timeout``)."""
        try:
            self._client().poll(timeout)
        finally:
            self._report()

    def _report(self) -> None:
        """Report the delivery errors served since the last report, once per topic and
        error."""
        if not self._errors:
            return
        errors, self._errors = self._errors, Counter()
        error_of, self._error_of = self._error_of, {}
        outcome = (
            "the tuples were acked already (fire_and_forget): the records are lost"
            if self.fire_and_forget
            else "the tuples are failed"
        )
        for (topic, text), count in errors.items():
            self.collector.report_error(
                delivery_error(
                    self.label,
                    self.bootstrap_servers,
                    topic,
                    count,
                    error_of[(topic, text)],
                    outcome,
                )
            )

    def settle(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until every record in flight has its
        delivery report, acking and failing their tuples; fail the tuples of records
        still unconfirmed then (a replay may write them twice)."""
        if not self._pending:
            return
        producer = self._client()
        try:
            wait_for_reports(producer, lambda: len(self._pending), timeout)
        finally:
            self._report()
        if not self._pending:
            return
        left, self._pending = self._pending, {}
        self._failed += len(left)
        self.collector.report_error(
            ConnectorError(
                f"{self.label}: {len(left)} records to {self.bootstrap_servers} still "
                f"unconfirmed after {timeout:g} s; their tuples are failed"
            )
        )
        for tup in left.values():
            if tup is not None:
                self.collector.fail(tup)

    def settle_batch(self) -> None:
        """Spark, at the end of each micro-batch: wait for the delivery reports of its
        records, so their tuples are acked (or failed) within the micro-batch."""
        self.settle(self._report_wait)

    def settle_before_checkpoint(self) -> None:
        """A checkpoint of a topology with stateful bolts: wait for the delivery
        reports of the records in flight (see
        :class:`~squall.model.hooks.SettlesBeforeCheckpoint`)."""
        self.settle(self._report_wait)

    def metrics(self) -> dict[str, float]:
        """``delivered``, ``failed``, ``skipped`` and ``in_flight`` (see the module
        docstring)."""
        return {
            "delivered": self._delivered,
            "failed": self._failed,
            "skipped": self._skipped,
            "in_flight": len(self._pending),
        }

    def cleanup(self) -> None:
        """Wait (at most :data:`CLEANUP_WAIT_SECS`) for the records in flight, then drop
        the producer. Not guaranteed to run: a killed process skips it, and tuples never
        acked are replayed by a reliable spout."""
        try:
            if self._prepared:
                self.settle(min(CLEANUP_WAIT_SECS, self._report_wait))
        finally:
            self._producer = None


__all__ = ["CLEANUP_WAIT_SECS", "SERVE_EVERY", "TICK_SECS", "KafkaBolt"]
