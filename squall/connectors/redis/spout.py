"""``RedisStreamSpout``: a reliable spout over a Redis Stream and a consumer group.

Guarantee: **at-least-once**. An entry is acknowledged to Redis (``XACK``) only once
the tuple tree it started is complete; a failed or timed-out tree emits the entry again.
An entry read by the group but not acknowledged stays in the group's pending entries
list (PEL), so it survives the crash of the spout's process: a spout task that starts
again under the same consumer name first emits its own pending entries again, and every
task takes over the entries other consumers of the group have left pending for
``claim_idle_ms`` (``XAUTOCLAIM``), so a topology killed (even SIGKILL) and restarted
on the same group loses nothing. Entries whose trees completed just before a crash but
whose ``XACK`` had not been sent are processed again: downstream writes must tolerate
duplicates (an upsert, a set, the entry id as a key).

Where it runs: the component carries only options and pickles (to Spark's driver-side
source process, and into its snapshots). Each task opens its own client in ``open``:
on the local engine on its worker thread; on Spark in the source's Python process,
where ``next_tuple``, ``ack`` and ``fail`` run too. A Spark snapshot keeps the entries
in flight, those to replay and the acknowledgements not yet sent, never the client or
entries read ahead: a task restored from a snapshot connects again at its first
``next_tuple`` and re-reads its pending entries, emitting those its snapshot does not
hold (read after the snapshot was taken).

Reading: ``next_tuple`` emits one tuple per call from a buffer it fills with one
``XREADGROUP ... COUNT batch`` (never blocking: an empty read waits ``poll_ms`` before
the next); acknowledgements are collected and sent as one ``XACK`` per ``next_tuple``
call (pipelined with the next read), when ``batch`` of them are waiting, and at
``deactivate``/``close``. ``topology.max.spout.pending`` bounds the entries in flight
(the engine stops calling ``next_tuple`` at the bound).

Consumer names: ``consumer`` if given (one name per task: with several tasks the task
index is appended, ``name-0``, ``name-1``...), else ``<component id>-<task index>``, so
a restarted topology finds its consumers again. A topology restarted with fewer tasks
leaves the extra names' entries pending; the remaining tasks claim them once they have
been idle ``claim_idle_ms``.

Tuples: with ``fields=("id", "data")`` (the default) ``[entry id, {field: value}]``;
with other fields, each read from the entry by name (``"id"`` is the entry id), values
converted by ``decode`` (see :mod:`squall.connectors.redis.entries`). A malformed entry
(a declared field missing, a conversion that raises) is emitted on stream ``"errors"``
as ``[stream key, entry id, {field: value}, error message]``, tracked like any other
tuple (acknowledged to Redis once processed), and counted in the ``malformed`` metric.

Failures: a server that cannot be reached, at ``open`` or later, never stops the
topology. The spout reports ``RedisStreamSpout '<component>' cannot reach <url,
password hidden>: ...`` through the collector (the component's errors in the metrics)
and emits nothing read from Redis until its back-off has passed (0.1 s, doubling, at
most 5 s); replays of failed tuples go on. Acknowledgements that could not be sent are
kept and sent once the server answers again. A consumer group that disappeared (a
server restarted without persistence) is created again.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import redis

from squall.connectors.errors import ConnectorUnavailableError
from squall.connectors.options import OptionChecker
from squall.connectors.outage import Outage
from squall.connectors.redis.client import (
    CONNECTION_ERRORS,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_SOCKET_TIMEOUT,
    check_connection,
    check_decode,
    check_fields,
    close_quietly,
    connect,
    full_id,
    is_entry_id,
    redact_url,
)
from squall.connectors.redis.entries import (
    DATA_FIELDS,
    ERROR_FIELDS,
    ERRORS_STREAM,
    EntryReader,
    MalformedEntryError,
)
from squall.model.components import Spout
from squall.model.declarer import DEFAULT_STREAM, OutputFieldsDeclarer
from squall.model.hooks import ReportsMetrics, ValidatesSubmission

if TYPE_CHECKING:
    from squall.runtime.collectors import SpoutOutputCollector
    from squall.runtime.context import TopologyContext

#: Milliseconds an entry must have been pending at another consumer before it is
#: claimed: longer than the topology's message timeout (30 s by default), so entries
#: still in flight at a live consumer are not taken.
DEFAULT_CLAIM_IDLE_MS = 60_000
#: Milliseconds between reads once a read found nothing new.
DEFAULT_POLL_MS = 10

#: One entry ready to emit: its id (the message id), the stream it goes out on, and
#: the tuple's values.
Item = tuple[str, str, list[Any]]


class Phase(enum.Enum):
    """What the spout's next read asks the server for."""

    #: Its own consumer's pending entries, from a cursor (``XREADGROUP ... <id>``).
    RECOVER = "recover"
    #: Entries idle at any consumer for ``claim_idle_ms`` (``XAUTOCLAIM``), from a cursor.
    CLAIM = "claim"
    #: New entries (``XREADGROUP ... >``).
    READ = "read"


