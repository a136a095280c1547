"""``RedisStreamTridentSpout``: Redis Streams as a partitioned Trident spout.

Each stream key is one partition. A partition's batch is a range of entry ids read with
``XRANGE`` (no consumer group: the position lives in Trident's coordination store, as
a Kafka offset does in a Trident Kafka spout), recorded as the batch's metadata
:class:`IdRange` (first id, last id, number of entries read).

Guarantee, with a transactional or opaque Trident state: **exactly-once**.

* ``opaque=False``: a transactional spout (Storm's ``IPartitionedTridentSpout``): a
  replayed transaction reads exactly its recorded range again, so it emits the same
  entries, provided they are still in the stream (do not trim a stream below what the
  topology has committed; an entry deleted before its replay is missing from it, which
  is logged).
* ``opaque=True`` (the default): an opaque spout (Storm's
  ``IOpaquePartitionedTridentSpout``): every attempt reads on from the end of the latest
  earlier transaction's range, so a replay may hold more entries than the first attempt
  but each entry ends up in exactly one committed batch.

A topology restarted with the same ``topology.transactional.state.dir`` (local engine)
or checkpoint directory (Spark) continues after the last committed ranges.

Where it runs: the spout carries only options and pickles. The coordinator (the number
of partitions: the number of streams) runs in the coordinator task (on Spark, the
source's driver-side process). Emitters run in the emitter tasks (on Spark, in
executors, one Spark partition per stream), each opening its own client at its first
batch. Partitions are spread over the emitter tasks
(``new_stream(...).parallelism_hint(n)``).

Tuples: the same fields and ``decode`` as :class:`~squall.connectors.redis.RedisStreamSpout`
(``("id", "data")`` by default). Trident has no error stream: a malformed entry is
left out of the batch (it still counts in the range, so a replay skips it alike), logged
as a warning on the ``squall`` logger naming the stream, the entry id and what is
wrong, reported through the collector where the engine keeps a batch's reported errors
without failing it (the local engine: the emitter component's errors; on Spark, where a
Trident emitter's reported error fails the micro-batch, it is only logged), and, with
``dead_letter``, recorded in that Redis hash: field ``<stream>/<entry id>``, value the
JSON object ``{"stream", "id", "entry", "error"}`` (a replay writes the same field
again, so each malformed entry is there once).

Failures: a server that cannot be reached fails the batch with
:class:`~squall.connectors.errors.ConnectorUnavailableError` naming the spout, its
stream id and the address (password hidden); the engine replays the batch after its
back-off (``topology.trident.batch.retry.*``; on Spark, up to
``topology.spark.batch.retries`` runs of the micro-batch).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from squall.connectors.errors import ConnectorUnavailableError
from squall.connectors.options import OptionChecker
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
    one_line,
    redact_url,
)
from squall.connectors.redis.entries import DATA_FIELDS, EntryReader, MalformedEntryError
from squall.model.context import TopologyContext
from squall.model.fields import Fields
from squall.model.hooks import ValidatesSubmission
from squall.trident.collector import Collector
from squall.trident.spouts import OpaquePartitionedTridentSpout, PartitionedTridentSpout

if TYPE_CHECKING:
    import redis

logger = logging.getLogger("squall")

#: Entries per partition and batch, by default.
DEFAULT_BATCH = 1000


@dataclass(frozen=True)
class IdRange:
    """The metadata of one partition's batch.

    Attributes:
        first: the id of the batch's first entry; None for an empty batch.
        last: the id of its last entry; for an empty batch, the id the next batch reads
            after (the previous batch's last, or the starting position).
        count: the entries read (malformed ones included).
    """

    first: str | None
    last: str
    count: int


class _Partitions:
    """The coordinator: one partition per stream, always ready."""

    def __init__(self, count: int) -> None:
        self.count = count

    def number_of_partitions(self) -> int:
        return self.count

    def is_ready(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to release."""


class RedisStreamTridentSpout(ValidatesSubmission):
    """A partitioned Trident spout over Redis Streams, one partition per stream key.

    ``RedisStreamTridentSpout(..., opaque=True)`` makes an
    :class:`OpaqueRedisStreamTridentSpout`, ``opaque=False`` a
    :class:`TransactionalRedisStreamTridentSpout` (both are instances of this class); see
    the module docstring for their guarantees.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> RedisStreamTridentSpout:
        if cls is RedisStreamTridentSpout:
            opaque = kwargs.get("opaque", args[2] if len(args) > 2 else True)
            cls = OpaqueRedisStreamTridentSpout if opaque else TransactionalRedisStreamTridentSpout
        return object.__new__(cls)

    def __init__(
        self,
        url: str,
        streams: str | Sequence[str],
        opaque: bool = True,
        batch: int = DEFAULT_BATCH,
        fields: Sequence[str] = DATA_FIELDS,
        decode: Mapping[str, Callable[[str], Any]] | None = None,
        start: str = "0",
        dead_letter: str | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
    ) -> None:
        """Keep the options; they are checked when the topology is submitted.

        Args:
            url: the server, ``redis://[[user]:password@]host[:port][/db]``,
                ``rediss://`` or ``unix://``.
            streams: the stream keys (a single key: one partition); partition ``i`` is
                ``streams[i]``, so keep their order across restarts.
            opaque: an opaque spout (True) or a transactional one (False).
            batch: the most entries a partition contributes to one batch.
            fields: the tuple's fields (see :mod:`squall.connectors.redis.entries`).
            decode: field -> converter of its string value, e.g. ``{"ts": int}``.
            start: where a partition's first batch starts: ``"0"`` (the stream's first
                entry), ``"$"`` (after its last entry at that moment) or after an
                entry id.
            dead_letter: a Redis hash recording malformed entries (see the module
                docstring); None: none.
            connect_timeout: seconds to open a connection.
            socket_timeout: seconds to wait for a reply.
        """
        self.url = url
        self.streams = [streams] if isinstance(streams, str) else list(streams)
        self.opaque = opaque
        self.batch = batch
        self.fields = tuple(fields) if isinstance(fields, (list, tuple)) else fields
        self.decode = dict(decode) if isinstance(decode, Mapping) else decode
        self.start = start
        self.dead_letter = dead_letter
        self.connect_timeout = connect_timeout
        self.socket_timeout = socket_timeout

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={redact_url(str(self.url))!r}, streams={self.streams!r})"

    def check_options(self, checker: OptionChecker) -> None:
        """Check every option; raise the checker's error at the first wrong one."""
        check_connection(
            checker,
            self.url,
            {"connect_timeout": self.connect_timeout, "socket_timeout": self.socket_timeout},
        )
        if not self.streams:
            raise checker.fail("streams must name at least one stream")
        for stream in self.streams:
            checker.text("a stream of streams", stream)
        if len(set(self.streams)) != len(self.streams):
            raise checker.fail(f"streams names a stream twice: {self.streams}")
        checker.positive_int("batch", self.batch)
        check_fields(checker, "fields", self.fields, allow_none=False)
        if self.decode is not None:
            check_decode(checker, self.decode, self.fields)
        if self.start not in ("0", "$") and not is_entry_id(self.start):
            raise checker.fail(f'start must be "0", "$" or an entry id, got {self.start!r}')
        if self.dead_letter is not None:
            checker.text("dead_letter", self.dead_letter)

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Check the options where the topology is submitted (``component_id``: the
        stream id given to ``new_stream``).

        Raises:
            InvalidTopologyError: an option is wrong; the message names the stream id.
        """
        self.check_options(OptionChecker(component_id, type(self).__name__))

    def get_output_fields(self) -> Fields:
        """The tuple's fields."""
        return Fields(list(self.fields))

    def get_coordinator(self, conf: dict[str, Any], context: TopologyContext) -> _Partitions:
        """One partition per stream."""
        return _Partitions(len(self.streams))

    def get_emitter(self, conf: dict[str, Any], context: TopologyContext) -> StreamRangeReader:
        """The emitter of a task: an :class:`OpaqueRangeEmitter` for an opaque spout,
        else a :class:`TransactionalRangeEmitter`. Runs in the emitter task."""
        if self.opaque:
            return OpaqueRangeEmitter(self, context)
        return TransactionalRangeEmitter(self, context)


