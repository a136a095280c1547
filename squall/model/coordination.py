"""The coordination store's interface: what transactional and Trident components read
their transaction ids and spout metadata from (Storm's ZooKeeper role).

Engines provide the implementations (``squall.runtime.coordination``) and give a task's
context the store it uses (``TopologyContext.coordination_store``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class CoordinationStore(ABC):
    """Key-value store of pickled values, keys grouped by namespace. Thread-safe."""

    @abstractmethod
    def get(self, namespace: str, key: str, default: Any = None) -> Any:
        """The value at ``key``, or ``default``."""

    @abstractmethod
    def put(self, namespace: str, key: str, value: Any) -> None:
        """Store ``value`` at ``key`` (durably, for a durable store)."""

    @abstractmethod
    def delete(self, namespace: str, key: str) -> None:
        """Remove ``key`` (no error if absent)."""

    @abstractmethod
    def keys(self, namespace: str) -> list[str]:
        """Every key of ``namespace``, sorted."""

    def close(self) -> None:
        """Release resources (nothing to release by default)."""
