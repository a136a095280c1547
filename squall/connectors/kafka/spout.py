"""``KafkaSpout``: Storm's storm-kafka-client ``KafkaSpout`` over confluent-kafka
(docs/connectors.md, section Kafka, says what users rely on).

Partitions: assigned by the spout itself (``assign``, never the group protocol; see
:mod:`~squall.connectors.kafka.assignment`), listed again every
``partition_refresh_ms``. The group (``group_id``) only keeps the committed offsets.

Guarantees: ``at_least_once`` emits each record with message id ``(topic, partition,
offset)``, commits every ``commit_period_ms`` the longest prefix of done records per
partition (:mod:`~squall.connectors.kafka.offsets`), replays a failed record after its
:class:`~squall.connectors.kafka.retry.RetryBackoff` and pauses a partition with
``max_uncommitted_offsets`` records emitted past its commit; ``at_most_once`` commits
the offsets of the records read before emitting them; ``no_guarantee`` emits without
message ids and commits the position of the records handed out. A commit counts once
the broker confirmed it (:mod:`~squall.connectors.kafka.commits`). Where a partition
starts: :mod:`~squall.connectors.kafka.positions`.

Where it runs: the component carries only its options and pickles. Each task makes its
consumer at its first ``next_tuple``, on the engine's thread or process for the task
(Spark: the source's driver-side process), where ``ack`` and ``fail`` run too. A Spark
snapshot keeps the per-partition offsets, the records in flight (their values) and the
retry schedule, never the consumer or records read ahead; a restored task makes a
consumer again and seeks each partition to its snapshot position.

Reading: ``next_tuple`` emits at most one tuple, from a buffer it fills with one
``consume`` of the records the client has fetched. It waits only for records it knows
are coming (a partition that has not answered its first fetch, or whose high watermark
is past the task's position), at most :data:`BEHIND_WAIT_SECONDS`: a worker of the
local engine runs several tasks on one thread, so a spout that waited for new records
would hold up the bolts beside it, while one that returned empty-handed with records
on their way would look idle (``squall run --until-idle`` would stop). A record the
translator skips is done at once and the next one is emitted in the same call.

Failures: a broker that cannot be reached is reported through the collector
(``KafkaSpout '<component>' cannot reach <servers>: ...``) with the connectors'
back-off; ``next_tuple`` never raises for it, commits that failed are sent again.
After such a failure every partition is held (nothing emitted or committed for it)
until its log is checked against what the task saw
(:mod:`~squall.connectors.kafka.logcheck`): a log made anew meanwhile starts again at
the strategy's reset point, reported. A topic that disappears is reported, a named
topic that does not exist is reported with the back-off until it does; a partition
that exists again, whose end fell behind the task's position, or whose offset is out of
range starts again at the strategy's reset point, reported.

Metrics: ``metrics()`` returns a dict the task refreshes (it is read from other
threads): Storm's ``kafkaOffset`` figures (:func:`~squall.connectors.kafka.offsets.offset_metrics`)
and ``malformed``, ``replayed``, ``retries_exhausted``, ``in_flight``.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from squall.connectors.errors import ConnectorError
from squall.connectors.kafka.client import (
    TopicSelection,
    consumer_config,
    is_unreachable,
    kafka,
    one_line,
    redact_conf,
)
from squall.connectors.kafka.commits import Commits
from squall.connectors.kafka.offsets import PartitionOffsets, offset_metrics
from squall.connectors.kafka.positions import commit_metadata
from squall.connectors.kafka.records import (
    ERROR_FIELDS,
    ERRORS_STREAM,
    RECORD_FIELDS,
    MalformedRecordError,
    RecordReader,
    Translator,
    error_values,
)
from squall.connectors.kafka.retry import RetryBackoff, RetrySchedule
from squall.connectors.kafka.spoutoptions import (
    AT_LEAST_ONCE,
    AT_MOST_ONCE,
    GUARANTEES,
    NO_GUARANTEE,
    STRATEGIES,
    check_spout_options,
)
from squall.connectors.kafka.spoutpartitions import InFlight, SpoutPartitions
from squall.connectors.options import OptionChecker
from squall.connectors.outage import Outage
from squall.model.components import Spout
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.hooks import ReportsMetrics, ValidatesSubmission

if TYPE_CHECKING:
    from squall.runtime.collectors import SpoutOutputCollector
    from squall.runtime.context import TopologyContext

#: The longest ``next_tuple`` waits for records the task knows are coming (a
#: partition's first fetch, records past its position): seconds, in slices of
#: :data:`BEHIND_SLICE_SECONDS`.
BEHIND_WAIT_SECONDS = 5.0
BEHIND_SLICE_SECONDS = 0.05
#: Records one ``consume`` fetches at most.
CONSUME_BATCH = 1000
#: Seconds a metadata or offsets request may take (or ``poll_timeout_ms`` if longer).
REQUEST_SECONDS = 2.0
#: Seconds between two refreshes of the metrics.
METRICS_SECONDS = 0.2
#: Seconds between two reports of the same error that is not an outage.
REPEAT_SECONDS = 5.0

Tp = tuple[str, int]
MsgId = tuple[str, int, int]


class KafkaSpout(SpoutPartitions, Spout, ValidatesSubmission, ReportsMetrics):
    """Emits the records of Kafka topics (see the module docstring).

    Declares the translator's streams (the default stream with ``fields`` without one)
    and ``"errors"`` with :data:`~squall.connectors.kafka.records.ERROR_FIELDS`.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topics: str | Sequence[str] | Any,
        group_id: str,
        *,
        processing_guarantee: str = AT_LEAST_ONCE,
        first_poll_offset: str = "uncommitted_earliest",
        fields: Sequence[str] = RECORD_FIELDS,
        translator: Translator | None = None,
        key_format: str = "str",
        value_format: str = "str",
        commit_period_ms: int = 30_000,
        max_uncommitted_offsets: int = 10_000_000,
        poll_timeout_ms: int = 200,
        retry: RetryBackoff | None = None,
        consumer_conf: Mapping[str, Any] | None = None,
        partition_refresh_ms: int = 2000,
    ) -> None:
        """Keep the options; they are checked when the topology is submitted.

        Args:
            bootstrap_servers: ``host:port[,host:port...]``.
            topics: a topic name, a list of names, or a compiled ``re.Pattern``
                matched against every topic's name.
            group_id: the consumer group whose committed offsets the spout keeps.
            processing_guarantee: ``at_least_once``, ``at_most_once`` or
                ``no_guarantee`` (see the module docstring).
            first_poll_offset: where a partition starts (see the module docstring).
            fields: the tuple's fields (see :mod:`squall.connectors.kafka.records`).
            translator: ``record -> values`` (or ``(stream, values)``; None skips).
            key_format: ``str``, ``bytes`` or ``json``.
            value_format: ``str``, ``bytes`` or ``json``.
            commit_period_ms: milliseconds between commits.
            max_uncommitted_offsets: records emitted past a partition's committed
                offset at most (``at_least_once``).
            poll_timeout_ms: the longest a ``next_tuple`` waits for the broker: the
                confirmation of a commit with ``at_most_once``, a metadata request
                while the broker is down (see the module docstring for reading).
            retry: the back-off of failed records (default ``RetryBackoff()``).
            consumer_conf: more librdkafka consumer settings.
            partition_refresh_ms: milliseconds between two listings of the partitions.
        """
        self.bootstrap_servers = bootstrap_servers
        self.topics = list(topics) if isinstance(topics, (list, tuple)) else topics
        self.group_id = group_id
        self.processing_guarantee = processing_guarantee
        self.first_poll_offset = first_poll_offset
        self.fields = tuple(fields) if isinstance(fields, (list, tuple)) else fields
        self.translator = translator
        self.key_format = key_format
        self.value_format = value_format
        self.commit_period_ms = commit_period_ms
        self.max_uncommitted_offsets = max_uncommitted_offsets
        self.poll_timeout_ms = poll_timeout_ms
        self.retry = RetryBackoff() if retry is None else retry
        self.consumer_conf = (
            dict(consumer_conf) if isinstance(consumer_conf, Mapping) else (consumer_conf)
        )
        self.partition_refresh_ms = partition_refresh_ms
        #: Whether ``open`` ran; the consumer (made at the first read) and the metrics
        #: the task last refreshed.
        self._opened = False
        self._consumer: Any = None
        self._metrics: dict[str, float] = {}

    def __repr__(self) -> str:
        return (
            f"KafkaSpout(bootstrap_servers={self.bootstrap_servers!r}, topics={self.topics!r}, "
            f"group_id={self.group_id!r}, consumer_conf={redact_conf(self._conf_or_none())!r})"
        )

    def _conf_or_none(self) -> Mapping[str, Any] | None:
        conf = self.consumer_conf
        return conf if isinstance(conf, Mapping) else None

    # --- options ----------------------------------------------------------------------

    def check_options(self, checker: OptionChecker) -> None:
        """Check every option (librdkafka checks the consumer settings); raise the
        checker's error at the first wrong one."""
        check_spout_options(checker, self)

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Check the options where the topology is submitted.

        Raises:
            InvalidTopologyError: an option is wrong; the message names the component.
        """
        self.check_options(OptionChecker(component_id, type(self).__name__))

    def _reader(self) -> RecordReader:
        return RecordReader(self.fields, self.key_format, self.value_format, self.translator)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The translator's streams (default: ``fields``), and ``"errors"``."""
        for stream, names in self._reader().output_streams().items():
            declarer.declare_stream(stream, list(names))
        declarer.declare_stream(ERRORS_STREAM, list(ERROR_FIELDS))

    # --- snapshots (Spark) ------------------------------------------------------------

    #: Attributes a snapshot leaves out (made again when restored).
    _TRANSIENT = (
        "_consumer",
        "_lister",
        "_buffer",
        "_stash",
        "_errors",
        "_commits",
        "_paused",
        "_outage",
        "_amo_waiting",
        "_suspect",
        "_last",
        "_admin",
        "_missing",
        "_listed",
    )

    def __getstate__(self) -> dict[str, Any]:
        """Options, and for an opened task its partitions' offsets, the records in
        flight, the retry schedule and the metrics; not the consumer or the records read
        ahead (a restored task reads them again from its positions)."""
        state = dict(vars(self))
        for transient in self._TRANSIENT:
            state.pop(transient, None)
        if "_assigned" in state:
            state["_assigned"] = []
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self._consumer = None
        if self._opened:  # make a consumer at the next read
            self._fresh_client()
            self._refresh_at = 0.0
            self._chores_at = 0.0

    # --- the task ---------------------------------------------------------------------

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        """Prepare the task; the consumer is made at the first ``next_tuple``. Runs once
        per task, where the task runs."""
        self._opened = True
        self.collector = collector
        component = context.component_id
        self._component = component
        self._topology = context.topology_name
        self._task_id = context.task_id
        self._task_index = context.task_index
        self._tasks = len(context.get_component_tasks(component))
        self._label = f"KafkaSpout {component!r}"
        self._selection = TopicSelection.of(OptionChecker(component, "KafkaSpout"), self.topics)
        self._read = self._reader().read
        self._guarantee = self.processing_guarantee
        self._tracking = self._guarantee == AT_LEAST_ONCE
        self._max_uncommitted = self.max_uncommitted_offsets
        self._poll_timeout = self.poll_timeout_ms / 1000.0
        self._request_timeout = max(REQUEST_SECONDS, self._poll_timeout)
        self._metadata = commit_metadata(self._topology, component, self._task_id)
        #: Partition -> its offsets, for the partitions this task reads.
        self._parts: dict[Tp, PartitionOffsets] = {}
        #: The partitions assigned to the consumer.
        self._assigned: list[Tp] = []
        #: Records emitted and not done: their stream, values and partition's offsets.
        self._in_flight: dict[MsgId, InFlight] = {}
        self._retries = RetrySchedule(self.retry)
        self._replay: deque[MsgId] = deque()
        self._malformed = 0
        self._replayed = 0
        self._exhausted = 0
        self._vanished: set[str] = set()
        self._topic_ids = {}
        self._reported: dict[str, float] = {}
        self._metrics = {}
        self._refresh_at = 0.0
        self._commit_at = time.monotonic() + self.commit_period_ms / 1000.0
        self._metrics_at = 0.0
        self._chores_at = 0.0
        self._fresh_client()

    def _fresh_client(self) -> None:
        """No consumer yet (made at the next read); nothing read ahead."""
        self._consumer = None
        self._lister: Any = None
        #: Records read and not handled yet.
        self._buffer: deque[Any] = deque()
        #: Records read while waiting for a commit's confirmation.
        self._stash: list[Any] = []
        #: ``at_most_once``: records read whose offsets are not committed yet.
        self._amo_waiting: list[Any] = []
        #: Client-wide errors from librdkafka's callback.
        self._errors: list[Any] = []
        self._commits = Commits()
        self._paused: set[Tp] = set()
        self._outage = Outage(self._label, self.bootstrap_servers)
        self._suspect = set()
        self._last = {}
        self._admin = None
        self._missing = {}
        self._listed = {}

    def next_tuple(self) -> None:
        """Emit one tuple: a failed record whose retry is due first, else the next
        record read (reading a batch when none is buffered). Runs the periodic work
        (partitions, commits, metrics) when due. Waits only for records it knows are
        coming (see the module docstring)."""
        now = time.monotonic()
        if now >= self._chores_at:
            self._chores(now)
        if self._replay:
            self._emit_replay()
            return
        buffer = self._buffer
        if not buffer:
            self._fill()
        handle = self._handle
        while buffer:
            if handle(buffer.popleft()):
                return

    def ack(self, msg_id: Any) -> None:
        """The record's tree completed: it is done (committed at the next commit)."""
        item = self._in_flight.pop(msg_id, None)
        if item is None:
            return
        item[2].done(msg_id[2])
        if self._retries.failing:
            self._retries.done(msg_id)

    def fail(self, msg_id: Any) -> None:
        """The record's tree failed: emit it again after its back-off, or, its retries
        exhausted, count it done and report it."""
        if msg_id not in self._in_flight:
            return
        now = time.monotonic()
        if self._retries.failed(msg_id, now):
            due = self._retries.next_due()
            if due is not None and due < self._chores_at:
                self._chores_at = due
            return
        item = self._in_flight.pop(msg_id)
        self._exhausted += 1
        item[2].done(msg_id[2])
        self.collector.report_error(
            ConnectorError(
                f"{self._label}: record {msg_id[0]}/{msg_id[1]}@{msg_id[2]} failed "
                f"{self.retry.max_retries} retries; counted as done"
            )
        )

    def activate(self) -> None:
        """Nothing to do (reading goes on at the next ``next_tuple``)."""

    def deactivate(self) -> None:
        """Commit what is done (``at_least_once``, ``no_guarantee``)."""
        if self._consumer is not None:
            self._commit(time.monotonic(), final=True)

    def close(self) -> None:
        """Commit what is done, then close the consumer. Runs when the topology is
        killed; not guaranteed (records not committed are read again after a
        restart)."""
        if self._consumer is None:
            return
        self._commit(time.monotonic(), final=True)
        with contextlib.suppress(Exception):  # a consumer whose broker is gone
            self._consumer.close()
        with contextlib.suppress(Exception):
            self._lister.close()
        self._consumer = self._lister = None

    def metrics(self) -> Mapping[str, float]:
        """The metrics the task last refreshed (see the module docstring). Called from
        other threads: only reads a dict the task replaces."""
        return self._metrics

    # --- emitting ---------------------------------------------------------------------

    def _emit_replay(self) -> None:
        msg_id = self._replay.popleft()
        item = self._in_flight.get(msg_id)
        if item is None:
            return
        self._replayed += 1
        self.collector.emit(item[1], msg_id=msg_id, stream=item[0])

    def _handle(self, message: Any) -> bool:
        """Emit ``message`` (True), or skip it: an error, a partition no longer read or
        paused, a record already handled, one the translator skips (False)."""
        if message.error() is not None:
            self._consume_error(message)
            return False
        tp = (message.topic(), message.partition())
        state = self._parts.get(tp)
        paused, suspect = self._paused, self._suspect
        if state is None or (paused and tp in paused) or (suspect and tp in suspect):
            return False
        offset = message.offset()
        start = state.next_offset
        if start is not None and offset < start:
            return False  # read again (after a pause or a seek)
        tracking = self._tracking
        if tracking and state.uncommitted() >= self._max_uncommitted:
            self._pause(tp, state)
            return False
        self._last[tp] = message
        try:
            read = self._read(message)
        except MalformedRecordError as error:
            self._malformed += 1
            stream, values = ERRORS_STREAM, error_values(message, error)
        else:
            if read is None:
                if tracking:
                    state.handled(offset, done=True)
                else:
                    state.next_offset = offset + 1
                return False
            stream, values = read
        if tracking:
            msg_id = (tp[0], tp[1], offset)
            self._in_flight[msg_id] = (stream, values, state)
            state.emitted(offset)
            self.collector.emit(values, msg_id=msg_id, stream=stream)
        else:
            state.next_offset = offset + 1
            state.emitted_offset = offset
            self.collector.emit(values, stream=stream)
        return True

    def _pause(self, tp: Tp, state: PartitionOffsets) -> None:
        """Stop reading ``tp`` (at its uncommitted bound) until a commit frees room;
        what was read ahead of it is read again from its position then."""
        self._paused.add(tp)
        try:
            self._consumer.pause([kafka().TopicPartition(tp[0], tp[1])])
        except Exception as error:
            self._report_once(f"{self._label}: could not pause {tp[0]}/{tp[1]}: {one_line(error)}")

    def _unpause(self) -> None:
        """Resume the paused partitions with room again, from their positions."""
        confluent = kafka()
        for tp in list(self._paused):
            state = self._parts.get(tp)
            if state is not None and state.uncommitted() >= self._max_uncommitted:
                continue
            self._paused.discard(tp)
            if state is None or tp not in self._assigned:
                continue
            partition = confluent.TopicPartition(tp[0], tp[1])
            try:
                if state.next_offset is not None:
                    self._consumer.seek(confluent.TopicPartition(tp[0], tp[1], state.next_offset))
                self._consumer.resume([partition])
            except Exception as error:
                self._paused.add(tp)
                self._report_once(
                    f"{self._label}: could not resume {tp[0]}/{tp[1]}: {one_line(error)}"
                )

    # --- reading ----------------------------------------------------------------------

    def _fill(self) -> None:
        """Read into the buffer what the client has fetched, waiting only for records
        known to be coming."""
        consumer = self._consumer
        if consumer is None:
            return
        if self._amo_waiting:  # at_most_once: read earlier, not committed yet
            if self._outage.ready():
                self._commit_then_buffer()
            return
        try:
            messages = consumer.consume(CONSUME_BATCH, 0)
            if not messages and self._behind():
                messages = self._await_records(consumer)
        except kafka().KafkaException as error:
            if self._outage.ready():
                self._unreachable(one_line(error))
            return
        if self._stash:
            messages = self._stash + messages
            self._stash = []
        if self._errors or self._commits.confirmed:
            self._settle_callbacks()
        if self._suspect:  # held since an outage: read again once checked
            suspect = self._suspect
            messages = [
                m
                for m in messages
                if m.error() is not None or (m.topic(), m.partition()) not in suspect
            ]
        if not messages:
            return
        if self._outage.failures:
            self._outage.recovered()
        if self._guarantee == AT_MOST_ONCE:
            self._amo_waiting = messages
            self._commit_then_buffer()
        else:
            self._buffer.extend(messages)

    def _behind(self) -> bool:
        """Whether a partition this task reads holds records its client has not handed
        over yet (by the high watermark of its last fetch), or has not answered a fetch
        yet. Never while the broker cannot be reached."""
        consumer = self._consumer
        if consumer is None or self._outage.failures:
            return False
        confluent = kafka()
        for tp in self._assigned:
            state = self._parts.get(tp)
            if state is None or tp in self._paused or tp in self._suspect:
                continue
            try:
                low, high = consumer.get_watermark_offsets(
                    confluent.TopicPartition(tp[0], tp[1]), cached=True
                )
            except confluent.KafkaException:
                continue
            if high is None or high < 0:
                return True
            position = state.next_offset if state.next_offset is not None else max(low, 0)
            if high > position:
                return True
        return False

    def _await_records(self, consumer: Any) -> list[Any]:
        """Wait (at most :data:`BEHIND_WAIT_SECONDS`) for records the task knows are
        coming: an engine sees a spout that emits nothing as idle, and ``squall run
        --until-idle`` would stop before they are read."""
        deadline = time.monotonic() + BEHIND_WAIT_SECONDS
        messages: list[Any] = []
        while not messages and time.monotonic() < deadline:
            messages = consumer.consume(CONSUME_BATCH, BEHIND_SLICE_SECONDS)
            if not messages and not self._behind():
                break
        return messages

    def _commit_then_buffer(self) -> None:
        """``at_most_once``: commit the offsets after the records read and, once the
        broker confirmed it (waiting at most ``poll_timeout_ms``), buffer them."""
        confluent = kafka()
        messages = self._amo_waiting
        last: dict[Tp, int] = {}
        for message in messages:
            if message.error() is None:
                last[(message.topic(), message.partition())] = message.offset()
        offsets = [
            confluent.TopicPartition(tp[0], tp[1], offset + 1, metadata=self._metadata)
            for tp, offset in last.items()
            if tp in self._parts
        ]
        if offsets:
            self._commits.expect()
            if not self._send_commit(offsets) or not self._await_commits():
                return
        self._amo_waiting = []
        self._buffer.extend(messages)
        if self._stash:  # read while waiting: committed in their turn
            self._amo_waiting, self._stash = self._stash, []

    def _send_commit(self, offsets: list[Any]) -> bool:
        """Send a commit without waiting; report a refusal."""
        failure = self._commits.send(self._consumer, offsets)
        if failure is not None:
            self._unreachable(failure)
        return failure is None

    def _await_commits(self) -> bool:
        """Wait (at most ``poll_timeout_ms``) until every commit sent is confirmed;
        whether they all were, successfully. Records read meanwhile are stashed."""
        deadline = time.monotonic() + self._poll_timeout
        consumer, commits = self._consumer, self._commits
        while commits.sending and time.monotonic() < deadline:
            message = consumer.poll(0.01)
            if message is not None:
                self._stash.append(message)
            if commits.confirmed:
                self._settle_callbacks()
        return not commits.sending and bool(commits.ok)

    def _on_error(self, error: Any) -> None:
        """librdkafka's client-wide errors (runs inside ``consume``/``poll``)."""
        self._errors.append(error)

    def _settle_callbacks(self) -> None:
        """Report the client errors gathered; apply the commit confirmations (a failed
        commit is reported and sent again later)."""
        if self._errors:
            errors, self._errors = self._errors, []
            for error in errors:
                if is_unreachable(error):
                    self._client_unreachable(error)
                elif error.fatal():
                    self._report_once(f"{self._label}: fatal consumer error: {one_line(error)}")
        if self._commits.confirmed:
            for failure in self._commits.settle(self._parts):
                self._unreachable(failure)
        if self._paused:
            self._unpause()

    def _consume_error(self, message: Any) -> None:
        """An error event from ``consume``: an offset out of range restarts the
        partition; an unreachable broker is reported with the back-off; others are
        reported (not more than once every few seconds)."""
        confluent = kafka()
        error = message.error()
        code = error.code()
        if code == confluent.KafkaError._PARTITION_EOF:
            return
        tp = (message.topic(), message.partition())
        if (
            code
            in (
                confluent.KafkaError._AUTO_OFFSET_RESET,
                confluent.KafkaError.OFFSET_OUT_OF_RANGE,
            )
            and tp in self._parts
        ):
            self._restart_partition(tp, f"offset out of range ({one_line(error)})")
        elif is_unreachable(error):
            self._client_unreachable(error)
        else:
            where = f"{tp[0]}/{tp[1]}"
            self._report_once(f"{self._label}: consumer error on {where}: {one_line(error)}")

    # --- periodic work ----------------------------------------------------------------

    def _chores(self, now: float) -> None:
        """Due retries to the replay queue; the consumer and the partitions; commits;
        the metrics. Sets when to come back."""
        retries = self._retries
        if len(retries):
            self._replay.extend(retries.pop_due(now))
        if self._errors or self._commits.confirmed:
            self._settle_callbacks()
        if now >= self._refresh_at and self._outage.ready():
            try:
                self._refresh(now)
            except kafka().KafkaException as error:  # assigning, seeking
                self._unreachable(one_line(error))
        if now >= self._commit_at:
            self._commit(now)
        if now >= self._metrics_at:
            self._refresh_metrics()
            self._metrics_at = now + METRICS_SECONDS
        upcoming = [self._refresh_at, self._commit_at, self._metrics_at]
        due = retries.next_due()
        if due is not None:
            upcoming.append(due)
        if not self._outage.ready():
            upcoming.append(now + self._outage.wait_ms() / 1000.0)
        self._chores_at = max(min(upcoming), now + 0.001)

    def _ensure_consumer(self) -> Any:
        if self._consumer is None:
            confluent = kafka()
            conf = self._client_conf()
            conf["auto.offset.reset"] = "error"
            conf["error_cb"] = self._on_error
            conf["on_commit"] = self._commits.on_commit
            self._consumer = confluent.Consumer(conf)
            # Metadata through a client of its own: the reading consumer's fetches are
            # not disturbed by frequent metadata requests.
            self._lister = confluent.Consumer(self._client_conf())
        return self._consumer

    def _unreachable(self, cause: Any, doubt: bool = True) -> None:
        """Report that the broker cannot be reached and start (or go on with) the
        back-off; ``doubt``: hold the partitions until their logs are checked (a
        request of the task's failed)."""
        error = cause if isinstance(cause, BaseException) else ConnectionError(str(cause))
        if doubt:
            self._doubt()
        self.collector.report_error(self._outage.failed(error))

    def _client_unreachable(self, error: Any) -> None:
        """A client error saying a broker cannot be reached: reported with the back-off;
        the partitions are held only when every broker is down (one broker of several
        going away cannot replace a log)."""
        if error.code() == kafka().KafkaError._ALL_BROKERS_DOWN:
            self._doubt()
        if self._outage.ready():
            self._unreachable(one_line(error), doubt=False)

    def _report_once(self, text: str) -> None:
        now = time.monotonic()
        if now - self._reported.get(text, -REPEAT_SECONDS) >= REPEAT_SECONDS:
            self._reported[text] = now
            self.collector.report_error(ConnectorError(text))

    def _client_conf(self) -> dict[str, Any]:
        """The settings of the task's clients; librdkafka's log lines go to the
        ``squall.connectors.kafka`` logger unless ``consumer_conf`` gives a logger."""
        return consumer_config(self.bootstrap_servers, self.group_id, self.consumer_conf)

    def _wait(self) -> float:
        """Seconds a metadata or offsets request may take: ``poll_timeout_ms`` while
        the broker cannot be reached, else up to 2 s."""
        return self._poll_timeout if self._outage.failures else self._request_timeout

    # --- commits ----------------------------------------------------------------------

    def _commit(self, now: float, final: bool = False) -> None:
        """The periodic commit of the guarantee (and the last one, ``final``)."""
        self._commit_at = now + self.commit_period_ms / 1000.0
        if self._consumer is None or not self._assigned or self._guarantee == AT_MOST_ONCE:
            return
        if not final and not self._outage.ready():
            return
        self._commit_partitions(self._assigned, wait=final)

    def _commit_partitions(self, partitions: Iterable[Tp], wait: bool) -> None:
        """Commit the commit point of each of ``partitions`` past its committed offset;
        ``wait``: for the confirmations (the earlier ones first), at most
        ``poll_timeout_ms`` each."""
        confluent = kafka()
        if wait and self._commits.sending:
            self._await_commits()
        offsets = []
        for tp in partitions:
            state = self._parts.get(tp)
            if state is None or tp in self._commits.sending or tp in self._suspect:
                continue
            point = state.to_commit()
            if point is None:
                continue
            offsets.append(confluent.TopicPartition(tp[0], tp[1], point, metadata=self._metadata))
        if offsets and self._send_commit(offsets) and wait:
            self._await_commits()
        if self._stash:
            self._buffer.extend(self._stash)
            self._stash = []

    # --- metrics ----------------------------------------------------------------------

    def _refresh_metrics(self) -> None:
        """Compute the metrics and replace the dict ``metrics()`` returns."""
        values: dict[str, float] = {
            "malformed": self._malformed,
            "replayed": self._replayed,
            "retries_exhausted": self._exhausted,
            "in_flight": len(self._in_flight),
        }
        if self._consumer is not None:
            values.update(offset_metrics(self._consumer, self._assigned, self._parts, self._listed))
        self._metrics = values


__all__ = [
    "AT_LEAST_ONCE",
    "AT_MOST_ONCE",
    "GUARANTEES",
    "NO_GUARANTEE",
    "STRATEGIES",
    "KafkaSpout",
]
