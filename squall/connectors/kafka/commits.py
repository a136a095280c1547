"""The offset commits of one ``KafkaSpout`` task: sent without blocking
(``commit(asynchronous=True)``) and counted once librdkafka confirms them through the
consumer's ``on_commit`` callback (a synchronous commit waits up to 45 s for a broker
that is down, longer than a spout may block).

Used on the spout task's thread only (the callback runs inside the consumer's
``consume``/``poll`` calls, on that thread). Never pickled: commits waiting for their
confirmation when a Spark snapshot is taken are sent again by the restored task.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squall.connectors.kafka.client import kafka, one_line
from squall.connectors.kafka.offsets import PartitionOffsets

Tp = tuple[str, int]


class Commits:
    """Commits sent and not confirmed yet, and the confirmations to apply.

    Attributes:
        sending: partition -> the offset of its commit waiting for confirmation.
        ok: whether every commit confirmed since :meth:`expect` succeeded (None: none
            confirmed since).
    """

    def __init__(self) -> None:
        self.sending: dict[Tp, int] = {}
        self.ok: bool | None = None
        self._confirmations: list[tuple[Any, list[Any] | None]] = []

    def on_commit(self, error: Any, partitions: list[Any] | None) -> None:
        """librdkafka's confirmation of a commit (the consumer's ``on_commit``)."""
        self._confirmations.append((error, partitions))

    @property
    def confirmed(self) -> bool:
        """Whether confirmations wait to be applied."""
        return bool(self._confirmations)

    def expect(self) -> None:
        """Start counting :attr:`ok` over the confirmations from now on."""
        self.ok = None

    def send(self, consumer: Any, offsets: list[Any]) -> str | None:
        """Send a commit of ``offsets`` (``TopicPartition`` objects) without waiting;
        None, or why the consumer refused it."""
        for partition in offsets:
            self.sending[(partition.topic, partition.partition)] = partition.offset
        try:
            consumer.commit(offsets=offsets, asynchronous=True)
        except kafka().KafkaException as error:
            for partition in offsets:
                self.sending.pop((partition.topic, partition.partition), None)
            return f"commit failed: {one_line(error)}"
        return None

    def settle(self, parts: Mapping[Tp, PartitionOffsets]) -> list[str]:
        """Apply the confirmations: each partition's offset is committed if its commit
        succeeded (a failed one is sent again by a later commit). Returns why commits
        failed."""
        confirmations, self._confirmations = self._confirmations, []
        failures: list[str] = []
        for error, partitions in confirmations:
            partitions = partitions or []
            failed = [p for p in partitions if p.error is not None]
            succeeded = error is None and not failed
            for partition in partitions:
                tp = (partition.topic, partition.partition)
                sent = self.sending.pop(tp, None)
                state = parts.get(tp)
                if succeeded and state is not None and sent == partition.offset:
                    state.was_committed(partition.offset)
            if not succeeded:
                self.ok = False
                failures.append(
                    f"commit failed: {one_line(error if error is not None else failed[0].error)}"
                )
            elif self.ok is None:
                self.ok = True
        return failures

    def forget(self, tp: Tp) -> None:
        """Stop waiting for ``tp``'s commit (the partition is no longer read)."""
        self.sending.pop(tp, None)


__all__ = ["Commits"]
