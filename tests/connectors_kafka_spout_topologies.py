"""Components and helpers of the KafkaSpout tests."""

from __future__ import annotations

import time
from typing import Any

from squall import Bolt, TopologyBuilder
from squall.connectors.kafka import KafkaSpout
from squall.model.topology import StormTopology
from squall.runtime.collectors import OutputCollector
from squall.runtime.context import TopologyContext
from squall.testing import SharedRecord


class Recorder(Bolt):
    """Records each input as ``[stream, values]`` under ``"seen"`` and acks it; fails,
    the first time it sees them, the records whose value is in ``fail_once`` (every
    time for those in ``fail_always``). With ``check`` (a broker's address, a group, a
    topic and its partition count), records ``[offset, committed offset of its
    partition]`` under ``"committed"`` for each record as it arrives. Sleeps ``delay``
    seconds before each tuple."""

    def __init__(
        self,
        fail_once: frozenset[str] = frozenset(),
        fail_always: frozenset[str] = frozenset(),
        check: tuple[str, str, str, int] | None = None,
        delay: float = 0.0,
    ) -> None:
        self.record = SharedRecord()
        self.fail_once = fail_once
        self.fail_always = fail_always
        self.check = check
        self.delay = delay

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector
        self.failed: set[tuple[Any, ...]] = set()
        self.consumer: Any = None
        if self.check is not None:
            import confluent_kafka

            self.consumer = confluent_kafka.Consumer(
                {"bootstrap.servers": self.check[0], "group.id": self.check[1]}
            )

    def cleanup(self) -> None:
        if self.consumer is not None:
            self.consumer.close()

    def execute(self, tup: Any) -> None:
        if self.delay:
            time.sleep(self.delay)
        values = list(tup.values)
        self.record.append("seen", [tup.source_stream, values])
        if self.check is not None:
            import confluent_kafka

            topic, partition = self.check[2], values[1]
            found = self.consumer.committed(
                [confluent_kafka.TopicPartition(topic, partition)], timeout=10
            )
            self.record.append("committed", [values[2], found[0].offset])
        if tup.source_stream == "default" and len(values) == 5:
            key = (values[0], values[1], values[2])
            if values[4] in self.fail_always or (
                values[4] in self.fail_once and key not in self.failed
            ):
                self.failed.add(key)
                self.record.append("failed", values[4])
                self.collector.fail(tup)
                return
        self.collector.ack(tup)

    def seen(self, stream: str = "default") -> list[list[Any]]:
        """The values received on ``stream``, in order."""
        return [values for source, values in self.record.get("seen") if source == stream]


def topology(spout: KafkaSpout, recorder: Recorder, parallelism: int = 1) -> StormTopology:
    """``spout`` (as ``"events"``) -> ``recorder`` on the default and errors streams."""
    builder = TopologyBuilder()
    builder.set_spout("events", spout, parallelism)
    builder.set_bolt("record", recorder).shuffle_grouping("events").shuffle_grouping(
        "events", "errors"
    )
    return builder.create_topology()


def records(topic: str, values: list[str], partition: int = 0, start: int = 0) -> list[list[Any]]:
    """The default tuples of ``values`` written to ``partition`` from offset ``start``."""
    return [[topic, partition, start + i, None, value] for i, value in enumerate(values)]
