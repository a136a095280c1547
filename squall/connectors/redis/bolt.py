"""``RedisStreamBolt``: appends each tuple to a Redis Stream (``XADD``).

Guarantee: **at-least-once**. A tuple is acked only once the write holding its entry
has succeeded; when the write fails, every tuple of that write is failed, so a reliable
spout replays them. A write whose reply was lost (the connection broke after the server
applied it) is replayed too, so the stream may hold an entry twice: give the entries a
key of their own (e.g. the source entry id as a field) if readers must tell.

Entries: one per tuple, with the tuple's fields in order (or the fields listed in
``fields``), each value encoded as a string: ``str`` and ``bytes`` as they are, ``int``
and ``float`` with ``str()`` (``3``, ``2.5``), anything else as JSON (``True`` ->
``true``, ``None`` -> ``null``, a dict or list as its JSON text; objects JSON cannot
hold, by their ``str``). With ``maxlen``, every ``XADD`` trims the stream to about that
many entries (``MAXLEN ~``, which Redis applies in whole nodes of entries, so the
stream may keep somewhat more); ``approximate=False`` trims exactly (``MAXLEN =``,
slower).

Where it runs: the bolt carries only options. Each task opens its own client in
``prepare`` (a local engine worker thread; on Spark an executor's Python worker) and
buffers its tuples. A buffer is written, as one ``MULTI``/``EXEC`` of ``XADD``s (all of
them or none), when it holds ``batch`` tuples, when its oldest tuple has waited
``max_delay_secs`` (checked on every tuple and on a tick tuple of that period), at the
end of every Spark micro-batch (trees do not outlive their micro-batch there) and when
the task is cleaned up.

Failures: a server that cannot be reached, at ``prepare`` or later, never stops the
topology: ``RedisStreamBolt '<component>' cannot reach <url, password hidden>: ...`` is
reported in the component's errors, the write's tuples are failed, and the next write
waits for the back-off (0.1 s, doubling, at most 5 s). A write the server refuses (the
key holds another type) fails its tuples and is reported. A tuple lacking one of the
``fields`` is failed alone and reported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis

from squall.connectors.errors import ConnectorError
from squall.connectors.options import OptionChecker
from squall.connectors.outage import Outage
from squall.connectors.redis.client import (
    CONNECTION_ERRORS,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_SOCKET_TIMEOUT,
    check_connection,
    check_fields,
    close_quietly,
    connect,
    one_line,
    redact_url,
)
from squall.connectors.sink import BatchingSink
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.hooks import ValidatesSubmission
from squall.model.tuple import Tuple

if TYPE_CHECKING:
    from squall.runtime.collectors import OutputCollector
    from squall.runtime.context import TopologyContext

#: redis-py's note on an error of a command in a pipeline.
_PIPELINE_NOTE = re.compile(r"^Command # \d+ \(.*\) of pipeline caused error: ")
#: Seconds a tuple waits in the buffer at most, by default.
DEFAULT_MAX_DELAY_SECS = 0.1


def encode_value(value: Any) -> str | bytes:
    """A tuple value as an entry's value (see the module docstring)."""
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, default=str)


def _server_reply(error: BaseException) -> str:
    """What the server answered, without redis-py's note of the pipeline's command
    (which would show the tuple's values)."""
    return _PIPELINE_NOTE.sub("", one_line(error))


