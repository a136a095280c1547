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
    """

    def __init__(self, path: str, line: int = 0, offset: int = 0) -> None:
        self.path = path
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
            OSError: the file cannot be opened or read.
        """
        handle = self._handle
        if handle is None:
            handle = self._handle = open(self.path, "rb", buffering=READ_BUFFER)  # noqa: SIM115
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


def read_span(path: str, start: int, end: int, first_line: int) -> list[Line]:
    """The complete lines between byte offsets ``start`` and ``end`` (line ends
    included), the first numbered ``first_line``: a range read before, read again.

    Raises:
        OSError: the file cannot be read, or it holds fewer bytes than ``end``.
    """
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(end - start)
    if len(data) != end - start:
        raise OSError(f"{path} holds {start + len(data)} bytes, fewer than {end}")
    lines: list[Line] = []
    offset = start
    number = first_line
    for raw in data.split(b"\n")[:-1]:
        stop = offset + len(raw) + 1
        lines.append(Line(number, offset, stop, raw))
        offset = stop
        number += 1
    return lines


def read_line(path: str, start: int, end: int, number: int) -> Line:
    """Line ``number``, known to span ``[start, end)`` (a line to emit again).

    Raises:
        OSError: the file cannot be read or no longer holds that line.
    """
    lines = read_span(path, start, end, number)
    if len(lines) != 1:
        raise OSError(f"{path} no longer holds line {number} at bytes {start}-{end}")
    return lines[0]


def file_size(path: str) -> int:
    """The size of ``path`` in bytes.

    Raises:
        OSError: it cannot be read.
    """
    return os.stat(path).st_size
