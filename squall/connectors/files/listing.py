"""Which files of a directory a reader takes, and which of its tasks reads each.

A file is taken when it is a regular file (or a link to one) directly in the
directory, its name matches the glob ``pattern`` (``fnmatch``, case-sensitive) and
does not start with ``.``: producers write a file under a hidden or non-matching name
(or elsewhere on the same file system) and rename it in when it is complete.
"""

from __future__ import annotations

import fnmatch
import os
from typing import NamedTuple

from squall.runtime.hashing import stable_hash


class Listed(NamedTuple):
    """A file found in the directory."""

    name: str
    inode: int
    size: int


def owner(name: str, tasks: int) -> int:
    """The index of the task that reads file ``name`` among ``tasks`` tasks: a stable
    hash of the name (the same in every process and run) modulo ``tasks``."""
    return stable_hash(name) % tasks if tasks > 1 else 0


def list_files(
    directory: str,
    pattern: str,
    task_index: int = 0,
    tasks: int = 1,
    problems: dict[str, OSError] | None = None,
) -> list[Listed]:
    """The files of ``directory`` the task ``task_index`` of ``tasks`` reads, by name.

    An entry whose name is taken but which cannot be examined (a link that cannot be
    resolved, such as a loop) goes into ``problems`` (name -> error) when it is given;
    without it, the error is raised.

    Raises:
        OSError: the directory cannot be listed, or (without ``problems``) an entry
            cannot be examined.
    """
    found: list[Listed] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if name.startswith(".") or not fnmatch.fnmatchcase(name, pattern):
                continue
            if tasks > 1 and owner(name, tasks) != task_index:
                continue
            try:
                if not entry.is_file():
                    continue
                status = entry.stat()
            except FileNotFoundError:  # renamed away meanwhile
                continue
            except OSError as error:
                if problems is None:
                    raise
                problems[name] = error
                continue
            found.append(Listed(name, status.st_ino, status.st_size))
    found.sort()
    return found