class RedisStreamBolt(BatchingSink, ValidatesSubmission):
    """Appends each tuple as an entry of ``stream``, batched; acks after the write.

    See the module docstring for the guarantee, the encoding and the failure behaviour.
    Declares no output stream. ``metrics()``: ``entries_written`` and ``failed_writes``.
    """

    written_metric = "entries_written"

    def __init__(
        self,
        url: str,
        stream: str,
        maxlen: int | None = None,
        fields: Sequence[str] | None = None,
        batch: int = 100,
        max_delay_secs: float | None = DEFAULT_MAX_DELAY_SECS,
        approximate: bool = True,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
    ) -> None:
        """Keep the options; they are checked when the topology is submitted.

        Args:
            url: the server, ``redis://[[user]:password@]host[:port][/db]``,
                ``rediss://`` or ``unix://``.
            stream: the stream's key (created by the first ``XADD``).
            maxlen: trim the stream to about this many entries; None: never trim.
            fields: the tuple fields written (in this order); None: all of them.
            batch: the most tuples written in one round trip.
            max_delay_secs: the longest a tuple waits in the buffer (a tick tuple of
                this period writes an idle buffer); None: no ticks, the buffer is
                written when full, at the end of a Spark micro-batch and at clean-up.
            approximate: trim with ``MAXLEN ~`` (True) or exactly.
            connect_timeout: seconds to open a connection.
            socket_timeout: seconds to wait for a reply.
        """
        super().__init__()
        self.url = url
        self.stream = stream
        self.maxlen = maxlen
        self.fields = tuple(fields) if isinstance(fields, (list, tuple)) else fields
        self.batch = batch
        self.max_delay_secs = max_delay_secs
        self.approximate = approximate
        self.connect_timeout = connect_timeout
        self.socket_timeout = socket_timeout

    def __repr__(self) -> str:
        return f"RedisStreamBolt(url={redact_url(str(self.url))!r}, stream={self.stream!r})"

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the client, its back-off and the buffer (a Spark snapshot is
        taken after the micro-batch's buffer was written)."""
        state = super().__getstate__()
        state.pop("_client", None)
        state.pop("_outage", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        if self._prepared:  # a client of its own
            self._client: redis.Redis | None = None
            self._outage = Outage(self.label, redact_url(self.url))

    # --- options ----------------------------------------------------------------------

    def check_options(self, checker: OptionChecker) -> None:
        """Check every option; raise the checker's error at the first wrong one."""
        check_connection(
            checker,
            self.url,
            {"connect_timeout": self.connect_timeout, "socket_timeout": self.socket_timeout},
        )
        checker.text("stream", self.stream)
        checker.optional_positive_int("maxlen", self.maxlen)
        check_fields(checker, "fields", self.fields, allow_none=True)
        checker.positive_int("batch", self.batch)
        if self.max_delay_secs is not None:
            checker.positive_number("max_delay_secs", self.max_delay_secs)
        if not isinstance(self.approximate, bool):
            raise checker.fail(f"approximate must be True or False, got {self.approximate!r}")

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Check the options where the topology is submitted.

        Raises:
            InvalidTopologyError: an option is wrong; the message names the component.
        """
        self.check_options(OptionChecker(component_id, type(self).__name__))

    # --- the task ---------------------------------------------------------------------

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """No output streams."""

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        """Try to connect (an unreachable server is reported, not raised: the first
        write tries again). Runs once per task, in the task's process."""
        self.start_buffer(collector, f"RedisStreamBolt {context.component_id!r}")
        self._outage = Outage(self.label, redact_url(self.url))
        self._client = connect(self.url, self.connect_timeout, self.socket_timeout)
        try:
            self._client.ping()
        except CONNECTION_ERRORS as error:
            collector.report_error(self._outage.failed(error))

    def item(self, tup: Tuple) -> dict[str, str | bytes]:
        """The tuple's entry: its fields (or ``fields``), values encoded."""
        if self.fields is None:
            return {
                name: encode_value(value)
                for name, value in zip(tup.fields, tup.values, strict=True)
            }
        return {name: encode_value(tup[name]) for name in self.fields}

    def write(self, items: list[dict[str, str | bytes]]) -> Exception | None:
        """Append the entries in one ``MULTI``/``EXEC`` (all or none), after the
        back-off of an outage."""
        self._outage.wait()
        if self._client is None:
            self._client = connect(self.url, self.connect_timeout, self.socket_timeout)
        pipeline = self._client.pipeline(transaction=True)
        for entry in items:
            pipeline.xadd(self.stream, entry, maxlen=self.maxlen, approximate=self.approximate)  # type: ignore[arg-type]
        try:
            pipeline.execute()
        except CONNECTION_ERRORS as error:
            return self._outage.failed(error)
        except redis.RedisError as error:
            self._outage.recovered()
            return ConnectorError(
                f"{self.label}: writing {len(items)} entries to stream "
                f"{self.stream!r} on {redact_url(self.url)} failed: {_server_reply(error)}; "
                "the tuples are failed"
            )
        self._outage.recovered()
        return None

    def cleanup(self) -> None:
        """Write what is buffered, then close the client (see
        :meth:`~squall.connectors.sink.BatchingSink.flush_at_cleanup`)."""
        if not self._prepared:
            return
        try:
            self.flush_at_cleanup()
        finally:
            close_quietly(self._client)
            self._client = None


__all__ = ["DEFAULT_MAX_DELAY_SECS", "RedisStreamBolt", "encode_value"]