class RedisStreamSpout(Spout, ValidatesSubmission, ReportsMetrics):
    """Emits the entries of a Redis Stream read through a consumer group; ``XACK`` on
    ``ack``, replay on ``fail``.

    See the module docstring for the guarantee, where each method runs and the failure
    behaviour. Declares the default stream with ``fields`` and stream ``"errors"`` with
    ``("stream", "id", "entry", "error")``. ``metrics()``: ``malformed``, ``replayed``,
    ``reclaimed`` (entries taken over from other consumers or re-read after a restart)
    and ``in_flight``.
    """

    def __init__(
        self,
        url: str,
        stream: str,
        group: str,
        consumer: str | None = None,
        fields: Sequence[str] = DATA_FIELDS,
        batch: int = 100,
        start: str = "0",
        decode: Mapping[str, Callable[[str], Any]] | None = None,
        claim_idle_ms: int = DEFAULT_CLAIM_IDLE_MS,
        poll_ms: int = DEFAULT_POLL_MS,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
    ) -> None:
        """Keep the options; they are checked when the topology is submitted.

        Args:
            url: the server, ``redis://[[user]:password@]host[:port][/db]``,
                ``rediss://`` or ``unix://``.
            stream: the stream's key.
            group: the consumer group; created (with the stream, ``MKSTREAM``) at
                ``start`` if missing.
            consumer: the consumer name (see the module docstring); default
                ``<component id>-<task index>``.
            fields: the tuple's fields (see the module docstring).
            batch: entries per read, and acknowledgements per ``XACK`` at most.
            start: where a new group starts: ``"0"`` (every entry of the stream),
                ``"$"`` (entries added from now on) or an entry id.
            decode: field -> converter of its string value, e.g. ``{"ts": int}``.
            claim_idle_ms: how long an entry must have been pending at a consumer
                before this spout claims it (at ``open``, then every that long).
            poll_ms: the pause after a read that found nothing.
            connect_timeout: seconds to open a connection.
            socket_timeout: seconds to wait for a reply.
        """
        self.url = url
        self.stream = stream
        self.group = group
        self.consumer = consumer
        self.fields = tuple(fields) if isinstance(fields, (list, tuple)) else fields
        self.batch = batch
        self.start = start
        self.decode = dict(decode) if isinstance(decode, Mapping) else decode
        self.claim_idle_ms = claim_idle_ms
        self.poll_ms = poll_ms
        self.connect_timeout = connect_timeout
        self.socket_timeout = socket_timeout
        #: Whether ``open`` ran; the task's counters, entries in flight and
        #: acknowledgements to send (``open`` starts them again).
        self._opened = False
        self._client: redis.Redis | None = None
        self._in_flight: dict[str, Item] = {}
        self._acks: list[str] = []
        self._malformed = 0
        self._replayed = 0
        self._reclaimed = 0

    def __repr__(self) -> str:
        return (
            f"RedisStreamSpout(url={redact_url(str(self.url))!r}, stream={self.stream!r}, "
            f"group={self.group!r})"
        )

    # --- options ----------------------------------------------------------------------

    def check_options(self, checker: OptionChecker) -> None:
        """Check every option; raise the checker's error at the first wrong one."""
        check_connection(
            checker,
            self.url,
            {"connect_timeout": self.connect_timeout, "socket_timeout": self.socket_timeout},
        )
        checker.text("stream", self.stream)
        checker.text("group", self.group)
        if self.consumer is not None:
            checker.text("consumer", self.consumer)
        check_fields(checker, "fields", self.fields, allow_none=False)
        checker.positive_int("batch", self.batch)
        if self.start not in ("0", "$") and not is_entry_id(self.start):
            raise checker.fail(f'start must be "0", "$" or an entry id, got {self.start!r}')
        if self.decode is not None:
            check_decode(checker, self.decode, self.fields)
        checker.positive_int("claim_idle_ms", self.claim_idle_ms)
        checker.positive_int("poll_ms", self.poll_ms)

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Check the options where the topology is submitted.

        Raises:
            InvalidTopologyError: an option is wrong; the message names the component.
        """
        self.check_options(OptionChecker(component_id, type(self).__name__))

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The default stream with ``fields``; ``"errors"`` for malformed entries."""
        declarer.declare(list(self.fields))
        declarer.declare_stream(ERRORS_STREAM, list(ERROR_FIELDS))

    # --- snapshots (Spark) ------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """Options, and for an opened task the entries in flight, those to replay and
        the acknowledgements not sent; not the client, its back-off or the entries read
        ahead (a restored task re-reads its pending entries)."""
        state = dict(vars(self))
        for transient in ("_client", "_outage", "_buffer"):
            state.pop(transient, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self._client = None  # connect again at the next read
        if self._opened:
            self._outage = Outage(self._label, redact_url(self.url))
            self._buffer: deque[Item] = deque()
            self._restart_reading()

    # --- the task ---------------------------------------------------------------------

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        """Prepare the task and try to connect and create the group; a server that
        cannot be reached is reported, not raised (reads retry after the back-off).
        Runs once per task, where the task runs."""
        self._opened = True
        self.collector = collector
        component = context.component_id
        tasks = len(context.get_component_tasks(component))
        if self.consumer is None:
            self._consumer = f"{component}-{context.task_index}"
        elif tasks > 1:
            self._consumer = f"{self.consumer}-{context.task_index}"
        else:
            self._consumer = self.consumer
        self._label = f"RedisStreamSpout {component!r}"
        self._reader = EntryReader(self.fields, self.decode)
        self._in_flight = {}
        self._replay: deque[Item] = deque()
        self._acks = []
        self._malformed = 0
        self._replayed = 0
        self._reclaimed = 0
        self._client = None
        self._outage = Outage(self._label, redact_url(self.url))
        self._buffer = deque()
        self._restart_reading()
        self._ensure_client()

    def _restart_reading(self) -> None:
        """Read from the start: own pending entries, then claims, then new entries."""
        self._group_ready = False
        self._phase = Phase.RECOVER
        self._cursor = "0-0"
        self._claim_at = 0.0
        self._idle_until = 0.0

    def next_tuple(self) -> None:
        """Emit one entry: a failed one first, else the next buffered one, reading a
        batch when the buffer is empty. Sends the waiting acknowledgements. Never waits
        for entries: a read that finds none returns at once."""
        if self._replay:
            item = self._replay.popleft()
            self._in_flight[item[0]] = item
            self.collector.emit(item[2], msg_id=item[0], stream=item[1])
            if self._acks:
                self._send_acks()
            return
        buffer = self._buffer
        if not buffer:
            for _ in range(len(Phase)):  # a phase that ends empty hands over to the next
                phase = self._phase
                self._read()
                if buffer or self._phase is phase:
                    break
            if not buffer:
                return
        elif self._acks:
            self._send_acks()
        item = buffer.popleft()
        self._in_flight[item[0]] = item
        self.collector.emit(item[2], msg_id=item[0], stream=item[1])

    def ack(self, msg_id: Any) -> None:
        """The entry's tree completed: acknowledge it to the group (batched)."""
        self._in_flight.pop(msg_id, None)
        self._acks.append(msg_id)
        if len(self._acks) >= self.batch:
            self._send_acks()

    def commit_acks(self) -> None:
        """Send the waiting acknowledgements now (a checkpoint of a topology with
        stateful bolts: see :class:`~squall.model.hooks.CommitsAcks`).

        Raises:
            ConnectorUnavailableError: the server cannot be reached (the checkpoint is
                rolled back and tried again).
        """
        if self._acks:
            self._send_acks()
        if self._acks:
            raise ConnectorUnavailableError(
                f"{self._label}: {len(self._acks)} acknowledgement(s) to "
                f"{redact_url(self.url)} could not be sent"
            )

    def fail(self, msg_id: Any) -> None:
        """The entry's tree failed: emit it again (before new entries)."""
        item = self._in_flight.pop(msg_id, None)
        if item is not None:
            self._replay.append(item)
            self._replayed += 1

    def deactivate(self) -> None:
        """Send the waiting acknowledgements."""
        if self._acks:
            self._send_acks()

    def close(self) -> None:
        """Send the waiting acknowledgements (if the server answers), then close the
        client. Runs when the topology is killed; not guaranteed (their entries stay
        pending and are emitted again after a restart)."""
        if not self._opened:
            return
        if self._acks:
            self._send_acks()
        close_quietly(self._client)
        self._client = None

    def metrics(self) -> dict[str, float]:
        """``malformed``, ``replayed``, ``reclaimed`` and ``in_flight`` of the task."""
        return {
            "malformed": self._malformed,
            "replayed": self._replayed,
            "reclaimed": self._reclaimed,
            "in_flight": len(self._in_flight),
        }

    # --- talking to the server --------------------------------------------------------

    def _ensure_client(self) -> redis.Redis | None:
        """The client, with the group created; None while the server cannot be reached
        (the failure reported, the back-off started)."""
        if not self._outage.ready():
            return None
        if self._group_ready and self._client is not None:
            return self._client
        try:
            if self._client is None:
                self._client = connect(self.url, self.connect_timeout, self.socket_timeout)
            self._create_group(self._client)
        except CONNECTION_ERRORS as error:
            self._unreachable(error)
            return None
        self._group_ready = True
        self._outage.recovered()
        return self._client

    def _create_group(self, client: redis.Redis) -> None:
        try:
            client.xgroup_create(self.stream, self.group, id=self.start, mkstream=True)
        except redis.ResponseError as error:
            if not str(error).startswith("BUSYGROUP"):
                raise

    def _unreachable(self, error: BaseException) -> None:
        self.collector.report_error(self._outage.failed(error))

    def _send_acks(self) -> None:
        client = self._ensure_client()
        if client is None:
            return
        acks = self._acks
        try:
            client.xack(self.stream, self.group, *acks)
        except CONNECTION_ERRORS as error:
            self._unreachable(error)
            return
        self._outage.recovered()
        del acks[: len(acks)]

    def _read(self) -> None:
        """Fill the buffer with one batch, by the current phase (sending the waiting
        acknowledgements in the same round trip)."""
        now = time.monotonic()
        if now < self._idle_until and not (self._phase is Phase.READ and now >= self._claim_at):
            if self._acks:
                self._send_acks()
            return
        client = self._ensure_client()
        if client is None:
            return
        if self._phase is Phase.READ and now >= self._claim_at:
            self._phase, self._cursor = Phase.CLAIM, "0-0"
        pipeline = client.pipeline(transaction=False)
        acks = list(self._acks)
        if acks:
            pipeline.xack(self.stream, self.group, *acks)
        phase = self._phase
        if phase is Phase.CLAIM:
            pipeline.xautoclaim(
                self.stream,
                self.group,
                self._consumer,
                self.claim_idle_ms,
                start_id=self._cursor,
                count=self.batch,
            )
        else:
            cursor = ">" if phase is Phase.READ else self._cursor
            pipeline.xreadgroup(self.group, self._consumer, {self.stream: cursor}, count=self.batch)
        try:
            replies = pipeline.execute(raise_on_error=False)
        except CONNECTION_ERRORS as error:
            self._unreachable(error)
            return
        self._outage.recovered()
        if acks:
            del self._acks[: len(acks)]
        reply = replies[-1]
        if isinstance(reply, Exception):
            self._read_failed(reply)
            return
        if phase is Phase.CLAIM:
            self._claimed(reply, now)
        elif phase is Phase.RECOVER:
            self._recovered(_entries(reply))
        else:
            entries = _entries(reply)
            if entries:
                self._buffer.extend(self._items(entries))
            else:
                self._idle_until = now + self.poll_ms / 1000.0

    def _read_failed(self, error: Exception) -> None:
        if isinstance(error, CONNECTION_ERRORS):
            self._unreachable(error)
        elif str(error).startswith("NOGROUP"):  # the group is gone (the server lost it)
            self._group_ready = False
        else:
            raise error

    def _recovered(self, entries: list[tuple[str, dict[str, str]]]) -> None:
        """A page of the consumer's own pending entries: emit those not held already
        (a restored task holds the ones its snapshot had in flight); acknowledge the
        deleted ones (returned without fields)."""
        if not entries:
            self._phase, self._cursor = Phase.CLAIM, "0-0"
            return
        self._cursor = entries[-1][0]
        held = self._held()
        fresh = []
        for entry_id, fields in entries:
            if not fields:
                self._acks.append(entry_id)
            elif entry_id not in held:
                fresh.append((entry_id, fields))
        self._reclaimed += len(fresh)
        self._buffer.extend(self._items(fresh))

    def _claimed(self, reply: Any, now: float) -> None:
        """A page of ``XAUTOCLAIM``: emit the entries not held already."""
        cursor, entries = str(reply[0]), reply[1] or []
        if full_id(cursor) == "0-0":
            self._phase = Phase.READ
            self._claim_at = now + self.claim_idle_ms / 1000.0
        else:
            self._cursor = cursor
        held = self._held()
        fresh = [(entry_id, fields) for entry_id, fields in entries if entry_id not in held]
        self._reclaimed += len(fresh)
        self._buffer.extend(self._items(fresh))

    def _held(self) -> set[str]:
        """Ids of the entries this task holds: in flight, acknowledged but not sent, to
        replay, read ahead."""
        return {
            *self._in_flight,
            *self._acks,
            *(item[0] for item in self._replay),
            *(item[0] for item in self._buffer),
        }

    def _items(self, entries: list[tuple[str, dict[str, str]]]) -> list[Item]:
        """Entries as items to emit; malformed ones on the errors stream."""
        values = self._reader.values
        items: list[Item] = []
        for entry_id, fields in entries:
            try:
                items.append((entry_id, DEFAULT_STREAM, values(entry_id, fields)))
            except MalformedEntryError as error:
                self._malformed += 1
                items.append(
                    (entry_id, ERRORS_STREAM, [self.stream, entry_id, dict(fields), str(error)])
                )
        return items


def _entries(reply: Any) -> list[tuple[str, dict[str, str]]]:
    """The entries of an ``XREADGROUP`` reply for one stream."""
    return list(reply[0][1]) if reply else []


__all__ = ["DEFAULT_CLAIM_IDLE_MS", "DEFAULT_POLL_MS", "Phase", "RedisStreamSpout"]
