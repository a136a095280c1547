"""Directories a process makes for as long as it runs, and their removal once a
process that made one is gone without removing it (killed with ``SIGKILL``).

Each directory names the process that owns it (file ``owner``, its pid). Making a
directory with a prefix first removes the directories of that prefix whose owner no
longer runs, so what killed processes leave behind does not pile up.

Runs in the submitting process (the supervisor), on any thread.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

#: The file naming a directory's owning process.
OWNER_FILE = "owner"


def owned_directory(prefix: str, base: Path | None = None) -> Path:
    """A new directory named ``prefix`` + a random suffix under ``base`` (the system's
    temporary directory by default), owned by this process; the abandoned directories
    of the same prefix there are removed first."""
    parent = Path(tempfile.gettempdir()) if base is None else base
    remove_abandoned(parent, prefix)
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    (directory / OWNER_FILE).write_text(str(os.getpid()))
    return directory


def remove_abandoned(base: Path, prefix: str) -> None:
    """Remove the directories ``base/prefix*`` whose owning process is gone (those
    without an owner file, being made or not made here, are left alone)."""
    for directory in base.glob(f"{prefix}*"):
        try:
            owner = int((directory / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(directory, ignore_errors=True)
        except PermissionError:
            continue  # another user's process: alive


__all__ = ["OWNER_FILE", "owned_directory", "remove_abandoned"]
