"""Reading complete lines of a file from a byte offset.

A line is complete when its ``\\n`` is in the file: a trailing line without one (a file
still being written) is not returned until it is complete. Line numbers are 1-based
physical lines; offsets are byte positions (a line spans ``[start, end)``, ``end``
after its ``\\n``).
"""

from __future__ import annotations

import os
from typing import BinaryIO, NamedTuple

#: Bytes of a file read at a time.
READ_BUFFER = 1 << 16


class FileChangedError(OSError):
    """The file at a path is no longer the one read: another file (inode) was put in
    its place, or it holds fewer bytes than were read from it (it was truncated)."""


def change(path: str, inode: int, size: int, read_inode: int, read_size: int) -> str | None:
    """How the file at ``path`` (now ``inode``, ``size`` bytes) differs from the one
    read (``read_inode``, of which ``read_size`` bytes were read), or None if it may be
    the same file (the same inode, and at least as many bytes)."""
    if inode != read_inode:
        return f"{path} was replaced by another file (inode {inode}, was {read_inode})"
    if size < read_size:
        return f"{path} was truncated to {size} bytes ({read_size} were read)"
    return None


def check_same_file(handle: BinaryIO, path: str, read_inode: int, read_size: int) -> None:
    """Check that the open ``handle`` is still the file read before.

    Raises:
        FileChangedError: it is another file, or a truncated one (see :func:`change`).
    """
    status = os.fstat(handle.fileno())
    problem = change(path, status.st_ino, status.st_size, read_inode, read_size)
    if problem is not None:
        raise FileChangedError(problem)


def describe_lines(numbers: list[int]) -> str:
    """``line 4`` or ``lines 2-3, 7``: sorted line numbers, runs joined."""
    runs: list[str] = []
    start = previous = numbers[0]
    for number in [*numbers[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        runs.append(str(start) if start == previous else f"{start}-{previous}")
        if number is not None:
            start = previous = number
    return f"line {numbers[0]}" if len(numbers) == 1 else f"lines {', '.join(runs)}"


class Line(NamedTuple):
    """One complete line: its number, byte span and content (without ``\\n``)."""

    number: int
    start: int
    end: int
    raw: bytes


class LineReader:
    """Reads the complete lines of one file, in order, from a position.

    Keeps the file open between calls (buffered); :meth:`close` releases it. Not
    thread-safe; used by the task that reads the file.

    Args:
        path: the file.
        line: the number of the line before the first one to read (0: from the start).
        offset: the byte offset where line ``line + 1`` starts.
        inode: the inode of the file read up to ``offset`` before (None: not checked):
            when the file is opened, it must still be that file, with at least
            ``offset`` bytes.
    """

    def __init__(self, path: str, line: int = 0, offset: int = 0, inode: int | None = None) -> None:
        self.path = path
        self.inode = inode
        #: The last line read (0 before any).
        self.line = line
        #: Where the next line starts.
        self.offset = offset
        #: Whether the last read stopped at the end of the file (after a complete line,
        #: or before an incomplete one).
        self.at_end = False
        #: Whether bytes without a line end follow the last complete line.
        self.partial = False
        self._handle: BinaryIO | None = None

    def read(self, limit: int) -> list[Line]:
        """Up to ``limit`` complete lines after the last one read.

        Raises:
            FileChangedError: the file opened is not the one read before (``inode``).
            OSError: the file cannot be opened or read.
        """
        handle = self._handle
        if handle is None:
            handle = open(self.path, "rb", buffering=READ_BUFFER)  # noqa: SIM115
            if self.inode is not None:
                try:
                    check_same_file(handle, self.path, self.inode, self.offset)
                except BaseException:
                    handle.close()
                    raise
            self._handle = handle
            handle.seek(self.offset)
        lines: list[Line] = []
        append = lines.append
        readline = handle.readline
        number, offset = self.line, self.offset
        self.at_end = self.partial = False
        while len(lines) < limit:
            raw = readline()
            if not raw.endswith(b"\n"):
                self.at_end = True
                if raw:  # incomplete: read it again once its line end is written
                    self.partial = True
                    handle.seek(offset)
                break
            number += 1
            end = offset + len(raw)
            append(Line(number, offset, end, raw[:-1]))
            offset = end
        self.line, self.offset = number, offset
        return lines

    def close(self) -> None:
        """Close the file (a later :meth:`read` opens it again at the position)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def read_span(
    path: str,
    start: int,
    end: int,
    first_line: int,
    inode: int | None = None,
    read_size: int = 0,
) -> list[Line]:
    """The complete lines between byte offsets ``start`` and ``end`` (line ends
    included), the first numbered ``first_line``: a range read before, read again.

    With ``inode``, the file must still be the one read before: that inode, holding at
    least ``read_size`` bytes (what was read of it).

    Raises:
        FileChangedError: the file is not the one read before, or holds fewer bytes
            than ``end``.
        OSError: the file cannot be read.
    """
    with open(path, "rb") as handle:
        if inode is not None:
            check_same_file(handle, path, inode, max(read_size, end))
        handle.seek(start)
        data = handle.read(end - start)
    if len(data) != end - start:
        raise FileChangedError(f"{path} holds {start + len(data)} bytes, fewer than {end}")
    lines: list[Line] = []
    offset = start
    number = first_line
    for raw in data.split(b"\n")[:-1]:
        stop = offset + len(raw) + 1
        lines.append(Line(number, offset, stop, raw))
        offset = stop
        number += 1
    return lines


def read_line(
    path: str, start: int, end: int, number: int, inode: int | None = None, read_size: int = 0
) -> Line:
    """Line ``number``, known to span ``[start, end)`` (a line to emit again), of the
    file read before (``inode``, ``read_size``: see :func:`read_span`).

    Raises:
        FileChangedError: the file is not the one read before or no longer holds that
            line.
        OSError: the file cannot be read.
    """
    lines = read_span(path, start, end, number, inode, read_size)
    if len(lines) != 1:
        raise FileChangedError(f"{path} no longer holds line {number} at bytes {start}-{end}")
    return lines[0]


def complete_lines_after(path: str, offset: int) -> tuple[int, int]:
    """How many complete lines ``path`` holds after byte ``offset``, and the offset
    after the last of them (``offset`` if none).

    Raises:
        OSError: the file cannot be read.
    """
    count, end = 0, offset
    with open(path, "rb") as handle:
        handle.seek(offset)
        position = offset
        while chunk := handle.read(READ_BUFFER):
            found = chunk.count(b"\n")
            if found:
                count += found
                end = position + chunk.rfind(b"\n") + 1
            position += len(chunk)
    return count, end
