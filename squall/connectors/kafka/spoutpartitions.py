"""The partitions of a ``KafkaSpout`` task over their life: taken when they appear
(positioned by the first-poll strategy, or at a restored snapshot's position), given up
when they go (a topic deleted, or another task's after the list changed), and started
again when their log was made anew (the end fell behind the task's position, the
offset is out of range, or, checked after the broker could not be reached, the log is
not the one the task was reading: see :mod:`~squall.connectors.kafka.logcheck`). Named
topics that do not exist are reported with the connectors' back-off until they do.

A mixin of :class:`~squall.connectors.kafka.spout.KafkaSpout`; its methods run on the
spout task's thread, inside ``next_tuple``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

from squall.connectors.errors import ConnectorError
from squall.connectors.kafka.assignment import task_partitions
from squall.connectors.kafka.client import (
    TopicSelection,
    end_offsets,
    is_unreachable,
    kafka,
    list_partitions,
    one_line,
)
from squall.connectors.kafka.commits import Commits
from squall.connectors.kafka.logcheck import (
    admin_config,
    committed_lost,
    end_before,
    probe,
    record_changed,
    topic_ids,
)
from squall.connectors.kafka.offsets import PartitionOffsets
from squall.connectors.kafka.positions import END, start_of
from squall.connectors.kafka.retry import RetrySchedule
from squall.connectors.outage import Outage
from squall.model.collectors import SpoutOutputCollector

Tp = tuple[str, int]
MsgId = tuple[str, int, int]
#: A record in flight: its stream, its values and its partition's offsets.
InFlight = tuple[str, list[Any], PartitionOffsets]


class SpoutPartitions:
    """Taking, giving up and restarting the partitions of a spout task."""

    # What the spout provides (see KafkaSpout.open).
    bootstrap_servers: str
    first_poll_offset: str
    partition_refresh_ms: int
    collector: SpoutOutputCollector
    _label: str
    _topology: str
    _task_index: int
    _tasks: int
    _tracking: bool
    _selection: TopicSelection
    _consumer: Any
    _lister: Any
    _parts: dict[Tp, PartitionOffsets]
    _assigned: list[Tp]
    _vanished: set[str]
    _paused: set[Tp]
    _in_flight: dict[MsgId, InFlight]
    _replay: deque[MsgId]
    _retries: RetrySchedule
    _buffer: deque[Any]
    _stash: list[Any]
    _amo_waiting: list[Any]
    _commits: Commits
    _outage: Outage
    _refresh_at: float
    #: Partitions held since the broker could not be reached: nothing of theirs is
    #: emitted or committed until their log is checked (:meth:`_confirm_logs`).
    _suspect: set[Tp]
    #: Partition -> the last record handled (compared after an outage).
    _last: dict[Tp, Any]
    #: Topic -> its id when first taken (brokers that give ids).
    _topic_ids: dict[str, str]
    _admin: Any
    #: Named topic that does not exist -> the back-off of its reports.
    _missing: dict[str, Outage]
    #: Partition not fetched yet -> its ``(start, end)`` asked of the broker (metrics).
    _listed: dict[Tp, tuple[int, int]]

    # Methods the spout provides, declared for the type checker only.
    if TYPE_CHECKING:

        def _ensure_consumer(self) -> Any: ...

        def _unreachable(self, cause: Any) -> None: ...

        def _report_once(self, text: str) -> None: ...

        def _commit_partitions(self, partitions: Iterable[Tp], wait: bool) -> None: ...

        def _client_conf(self) -> dict[str, Any]: ...

        def _wait(self) -> float: ...

    def _refresh(self, now: float) -> None:
        """List the partitions; take the new ones of this task (positioned by the
        strategy, or at their snapshot position), give up those gone, restart those
        whose end fell behind the task's position."""
        self._refresh_at = now + self.partition_refresh_ms / 1000.0
        consumer = self._ensure_consumer()
        confluent = kafka()
        try:
            found = list_partitions(self._lister, self._selection, self._wait())
        except confluent.KafkaException as error:
            self._unreachable(one_line(error))
            return
        finally:
            self._lister.poll(0)  # hands its log lines to the logger
        mine = task_partitions(found, self._task_index, self._tasks)
        wanted = set(mine)
        topics = {tp[0] for tp in found}
        gone = [tp for tp in self._assigned if tp not in wanted]
        if gone:
            self._give_up(gone, topics)
        new = [tp for tp in mine if tp not in set(self._assigned)]
        if new:
            try:
                starts = self._starts(new)
            except confluent.KafkaException as error:
                self._unreachable(one_line(error))
                return
            consumer.incremental_assign(
                [confluent.TopicPartition(t, p, starts[(t, p)]) for t, p in new]
            )
            self._assigned.extend(new)
            self._remember_ids({tp[0] for tp in new})
        self._outage.recovered()
        if self._selection.pattern is None:
            self._report_missing(topics, now)
        if self._suspect and not self._confirm_logs():
            return
        self._check_ends()
        self._list_unfetched()

    def _give_up(self, gone: list[Tp], topics: set[str]) -> None:
        """Stop reading ``gone``: commit what is done first (if their topic still
        exists), then forget their records; report topics that no longer exist."""
        confluent = kafka()
        vanished = sorted({tp[0] for tp in gone if tp[0] not in topics})
        for topic in vanished:
            if topic not in self._vanished:
                self._vanished.add(topic)
                self.collector.report_error(
                    ConnectorError(
                        f"{self._label}: topic {topic!r} no longer exists on "
                        f"{self.bootstrap_servers}; its records not committed are lost "
                        f"with it, and it is read again from {self._reset_name()} once it "
                        f"exists again"
                    )
                )
        kept = [tp for tp in gone if tp[0] in topics]
        if kept and self._tracking:
            self._commit_partitions(kept, wait=True)
        try:
            self._consumer.incremental_unassign([confluent.TopicPartition(t, p) for t, p in gone])
        except confluent.KafkaException as error:
            self._report_once(f"{self._label}: could not unassign partitions: {one_line(error)}")
        gone_set = set(gone)
        self._assigned = [tp for tp in self._assigned if tp not in gone_set]
        for tp in gone:
            self._forget(tp)

    def _forget(self, tp: Tp) -> None:
        """Drop a partition's offsets, records in flight and retries."""
        self._parts.pop(tp, None)
        self._paused.discard(tp)
        self._suspect.discard(tp)
        self._last.pop(tp, None)
        self._listed.pop(tp, None)
        self._commits.forget(tp)

        def other(msg_id: MsgId) -> bool:
            return (msg_id[0], msg_id[1]) != tp

        self._in_flight = {key: item for key, item in self._in_flight.items() if other(key)}
        self._replay = deque(key for key in self._replay if other(key))
        self._retries.forget(other)

    def _reset_name(self) -> str:
        return "the earliest offset" if "earliest" in self.first_poll_offset else "the end"

    def _starts(self, new: list[Tp]) -> dict[Tp, int]:
        """Where each new partition starts: its position (a restored task), else by the
        strategy. Creates their offsets.

        Raises:
            KafkaException: the broker did not answer in time.
        """
        confluent = kafka()
        starts: dict[Tp, int] = {}
        unknown: list[Tp] = []
        for tp in new:
            state = self._parts.get(tp)
            if state is not None and state.next_offset is not None:
                starts[tp] = state.next_offset
            else:
                unknown.append(tp)
        if not unknown:
            return starts
        found = self._consumer.committed(
            [confluent.TopicPartition(t, p) for t, p in unknown], timeout=self._wait()
        )
        committed: dict[Tp, tuple[int, str | None]] = {
            (entry.topic, entry.partition): (entry.offset, entry.metadata) for entry in found
        }
        to_end: list[Tp] = []
        for tp in unknown:
            offset, metadata = committed.get(tp, (-1, None))
            start = start_of(self.first_poll_offset, offset, metadata, self._topology)
            if isinstance(start, int):
                starts[tp] = start
                self._parts[tp] = PartitionOffsets(committed=start, next_offset=start)
            elif start == END:
                to_end.append(tp)
            else:
                starts[tp] = confluent.OFFSET_BEGINNING
                self._parts[tp] = PartitionOffsets()
        if to_end:
            ends = self._ends(to_end)
            for tp in to_end:
                starts[tp] = ends[tp]
                self._parts[tp] = PartitionOffsets(next_offset=ends[tp])
        return starts

    def _ends(self, partitions: Iterable[Tp]) -> dict[Tp, int]:
        conf = self._client_conf()
        return end_offsets(conf, partitions, self._wait())

    def _check_ends(self) -> None:
        """Restart the partitions whose end (from fetches) is behind the task's
        position: their log was deleted and made again (a topic re-created)."""
        consumer, confluent = self._consumer, kafka()
        for tp in list(self._assigned):
            state = self._parts.get(tp)
            if state is None or state.next_offset is None:
                continue
            try:
                _, high = consumer.get_watermark_offsets(
                    confluent.TopicPartition(tp[0], tp[1]), cached=True
                )
            except confluent.KafkaException:
                continue
            if 0 <= high < state.next_offset:
                self._restart_partition(
                    tp, f"its end ({high}) is behind the spout's position ({state.next_offset})"
                )
        if self._vanished:
            present = {tp[0] for tp in self._assigned}
            for topic in sorted(self._vanished & present):
                self._vanished.discard(topic)
                self.collector.report_error(
                    ConnectorError(
                        f"{self._label}: topic {topic!r} exists again on "
                        f"{self.bootstrap_servers}; reading it from {self._reset_name()} "
                        f"(or the group's committed offsets)"
                    )
                )

    def _restart_partition(self, tp: Tp, why: str) -> None:
        """Start ``tp`` again at the strategy's reset point (its records in flight are
        forgotten); reported."""
        confluent = kafka()
        self._forget(tp)
        if self.first_poll_offset.endswith("latest"):
            try:
                start = self._ends([tp])[tp]
            except confluent.KafkaException as error:
                self._unreachable(one_line(error))
                start = confluent.OFFSET_END
            self._parts[tp] = PartitionOffsets(next_offset=max(start, 0))
        else:
            start = confluent.OFFSET_BEGINNING
            self._parts[tp] = PartitionOffsets()
        self._buffer = deque(
            m for m in self._buffer if (m.topic(), m.partition()) != tp or m.error() is not None
        )
        self._seek(tp, start)
        self.collector.report_error(
            ConnectorError(
                f"{self._label}: partition {tp[0]}/{tp[1]}: {why}; reading it again from "
                f"{self._reset_name()}"
            )
        )

    def _seek(self, tp: Tp, offset: int) -> None:
        """Read ``tp`` on from ``offset`` (assigned again if the client cannot seek it
        yet)."""
        confluent = kafka()
        try:
            self._consumer.seek(confluent.TopicPartition(tp[0], tp[1], offset))
        except confluent.KafkaException:
            self._consumer.incremental_unassign([confluent.TopicPartition(tp[0], tp[1])])
            self._consumer.incremental_assign([confluent.TopicPartition(tp[0], tp[1], offset)])

    def _list_unfetched(self) -> None:
        """Ask the broker the start and end of the partitions the client has not
        fetched yet, so that the lag counts their records (see ``offset_metrics``)."""
        confluent = kafka()
        listed: dict[Tp, tuple[int, int]] = {}
        for tp in self._assigned:
            partition = confluent.TopicPartition(tp[0], tp[1])
            try:
                _, high = self._consumer.get_watermark_offsets(partition, cached=True)
                if high is not None and high >= 0:
                    continue
                low, high = self._lister.get_watermark_offsets(partition, timeout=self._wait())
            except confluent.KafkaException:
                continue
            listed[tp] = (low, high)
        self._listed = listed

    # --- a log made anew while the broker was away --------------------------------------

    def _doubt(self) -> None:
        """The broker could not be reached: hold every partition read (nothing of
        theirs is emitted or committed, records read are dropped and read again) until
        the next listing checks their logs. Runs where the failure is seen."""
        if not self._assigned:
            return
        suspect = self._suspect
        suspect.update(self._assigned)
        self._refresh_at = 0.0

        def kept(message: Any) -> bool:
            return message.error() is not None or (message.topic(), message.partition()) not in (
                suspect
            )

        buffer = self._buffer
        if buffer:  # in place: next_tuple may be going through it
            remaining = [m for m in buffer if kept(m)]
            buffer.clear()
            buffer.extend(remaining)
        self._stash = [m for m in self._stash if kept(m)]
        self._amo_waiting = [m for m in self._amo_waiting if kept(m)]

    def _confirm_logs(self) -> bool:
        """Check the held partitions' logs against what the task saw: a partition whose
        log is a new one starts again at the strategy's reset point (reported); the
        others read on from their positions. False if the broker did not answer (they
        stay held, the back-off goes on)."""
        confluent = kafka()
        held = [tp for tp in self._assigned if tp in self._suspect]
        try:
            changes = self._log_changes(held)
        except confluent.KafkaException as error:
            self._unreachable(one_line(error))
            return False
        for tp in held:
            self._suspect.discard(tp)
            why = changes.get(tp)
            if why is not None:
                self._restart_partition(tp, f"its log is not the one the spout read ({why})")
                continue
            state = self._parts.get(tp)
            if state is not None and state.next_offset is not None:
                self._seek(tp, state.next_offset)
            elif state is not None:
                self._seek(tp, confluent.OFFSET_BEGINNING)
        self._suspect.difference_update(held)
        return True

    def _log_changes(self, held: list[Tp]) -> dict[Tp, str]:
        """Why each of ``held`` holds a new log (partitions without a reason left out):
        a topic id changed, the group's committed offset below one the broker confirmed,
        or the record at the task's position gone or different.

        A check the broker refuses for another reason than being out of reach (an
        unsupported request, an authorization) is reported and left out.

        Raises:
            KafkaException: the broker could not be reached or did not answer in time.
        """
        confluent = kafka()
        changes: dict[Tp, str] = {}
        if not held:
            return changes
        wait = self._wait()
        known = {tp[0] for tp in held if tp[0] in self._topic_ids}
        now_ids = self._ask("topic ids", lambda: topic_ids(self._admin_client(), known, wait))
        if known and now_ids is not None:
            for tp in held:
                before, after = self._topic_ids.get(tp[0]), now_ids.get(tp[0])
                if before is not None and after is not None and before != after:
                    changes[tp] = f"the topic's id is {after}, not {before}"
        wanted = [confluent.TopicPartition(t, p) for t, p in held]
        found = self._ask("committed offsets", lambda: self._consumer.committed(wanted, wait))
        for entry in found or []:
            tp = (entry.topic, entry.partition)
            state = self._parts.get(tp)
            if tp in changes or state is None or state.committed is None:
                continue
            why = committed_lost(entry.offset, state.committed)
            if why is not None:
                changes[tp] = why
        offsets: dict[Tp, int] = {}
        for tp in held:
            state = self._parts.get(tp)
            if tp in changes or state is None or not state.next_offset:
                continue
            last = self._last.get(tp)
            offsets[tp] = last.offset() if last is not None else state.next_offset - 1
        answers = self._ask("records", lambda: probe(self._client_conf(), offsets, wait))
        for tp, answer in (answers or {}).items():
            last = self._last.get(tp)
            if last is not None and last.offset() == offsets[tp]:
                low = None
                if answer[0] == "out of range":
                    found_range = self._ask("the log's start", partial(self._range, tp, wait))
                    low = found_range[0] if found_range is not None else None
                why = record_changed(last, answer, low)
            else:
                why = end_before(answer, offsets[tp] + 1)
            if why is not None:
                changes[tp] = why
        return changes

    def _range(self, tp: Tp, wait: float) -> tuple[int, int]:
        """``tp``'s start and end, asked of the broker."""
        partition = kafka().TopicPartition(tp[0], tp[1])
        low, high = self._lister.get_watermark_offsets(partition, timeout=wait)
        return low, high

    def _ask(self, what: str, request: Callable[[], Any]) -> Any:
        """``request()``'s answer; None (reported) if the broker refused it for another
        reason than being out of reach.

        Raises:
            KafkaException: the broker could not be reached or did not answer in time.
        """
        confluent = kafka()
        try:
            return request()
        except confluent.KafkaException as error:
            if is_unreachable(error):
                raise
            self._report_once(
                f"{self._label}: could not read {what} to check the logs: {one_line(error)}"
            )
            return None

    def _admin_client(self) -> Any:
        if self._admin is None:
            kafka()
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(admin_config(self._client_conf()))
        return self._admin

    def _remember_ids(self, topics: set[str]) -> None:
        """Keep the ids of ``topics`` not known yet (the broker gives none: nothing)."""
        unknown = {topic for topic in topics if topic not in self._topic_ids}
        if not unknown:
            return
        try:
            self._topic_ids.update(topic_ids(self._admin_client(), unknown, self._wait()))
        except kafka().KafkaException:
            return  # compared by the other checks only

    # --- named topics that do not exist -----------------------------------------------

    def _report_missing(self, topics: set[str], now: float) -> None:
        """Report each named topic that does not exist, with the connectors' back-off,
        until it does; list again when the next report is due."""
        for name in self._selection.names:
            backoff = self._missing.get(name)
            if name in topics:
                self._missing.pop(name, None)
                continue
            if backoff is None:
                backoff = self._missing[name] = Outage(self._label, self.bootstrap_servers)
            if not backoff.ready():
                continue
            backoff.failed(LookupError(name))
            wait = backoff.wait_ms() / 1000.0
            if backoff.failures == 1 and name in self._vanished:
                continue  # reported as gone just now
            self.collector.report_error(
                ConnectorError(
                    f"{self._label}: topic {name!r} does not exist on {self.bootstrap_servers} "
                    f"(attempt {backoff.failures}; checking again in {wait:.3g} s); it is "
                    f"read once it exists"
                )
            )
        if self._missing:
            soonest = min(backoff.wait_ms() for backoff in self._missing.values()) / 1000.0
            self._refresh_at = min(self._refresh_at, now + soonest)


__all__ = ["InFlight", "SpoutPartitions"]
