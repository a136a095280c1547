"""``FileTridentSpout``: the files of a directory as the partitions of a transactional
Trident spout."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

from squall.connectors.files.checks import path_text
from squall.connectors.files.formats import LineParser, MalformedRecord, output_fields
from squall.connectors.files.lines import Line, LineReader, change, read_span
from squall.connectors.files.listing import list_files
from squall.connectors.files.progress import PROGRESS_DIRECTORY, fsync_directory, write_atomically
from squall.connectors.files.records import RecordOptions
from squall.connectors.options import OptionChecker
from squall.model.context import TopologyContext
from squall.model.fields import Fields
from squall.model.hooks import ValidatesSubmission
from squall.trident.collector import Collector
from squall.trident.spouts import PartitionedTridentSpout


class PartitionRegistry:
    """Which file is which partition: an append-only list of names in
    ``.squall-progress/partitions-<hash of the pattern>.json`` of the directory.

    Partition ``p`` is the ``p``-th file ever registered, so the numbering never
    changes as files come. The coordinator registers new files (under a lock file, so
    two topologies on one directory agree); emitters only read the list.
    """

    def __init__(self, directory: str, pattern: str) -> None:
        digest = hashlib.sha256(pattern.encode()).hexdigest()[:16]
        self.directory = os.path.join(directory, PROGRESS_DIRECTORY)
        self.path = os.path.join(self.directory, f"partitions-{digest}.json")
        self._names: list[str] = []

    def names(self) -> list[str]:
        """The registered files, in partition order (read again from the file).

        Raises:
            OSError: the list exists but cannot be read.
        """
        try:
            with open(self.path, "rb") as handle:
                self._names = list(json.loads(handle.read()))
        except FileNotFoundError:
            self._names = []
        return self._names

    def name(self, partition: int) -> str:
        """The file of ``partition``.

        Raises:
            OSError: the list cannot be read.
            LookupError: no file has that partition number.
        """
        if partition >= len(self._names):
            self.names()
        if partition >= len(self._names):
            raise LookupError(f"no file is registered as partition {partition} in {self.path}")
        return self._names[partition]

    def register(self, found: Sequence[str]) -> list[str]:
        """Add the files of ``found`` not registered yet (in name order); returns every
        registered file.

        Raises:
            OSError: the list cannot be read or written.
        """
        with self._locked():
            names = self.names()
            known = set(names)
            new = sorted(name for name in found if name not in known)
            if new:
                names = [*names, *new]
                write_atomically(self.path, json.dumps(names).encode())
                fsync_directory(self.directory)
                self._names = names
        return names

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        os.makedirs(self.directory, exist_ok=True)
        with open(self.path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


class FilePartitionCoordinator:
    """The spout's coordinator: lists the directory (at most every ``scan_ms``),
    registers new files and returns the number of partitions. If the directory cannot
    be listed, the partitions known so far are used."""

    def __init__(self, spout: FileTridentSpout) -> None:
        self._spout = spout
        self._registry = PartitionRegistry(spout.directory, spout.pattern)
        self._count = 0
        self._next_scan = 0.0

    def number_of_partitions(self) -> int:
        now = time.monotonic()
        if now >= self._next_scan:
            self._next_scan = now + self._spout.scan_ms / 1000.0
            with contextlib.suppress(OSError):
                listed = list_files(self._spout.directory, self._spout.pattern)
                self._count = len(self._registry.register([item.name for item in listed]))
        return self._count

    def is_ready(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to release."""


