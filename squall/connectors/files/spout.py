"""``FileSpout``: a reliable spout reading each file of a directory once, line by line."""

from __future__ import annotations

import bisect
import os
import shutil
from collections import deque
from collections.abc import Sequence
from typing import Any

from squall.connectors.files.checks import not_a_file, path_text
from squall.connectors.files.formats import LineParser, MalformedRecord, output_fields
from squall.connectors.files.lines import Line, LineReader, read_line
from squall.connectors.files.listing import list_files, owner
from squall.connectors.files.progress import (
    FileProgress,
    ProgressRecord,
    ProgressStore,
    fsync_directory,
)
from squall.connectors.files.records import RecordOptions
from squall.connectors.options import OptionChecker
from squall.connectors.outage import Outage
from squall.model.components import Spout
from squall.model.declarer import OutputFieldsDeclarer
from squall.runtime.collectors import SpoutOutputCollector
from squall.runtime.context import TopologyContext
from squall.runtime.hooks import ReportsMetrics, ValidatesSubmission

#: The stream of malformed records.
ERRORS_STREAM = "errors"
#: Its fields: the file's name, the line number, the line's text and what is wrong.
ERROR_FIELDS = ("file", "line", "text", "error")

#: Attributes of a running spout that are not part of its state (an open file, caches
#: rebuilt on demand): left out when it is pickled (a Spark snapshot).
_TRANSIENT = ("_reader", "_parsers")


