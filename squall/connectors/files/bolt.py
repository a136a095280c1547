"""``FileBolt``: a sink bolt appending tuples to files, acking after ``fsync``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from squall.connectors.files.checks import not_a_file, path_text
from squall.connectors.files.formats import EXTENSIONS
from squall.connectors.files.records import RecordOptions
from squall.connectors.files.writer import PartFile, final_name, next_number, recover_leftovers
from squall.connectors.options import OptionChecker
from squall.connectors.outage import Outage
from squall.model.components import Bolt
from squall.model.config import Config
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.hooks import ReportsMetrics, SettlesBatch, ValidatesSubmission
from squall.model.tuple import Tuple, is_tick_tuple
from squall.runtime.collectors import OutputCollector
from squall.runtime.context import TopologyContext

#: Default size at which a file is finished and the next one started.
DEFAULT_ROTATE_BYTES = 64 * 1024 * 1024
#: Default age (seconds since its first write) at which a file is finished.
DEFAULT_ROTATE_SECS = 300.0

#: Attributes of a running bolt that are not part of its state (an open file, tuples
#: waiting for their write): left out when it is pickled (a Spark snapshot).
_TRANSIENT = ("_file", "_buffer", "_layouts")


class FileBolt(RecordOptions, Bolt, ValidatesSubmission, SettlesBatch, ReportsMetrics):
    """Appends each tuple it receives, as one line, to files in ``directory``.

    **Guarantee: at-least-once.** A tuple is acked only after its line is written,
    flushed and ``fsync``ed: an acked tuple survives a crash of the process and of the
    machine. Tuples are written in groups, with one ``fsync`` per group: a group is
    written when ``batch`` tuples wait, when the oldest waiting tuple is ``flush_ms``
    old (checked at each tuple and at tick tuples every ``flush_ms``), and when the
    task is cleaned up. A tuple whose write fails is failed (its spout replays it);
    after a crash, tuples written but not yet acked are replayed and so appear twice.
    A tuple that cannot be written in the format (a ``lines`` value holding a line end,
    a value JSON cannot encode) is failed and reported.

    **Files.** Each task writes its own files, ``<prefix>-<task id>-<n>.<ext>``
    (``ext``: ``jsonl``, ``txt`` for ``lines``, ``csv``; ``n`` counts up, six digits,
    continuing after the task's files already there). The file being written is
    ``.<name>.inprogress`` (hidden, so a ``FileSpout`` reading the directory skips it);
    it is *finished*, closed and atomically renamed to its final name with an ``fsync``
    of the directory, once it holds ``rotate_bytes`` bytes or is ``rotate_secs`` old
    (either may be None), and at ``cleanup``. A final name therefore always shows a
    whole file. In-progress files a task left behind (a crash) are finished when the
    task next writes: cut after their last complete line and renamed.

    **Lines** (see :mod:`squall.connectors.files.formats`): ``jsonl`` writes a JSON
    object of the fields; ``csv`` a row of the values (with ``header``, each file
    starts with the field names); ``lines`` the ``str`` of the tuple's one field. The
    fields are ``fields`` if given (taken by name), else each tuple's own fields.

    **Failures.** A write that fails (a full disk, a file system that went away) fails
    the group's tuples, reports an error naming the bolt and the directory, and the
    bolt waits out its back-off (:class:`~squall.connectors.outage.Outage`) before its
    next write; the file is cut back to its last synced size.

    **Where it runs.** ``validate_submission`` where the topology is submitted;
    ``prepare``, ``execute`` and ``cleanup`` on the task's thread (local engine) or in
    the executors' Python workers (Spark): on Spark the files are on the disk of the
    machine running the task, so a cluster needs ``directory`` on a shared file system.
    On Spark a task's trees must complete within their micro-batch, so at the end of
    each micro-batch (``settle_batch``) the bolt writes its waiting tuples, acks them
    and finishes its file: a micro-batch gives each task that received tuples one file
    (or more, with ``rotate_bytes``). Ticks are not needed there: ``flush_ms=None``
    spares the empty micro-batches they cause while the spouts are idle.

    Args:
        directory: where the files go (made if missing).
        format: ``"jsonl"``, ``"lines"`` or ``"csv"``.
        rotate_bytes: finish a file once it holds this many bytes (None: no limit).
        rotate_secs: finish a file this many seconds after it was started (None: no
            limit).
        fields: the fields to write (None: each tuple's fields).
        prefix: the start of the files' names.
        batch: tuples written together, with one ``fsync``.
        flush_ms: the longest a tuple waits for its write while tuples keep coming,
            and the period of the bolt's tick tuples (None: no ticks; tuples wait for
            a full ``batch``, the end of a Spark micro-batch or ``cleanup``).
        header: CSV: start each file with the field names.
        delimiter: CSV column separator.
        quotechar: CSV quote character.
        encoding: the text encoding of the files.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        format: str = "jsonl",
        rotate_bytes: int | None = DEFAULT_ROTATE_BYTES,
        rotate_secs: float | None = DEFAULT_ROTATE_SECS,
        fields: Sequence[str] | None = None,
        prefix: str = "part",
        *,
        batch: int = 1000,
        flush_ms: float | None = 200,
        header: bool = True,
        delimiter: str = ",",
        quotechar: str = '"',
        encoding: str = "utf-8",
    ) -> None:
        self.directory: str = path_text(directory)
        self.rotate_bytes = rotate_bytes
        self.rotate_secs = rotate_secs
        self.prefix = prefix
        self.batch = batch
        self.flush_ms = flush_ms
        self.keep_record_options(format, fields, header, delimiter, quotechar, encoding)
        #: Whether ``prepare`` ran (a snapshot of a prepared bolt starts new files).
        self._prepared = False
        self._counters: dict[str, int] = {}

    # -- declaration and submission -------------------------------------------------

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """A sink: no streams."""

    def get_component_configuration(self) -> dict[str, Any] | None:
        """Tick tuples every ``flush_ms`` (none when it is None)."""
        if self.flush_ms is None:
            return None
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: float(self.flush_ms) / 1000.0}

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Check the options (where the topology is submitted).

        Raises:
            InvalidTopologyError: an option is wrong; the message names the component
                and the option.
        """
        checker = OptionChecker(component_id, type(self).__name__)
        not_a_file(checker, "directory", self.directory)
        self.check_record_options(checker)
        checker.optional_positive_int("rotate_bytes", self.rotate_bytes)
        if self.rotate_secs is not None:
            checker.positive_number("rotate_secs", self.rotate_secs)
        prefix = checker.text("prefix", self.prefix)
        if prefix.startswith(".") or "/" in prefix or os.sep in prefix:
            raise checker.fail(
                f"prefix must be a plain name (no '/', no leading '.'), got {prefix!r}"
            )
        checker.positive_int("batch", self.batch)
        if self.flush_ms is not None:
            checker.positive_number("flush_ms", self.flush_ms)

    # -- lifecycle ------------------------------------------------------------------

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        """Prepare the task (no file is touched before the first write)."""
        self._prepared = True
        self.collector = collector
        self._context = context
        self._task_id = context.task_id
        self._outage = Outage(f"FileBolt {context.component_id!r}", self.directory)
        self._encoder = self.line_encoder()
        self._extension = EXTENSIONS[self.format]
        self._next_number: int | None = None
        self._recovered = False
        self._counters = {"files_finished": 0, "tuples_written": 0, "write_failures": 0}
        self._file: PartFile | None = None
        #: The file's CSV header (its field names), once written.
        self._file_fields: list[str] | None = None
        self._buffer: list[tuple[Tuple, bytes]] = []
        self._buffered_at = 0.0
        self._layouts: dict[tuple[str, str], tuple[list[str], list[int]]] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for name in _TRANSIENT:
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._prepared:  # a new life for its files
            self._file = None
            self._buffer = []
            self._layouts = {}
            self._next_number = None
            self._recovered = False

    def execute(self, tup: Tuple) -> None:
        """Queue the tuple's line; write the waiting lines when due (see the class
        docstring). Tick tuples write what waits and finish a file that is too old."""
        now = self._context.clock.now_ms()
        if is_tick_tuple(tup):
            self._flush(now)
            self._rotate_if_old(now)
            return
        try:
            names, values = self._select(tup)
            line = self._encoder.encode(names, values)
            if self.format == "csv" and self.header:
                line = self._check_header(names, line)
        except ValueError as error:
            self.collector.report_error(error)
            self.collector.fail(tup)
            return
        if not self._buffer:
            self._buffered_at = now
        self._buffer.append((tup, line))
        if len(self._buffer) >= self.batch or (
            self.flush_ms is not None and now - self._buffered_at >= self.flush_ms
        ):
            self._flush(now)
            self._rotate_if_old(now)

    def settle_batch(self) -> None:
        """Spark, at the end of each micro-batch: write and ack what waits, then finish
        the file."""
        now = self._context.clock.now_ms()
        self._flush(now)
        self._finish()

    def settle_before_checkpoint(self) -> None:
        """A checkpoint of a topology with stateful bolts: write (with ``fsync``) and
        ack what waits; the file stays open (see
        :class:`~squall.model.hooks.SettlesBeforeCheckpoint`)."""
        self._flush(self._context.clock.now_ms())

    def cleanup(self) -> None:
        """Write and ack what waits, then finish the file."""
        if not self._prepared:
            return
        now = self._context.clock.now_ms()
        self._flush(now)
        self._finish()

    def metrics(self) -> dict[str, float]:
        """Files finished, tuples written and acked, failed writes."""
        return dict(self._counters)

    # -- lines ----------------------------------------------------------------------

    def _select(self, tup: Tuple) -> tuple[list[str], list[Any]]:
        key = (tup.source_component, tup.source_stream)
        layout = self._layouts.get(key)
        if layout is None:
            names = list(self.fields or tup.fields)
            try:
                indexes = [tup.fields.index(name) for name in names]
            except ValueError:
                missing = [n for n in names if n not in tup.fields]
                raise ValueError(
                    f"FileBolt: tuples of {key[0]!r} stream {key[1]!r} have no field(s) "
                    f"{missing} (they have {list(tup.fields)})"
                ) from None
            layout = self._layouts[key] = (names, indexes)
        names, indexes = layout
        values = tup.values
        return names, [values[i] for i in indexes]

    def _check_header(self, names: list[str], line: bytes) -> bytes:
        """A CSV file holds rows of one header: tuples with other fields are refused."""
        expected = self._file_fields
        if expected is None:
            if self._buffer:
                first = self._select(self._buffer[0][0])[0]
                if first != names:
                    raise ValueError(
                        f"FileBolt: CSV rows of fields {names} and {first} in one file"
                    )
        elif expected != names:
            raise ValueError(f"FileBolt: CSV file has columns {expected}, tuple has {names}")
        return line

    # -- writing --------------------------------------------------------------------

    def _flush(self, now: float) -> None:
        """Write, ``fsync`` and ack the waiting tuples (fail them if the write fails)."""
        buffer = self._buffer
        if not buffer:
            return
        self._buffer = []
        self._outage.wait()
        part = self._file
        try:
            if part is None:
                part = self._open(now, self._select(buffer[0][0])[0])
            part.append(b"".join(line for _, line in buffer))
            part.sync()
        except OSError as error:
            self._write_failed(error, buffer)
            return
        if self._outage.failures:
            self._outage.recovered()
        self._counters["tuples_written"] += len(buffer)
        ack = self.collector.ack
        for tup, _ in buffer:
            ack(tup)
        if self.rotate_bytes is not None and part.size >= self.rotate_bytes:
            self._finish()

    def _write_failed(self, error: OSError, buffer: list[tuple[Tuple, bytes]]) -> None:
        self._counters["write_failures"] += 1
        part = self._file
        if part is not None and (part.size == 0 or not part.rollback()):
            self._abandon()
        self.collector.report_error(self._outage.failed(error))
        fail = self.collector.fail
        for tup, _ in buffer:
            fail(tup)

    def _open(self, now: float, names: list[str]) -> PartFile:
        """Start the task's next file (finishing its leftovers first, once)."""
        directory = self.directory
        os.makedirs(directory, exist_ok=True)
        if not self._recovered:
            recover_leftovers(directory, self.prefix, self._task_id, self._extension)
            self._recovered = True
            self._next_number = None
        if self._next_number is None:
            self._next_number = next_number(directory, self.prefix, self._task_id, self._extension)
        while True:
            name = final_name(self.prefix, self._task_id, self._next_number, self._extension)
            self._next_number += 1
            if os.path.exists(os.path.join(directory, name)):
                continue
            try:
                part = PartFile(directory, name, now)
            except FileExistsError:
                continue
            break
        self._file = part
        self._file_fields = None
        if self.format == "csv" and self.header:
            part.append(self._encoder.header(names))
            self._file_fields = names
        return part

    def _rotate_if_old(self, now: float) -> None:
        part = self._file
        if (
            part is not None
            and self.rotate_secs is not None
            and now - part.opened_ms >= self.rotate_secs * 1000.0
        ):
            self._finish()

    def _finish(self) -> None:
        """Finish the current file: rename it to its final name (see the class
        docstring). A failed rename is reported; the file is finished later as a
        leftover."""
        part = self._file
        if part is None:
            return
        self._file = None
        self._file_fields = None
        try:
            if part.finish():
                self._counters["files_finished"] += 1
        except OSError as error:
            self._abandon()
            self.collector.report_error(self._outage.failed(error))

    def _abandon(self) -> None:
        """Give up the current file; it is finished as a leftover before the next."""
        if self._file is not None:
            self._file.discard_if_empty()
        self._file = None
        self._file_fields = None
        self._recovered = False