class FilePartitionEmitter:
    """Emits a partition's (a file's) batches: a new batch is the next ``batch_lines``
    complete lines after the previous batch; a replay reads the same byte range."""

    def __init__(self, spout: FileTridentSpout) -> None:
        self._spout = spout
        self._registry = PartitionRegistry(spout.directory, spout.pattern)
        self._parsers: dict[str, LineParser] = {}
        width = len(output_fields(spout.format, spout.fields))
        self._empty = [None] * width

    def emit_partition_batch_new(
        self, attempt: Any, collector: Collector, partition: int, last_meta: dict[str, Any] | None
    ) -> dict[str, Any]:
        """Emit the lines after ``last_meta``; return this batch's metadata.

        The metadata names the file's inode, so that a replay reads the same file. If
        the file under the partition's name is no longer the one ``last_meta`` read
        (another file was put in its place, or it was truncated), the change is reported
        through ``collector.report_error`` naming the file, the lines of the old file
        not yet read are lost with it, and the file is read from its start as a new file.

        Raises:
            FileChangedError: the file changed again between its check and its opening
                (the batch fails; its next attempt sees the new file).
        """
        name = self._registry.name(partition)
        path = self._path(name)
        line, offset = (last_meta["last_line"], last_meta["end"]) if last_meta else (0, 0)
        try:
            status = os.stat(path)
        except FileNotFoundError:  # the file is gone: nothing more from it
            return {**(last_meta or {"file": name, "inode": None}), **_empty_span(line, offset)}
        read_inode = last_meta.get("inode") if last_meta else None
        if read_inode is not None:
            problem = change(path, status.st_ino, status.st_size, read_inode, offset)
            if problem is not None:
                collector.report_error(
                    f"FileTridentSpout: {problem}; whatever followed line {line} of the "
                    "file read before was not read and is lost; reading the file now "
                    "there from its start"
                )
                line, offset = 0, 0
                self._parsers.pop(name, None)
        reader = LineReader(path, line, offset, inode=status.st_ino)
        try:
            lines = reader.read(self._spout.batch_lines)
        finally:
            reader.close()
        meta = {
            "file": name,
            "first_line": line + 1,
            "start": offset,
            "last_line": reader.line,
            "end": reader.offset,
            "inode": status.st_ino,
        }
        self._emit(collector, name, lines)
        return meta

    def emit_partition_batch(
        self, attempt: Any, collector: Collector, partition: int, meta: dict[str, Any]
    ) -> None:
        """Emit again exactly the lines of ``meta``.

        Raises:
            FileChangedError: the file is no longer the one the batch read (another
                file under its name, or truncated): a replay never emits other bytes.
            OSError: the file no longer holds the lines, or cannot be read.
        """
        if meta["end"] == meta["start"]:
            return
        name = meta["file"]
        lines = read_span(
            self._path(name), meta["start"], meta["end"], meta["first_line"], meta.get("inode")
        )
        self._emit(collector, name, lines)

    def close(self) -> None:
        """Nothing to release."""

    def _path(self, name: str) -> str:
        return os.path.join(self._spout.directory, name)

    def _parser(self, name: str, first_line: int) -> LineParser:
        parser = self._parsers.get(name)
        if parser is None:
            parser = self._spout.line_parser()
            if parser.header and first_line > 1:
                header = LineReader(self._path(name))
                try:
                    found = header.read(1)
                finally:
                    header.close()
                with contextlib.suppress(MalformedRecord):
                    if found:
                        parser.read_header(found[0].raw)
            self._parsers[name] = parser
        return parser

    def _emit(self, collector: Collector, name: str, lines: list[Line]) -> None:
        if not lines:
            return
        parser = self._parser(name, lines[0].number)
        error_field = self._spout.error_field
        emit = collector.emit
        for line in lines:
            try:
                if parser.header and line.number == 1:
                    parser.read_header(line.raw)
                    continue
                if parser.skips(line.raw):
                    continue
                values = parser.parse(line.raw)
            except MalformedRecord as error:
                if error_field is not None:
                    text = line.raw.decode(parser.encoding, errors="replace").rstrip("\r")
                    problem = {"file": name, "line": line.number, "text": text, "error": str(error)}
                    emit([*self._empty, problem])
                continue
            if error_field is not None:
                values.append(None)
            emit(values)


