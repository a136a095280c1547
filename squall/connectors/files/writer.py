"""The files a sink task writes: an in-progress file that grows, then is renamed to
its final name.

A task's files are ``<prefix>-<task id>-<n>.<ext>`` (``n`` counting up from 0 with six
digits). While written, a file is ``.<final name>.inprogress`` (hidden, so a
``FileSpout`` on the same directory does not read it); finishing it renames it to its
final name and ``fsync``s the directory, so a final name always shows a whole file.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import BinaryIO

from squall.connectors.files.progress import fsync_directory

_IN_PROGRESS = ".inprogress"


def final_name(prefix: str, task_id: int, number: int, extension: str) -> str:
    """The name of a task's ``number``-th file."""
    return f"{prefix}-{task_id}-{number:06d}.{extension}"


def in_progress_name(final: str) -> str:
    """The name of a file while it is written."""
    return f".{final}{_IN_PROGRESS}"


def _pattern(prefix: str, task_id: int, extension: str) -> re.Pattern[str]:
    return re.compile(
        rf"^\.?{re.escape(prefix)}-{task_id}-(\d+)\.{re.escape(extension)}"
        rf"(?:{re.escape(_IN_PROGRESS)})?$"
    )


class PartFile:
    """The file a task is writing.

    Its ``size`` is what was written and synced (``sync``); after a failed write the
    file is cut back to it (``rollback``), so it holds only whole lines.
    """

    def __init__(self, directory: str, final: str, opened_ms: float) -> None:
        self.directory = directory
        self.final = final
        self.path = os.path.join(directory, in_progress_name(final))
        self.opened_ms = opened_ms
        self.size = 0
        self._handle: BinaryIO = open(self.path, "xb")  # noqa: SIM115 - kept open

    def append(self, data: bytes) -> None:
        """Write ``data`` (not synced yet).

        Raises:
            OSError: the write failed (see :meth:`rollback`).
        """
        self._handle.write(data)

    def sync(self) -> None:
        """Flush and ``fsync``: what was appended is durable.

        Raises:
            OSError: the flush or ``fsync`` failed.
        """
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self.size = self._handle.tell()

    def rollback(self) -> bool:
        """Cut the file back to the last synced size; False if that failed too (the
        file is then closed and should be abandoned)."""
        try:
            self._handle.seek(self.size)
            self._handle.truncate(self.size)
            self._handle.flush()
            return True
        except (OSError, ValueError):
            self.close()
            return False

    def finish(self) -> str:
        """Close the file and rename it to its final name (the directory ``fsync``ed);
        returns the final path. An empty file is removed instead.

        Raises:
            OSError: the rename failed.
        """
        self.close()
        if self.size == 0:
            os.remove(self.path)
            return ""
        target = os.path.join(self.directory, self.final)
        os.replace(self.path, target)
        fsync_directory(self.directory)
        return target

    def discard_if_empty(self) -> None:
        """Close the file, and remove it if nothing was synced to it (a file given up
        after a failed write)."""
        self.close()
        if self.size == 0:
            with contextlib.suppress(OSError):
                os.remove(self.path)

    def close(self) -> None:
        """Close the handle (idempotent)."""
        if not self._handle.closed:
            with contextlib.suppress(OSError):
                self._handle.close()


def next_number(directory: str, prefix: str, task_id: int, extension: str) -> int:
    """The number of a task's next file: one above every number its files (final or in
    progress) use in ``directory``.

    Raises:
        OSError: the directory cannot be listed.
    """
    pattern = _pattern(prefix, task_id, extension)
    numbers = [int(match.group(1)) for match in map(pattern.match, os.listdir(directory)) if match]
    return max(numbers, default=-1) + 1


def _complete_size(handle: BinaryIO, size: int) -> int:
    """The size of the file's part that ends with its last line end."""
    end = size
    while end > 0:
        start = max(0, end - 65536)
        handle.seek(start)
        found = handle.read(end - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def recover_leftovers(directory: str, prefix: str, task_id: int, extension: str) -> list[str]:
    """Finish the in-progress files a task left behind (a crash): each is cut after
    its last complete line and renamed to its final name (an empty one is removed).
    Returns the final paths.

    Raises:
        OSError: a file cannot be read, cut or renamed.
    """
    pattern = _pattern(prefix, task_id, extension)
    recovered: list[str] = []
    for name in sorted(os.listdir(directory)):
        if not (name.startswith(".") and name.endswith(_IN_PROGRESS) and pattern.match(name)):
            continue
        path = os.path.join(directory, name)
        with open(path, "r+b") as handle:
            size = handle.seek(0, os.SEEK_END)
            keep = _complete_size(handle, size)
            if keep != size:
                handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
        if keep == 0:
            os.remove(path)
            continue
        target = os.path.join(directory, name[1 : -len(_IN_PROGRESS)])
        os.replace(path, target)
        recovered.append(target)
    if recovered:
        fsync_directory(directory)
    return recovered