class FileSpout(RecordOptions, Spout, ValidatesSubmission, ReportsMetrics):
    """Reads every file of ``directory`` whose name matches ``pattern``, once, line by
    line, and emits one tuple per record.

    **Guarantee: at-least-once**, across failed tuples, restarts and crashes. Each
    record is emitted with the message id ``(file, line)``: the file's name (relative
    to ``directory``) and the line number (1-based physical lines, the CSV header and
    blank lines counted). ``fail`` emits the line again (read again from the file).
    The spout keeps, per file, the *acked prefix* (the last line up to which every line
    is acked) in ``directory/.squall-progress/`` (one record per file, written
    atomically: temporary file, ``fsync``, ``rename``, ``fsync`` of the directory) at
    most every ``progress_ms`` and when the spout deactivates or closes. A restarted
    topology resumes each file after its recorded prefix: lines before it are never
    emitted again, lines after it (acked or not when the process died) are. With acking
    off (``topology.acker.executors`` 0), a line counts as acked when emitted
    (at-most-once).

    **Files.** A file is taken when its name matches ``pattern`` and does not start
    with ``.``, and it is a regular file directly in ``directory``. Only complete lines
    (ending with ``\\n``) are read: a trailing line without one waits until it is
    complete. Producers should write a file elsewhere on the same file system (or
    under a name starting with ``.``) and rename it in when complete. The directory is
    listed again at most every ``scan_ms``, so files added while the topology runs are
    read; files are read in name order. A file is *finished* when it is read to its end
    and every line is acked: it is then moved into ``done_directory`` (made if missing;
    a file of the same name there is replaced), or, without one, left in place and
    remembered as done in its record (bytes appended to it later are read; a file
    replaced under the same name, that is with another inode, or shrunk, is read from
    the start).

    **Records** (see :mod:`squall.connectors.files.formats`): ``lines`` emits
    ``[line]`` (field ``line``, or the one name in ``fields``); ``jsonl`` emits the
    values of ``fields`` taken by name from each JSON object, or without ``fields`` one
    field ``record`` holding the object (a dict); ``csv`` with ``header`` maps the
    first line's columns to ``fields`` by name (without ``fields``: ``record``, a dict
    of column -> text), without ``header`` ``fields`` name the columns in order.
    Malformed records (invalid JSON or CSV, not an object, a missing field, another
    number of columns, undecodable text) are emitted on stream ``"errors"`` as
    ``[file, line, text, error]`` with the same message id, so they are acked, failed
    and replayed like the others: subscribe a bolt to ``(component, "errors")`` to keep
    them; unsubscribed, they are acked at once.

    **Tasks.** With several tasks each file is read by one task: a stable hash of its
    name modulo the number of tasks. Per ``next_tuple`` a task reads up to ``batch``
    lines (lines to replay first); with ``topology.max.spout.pending`` the pending
    trees may exceed it by up to ``batch``. On Spark a micro-batch holds up to
    ``batch`` times ``topology.spark.batch.max.tuples`` records per task: set
    ``topology.max.spout.pending`` to bound it.

    **Failures.** A directory or file that cannot be read (a file system that went
    away, permissions) does not stop the topology: the spout reports an error naming
    itself and the directory through the collector (in the component's errors), emits
    nothing until its back-off (:class:`~squall.connectors.outage.Outage`) allows
    another attempt, and then continues where it stood. A line to replay whose file
    has disappeared is reported and given up (it cannot be read again).

    **Where it runs.** ``validate_submission`` where the topology is submitted (it
    checks the options and that ``directory`` exists: an ``InvalidTopologyError``
    naming the component otherwise). ``open``, ``next_tuple``, ``ack``, ``fail``,
    ``deactivate`` and ``close`` on the task's thread (local engine), or in the
    driver-side Python process of the spout's source (Spark): the files are read on the
    driver's machine. On Spark the spout is snapshotted after each micro-batch with its
    positions and pending lines (its open file is left out and opened again where it
    stood), and a restarted query resumes from that snapshot.

    Args:
        directory: the directory to read (must exist).
        pattern: glob the file names must match.
        format: ``"lines"``, ``"jsonl"`` or ``"csv"``.
        done_directory: where finished files are moved (None: left in place).
        fields: the emitted fields (see above).
        batch: the most lines read (and records emitted) per ``next_tuple``; the
            default, 16, matches the local engine's rounds (128 ``next_tuple`` calls, a
            bolt's 2,048 tuples): larger batches let queues and pending trees grow.
        scan_ms: the shortest interval between two listings of the directory.
        progress_ms: the longest interval between two writes of the progress records.
        header: CSV: the first line of each file names the columns.
        delimiter: CSV column separator.
        quotechar: CSV quote character.
        encoding: the files' text encoding.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        pattern: str = "*",
        format: str = "lines",
        done_directory: str | os.PathLike[str] | None = None,
        fields: Sequence[str] | None = None,
        *,
        batch: int = 16,
        scan_ms: int = 500,
        progress_ms: int = 200,
        header: bool = True,
        delimiter: str = ",",
        quotechar: str = '"',
        encoding: str = "utf-8",
    ) -> None:
        self.directory: str = path_text(directory)
        self.pattern = pattern
        self.done_directory: str | None = (
            None if done_directory is None else path_text(done_directory)
        )
        self.batch = batch
        self.scan_ms = scan_ms
        self.progress_ms = progress_ms
        self.keep_record_options(format, fields, header, delimiter, quotechar, encoding)

    # -- declaration and submission -------------------------------------------------

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The records' fields on ``"default"``; ``ERROR_FIELDS`` on ``"errors"``."""
        declarer.declare(list(output_fields(self.format, self.fields)))
        declarer.declare_stream(ERRORS_STREAM, list(ERROR_FIELDS))

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Check the options (where the topology is submitted).

        Raises:
            InvalidTopologyError: an option is wrong or ``directory`` does not exist;
                the message names the component and the option.
        """
        checker = OptionChecker(component_id, type(self).__name__)
        self.check_reader_options(checker, self.directory, self.pattern)
        if self.done_directory is not None:
            done = not_a_file(checker, "done_directory", self.done_directory)
            if os.path.realpath(done) == os.path.realpath(self.directory):
                raise checker.fail("done_directory must differ from directory")
        checker.positive_int("batch", self.batch)
        checker.positive_number("scan_ms", self.scan_ms)
        checker.positive_number("progress_ms", self.progress_ms)

    # -- lifecycle ------------------------------------------------------------------

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        """Prepare the task (no file is touched yet: the first ``next_tuple`` lists the
        directory)."""
        self.collector = collector
        self._context = context
        self._task_index = context.task_index
        self._tasks = len(context.get_component_tasks(context.component_id))
        self._outage = Outage(f"FileSpout {context.component_id!r}", self.directory)
        self._store = ProgressStore(self.directory)
        self._files: dict[str, FileProgress] = {}
        #: Files with lines to read, in name order; the first is being read.
        self._queue: list[str] = []
        self._queued: set[str] = set()
        self._replays: deque[tuple[str, int]] = deque()
        #: Files read to their end whose lines may all be acked.
        self._finishing: set[str] = set()
        #: Progress records found at the first listing, until their files are seen.
        self._records: dict[str, ProgressRecord] | None = None
        self._next_scan = 0.0
        self._next_flush = 0.0
        self._counters = {"files_finished": 0, "malformed": 0, "replayed": 0, "lost": 0}
        self._reader: LineReader | None = None
        self._parsers: dict[str, LineParser] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for name in _TRANSIENT:
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "_files" in state:  # an opened spout: its file is opened again when read
            self._reader = None
            self._parsers = {}

    def next_tuple(self) -> None:
        """List the directory and write progress when due, then read up to ``batch``
        lines: lines to replay first, then new lines. Never blocks on a wait."""
        now = self._context.clock.now_ms()
        if now >= self._next_scan or now >= self._next_flush or self._finishing:
            if not self._outage.ready():
                return
            try:
                self._maintain(now)
            except OSError as error:
                self._unavailable(error)
                return
        elif not self._outage.ready():
            return
        budget = self.batch
        try:
            if self._replays:
                budget -= self._emit_replays(budget)
            while budget > 0 and self._queue:
                budget -= self._read(budget)
        except OSError as error:
            self._unavailable(error)
            return
        if self._outage.failures:
            self._outage.recovered()

    def ack(self, msg_id: Any) -> None:
        """The record's tree completed: extend the file's acked prefix."""
        name, number = msg_id
        progress = self._files.get(name)
        if progress is None:
            return
        span = progress.pending.pop(number, None)
        if span is None:
            return
        progress.ack(number, span[1])
        if progress.at_end and not progress.pending:
            self._finishing.add(name)

    def fail(self, msg_id: Any) -> None:
        """The record's tree failed: emit the line again (at the next ``next_tuple``)."""
        name, number = msg_id
        progress = self._files.get(name)
        if progress is not None and number in progress.pending:
            self._replays.append((name, number))

    def commit_acks(self) -> None:
        """Write the progress of every file now (a checkpoint of a topology with
        stateful bolts: see :class:`~squall.runtime.hooks.CommitsAcks`).

        Raises:
            OSError: a progress record could not be written (the checkpoint is rolled
                back and tried again).
        """
        self._flush()

    def deactivate(self) -> None:
        """Write the progress of every file now."""
        self._flush_quietly()

    def close(self) -> None:
        """Write the progress of every file and close the file being read."""
        self._flush_quietly()
        self._close_reader()

    def metrics(self) -> dict[str, float]:
        """Files finished, malformed records emitted on ``"errors"``, lines emitted
        again after a fail, and lines given up because their file disappeared."""
        return dict(getattr(self, "_counters", {}))

    # -- reading --------------------------------------------------------------------

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def _parser(self, progress: FileProgress) -> LineParser:
        parser = self._parsers.get(progress.name)
        if parser is None:
            parser = self.line_parser()
            if parser.header and progress.read_line >= 1:
                parser.columns = progress.columns or self._header_of(progress.name, parser)
            self._parsers[progress.name] = parser
        return parser

    def _header_of(self, name: str, parser: LineParser) -> list[str] | None:
        """A resumed CSV file's columns, from its first line."""
        header = LineReader(self._path(name))
        try:
            lines = header.read(1)
        finally:
            header.close()
        if not lines:
            return None
        try:
            parser.read_header(lines[0].raw)
        except MalformedRecord:
            return None
        return parser.columns

    def _read(self, budget: int) -> int:
        """Emit up to ``budget`` records of the first queued file; returns the lines
        read (at least 1 when the file's end is reached, which dequeues it)."""
        name = self._queue[0]
        progress = self._files[name]
        reader = self._reader
        if reader is None or reader.path != self._path(name):
            self._close_reader()
            reader = self._reader = LineReader(
                self._path(name), progress.read_line, progress.read_offset
            )
        try:
            lines = reader.read(budget)
        except FileNotFoundError:  # removed since the listing: the next one forgets it
            self._close_reader()
            del self._queue[0]
            self._queued.discard(name)
            return 1
        if lines:
            try:
                self._emit_lines(progress, lines)
            except BaseException:
                self._close_reader()  # read the batch again rather than skip its rest
                raise
        progress.read_line, progress.read_offset = reader.line, reader.offset
        if not reader.at_end:
            return len(lines)
        progress.at_end = not reader.partial
        self._close_reader()
        del self._queue[0]
        self._queued.discard(name)
        if progress.at_end and not progress.pending:
            self._finishing.add(name)
        return max(len(lines), 1)

    def _emit_lines(self, progress: FileProgress, lines: list[Line]) -> None:
        parser = self._parser(progress)
        name = progress.name
        pending = progress.pending
        emit = self.collector.emit
        for line in lines:
            number = line.number
            if parser.header and number == 1:
                try:
                    parser.read_header(line.raw)
                except MalformedRecord as error:
                    pending[number] = (line.start, line.end)
                    self._emit_malformed(name, line, error)
                else:
                    progress.columns = parser.columns
                    progress.ack(number, line.end)
                continue
            if parser.skips(line.raw):
                progress.ack(number, line.end)
                continue
            pending[number] = (line.start, line.end)
            try:
                values = parser.parse(line.raw)
            except MalformedRecord as error:
                self._emit_malformed(name, line, error)
                continue
            emit(values, (name, number))

    def _emit_malformed(self, name: str, line: Line, error: MalformedRecord) -> None:
        self._counters["malformed"] += 1
        text = line.raw.decode(self.encoding, errors="replace").rstrip("\r")
        self.collector.emit(
            [name, line.number, text, str(error)], (name, line.number), ERRORS_STREAM
        )

    def _emit_replays(self, budget: int) -> int:
        """Emit up to ``budget`` failed lines again; returns how many were taken."""
        taken = 0
        replays = self._replays
        while replays and taken < budget:
            name, number = replays[0]
            progress = self._files.get(name)
            span = None if progress is None else progress.pending.get(number)
            if progress is None or span is None:
                replays.popleft()
                continue
            try:
                line = read_line(self._path(name), span[0], span[1], number)
            except FileNotFoundError as error:
                replays.popleft()
                self._give_up(progress, number, span, error)
                continue
            replays.popleft()
            taken += 1
            self._counters["replayed"] += 1
            parser = self._parser(progress)
            if parser.header and number == 1:  # a malformed header, again
                self._emit_malformed(name, line, MalformedRecord("invalid CSV header"))
                continue
            try:
                values = parser.parse(line.raw)
            except MalformedRecord as error:
                self._emit_malformed(name, line, error)
                continue
            self.collector.emit(values, (name, number))
        return taken

    def _give_up(
        self, progress: FileProgress, number: int, span: tuple[int, int], error: OSError
    ) -> None:
        """A line to replay cannot be read again (its file is gone): report it and
        count it as done."""
        self._counters["lost"] += 1
        self.collector.report_error(
            OSError(
                f"FileSpout {self._context.component_id!r}: line {number} of "
                f"{self._path(progress.name)} cannot be emitted again: {error}"
            )
        )
        progress.pending.pop(number, None)
        progress.ack(number, span[1])

    def _close_reader(self) -> None:
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.close()
            self._reader = None

    def _unavailable(self, error: OSError) -> None:
        """Report a failed attempt; nothing is read until the back-off has passed."""
        self._close_reader()
        self.collector.report_error(self._outage.failed(error))

    # -- listing, progress, finished files ------------------------------------------

    def _maintain(self, now: float) -> None:
        if now >= self._next_scan:
            self._scan()
            self._next_scan = now + self.scan_ms
        if self._finishing:
            self._finish_files()
        if now >= self._next_flush:
            self._flush()
            self._next_flush = now + self.progress_ms

    def _owned(self, name: str) -> bool:
        return owner(name, self._tasks) == self._task_index

    def _scan(self) -> None:
        """List the directory: new files, files grown, replaced or gone."""
        listed = list_files(self.directory, self.pattern, self._task_index, self._tasks)
        if self._records is None:
            self._records = {
                name: record for name, record in self._store.read_all().items() if self._owned(name)
            }
        records = self._records
        present = set()
        for item in listed:
            name = item.name
            present.add(name)
            progress = self._files.get(name)
            if progress is not None and not progress.pending and name not in self._queued:
                replaced = progress.inode != item.inode or item.size < progress.read_offset
                if replaced:
                    self._forget(name)
                    progress = None
            if progress is None:
                progress = self._track(name, item.inode, item.size, records.pop(name, None))
            if progress.done:
                if self.done_directory is not None:
                    self._finishing.add(name)  # finished before a crash, not moved yet
                    continue
                if item.size <= progress.read_offset:
                    continue
                progress.done = False  # appended to since: read on
            if item.size > progress.read_offset and name not in self._queued:
                progress.at_end = False
                bisect.insort(self._queue, name)
                self._queued.add(name)
            elif item.size == progress.read_offset and not progress.at_end:
                progress.at_end = name not in self._queued
                if progress.at_end and not progress.pending:
                    self._finishing.add(name)
        for name in [n for n, p in self._files.items() if n not in present and not p.pending]:
            self._forget(name)
            self._store.remove(name)
        for name in list(records):  # records of files gone before this run saw them
            if name not in present:
                self._store.remove(name)
                del records[name]

    def _track(
        self, name: str, inode: int, size: int, record: ProgressRecord | None
    ) -> FileProgress:
        if record is not None and record.inode == inode and record.offset <= size:
            progress = FileProgress.resumed(record)
        else:
            progress = FileProgress(name, inode, dirty=record is not None)
        self._files[name] = progress
        return progress

    def _forget(self, name: str) -> None:
        self._files.pop(name, None)
        self._parsers.pop(name, None)
        self._finishing.discard(name)
        if name in self._queued:
            self._queue.remove(name)
            self._queued.discard(name)
            if self._reader is not None and self._reader.path == self._path(name):
                self._close_reader()

    def _finish_files(self) -> None:
        """Finish the files read to their end with every line acked."""
        for name in sorted(self._finishing):
            progress = self._files.get(name)
            if progress is None or not (progress.done or progress.is_complete()):
                self._finishing.discard(name)
                continue
            progress.done = True
            if self.done_directory is None:
                self._store.write([progress.record()])
                progress.dirty = False
            else:
                self._store.write([progress.record()])
                self._move_done(name)
                self._store.remove(name)
                self._forget(name)
            self._finishing.discard(name)
            self._counters["files_finished"] += 1

    def _move_done(self, name: str) -> None:
        """Move a finished file into ``done_directory`` (durably)."""
        done = self.done_directory
        assert done is not None
        os.makedirs(done, exist_ok=True)
        source, target = self._path(name), os.path.join(done, name)
        try:
            os.replace(source, target)
        except FileNotFoundError:
            return  # moved before a crash
        except OSError as error:
            if error.errno != 18:  # EXDEV: another file system
                raise
            shutil.move(source, target)
        fsync_directory(done)
        fsync_directory(self.directory)

    def _flush(self) -> None:
        """Write the record of every file whose acked prefix moved."""
        dirty = [p for p in self._files.values() if p.dirty]
        if dirty:
            self._store.write([p.record() for p in dirty])
            for progress in dirty:
                progress.dirty = False

    def _flush_quietly(self) -> None:
        if not hasattr(self, "_files"):
            return
        try:
            self._flush()
        except OSError as error:
            self.collector.report_error(self._outage.failed(error))
