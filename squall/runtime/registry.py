"""What every cluster shares: its running topologies by name, and the history of their
figures."""

from __future__ import annotations

import threading
import time
from typing import Generic, TypeVar

from squall.model.errors import SquallError, excerpt
from squall.runtime.cluster import Cluster
from squall.runtime.metrics import TopologyInfo
from squall.runtime.rolling import HistoryKeeper

T = TypeVar("T")


class TopologyRegistry(Cluster, Generic[T]):
    """The part of :class:`~squall.runtime.cluster.Cluster` every engine shares:
    running topologies by name (each an engine's ``T``), and the history of their
    figures for the rolling windows (see :mod:`squall.runtime.rolling`).

    Engines (``LocalCluster``, ``SparkCluster``) implement the rest of ``Cluster``.
    """

    def __init__(self) -> None:
        self._topologies: dict[str, T] = {}
        self._lock = threading.Lock()
        self._history = HistoryKeeper(self.topology_names, self.get_topology_info)

    def _claim(self, name: str) -> None:
        """Check that no topology called ``name`` runs.

        Raises:
            SquallError: one does.
        """
        if name in self._topologies:
            raise SquallError(f"a topology named {name!r} is already running")

    def _register(self, name: str, running: T) -> None:
        """Topology ``name`` runs: keep it, and start its figures' history. Call with
        ``self._lock`` held."""
        self._topologies[name] = running
        self._history.started(name)

    def _release(self, name: str) -> None:
        """Forget topology ``name`` (it ended, or did not start), and its figures'
        history. Call with ``self._lock`` held."""
        self._topologies.pop(name, None)
        self._history.ended(name)

    def in_window(self, name: str, info: TopologyInfo, window_secs: int | None) -> TopologyInfo:
        """``info`` (``name``'s figures now, from ``get_topology_info(name)``) over its
        last ``window_secs`` seconds (None: all time), from the cluster's history: one
        reading of the figures serves every window.

        Raises:
            ValueError: the window is not one the cluster keeps
                (:data:`~squall.runtime.rolling.WINDOWS`).
        """
        if window_secs is None:
            return info
        history = self._history.history(name)
        if history is None or window_secs not in history.windows:
            kept = ", ".join(str(w) for w in self._history.windows)
            raise ValueError(
                f"window_secs={window_secs!r}: the windows kept are {kept} seconds "
                "(or None: all time)"
            )
        return history.window(time.monotonic(), info, window_secs)

    @property
    def metric_windows(self) -> list[int]:
        """The rolling windows ``get_topology_info(name, window_secs)`` answers, in
        seconds (10 minutes, 3 hours, 1 day)."""
        return list(self._history.windows)

    def _get(self, name: str) -> T:
        try:
            return self._topologies[name]
        except KeyError:
            known = sorted(self._topologies) or "none"
            raise SquallError(
                f"no topology named {excerpt(name)} is running (running: {known})"
            ) from None

    def topology_names(self) -> list[str]:
        """Names of the running topologies."""
        return sorted(self._topologies)