class StreamRangeReader:
    """Reads id ranges of the spout's streams and emits their entries; the base of the
    emitters. Runs in an emitter task; connects at its first batch."""

    def __init__(self, spout: RedisStreamTridentSpout, context: TopologyContext) -> None:
        self.spout = spout
        self.component = context.component_id
        self.label = f"{type(spout).__name__} {self.component!r}"
        self.reader = EntryReader(spout.fields, spout.decode)
        #: The entries the last :meth:`read_after` read.
        self.entries: list[tuple[str, dict[str, str]]] = []
        self._client: redis.Redis | None = None

    def _call(self, partition: int, command: Callable[[redis.Redis], Any]) -> Any:
        if self._client is None:
            self._client = connect(
                self.spout.url, self.spout.connect_timeout, self.spout.socket_timeout
            )
        try:
            return command(self._client)
        except CONNECTION_ERRORS as error:
            raise ConnectorUnavailableError(
                f"{self.label} cannot reach {redact_url(self.spout.url)} (stream "
                f"{self.spout.streams[partition]!r}): {one_line(error)}; the batch is replayed"
            ) from error

    def start_after(self, partition: int) -> str:
        """The id a partition's first batch reads after."""
        start = self.spout.start
        if start != "$":
            return full_id(start)
        stream = self.spout.streams[partition]

        def last_id(client: redis.Redis) -> str:
            newest: Any = client.xrevrange(stream, count=1)
            return str(newest[0][0]) if newest else "0-0"

        return str(self._call(partition, last_id))

    def read_after(self, partition: int, last: IdRange | None) -> IdRange:
        """Read the next entries of ``partition`` after ``last`` (at most ``batch``)
        into :attr:`entries`; their range."""
        after = last.last if last is not None else self.start_after(partition)
        stream = self.spout.streams[partition]
        self.entries = list(
            self._call(
                partition,
                lambda client: client.xrange(
                    stream, min=f"({after}", max="+", count=self.spout.batch
                ),
            )
        )
        if not self.entries:
            return IdRange(None, after, 0)
        return IdRange(self.entries[0][0], self.entries[-1][0], len(self.entries))

    def read_range(self, partition: int, meta: IdRange) -> list[tuple[str, dict[str, str]]]:
        """The entries of ``meta``'s range again."""
        if meta.count == 0 or meta.first is None:
            return []
        stream = self.spout.streams[partition]
        first = meta.first
        entries = list(
            self._call(
                partition,
                lambda client: client.xrange(stream, min=first, max=meta.last, count=meta.count),
            )
        )
        if len(entries) != meta.count:
            logger.warning(
                "%s: stream %r lost entries of a batch being replayed: %d of %d in %s..%s "
                "are left (deleted or trimmed)",
                self.label,
                stream,
                len(entries),
                meta.count,
                first,
                meta.last,
            )
        return entries

    def emit(
        self, collector: Collector, partition: int, entries: list[tuple[str, dict[str, str]]]
    ) -> None:
        """Emit the entries; set malformed ones aside (see the module docstring)."""
        values = self.reader.values
        malformed: list[tuple[str, dict[str, str], MalformedEntryError]] = []
        for entry_id, fields in entries:
            try:
                row = values(entry_id, fields)
            except MalformedEntryError as error:
                malformed.append((entry_id, fields, error))
                continue
            collector.emit(row)
        if malformed:
            self._set_aside(collector, partition, malformed)

    def _set_aside(
        self,
        collector: Collector,
        partition: int,
        malformed: list[tuple[str, dict[str, str], MalformedEntryError]],
    ) -> None:
        stream = self.spout.streams[partition]
        for entry_id, _, error in malformed:
            message = f"{self.label}: stream {stream!r} entry {entry_id} left out: {error}"
            logger.warning("%s", message)
            # An engine that fails the batch of an emitter that reports (Spark) raises
            # the error back: the entry is then only logged.
            with contextlib.suppress(MalformedEntryError):
                collector.report_error(MalformedEntryError(message))
        dead_letter = self.spout.dead_letter
        if dead_letter is None:
            return
        records = {
            f"{stream}/{entry_id}": json.dumps(
                {"stream": stream, "id": entry_id, "entry": fields, "error": str(error)}
            )
            for entry_id, fields, error in malformed
        }
        self._call(partition, lambda client: client.hset(dead_letter, mapping=records))

    def close(self) -> None:
        """Close the client."""
        close_quietly(self._client)
        self._client = None


