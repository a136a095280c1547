"""Spouts for tests: a fixed list of tuples, or tuples fed one by one from the test."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from squall.model.components import Spout
from squall.model.config import Config
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.fields import Fields, as_fields
from squall.model.hooks import Exhaustible
from squall.model.tuple import DEFAULT_STREAM
from squall.runtime.collectors import SpoutOutputCollector
from squall.runtime.context import TopologyContext
from squall.testing.shared import SharedRecord


class RecordingSpout(Spout):
    """A spout whose tasks record the msg ids acked and failed in one shared record."""

    record: SharedRecord

    @property
    def acked(self) -> list[Any]:
        """Msg ids acked so far, over all tasks, in order."""
        return self.record.get("acked")

    @property
    def failed(self) -> list[Any]:
        """Msg ids failed (or timed out) so far, over all tasks, in order."""
        return self.record.get("failed")


class FixedTupleSpout(RecordingSpout, Exhaustible):
    """Emits a fixed list of tuples once each, reliably (the msg id is the tuple's index).

    With several tasks, task ``i`` of ``n`` emits tuples ``i, i+n, i+2n, ...``. It does
    not replay failed tuples. ``acked``/``failed`` list the msg ids (indexes) acked and
    failed across all tasks; ``is_exhausted()`` is true for a task once all its tuples
    are emitted and none is pending.

    Args:
        tuples: lists of values for the default stream, or a mapping from stream id to
            such lists.
        fields: the output fields of every stream (a ``Fields``, list of names or one
            name). Required unless ``streams`` gives fields per stream.
        streams: stream id -> fields, when streams differ in fields.
    """

    def __init__(
        self,
        tuples: Sequence[Sequence[Any]] | Mapping[str, Sequence[Sequence[Any]]],
        fields: Fields | Iterable[str] | str | None = None,
        streams: Mapping[str, Fields | Iterable[str]] | None = None,
    ) -> None:
        if isinstance(tuples, Mapping):
            items = [(stream, list(values)) for stream, rows in tuples.items() for values in rows]
        else:
            items = [(DEFAULT_STREAM, list(values)) for values in tuples]
        self.items: list[tuple[str, list[Any]]] = items
        if streams is not None:
            self.stream_fields = {s: as_fields(f) for s, f in streams.items()}
        elif fields is not None:
            used = {stream for stream, _ in items} or {DEFAULT_STREAM}
            self.stream_fields = {s: as_fields(fields) for s in sorted(used)}
        else:
            raise ValueError("FixedTupleSpout needs fields (or streams with fields)")
        self.record = SharedRecord()

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        for stream, fields in self.stream_fields.items():
            declarer.declare_stream(stream, fields)

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self.collector = collector
        count = len(context.get_component_tasks(context.component_id))
        self._mine = list(range(context.task_index, len(self.items), count))
        self._position = 0
        self._pending: set[int] = set()

    def next_tuple(self) -> None:
        if self._position >= len(self._mine):
            return
        index = self._mine[self._position]
        self._position += 1
        stream, values = self.items[index]
        self._pending.add(index)
        self.collector.emit(values, msg_id=index, stream=stream)

    def ack(self, msg_id: Any) -> None:
        self._pending.discard(msg_id)
        self.record.append("acked", msg_id)

    def fail(self, msg_id: Any) -> None:
        self._pending.discard(msg_id)
        self.record.append("failed", msg_id)

    def is_exhausted(self) -> bool:
        """All of this task's tuples emitted, and none still pending."""
        return self._position >= len(self._mine) and not self._pending


class FeederSpout(RecordingSpout, Exhaustible):
    """A spout the test feeds: ``feed(values, msg_id=None)`` from any thread.

    Tuples fed are emitted in order by whichever task polls first (one task is usual),
    wherever the tasks run: the spout the test holds and its tasks share one queue (a
    :class:`~squall.testing.SharedRecord`'s), so feeding works on the local engine, in
    its worker processes and on Spark (whose spout tasks run in a source's process).
    ``acked``/``failed`` list the msg ids acked and failed; a failed tuple is not
    replayed unless ``replay_failed=True`` (it is then fed again, at the queue's end).
    """

    def __init__(
        self,
        fields: Fields | Iterable[str] | str,
        stream: str = DEFAULT_STREAM,
        replay_failed: bool = False,
    ) -> None:
        self.fields = as_fields(fields)
        self.stream = stream
        self.replay_failed = replay_failed
        self.record = SharedRecord()

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare_stream(self.stream, self.fields)

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self.collector = collector
        self._in_flight: dict[Any, list[Any]] = {}

    def feed(self, values: Sequence[Any], msg_id: Any = None) -> None:
        """Queue ``values`` for emission (with ``msg_id``: tracked). Thread-safe."""
        self.record.put((list(values), msg_id))

    def feed_many(
        self, rows: Iterable[Sequence[Any]], msg_ids: Iterable[Any] | None = None
    ) -> None:
        """Queue several tuples; ``msg_ids`` pairs with ``rows`` when given."""
        if msg_ids is None:
            for row in rows:
                self.feed(row)
        else:
            for row, msg_id in zip(rows, msg_ids, strict=True):
                self.feed(row, msg_id)

    def next_tuple(self) -> None:
        try:
            values, msg_id = self.record.take()
        except IndexError:
            return
        if msg_id is not None:
            self._in_flight[msg_id] = values
        self.collector.emit(values, msg_id=msg_id, stream=self.stream)

    def ack(self, msg_id: Any) -> None:
        self._in_flight.pop(msg_id, None)
        self.record.append("acked", msg_id)

    def fail(self, msg_id: Any) -> None:
        self.record.append("failed", msg_id)
        values = self._in_flight.pop(msg_id, None)
        if self.replay_failed and values is not None:
            self.record.put((values, msg_id))

    def is_exhausted(self) -> bool:
        """Nothing queued and nothing in flight on this task."""
        return not self._in_flight and not self.record.queued()


class TestWordSpout(Spout):
    """Storm's ``TestWordSpout``: emits random words from ``WORDS`` (``"nathan"``,
    ``"mike"``, ``"jackson"``, ``"golda"``, ``"bertels"``) on field ``"word"``,
    unanchored (no msg id), one word per ``interval_ms`` of the topology's clock.

    Storm's sleeps 100 ms before each word; this one returns from ``next_tuple`` without
    emitting until the clock has moved ``interval_ms`` since its last word (the first
    word ``interval_ms`` after ``open``), so on a ``ManualClock`` a task emits one word
    each time the clock passes its next due time.

    Args:
        is_distributed: False caps the spout at one task
            (``topology.max.task.parallelism`` 1 in its component configuration), as
            Storm's ``TestWordSpout(false)``.
        seed: makes runs reproducible: task ``i`` draws from ``random.Random(seed +
            i)`` (None: unseeded, as Storm's).
        interval_ms: the pacing (0: a word at every ``next_tuple``).
        max_words: stop after this many words per task (None: never), for tests that
            need a finite input.

    Raises:
        ValueError: a negative ``interval_ms`` or ``max_words``.
    """

    __test__ = False  # a spout, not a test class for pytest

    WORDS = ("nathan", "mike", "jackson", "golda", "bertels")
    outputs = ["word"]

    def __init__(
        self,
        is_distributed: bool = True,
        seed: int | None = None,
        interval_ms: float = 100.0,
        max_words: int | None = None,
    ) -> None:
        if interval_ms < 0:
            raise ValueError(f"TestWordSpout: interval_ms must be >= 0, got {interval_ms!r}")
        if max_words is not None and max_words < 0:
            raise ValueError(f"TestWordSpout: max_words must be >= 0, got {max_words!r}")
        self.is_distributed = is_distributed
        self.seed = seed
        self.interval_ms = interval_ms
        self.max_words = max_words

    def get_component_configuration(self) -> dict[str, Any] | None:
        if not self.is_distributed:
            return {Config.TOPOLOGY_MAX_TASK_PARALLELISM: 1}
        return None

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self.collector = collector
        self._clock = context.clock
        self._random = random.Random(None if self.seed is None else self.seed + context.task_index)
        self._due_ms = self._clock.now_ms() + self.interval_ms
        self._emitted = 0

    def next_tuple(self) -> None:
        """Emit one word if its time has come. On the task's thread; never blocks."""
        if self.max_words is not None and self._emitted >= self.max_words:
            return
        now = self._clock.now_ms()
        if now < self._due_ms:
            return
        self._due_ms = now + self.interval_ms
        self._emitted += 1
        self.collector.emit([self._random.choice(self.WORDS)])
