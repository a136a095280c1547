"""Per-partition offset tracking of an at-least-once ``KafkaSpout`` task (Storm's
``OffsetManager``): which records of a partition are done, the offset that may be
committed, and how many records past the committed offset are outstanding.

Records are tracked in the order the spout handles them (their offsets ascending, with
gaps where a compacted topic dropped records or a transaction marker sits). The commit
point is the offset of the oldest record handed out and not done (acked, skipped, or
its retries exhausted), else the offset after the last record handled: gaps never block
a commit.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from squall.connectors.kafka.client import kafka

Tp = tuple[str, int]


class PartitionOffsets:
    """The offsets of one partition at one spout task.

    Used on the spout task's thread only; picklable (kept in Spark snapshots).

    Attributes:
        committed: the offset last committed (or found committed for the group), None
            if none is known.
        next_offset: the offset after the last record handled (emitted or skipped),
            None before the first one when the start offset is not known (the earliest).
        emitted_offset: the offset of the last record emitted, None before the first.
        start: where the task started reading the partition (the committed offset, or
            the end for the ``latest`` strategies), None for its earliest offset.
    """

    __slots__ = (
        "_done",
        "_order",
        "_released",
        "committed",
        "emitted_offset",
        "next_offset",
        "start",
    )

    def __init__(self, committed: int | None = None, next_offset: int | None = None) -> None:
        self.committed = committed
        self.next_offset = next_offset
        self.start = next_offset
        self.emitted_offset: int | None = None
        #: Offsets handled and not yet below the commit point, ascending.
        self._order: deque[int] = deque()
        #: Those of ``_order`` that are done.
        self._done: set[int] = set()
        #: Records below the commit point that are not committed yet.
        self._released = 0

    def handled(self, offset: int, done: bool = False) -> None:
        """Record ``offset`` handed out (``done``: skipped, done at once)."""
        self._order.append(offset)
        if done:
            self._done.add(offset)
        self.next_offset = offset + 1

    def emitted(self, offset: int) -> None:
        """Record ``offset`` emitted (tracked until done)."""
        self._order.append(offset)
        self.next_offset = offset + 1
        self.emitted_offset = offset

    def done(self, offset: int) -> None:
        """Record ``offset`` done (acked, or its retries exhausted)."""
        self._done.add(offset)

    def commit_point(self) -> int | None:
        """The offset to commit: that of the oldest record not done, else the offset
        after the last record handled (None if no record was handled and the start
        offset is unknown)."""
        order, done = self._order, self._done
        while order and order[0] in done:
            done.discard(order.popleft())
            self._released += 1
        if order:
            return order[0]
        return self.next_offset

    def to_commit(self) -> int | None:
        """The commit point if it is past the committed offset, else None."""
        point = self.commit_point()
        if point is None or (self.committed is not None and point <= self.committed):
            return None
        return point

    def was_committed(self, offset: int) -> None:
        """Record ``offset`` committed (the commit point that was sent)."""
        self.committed = offset
        self._released = 0

    def uncommitted(self) -> int:
        """Records handed out at or past the committed offset and not committed."""
        return len(self._order) + self._released

    def pending(self) -> int:
        """Records handed out and not done."""
        return len(self._order) - len(self._done)

    def __getstate__(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.start = None  # a snapshot taken before the start was kept
        for name, value in state.items():
            setattr(self, name, value)

    def __repr__(self) -> str:
        return (
            f"PartitionOffsets(committed={self.committed}, next_offset={self.next_offset}, "
            f"uncommitted={self.uncommitted()})"
        )


def offset_metrics(
    consumer: Any,
    partitions: Iterable[tuple[str, int]],
    offsets: Mapping[Tp, PartitionOffsets],
    listed: Mapping[Tp, tuple[int, int]] | None = None,
) -> dict[str, float]:
    """Storm's ``kafkaOffset`` metrics of ``partitions``: per partition
    ``<topic>/partition_<p>/latestTimeOffset`` (the end, from the high watermark of the
    consumer's last fetch), ``/latestCompletedOffset`` (committed),
    ``/latestEmittedOffset`` and ``/spoutLag`` (end - committed, or end - where the
    task started it before its first commit: the committed offset it found, the end
    for the ``latest`` strategies, else the log's start); per topic
    ``<topic>/totalSpoutLag``. A figure not known yet is left out.

    Args:
        consumer: the task's consumer (its fetches' watermarks are read, no request).
        partitions: the partitions the task reads.
        offsets: their offsets.
        listed: ``(start, end)`` of partitions asked of the broker, used for those not
            fetched yet.
    """
    confluent = kafka()
    values: dict[str, float] = {}
    for tp in partitions:
        state = offsets.get(tp)
        if state is None:
            continue
        prefix = f"{tp[0]}/partition_{tp[1]}"
        try:
            low, high = consumer.get_watermark_offsets(
                confluent.TopicPartition(tp[0], tp[1]), cached=True
            )
        except confluent.KafkaException:
            low, high = -1, -1
        if (high is None or high < 0) and listed is not None and tp in listed:
            low, high = listed[tp]
        known = high is not None and high >= 0
        if known:
            values[f"{prefix}/latestTimeOffset"] = high
        if state.committed is not None:
            values[f"{prefix}/latestCompletedOffset"] = state.committed
        if state.emitted_offset is not None:
            values[f"{prefix}/latestEmittedOffset"] = state.emitted_offset
        base = state.committed
        if base is None:
            base = state.start if state.start is not None else low
        if known and base is not None and base >= 0:
            lag = max(high - base, 0)
            values[f"{prefix}/spoutLag"] = lag
            total = f"{tp[0]}/totalSpoutLag"
            values[total] = values.get(total, 0) + lag
    return values


__all__ = ["PartitionOffsets", "offset_metrics"]