class TransactionalRangeEmitter(StreamRangeReader):
    """A transactional emitter: a new batch reads on after the previous range and is
    recorded; a replay reads its recorded range again."""

    def emit_partition_batch_new(
        self, attempt: Any, collector: Collector, partition: int, last_meta: IdRange | None
    ) -> IdRange:
        """Emit the partition's next entries; return their range."""
        meta = self.read_after(partition, last_meta)
        self.emit(collector, partition, self.entries)
        return meta

    def emit_partition_batch(
        self, attempt: Any, collector: Collector, partition: int, meta: IdRange
    ) -> None:
        """Emit the entries of ``meta``'s range again."""
        self.emit(collector, partition, self.read_range(partition, meta))


class OpaqueRangeEmitter(StreamRangeReader):
    """An opaque emitter: every attempt reads on after the latest earlier range."""

    def emit_partition_batch(
        self, attempt: Any, collector: Collector, partition: int, last_meta: IdRange | None
    ) -> IdRange:
        """Emit the partition's next entries after ``last_meta``; return their range."""
        meta = self.read_after(partition, last_meta)
        self.emit(collector, partition, self.entries)
        return meta


class TransactionalRedisStreamTridentSpout(RedisStreamTridentSpout, PartitionedTridentSpout):
    """``RedisStreamTridentSpout(..., opaque=False)``: replays are identical."""


class OpaqueRedisStreamTridentSpout(RedisStreamTridentSpout, OpaquePartitionedTridentSpout):
    """``RedisStreamTridentSpout(..., opaque=True)``: replays read on from the latest
    earlier range."""


__all__ = [
    "DEFAULT_BATCH",
    "IdRange",
    "OpaqueRangeEmitter",
    "OpaqueRedisStreamTridentSpout",
    "RedisStreamTridentSpout",
    "StreamRangeReader",
    "TransactionalRangeEmitter",
    "TransactionalRedisStreamTridentSpout",
]
