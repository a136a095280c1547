"""``FileSpout``: a reliable spout reading each file of a directory once, line by line."""

from __future__ import annotations

import bisect
import os
from collections import deque
from collections.abc import Sequence
from typing import Any

from squall.connectors.files.checks import not_a_file, path_text
from squall.connectors.files.done import DoneDirectory
from squall.connectors.files.formats import LineParser, MalformedRecord, output_fields
from squall.connectors.files.lines import (
    FileChangedError,
    Line,
    LineReader,
    change,
    describe_lines,
    read_line,
)
from squall.connectors.files.listing import Listed, list_files, owner
from squall.connectors.files.progress import FileProgress, ProgressRecord, ProgressStore
from squall.connectors.files.records import RecordOptions
from squall.connectors.options import OptionChecker
from squall.connectors.outage import Outage
from squall.model.components import Spout
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.hooks import ReportsMetrics, ValidatesSubmission
from squall.runtime.collectors import SpoutOutputCollector
from squall.runtime.context import TopologyContext

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
    complete. The directory is listed again at most every ``scan_ms``, so files added
    while the topology runs are read; files are read in name order.

    **A file must be complete when it appears in the directory** (as with Storm's
    ``HdfsSpout``): producers write it elsewhere on the same file system (or under a
    name starting with ``.``) and rename it in when complete. A file is *finished* when
    it is read to its end and every line is acked. Without ``done_directory`` it is left
    in place and remembered as done in its record: bytes appended to it later are read.
    With ``done_directory`` it is moved there (made if missing; a file of the same name
    there is replaced) once it has stayed unchanged for ``settle_ms``, checked again
    just before the move: lines appended until then are read first. Lines appended
    after the move (by a writer that kept the file open) are not read: the spout
    notices them in the last 256 files it moved while it runs, counts them in ``lost``
    and reports them, naming the file.

    **Changed files.** A file replaced under its name (another inode) or truncated
    (fewer bytes than were read) is read again from its start as a new file. Its lines
    still waiting to be emitted again after a fail cannot be: each replay first checks
    that the file is the one read (its inode, and at least the bytes read), so no byte
    of another file is emitted under an old line's id (a file rewritten in place to at
    least as many bytes cannot be told apart). Those lines are counted in
    ``lost`` and reported naming the file; lines in flight are lost only if they fail,
    and the new file is read once none of them is pending (acked, failed or timed
    out), since its message ids are the same.

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

    **Failures.** Nothing stops the topology. A directory that cannot be listed (a
    file system that went away) is reported through the collector (in the component's
    errors), naming the spout and the directory; nothing is read until its back-off
    (:class:`~squall.connectors.outage.Outage`) allows another attempt, then the spout
    continues where it stood. A file that cannot be read (no read permission, a link
    that cannot be resolved) is reported naming the file and set aside with a back-off
    of its own: the other files are read meanwhile, and it is tried again (its replays
    wait for it). A line to replay whose file has disappeared is reported and given up
    (it cannot be read again); so is one whose file changed (above).

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
        settle_ms: with ``done_directory``, how long a finished file must stay
            unchanged before it is moved.
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
        settle_ms: int = 1000,
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
        self.settle_ms = settle_ms
        self.keep_record_options(format, fields, header, delimiter, quotechar, encoding)
        #: Whether ``open`` ran (a snapshot of an opened spout reads its files again).
        self._opened = False
        self._counters: dict[str, int] = {}
        self._reader: LineReader | None = None

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
        checker.positive_number("settle_ms", self.settle_ms)

    # -- lifecycle ------------------------------------------------------------------

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        """Prepare the task (no file is touched yet: the first ``next_tuple`` lists the
        directory)."""
        self._opened = True
        self.collector = collector
        self._context = context
        self._name = f"FileSpout {context.component_id!r}"
        self._task_index = context.task_index
        self._tasks = len(context.get_component_tasks(context.component_id))
        self._outage = Outage(self._name, self.directory)
        self._store = ProgressStore(self.directory)
        self._files: dict[str, FileProgress] = {}
        #: Files with lines to read, in name order; the first is being read.
        self._queue: list[str] = []
        self._queued: set[str] = set()
        self._replays: deque[tuple[str, int]] = deque()
        #: Files read to their end whose lines may all be acked, with the time (ms) from
        #: which they may be finished (with a done directory: once unchanged so long).
        self._finishing: dict[str, float] = {}
        self._next_finish = float("inf")
        #: Files that changed (replaced or truncated) while some of their lines were in
        #: flight, by name, until those are acked or failed: the new file waits.
        self._retired: dict[str, FileProgress] = {}
        #: Files whose record describes a file that changed: written again.
        self._stale: set[str] = set()
        #: Files that could not be read, with their back-off.
        self._blocked: dict[str, Outage] = {}
        self._done = (
            None
            if self.done_directory is None
            else DoneDirectory(self.directory, self.done_directory)
        )
        #: Progress records found at the first listing, until their files are seen.
        self._records: dict[str, ProgressRecord] | None = None
        self._next_scan = 0.0
        self._next_flush = 0.0
        self._counters = {"files_finished": 0, "malformed": 0, "replayed": 0, "lost": 0}
        self._reader = None
        self._parsers: dict[str, LineParser] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for name in _TRANSIENT:
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reader = None  # an opened spout opens its file again when it reads
        if self._opened:
            self._parsers = {}
            # Back-offs count on this process's monotonic clock: a restored spout (maybe
            # in another process) tries the directory and the files set aside again now.
            for outage in [self._outage, *self._blocked.values()]:
                outage.recovered()

    def next_tuple(self) -> None:
        """List the directory, finish files and write progress when due, then read up
        to ``batch`` lines: lines to replay first, then new lines. Never blocks on a
        wait. A file that cannot be read is reported and set aside (see
        ``_file_failed``); only a directory that cannot be listed stops the reading."""
        now = self._context.clock.now_ms()
        if now >= self._next_scan or now >= self._next_flush or now >= self._next_finish:
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
        retired = self._retired.get(name)
        if retired is not None and retired.pending.pop(number, None) is not None:
            if not retired.pending:
                del self._retired[name]
            return
        progress = self._files.get(name)
        if progress is None:
            return
        span = progress.pending.pop(number, None)
        if span is None:
            return
        progress.ack(number, span[1])
        if progress.at_end and not progress.pending:
            self._may_finish(name)

    def fail(self, msg_id: Any) -> None:
        """The record's tree failed: emit the line again (at the next ``next_tuple``),
        unless its file changed since it was read (then it is lost, and reported)."""
        name, number = msg_id
        retired = self._retired.get(name)
        if retired is not None and retired.pending.pop(number, None) is not None:
            if not retired.pending:
                del self._retired[name]
            self._counters["lost"] += 1
            self.collector.report_error(
                FileChangedError(
                    f"{self._name}: line {number} of {self._path(name)} failed after the "
                    "file changed: it cannot be emitted again (lost)"
                )
            )
            return
        progress = self._files.get(name)
        if progress is not None and number in progress.pending:
            self._replays.append((name, number))

    def commit_acks(self) -> None:
        """Write the progress of every file now (a checkpoint of a topology with
        stateful bolts: see :class:`~squall.model.hooks.CommitsAcks`).

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
        again after a fail, and lines lost: to replay when their file had disappeared
        or changed, or appended to a file after it was moved to the done directory."""
        return dict(self._counters)

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
        read (at least 1 when the file's end is reached or it cannot be read, which
        dequeues it)."""
        name = self._queue[0]
        progress = self._files[name]
        reader = self._reader
        if reader is None or reader.path != self._path(name):
            self._close_reader()
            reader = self._reader = LineReader(
                self._path(name), progress.read_line, progress.read_offset, progress.inode
            )
        try:
            lines = reader.read(budget)
            if lines:
                self._emit_lines(progress, lines)
        except BaseException as error:
            self._close_reader()  # read the batch again rather than skip its rest
            if isinstance(error, OSError):
                self._unreadable(name, error)
                return 1
            raise
        self._blocked.pop(name, None)
        progress.read_line, progress.read_offset = reader.line, reader.offset
        progress.size = max(progress.size, reader.offset)
        if not reader.at_end:
            return len(lines)
        progress.at_end = not reader.partial
        self._close_reader()
        self._dequeue(name)
        if progress.at_end and not progress.pending:
            self._may_finish(name)
        return max(len(lines), 1)

    def _dequeue(self, name: str) -> None:
        if name in self._queued:
            self._queue.remove(name)
            self._queued.discard(name)

    def _unreadable(self, name: str, error: OSError) -> None:
        """File ``name`` could not be read: gone since the listing (the next listing
        forgets it), changed (:meth:`_retire`), or unreadable (:meth:`_file_failed`)."""
        self._dequeue(name)
        if isinstance(error, FileChangedError):
            self._retire(name, str(error))
        elif not isinstance(error, FileNotFoundError):
            self._file_failed(name, error)

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
        """Emit up to ``budget`` failed lines again; returns how many were taken.

        Each line is read again only from the file it was read from (the same inode,
        with at least the bytes read): a file that changed is retired with its lines
        (:meth:`_retire`); the lines of a file that cannot be read now wait for its
        back-off while the others are emitted."""
        taken = 0
        replays = self._replays
        waiting = {name for name, outage in self._blocked.items() if not outage.ready()}
        deferred: list[tuple[str, int]] = []
        try:
            while replays and taken < budget:
                taken += self._emit_replay(replays.popleft(), waiting, deferred)
        finally:
            replays.extendleft(reversed(deferred))
        return taken

    def _emit_replay(
        self, entry: tuple[str, int], waiting: set[str], deferred: list[tuple[str, int]]
    ) -> int:
        """Emit one failed line again; returns 1 if it was emitted, else 0 (gone,
        lost, or ``deferred`` while its file is ``waiting`` for its back-off)."""
        name, number = entry
        progress = self._files.get(name)
        span = None if progress is None else progress.pending.get(number)
        if progress is None or span is None:
            return 0
        if name in waiting:
            deferred.append(entry)
            return 0
        path = self._path(name)
        try:
            line = read_line(path, span[0], span[1], number, progress.inode, progress.read_offset)
            parser = self._parser(progress)
        except FileNotFoundError as error:
            if not os.path.isdir(self.directory):
                self._replays.appendleft(entry)  # the directory is away: try again later
                raise
            self._give_up(progress, number, span, error)
            return 0
        except FileChangedError as error:
            self._replays.appendleft(entry)
            self._retire(name, str(error))
            return 0
        except OSError as error:
            deferred.append(entry)
            waiting.add(name)
            self._file_failed(name, error)
            return 0
        self._blocked.pop(name, None)
        self._counters["replayed"] += 1
        if parser.header and number == 1:  # a malformed header, again
            self._emit_malformed(name, line, MalformedRecord("invalid CSV header"))
        else:
            try:
                self.collector.emit(parser.parse(line.raw), (name, number))
            except MalformedRecord as error:
                self._emit_malformed(name, line, error)
        return 1

    def _give_up(
        self, progress: FileProgress, number: int, span: tuple[int, int], error: OSError
    ) -> None:
        """A line to replay cannot be read again (its file is gone): report it and
        count it as done."""
        self._counters["lost"] += 1
        self.collector.report_error(
            OSError(
                f"{self._name}: line {number} of "
                f"{self._path(progress.name)} cannot be emitted again: {error}"
            )
        )
        progress.pending.pop(number, None)
        progress.ack(number, span[1])

    def _retire(self, name: str, what: str) -> None:
        """File ``name`` is no longer the one read (``what`` says how): its lines
        waiting for a replay are lost, its lines in flight are lost if they fail, and
        the file in its place is read from its start as a new file once none of the
        old lines is pending (their message ids are the same). Reported unless nothing
        is lost."""
        progress = self._files[name]
        waiting = sorted({n for f, n in self._replays if f == name and n in progress.pending})
        if waiting:
            kept = [entry for entry in self._replays if entry[0] != name]
            self._replays.clear()
            self._replays.extend(kept)
            for number in waiting:
                del progress.pending[number]
            self._counters["lost"] += len(waiting)
        unread = progress.size > progress.read_offset
        self._forget(name)
        self._stale.add(name)
        if progress.pending:
            self._retired[name] = progress
        if not (waiting or unread or progress.pending):
            return
        parts = [f"{self._name}: {what}"]
        if unread:
            parts.append(f"its lines after line {progress.read_line} were not read")
        if waiting:
            verb = "is" if len(waiting) == 1 else "are"
            parts.append(f"{describe_lines(waiting)} waiting to be emitted again {verb} lost")
        if progress.pending:
            flight = sorted(progress.pending)
            verb = "is lost if it fails" if len(flight) == 1 else "are lost if they fail"
            parts.append(f"{describe_lines(flight)} in flight {verb}")
        parts.append(
            "the file is read again from its start as a new file"
            + (" once none is pending" if progress.pending else "")
        )
        self.collector.report_error(FileChangedError("; ".join(parts)))

    def _file_failed(self, name: str, error: OSError) -> None:
        """File ``name`` cannot be read or examined now (permissions, a link that cannot
        be resolved): report it, naming it, and set it aside until its back-off allows
        another attempt; the other files are read meanwhile."""
        outage = self._blocked.get(name)
        if outage is None:
            outage = self._blocked[name] = Outage(self._name, self._path(name))
        self._dequeue(name)
        self.collector.report_error(outage.failed(error))

    def _set_aside(self, name: str) -> bool:
        """Whether file ``name`` failed and its back-off has not passed."""
        outage = self._blocked.get(name)
        return outage is not None and not outage.ready()

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
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
        if now >= self._next_finish:
            self._finish_files(now)
        if now >= self._next_flush:
            self._flush()
            self._next_flush = now + self.progress_ms

    def _owned(self, name: str) -> bool:
        return owner(name, self._tasks) == self._task_index

    def _scan(self) -> None:
        """List the directory: new files, files grown, replaced, truncated or gone,
        entries that cannot be examined, and files moved to the done directory that
        grew."""
        problems: dict[str, OSError] = {}
        listed = list_files(self.directory, self.pattern, self._task_index, self._tasks, problems)
        if self._records is None:
            self._records = {
                name: record for name, record in self._store.read_all().items() if self._owned(name)
            }
        records = self._records
        present = set(problems)
        for name, error in problems.items():
            if not self._set_aside(name):
                self._file_failed(name, error)
        for item in listed:
            present.add(item.name)
            if item.name not in self._retired:  # else its old lines are in flight
                self._scan_file(item, records)
        for name in [n for n, p in self._files.items() if n not in present and not p.pending]:
            self._forget(name)
            self._store.remove(name)
        for name in list(records):  # records of files gone before this run saw them
            if name not in present:
                self._store.remove(name)
                del records[name]
        for name in [n for n in self._blocked if n not in present]:
            del self._blocked[name]
        if self._done is not None:
            self._report_appended(self._done)

    def _scan_file(self, item: Listed, records: dict[str, ProgressRecord]) -> None:
        """One file of the listing: track it, queue what it holds beyond the lines
        read, or retire it if it is not the file read before."""
        name = item.name
        progress = self._files.get(name)
        if progress is not None:
            what = change(
                self._path(name), item.inode, item.size, progress.inode, progress.read_offset
            )
            if what is not None:
                self._retire(name, what)
                if name in self._retired:
                    return
                progress = None
        if progress is None:
            progress = self._track(name, item.inode, item.size, records.pop(name, None))
        progress.size = item.size
        if progress.done:
            if self.done_directory is not None:
                self._may_finish(name)  # finished before a crash, not moved yet
                return
            if item.size <= progress.read_offset:
                return
            progress.done = False  # appended to since: read on
        if item.size > progress.read_offset and name not in self._queued:
            if self._set_aside(name):
                return
            progress.at_end = False
            bisect.insort(self._queue, name)
            self._queued.add(name)
        elif item.size == progress.read_offset and not progress.at_end:
            progress.at_end = name not in self._queued
            if progress.at_end and not progress.pending:
                self._may_finish(name)

    def _track(
        self, name: str, inode: int, size: int, record: ProgressRecord | None
    ) -> FileProgress:
        if record is not None and record.inode == inode and record.offset <= size:
            progress = FileProgress.resumed(record)
        else:
            stale = record is not None or name in self._stale
            progress = FileProgress(name, inode, dirty=stale)
        self._stale.discard(name)
        self._files[name] = progress
        return progress

    def _forget(self, name: str) -> None:
        self._files.pop(name, None)
        self._parsers.pop(name, None)
        self._finishing.pop(name, None)
        if name in self._queued:
            self._dequeue(name)
            if self._reader is not None and self._reader.path == self._path(name):
                self._close_reader()

    def _may_finish(self, name: str) -> None:
        """File ``name`` is read to its end with every line acked: finish it once it
        has stayed so for ``settle_ms`` (with a done directory), at once otherwise."""
        if name not in self._finishing:
            delay = 0 if self._done is None else self.settle_ms
            due = self._context.clock.now_ms() + delay
            self._finishing[name] = due
            self._next_finish = min(self._next_finish, due)

    def _finish_files(self, now: float) -> None:
        """Finish the files read to their end with every line acked, when due. With a
        done directory, a file is moved only if it holds no byte beyond the lines read
        (else it is read on)."""
        for name in sorted(n for n, due in self._finishing.items() if due <= now):
            progress = self._files.get(name)
            if progress is None or not (progress.done or progress.is_complete()):
                self._finishing.pop(name, None)
                continue
            if self._done is not None and self._grew(progress):
                continue
            progress.done = True
            self._store.write([progress.record()])
            progress.dirty = False
            if self._done is not None:
                self._done.move(name, progress.inode, progress.read_offset, progress.read_line)
                self._store.remove(name)
                self._forget(name)
            self._finishing.pop(name, None)
            self._counters["files_finished"] += 1
        self._next_finish = min(self._finishing.values(), default=float("inf"))

    def _grew(self, progress: FileProgress) -> bool:
        """Whether a file about to be moved changed since it was read to its end: if it
        grew it is queued to be read on (if it was replaced or truncated, the next
        listing retires it). Either way it is not finished now.

        Raises:
            OSError: the file cannot be examined.
        """
        name = progress.name
        try:
            status = os.stat(self._path(name))
        except FileNotFoundError:
            return False  # moved before a crash: finished
        if status.st_ino != progress.inode or status.st_size < progress.read_offset:
            self._finishing.pop(name, None)
            return True
        if status.st_size == progress.read_offset:
            return False
        self._finishing.pop(name, None)
        progress.done = progress.at_end = False
        progress.size = status.st_size
        if name not in self._queued and not self._set_aside(name):
            bisect.insort(self._queue, name)
            self._queued.add(name)
        return True

    def _report_appended(self, done: DoneDirectory) -> None:
        """Count and report the lines appended to files after they were moved."""
        for moved, numbers in done.appended():
            self._counters["lost"] += len(numbers)
            verb = "is" if len(numbers) == 1 else "are"
            self.collector.report_error(
                FileChangedError(
                    f"{self._name}: {describe_lines(numbers)} appended to {moved.source} "
                    f"after it was finished and moved to {moved.target} {verb} not read "
                    "(counted as lost); a file must be complete when it appears in the "
                    "directory"
                )
            )

    def _flush(self) -> None:
        """Write the record of every file whose acked prefix moved."""
        dirty = [p for p in self._files.values() if p.dirty]
        if dirty:
            self._store.write([p.record() for p in dirty])
            for progress in dirty:
                progress.dirty = False

    def _flush_quietly(self) -> None:
        if not self._opened:
            return
        try:
            self._flush()
        except OSError as error:
            self.collector.report_error(self._outage.failed(error))
