"""Where a file spout stands in each file, kept in the read directory.

:class:`ProgressStore` keeps one record per file in the hidden subdirectory
``.squall-progress/`` of the directory read: the file's inode, the last line of its
fully acked prefix (every line up to it acked) with the byte offset after it, and
whether the file is finished. A record is written atomically (a temporary file,
``fsync``, ``rename``, then ``fsync`` of the subdirectory), so after a crash it holds
either the old or the new position, never a mix.

:class:`FileProgress` is a file's position in memory: the lines read, the lines emitted
and not yet acked, and the acked prefix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import urllib.parse
from dataclasses import dataclass, field

#: The subdirectory of a read directory holding the progress records.
PROGRESS_DIRECTORY = ".squall-progress"
_SUFFIX = ".json"


@dataclass(frozen=True)
class ProgressRecord:
    """A file's durable position.

    Attributes:
        file: the file's name in the directory.
        inode: its inode number when it was read (another inode: a new file).
        line: the last line of the acked prefix (0: none).
        offset: the byte offset after that line.
        done: every line is acked and the file is finished.
    """

    file: str
    inode: int
    line: int
    offset: int
    done: bool = False


def fsync_directory(path: str) -> None:
    """``fsync`` a directory, so the renames and creations in it are durable."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_atomically(path: str, data: bytes) -> None:
    """Write ``path`` whole or not at all: a temporary file beside it, ``fsync``,
    ``rename`` (the caller ``fsync``s the directory).

    Raises:
        OSError: the file cannot be written.
    """
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


class ProgressStore:
    """The progress records of one read directory (see the module docstring).

    Each file's record is written only by the task reading the file. Runs in the spout
    task (on Spark, in the source's driver-side process).
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, PROGRESS_DIRECTORY)

    def _record_path(self, name: str) -> str:
        quoted = urllib.parse.quote(name, safe="")
        if len(quoted) > 200:
            quoted = hashlib.sha256(name.encode()).hexdigest()
        return os.path.join(self.path, quoted + _SUFFIX)

    def read_all(self) -> dict[str, ProgressRecord]:
        """Every record, by file name (unreadable records are left out: their files
        are read from the start).

        Raises:
            OSError: the directory cannot be listed.
        """
        if not os.path.isdir(self.path):
            return {}
        records: dict[str, ProgressRecord] = {}
        for entry in os.scandir(self.path):
            if not entry.name.endswith(_SUFFIX):
                continue
            try:
                with open(entry.path, "rb") as handle:
                    record = ProgressRecord(**json.loads(handle.read()))
            except (OSError, ValueError, TypeError):
                continue
            records[record.file] = record
        return records

    def write(self, records: list[ProgressRecord]) -> None:
        """Write ``records`` atomically, then ``fsync`` the subdirectory once.

        Raises:
            OSError: a record cannot be written.
        """
        if not records:
            return
        os.makedirs(self.path, exist_ok=True)
        for record in records:
            payload = json.dumps(record.__dict__, ensure_ascii=False).encode()
            write_atomically(self._record_path(record.file), payload)
        fsync_directory(self.path)

    def remove(self, name: str) -> None:
        """Forget ``name``'s record (its file was moved away or is gone).

        Raises:
            OSError: the record exists but cannot be removed.
        """
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._record_path(name))


@dataclass
class FileProgress:
    """One file's position in memory (see the module docstring).

    Lines ``1..acked_line`` are acked; ``pending`` holds each emitted line not yet acked
    (line -> byte span), ``acked_ahead`` each acked line beyond the prefix (line ->
    its end offset). Lines the spout consumes without emitting (a CSV header, blank
    lines) are acked as they are read.
    """

    name: str
    inode: int
    #: The last line read and where the next one starts.
    read_line: int = 0
    read_offset: int = 0
    #: The acked prefix: its last line and the offset after it.
    acked_line: int = 0
    acked_offset: int = 0
    pending: dict[int, tuple[int, int]] = field(default_factory=dict)
    acked_ahead: dict[int, int] = field(default_factory=dict)
    #: Whether the file was read to its end (no byte after its last complete line).
    at_end: bool = False
    #: The file's size when it was last listed or read.
    size: int = 0
    #: The file's CSV column names, once read (a CSV file with a header).
    columns: list[str] | None = None
    #: The acked prefix moved since the record was last written.
    dirty: bool = False
    done: bool = False

    @classmethod
    def resumed(cls, record: ProgressRecord) -> FileProgress:
        """The position a record describes: reading resumes after its acked prefix."""
        return cls(
            record.file,
            record.inode,
            read_line=record.line,
            read_offset=record.offset,
            acked_line=record.line,
            acked_offset=record.offset,
            size=record.offset,
            done=record.done,
        )

    def record(self) -> ProgressRecord:
        """The durable form of the acked prefix."""
        return ProgressRecord(self.name, self.inode, self.acked_line, self.acked_offset, self.done)

    def ack(self, line: int, end: int) -> None:
        """Line ``line`` (ending at ``end``) is acked: extend the prefix if it can."""
        if line != self.acked_line + 1:
            self.acked_ahead[line] = end
            return
        self.acked_line, self.acked_offset = line, end
        ahead = self.acked_ahead
        if ahead:
            following = line + 1
            while following in ahead:
                self.acked_offset = ahead.pop(following)
                self.acked_line = following
                following += 1
        self.dirty = True

    def is_complete(self) -> bool:
        """Whether every line of the file is read and acked (it has nothing more)."""
        return self.at_end and not self.pending and self.acked_line == self.read_line
