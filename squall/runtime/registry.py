"""What every cluster shares: its running topologies by name, and the context manager."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Any, Generic, TypeVar

from squall.model.errors import SquallError

T = TypeVar("T")
SelfRegistry = TypeVar("SelfRegistry", bound="TopologyRegistry[Any]")


class TopologyRegistry(ABC, Generic[T]):
    """Running topologies by name, for a cluster (``LocalCluster``, ``SparkCluster``).

    Subclasses implement ``shutdown()``; leaving a ``with`` block calls it.
    """

    def __init__(self) -> None:
        self._topologies: dict[str, T] = {}
        self._lock = threading.Lock()

    def _claim(self, name: str) -> None:
        """Check that no topology called ``name`` runs.

        Raises:
            SquallError: one does.
        """
        if name in self._topologies:
            raise SquallError(f"a topology named {name!r} is already running")

    def _get(self, name: str) -> T:
        try:
            return self._topologies[name]
        except KeyError:
            known = sorted(self._topologies) or "none"
            raise SquallError(f"no topology named {name!r} is running (running: {known})") from None

    def topology_names(self) -> list[str]:
        """Names of the running topologies."""
        return sorted(self._topologies)

    @abstractmethod
    def shutdown(self) -> None:
        """Stop every topology (and release the cluster's resources)."""

    def __enter__(self: SelfRegistry) -> SelfRegistry:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()
