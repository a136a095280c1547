"""Virtual environments of their own for the systems the benchmarks compare squall with.

Each lives under ``bench/`` (git ignores them) and is created with ``pip install`` on
first use, from the interpreter running the benchmark. This module imports only the
standard library, so that a benchmark running in one of these environments can import
it too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
BYTEWAX_VENV = BENCH / ".venv-bytewax"
BYTEWAX_REQUIREMENT = "bytewax>=0.21,<0.22"
PATHWAY_VENV = BENCH / ".venv-pathway"
PATHWAY_REQUIREMENT = "pathway>=0.33,<0.34"


def venv_python(venv: Path, requirement: str) -> Path:
    """The interpreter of the environment ``venv``, creating it with ``requirement``
    installed if it is missing.

    Raises:
        RuntimeError: the environment cannot be created or the requirement installed.
    """
    python = venv / "bin" / "python"
    if python.exists():
        return python
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "--quiet", requirement],
    ]
    for command in steps:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()[-2000:]}")
    return python


def bytewax_python() -> Path:
    """The Bytewax environment's interpreter (``bench/.venv-bytewax``), created if missing."""
    return venv_python(BYTEWAX_VENV, BYTEWAX_REQUIREMENT)


def pathway_python() -> Path:
    """The Pathway environment's interpreter (``bench/.venv-pathway``), created if missing."""
    return venv_python(PATHWAY_VENV, PATHWAY_REQUIREMENT)


def installed_version(python: Path, distribution: str) -> str:
    """The version of ``distribution`` installed for the interpreter ``python``."""
    code = f"import importlib.metadata as m; print(m.version({distribution!r}))"
    done = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True)
    return done.stdout.strip()
