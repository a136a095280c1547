"""The Python executable (``PYSPARK_PYTHON``) of the Python processes a session squall
starts on this machine.

Spark puts its own copy of PySpark, ``$SPARK_HOME/python/lib/pyspark.zip`` (with
py4j's zip and a Spark jar), first on the import path of every Python process it
starts. Python compiles modules imported from a zip file at every import, caching
nothing, so each new process spends most of a second of CPU compiling PySpark. A
streaming source runs in a new process per source and query, so that cost is paid at
every topology start, for every spout.

For a local master the executors run on this machine, with this interpreter, and
PySpark is installed where this process imported it from. There the processes are
started through a small launcher that moves Spark's zip and jar entries to the end of
``PYTHONPATH`` and runs this interpreter: PySpark (the same version) then imports from
its installed, compiled files, and anything only in Spark's files still imports. A
topology starts in about half the CPU time (measured on a one-spout topology).

Anywhere else (a cluster master, PySpark imported from a zip, no POSIX shell, or a
launcher directory this user does not own alone) the processes run this interpreter
as Spark starts it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shlex
import stat
import sys
import tempfile

#: Masters whose executors run on this machine.
LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?|local-cluster\[[^\]]*\]")

_LAUNCHER = """#!/bin/sh
# Written by squall: runs {python} with the entries Spark adds under SPARK_HOME
# (pyspark.zip, py4j's zip, Spark's jars) moved to the end of PYTHONPATH, so that
# PySpark imports from its installed, compiled files.
set -f
first=""
last=""
IFS=:
for entry in $PYTHONPATH; do
  case "$entry" in
    "$SPARK_HOME"/python/lib/*.zip|"$SPARK_HOME"/jars/*.jar)
      last="${{last:+$last:}}$entry" ;;
    *)
      first="${{first:+$first:}}$entry" ;;
  esac
done
unset IFS
PYTHONPATH="$first${{last:+:$last}}"
export PYTHONPATH
exec {python} "$@"
"""


def is_local_master(master: str) -> bool:
    """Whether ``master`` runs the executors in this machine (``local``, ``local[N]``,
    ``local[N, F]``, ``local[*]``, ``local-cluster[...]``)."""
    return LOCAL_MASTER.fullmatch(master.strip()) is not None


def launcher_text(python: str) -> str:
    """The launcher script that runs ``python`` with Spark's entries moved last."""
    return _LAUNCHER.format(python=shlex.quote(python))


def worker_python(master: str) -> str:
    """``PYSPARK_PYTHON`` for a session on ``master``: the launcher of this interpreter
    for a local master when it can be used (see the module's description), else this
    interpreter itself.

    Runs on the driver, before the session starts.
    """
    if not is_local_master(master) or not _pyspark_installed_as_files():
        return sys.executable
    return launcher_path() or sys.executable


def _pyspark_installed_as_files() -> bool:
    """Whether this process finds PySpark and py4j as files (not inside a zip)."""
    for name in ("pyspark", "py4j"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return False
        if spec is None or spec.origin is None or not os.path.isfile(spec.origin):
            return False
    return True


def launcher_path(directory: str | None = None) -> str | None:
    """The launcher of this interpreter, written if missing; None when it cannot be
    written safely (not POSIX, or ``directory`` is not owned by this user alone).

    ``directory`` defaults to ``squall-<uid>`` in the system's temporary directory, made
    with mode 0700. The file is named after the interpreter and its text, so every
    process of one interpreter shares one launcher.
    """
    if os.name != "posix":
        return None
    text = launcher_text(sys.executable)
    folder = directory or os.path.join(tempfile.gettempdir(), f"squall-{os.getuid()}")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        status = os.lstat(folder)
        shared = status.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
        private = status.st_uid == os.getuid() and not shared
        if not stat.S_ISDIR(status.st_mode) or not private:
            return None
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        path = os.path.join(folder, f"python-{digest}")
        if not os.path.isfile(path):
            descriptor, staging = tempfile.mkstemp(dir=folder, prefix=".python-")
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(staging, 0o700)
            os.replace(staging, path)
        return path
    except OSError:
        return None


__all__ = ["is_local_master", "launcher_path", "launcher_text", "worker_python"]
