"""What a process keeps warm between micro-batches, per topology run.

Spark reuses its Python workers (and the source's process) from one micro-batch to the
next, and across topology runs: a task's prepared operations, a live bolt task, a spout
emitter, a run's set-up are made once per process and kept in :data:`TASKS`, under the
run's key, until the run is forgotten. Forgetting a run releases what it kept (a
processor's ``cleanup``, a batch bolt's ``cleanup_task``, a bolt task's ``cleanup``), in
the order it was kept.

Runs in every process squall uses: the driver, the sources' processes and executors'
Python workers, each with its own cache. Only the thread running a task touches it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

_Kept = TypeVar("_Kept")


class TaskCache:
    """Objects kept per topology run (``"<topology>-<uuid>"``) and key."""

    def __init__(self) -> None:
        self._kept: dict[str, dict[Hashable, Any]] = {}
        self._releases: dict[str, list[Callable[[], object]]] = {}

    def get(
        self,
        run: str,
        key: Hashable,
        make: Callable[[], _Kept],
        release: Callable[[_Kept], object] | None = None,
    ) -> _Kept:
        """The object kept for ``run`` under ``key``, made by ``make`` on first use;
        ``release`` is called on it when the run is forgotten."""
        kept = self._kept.setdefault(run, {})
        if key in kept:
            found: _Kept = kept[key]
            return found
        made = kept[key] = make()
        if release is not None:
            self._releases.setdefault(run, []).append(lambda: release(made))
        return made

    def peek(self, run: str, key: Hashable) -> Any:
        """The object kept for ``run`` under ``key``, or None."""
        return self._kept.get(run, {}).get(key)

    def runs(self) -> list[str]:
        """The runs that keep something in this process."""
        return list(self._kept)

    def forget(self, run: str) -> None:
        """Drop everything kept for ``run``, releasing it in the order it was kept.

        Raises:
            Exception: the first error a release raised, after every release ran.
        """
        self._kept.pop(run, None)
        error: Exception | None = None
        for release in self._releases.pop(run, []):
            try:
                release()
            except Exception as exc:
                error = error or exc
        if error is not None:
            raise error


#: This process's cache.
TASKS = TaskCache()


class LiveRuns:
    """The topology runs started and not yet killed by this process's clusters (the
    driver). Stage tasks carry them, so an executor's worker drops what it keeps for
    any other run (see ``execute.bolttasks.forget_finished_runs``) without reading
    anything from the checkpoint."""

    def __init__(self) -> None:
        self._runs: set[str] = set()
        self._lock = threading.Lock()

    def add(self, run: str) -> None:
        """Run ``run`` started."""
        with self._lock:
            self._runs.add(run)

    def discard(self, run: str) -> None:
        """Run ``run`` was killed."""
        with self._lock:
            self._runs.discard(run)

    def snapshot(self) -> frozenset[str]:
        """The live runs now."""
        with self._lock:
            return frozenset(self._runs)


#: The driver's live runs.
LIVE_RUNS = LiveRuns()