class FileTridentSpout(RecordOptions, PartitionedTridentSpout, ValidatesSubmission):
    """The files of ``directory`` matching ``pattern`` as the partitions of a
    transactional Trident spout (Storm's ``IPartitionedTridentSpout``).

    **Guarantee: exactly-once** into transactional or opaque Trident state, across
    failed batches, restarts and crashes (with a durable coordination store:
    ``topology.transactional.state.dir`` on the local engine, the checkpoint directory
    on Spark). A batch of a file is its next ``batch_lines`` complete lines; its
    metadata is ``{"file", "first_line", "start", "last_line", "end", "inode"}`` (line
    numbers, byte offsets and the file's inode), stored by the engine, so a replayed
    transaction emits exactly the same lines of the same file, or fails with
    ``FileChangedError`` if the file was replaced or truncated (a new batch reports such
    a change and reads the new file from its start). Files must therefore only grow by
    whole lines at their end (or be renamed in complete) while the topology runs; a
    trailing line without ``\\n`` is not read until complete.

    **Partitions.** The coordinator lists the directory at most every ``scan_ms`` and
    registers new files (name matching ``pattern``, not starting with ``.``) in
    ``.squall-progress/partitions-<hash of pattern>.json``: partition ``p`` is the
    ``p``-th file registered, so new files add partitions and never renumber old ones.
    Files are never moved or deleted by the spout. Every transaction looks at every
    partition (a file with nothing new emits nothing).

    **Records** as ``FileSpout``'s (see :mod:`squall.connectors.files.formats`). The
    output fields are the record's fields, then ``error_field`` (default ``"error"``):
    None for a good record; for a malformed one the record's fields are None and
    ``error_field`` holds ``{"file", "line", "text", "error"}``. With
    ``error_field=None`` malformed records are skipped.

    **Where it runs.** ``validate_submission`` where the topology is submitted (an
    ``InvalidTopologyError`` naming the component for a wrong option or a missing
    directory). The coordinator (listing, registry) runs in the coordinator task
    (local engine) or the source's driver-side process (Spark); emitters read the files
    in the emitter tasks (local) or the executors' Python workers (Spark: one Spark
    partition per file; a cluster needs ``directory`` on a shared file system). A file
    that cannot be read fails the batch, which the engine replays after its back-off.

    Args:
        directory: the directory to read (must exist).
        pattern: glob the file names must match.
        format: ``"lines"``, ``"jsonl"`` or ``"csv"``.
        fields: the record's fields (see ``FileSpout``).
        error_field: the field for malformed records (None: skip them).
        batch_lines: the most lines of one file in one batch.
        scan_ms: the shortest interval between two listings of the directory.
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
        fields: Sequence[str] | None = None,
        *,
        error_field: str | None = "error",
        batch_lines: int = 1000,
        scan_ms: int = 500,
        header: bool = True,
        delimiter: str = ",",
        quotechar: str = '"',
        encoding: str = "utf-8",
    ) -> None:
        self.directory: str = path_text(directory)
        self.pattern = pattern
        self.error_field = error_field
        self.batch_lines = batch_lines
        self.scan_ms = scan_ms
        self.keep_record_options(format, fields, header, delimiter, quotechar, encoding)

    def get_output_fields(self) -> Fields:
        """The record's fields, then ``error_field`` (if not None)."""
        names = list(output_fields(self.format, self.fields))
        if self.error_field is not None and self.error_field not in names:  # else refused
            names.append(self.error_field)  # at submit, naming the component
        return Fields(names)

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Check the options (where the topology is submitted).

        Raises:
            InvalidTopologyError: an option is wrong or ``directory`` does not exist;
                the message names the component and the option.
        """
        checker = OptionChecker(component_id, type(self).__name__)
        self.check_reader_options(checker, self.directory, self.pattern)
        if self.error_field is not None:
            checker.text("error_field", self.error_field)
            if self.error_field in output_fields(self.format, self.fields):
                raise checker.fail(f"error_field {self.error_field!r} is also a record field")
        checker.positive_int("batch_lines", self.batch_lines)
        checker.positive_number("scan_ms", self.scan_ms)

    def get_coordinator(
        self, conf: dict[str, Any], context: TopologyContext
    ) -> FilePartitionCoordinator:
        """The coordinator (one, in the coordinator's task or process)."""
        return FilePartitionCoordinator(self)

    def get_emitter(self, conf: dict[str, Any], context: TopologyContext) -> FilePartitionEmitter:
        """An emitter, in each emitter task (Spark: each executor partition)."""
        return FilePartitionEmitter(self)


def _empty_span(line: int, offset: int) -> dict[str, Any]:
    """Metadata fields of a batch that read nothing after ``line`` (at ``offset``)."""
    return {"first_line": line + 1, "start": offset, "last_line": line, "end": offset}
