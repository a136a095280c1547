"""The done directory of a file spout: where finished files are moved, and a watch on
the files moved, so that lines appended to one after it was moved (by a writer that
kept it open) are noticed rather than lost silently.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections import OrderedDict
from dataclasses import dataclass

from squall.connectors.files.lines import complete_lines_after
from squall.connectors.files.progress import fsync_directory

#: How many of the files moved last are watched for lines appended after the move.
WATCHED_FILES = 256


@dataclass
class Moved:
    """A file moved to the done directory, as far as it was read.

    Attributes:
        source: its path in the directory read.
        target: its path in the done directory.
        inode: its inode.
        offset: the byte offset after the last line read (or noticed as appended).
        line: the number of that line.
    """

    source: str
    target: str
    inode: int
    offset: int
    line: int


class DoneDirectory:
    """Moves finished files from ``directory`` into ``done`` and watches the last
    :data:`WATCHED_FILES` files moved for lines appended after the move.

    Runs in the spout task that read the files (not thread-safe); the watch lasts while
    the task runs (it is not kept across a restart).
    """

    def __init__(self, directory: str, done: str) -> None:
        self.directory = directory
        self.done = done
        self._watched: OrderedDict[str, Moved] = OrderedDict()

    def move(self, name: str, inode: int, offset: int, line: int) -> None:
        """Move file ``name`` (read up to line ``line``, ending at ``offset``) into the
        done directory (made if missing; a file of the same name there is replaced),
        durably, and watch it. A file already gone (moved before a crash) is skipped.

        Raises:
            OSError: the file cannot be moved.
        """
        os.makedirs(self.done, exist_ok=True)
        source, target = os.path.join(self.directory, name), os.path.join(self.done, name)
        try:
            os.replace(source, target)
        except FileNotFoundError:
            return  # moved before a crash
        except OSError as error:
            if error.errno != errno.EXDEV:  # another file system: copy, then remove
                raise
            shutil.move(source, target)
            inode = os.stat(target).st_ino
        fsync_directory(self.done)
        fsync_directory(self.directory)
        self._watched.pop(name, None)
        self._watched[name] = Moved(source, target, inode, offset, line)
        while len(self._watched) > WATCHED_FILES:
            self._watched.popitem(last=False)

    def appended(self) -> list[tuple[Moved, list[int]]]:
        """The watched files that hold complete lines after the ones read (or noticed
        before), each with those lines' numbers; they are noticed once. A watched file
        that is gone or replaced in the done directory is no longer watched; one that
        cannot be read now is looked at again next time."""
        found: list[tuple[Moved, list[int]]] = []
        for name, moved in list(self._watched.items()):
            try:
                status = os.stat(moved.target)
                if status.st_ino != moved.inode:
                    raise FileNotFoundError(moved.target)
                if status.st_size <= moved.offset:
                    continue
                count, end = complete_lines_after(moved.target, moved.offset)
            except FileNotFoundError:
                del self._watched[name]
                continue
            except OSError:
                continue
            if count:
                found.append((moved, list(range(moved.line + 1, moved.line + 1 + count))))
                moved.line += count
                moved.offset = end
        return found
