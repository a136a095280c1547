"""Child processes the crash tests run a topology in and kill with SIGKILL."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parent.parent


def start_child(module: str, *arguments: str) -> subprocess.Popen[bytes]:
    """``python -m <module> <arguments>`` from the repository's root, in a session of
    its own (so that killing its group kills its workers too); stderr is kept."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *arguments],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def kill_after_progress(
    child: subprocess.Popen[bytes], progressed: Callable[[], bool], rng: random.Random
) -> None:
    """Wait until ``progressed()`` (or the child ended, which fails with its stderr),
    then a random moment more, and kill the child's process group with SIGKILL."""
    try:
        wait_until(lambda: progressed() or child.poll() is not None, timeout=60.0, interval=0.01)
        assert child.poll() is None, child.stderr.read().decode()[-3000:]  # type: ignore[union-attr]
        wait_until(lambda: rng.random() < 0.05, timeout=5.0, interval=0.005)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
