"""``KafkaState``: a Trident state that writes a batch's tuples to a Kafka topic
(Storm's ``TridentKafkaState``).

Use it with ``partition_persist``::

    factory = KafkaState.factory("broker:9092", "out", key_field="word", value_field="count")
    stream.partition_persist(factory, Fields(["word", "count"]), KafkaStateUpdater())

Records: one per tuple, as :class:`~squall.connectors.kafka.KafkaBolt` writes them (see
:mod:`squall.connectors.kafka.encoding`; ``topic`` may be a selector, and a tuple it
returns None for is left out). The fields named by ``key_field`` and ``value_field``
must be among the fields given to ``partition_persist``.

Guarantee: **at-least-once**. ``update_state`` hands every record of the partition's
batch to the producer and returns only once the broker confirmed them all; if a tuple
cannot be written (a field it lacks, a value its format refuses) or a record is not
delivered (the broker down past ``message.timeout.ms``, 30 s unless ``producer_conf``
says otherwise), it raises, so the batch fails and Trident replays it. The records of
the failed attempt that were delivered stay in the topic and the replay writes them
again: a reader may see a batch's records twice (give records a key of their own, e.g.
the source's offset, if it must tell).

Where it runs: the factory carries only options and pickles to every process that
runs a partition of the state (Spark executors included). Each partition's state makes
its own producer at its first batch, in the task that owns it, and closes it (after
waiting at most :data:`CLOSE_WAIT_SECS` for records in flight) when the task ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
from squall.model.context import TopologyContext
from squall.model.errors import InvalidTopologyError
from squall.trident.operations import StateUpdater, TridentCollector
from squall.trident.state.base import State, StateFactory
from squall.trident.tuple import TridentTuple

#: Seconds ``close`` waits for the records in flight.
CLOSE_WAIT_SECS = 5.0
#: What a failed batch's error ends with.
REPLAYED = "the batch fails and is replayed"


class _FactoryChecker(OptionChecker):
    """Checks the options of ``KafkaState.factory`` where the topology is declared."""

    def __init__(self) -> None:
        super().__init__("", "KafkaState")

    def fail(self, message: str) -> InvalidTopologyError:
        return InvalidTopologyError(f"KafkaState.factory: {message}")


@dataclass(frozen=True)
class KafkaStateFactory(StateFactory):
    """Makes the :class:`KafkaState` of each partition. Picklable; connects nowhere
    (its states do, at their first batch). Made by :meth:`KafkaState.factory`."""

    bootstrap_servers: str
    topic: str | TopicSelector
    key_field: str | None = None
    value_field: str | None = "value"
    value_format: str = "str"
    producer_conf: dict[str, Any] = field(default_factory=dict, hash=False)

    def __repr__(self) -> str:
        topic = self.topic if isinstance(self.topic, str) else "<selector>"
        return (
            f"KafkaStateFactory(bootstrap_servers={self.bootstrap_servers!r}, "
            f"topic={topic!r}, producer_conf={redact_conf(self.producer_conf)!r})"
        )

    def make_state(
        self,
        conf: dict[str, Any],
        context: TopologyContext | None,
        partition_index: int,
        num_partitions: int,
    ) -> KafkaState:
        """The state of one partition. Runs in the task that owns it."""
        component = None if context is None else context.component_id
        label = "KafkaState" if component is None else f"KafkaState {component!r}"
        return KafkaState(self, label)


class KafkaState(State):
    """One partition's writer of records (see the module docstring). Runs in the task
    that owns the partition; not thread-safe."""

    def __init__(self, factory: KafkaStateFactory, label: str = "KafkaState") -> None:
        self.options = factory
        self.label = label
        self.settings = producer_config(factory.bootstrap_servers, factory.producer_conf)
        self.report_wait = report_wait_secs(self.settings)
        self.encoder = RecordEncoder(
            factory.topic, factory.key_field, factory.value_field, factory.value_format
        )
        #: The batch being applied.
        self.current_txid: int | None = None
        #: Records confirmed, and tuples the selector left out, by this state.
        self.written = 0
        self.skipped = 0
        self._producer: Any = None

    @staticmethod
    def factory(
        bootstrap_servers: str,
        topic: str | TopicSelector,
        key_field: str | None = None,
        value_field: str | None = "value",
        value_format: str = "str",
        producer_conf: Mapping[str, Any] | None = None,
    ) -> KafkaStateFactory:
        """A factory of states writing to ``topic``.

        Runs where the topology is declared; checks the options (librdkafka checks the
        producer settings), connects nowhere.

        Args:
            bootstrap_servers: ``host:port[,host:port...]`` of the brokers.
            topic: the topic, or a callable ``tuple -> topic name or None`` (None: the
                tuple is left out).
            key_field: the field holding the record's key; None: records without key.
            value_field: the field holding the record's value; None: the whole tuple as
                a JSON object of its fields (with ``value_format="json"``).
            value_format: ``"str"``, ``"bytes"`` or ``"json"``.
            producer_conf: librdkafka producer settings over squall's.

        Raises:
            InvalidTopologyError: an option is wrong (``KafkaState.factory: ...``).
        """
        checker = _FactoryChecker()
        check_producer(checker, bootstrap_servers, producer_conf)
        check_encoding(checker, topic, key_field, value_field, value_format)
        return KafkaStateFactory(
            bootstrap_servers=bootstrap_servers,
            topic=topic,
            key_field=key_field,
            value_field=value_field,
            value_format=value_format,
            producer_conf=dict(producer_conf or {}),
        )

    def begin_commit(self, txid: int) -> None:
        """Start batch ``txid`` (again, for a replay)."""
        self.current_txid = txid

    def commit(self, txid: int) -> None:
        """Nothing to do: :meth:`write` returned once every record was confirmed."""

    def write(self, tuples: list[TridentTuple]) -> int:
        """Write a record for each tuple and wait until the broker confirmed them all;
        the number written. Runs in the owning task, within the batch's commit.

        Raises:
            RecordEncodingError: a tuple cannot be written (nothing of the batch is
                written then).
            ConnectorError: a record was refused or not delivered
                (``ConnectorUnavailableError``: the broker could not be reached).
        """
        encoded = []
        for tup in tuples:
            try:
                record = self.encoder.encode(tup)
            except RecordEncodingError as error:
                raise RecordEncodingError(
                    f"{self.label}: cannot write a tuple of batch {self.current_txid}: "
                    f"{error}; {REPLAYED}"
                ) from None
            if record[0] is None:
                self.skipped += 1
            else:
                encoded.append(record)
        if not encoded:
            return 0
        producer = self._client()
        failures: list[tuple[str, Any]] = []
        pending = [0]

        def delivered(error: Any, message: Any) -> None:
            pending[0] -= 1
            if error is not None:
                failures.append((str(message.topic()), error))

        for topic, key, value in encoded:
            assert topic is not None
            try:
                produce(producer, topic, key, value, delivered)
            except kafka().KafkaException as error:
                # the batch's records handed over so far settle before the replay
                wait_for_reports(producer, lambda: pending[0], self.report_wait)
                raise ConnectorError(
                    f"{self.label}: topic {topic!r} refused a record of batch "
                    f"{self.current_txid}: {one_line(error)}; {REPLAYED}"
                ) from None
            pending[0] += 1
        wait_for_reports(producer, lambda: pending[0], self.report_wait)
        if failures:
            failed_topic, first = failures[0]
            raise delivery_error(
                self.label,
                self.options.bootstrap_servers,
                failed_topic,
                sum(1 for topic, _ in failures if topic == failed_topic),
                first,
                f"batch {self.current_txid} fails and is replayed",
            )
        if pending[0]:
            raise ConnectorError(
                f"{self.label}: {pending[0]} records of batch {self.current_txid} still "
                f"unconfirmed after {self.report_wait:g} s; {REPLAYED}"
            )
        self.written += len(encoded)
        return len(encoded)

    def _client(self) -> Any:
        if self._producer is None:
            self._producer = kafka().Producer(dict(self.settings))
        return self._producer

    def close(self) -> None:
        """Wait (at most :data:`CLOSE_WAIT_SECS`) for records in flight, then drop the
        producer."""
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(min(CLOSE_WAIT_SECS, self.report_wait))


class KafkaStateUpdater(StateUpdater):
    """``partition_persist``'s updater for a :class:`KafkaState`: writes the batch's
    tuples (see :meth:`KafkaState.write`). Emits nothing."""

    def update_state(
        self, state: Any, tuples: list[TridentTuple], collector: TridentCollector
    ) -> None:
        """Write the tuples; raise (failing the batch) if any is not written. Runs in
        the task that owns the partition, within the batch's commit."""
        if not isinstance(state, KafkaState):
            raise TypeError(
                f"KafkaStateUpdater updates a KafkaState (from KafkaState.factory), got "
                f"{type(state).__name__}"
            )
        state.write(tuples)


__all__ = ["CLOSE_WAIT_SECS", "KafkaState", "KafkaStateFactory", "KafkaStateUpdater"]
