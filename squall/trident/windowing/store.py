"""Where Trident windows keep their tuples and fired results (Storm's ``WindowsStore``).

A window operation's task keeps, under string keys, the tuples its windows may still
hold (with a store factory given to the operation), the results of windows that fired
and are not yet committed, and a little bookkeeping; every key starts with a kind and
the window task's id (``<window id>|<task index>|``), so one store may serve several
window tasks. :class:`InMemoryWindowsStore` keeps them in the task's memory; a durable
store (``StateProviderWindowsStoreFactory``, over squall's state providers) keeps them
where a restarted topology finds them again.

A factory (:class:`WindowsStoreFactory`) is part of the topology declaration: it is
copied into every task, and ``create(conf)`` runs in the task.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

#: Separates the parts of a key.
KEY_SEPARATOR = "|"


@dataclass(frozen=True)
class Entry:
    """A key and its value, for :meth:`WindowsStore.put_all` (Storm's
    ``WindowsStore.Entry``).

    Raises:
        ValueError: the key or the value is None.
    """

    key: str
    value: Any

    def __post_init__(self) -> None:
        if self.key is None:
            raise ValueError("a windows store entry's key cannot be None")
        if self.value is None:
            raise ValueError(f"windows store entry {self.key!r}: the value cannot be None")


class WindowsStore(ABC):
    """A key-value store of a window task (Storm's ``WindowsStore``). Used by one task
    at a time, from the thread running it."""

    KEY_SEPARATOR: ClassVar[str] = KEY_SEPARATOR

    @abstractmethod
    def get(self, key: str | list[str]) -> Any:
        """The value of ``key`` (None if absent); for a list of keys, the list of their
        values in that order."""

    @abstractmethod
    def get_all_keys(self) -> Iterable[str]:
        """Every key held."""

    @abstractmethod
    def put(self, key: str, value: Any) -> None:
        """Set ``key`` to ``value``."""

    @abstractmethod
    def put_all(self, entries: Iterable[Entry]) -> None:
        """Set every entry's key to its value."""

    @abstractmethod
    def remove(self, key: str) -> None:
        """Remove ``key`` (nothing if absent)."""

    @abstractmethod
    def remove_all(self, keys: Iterable[str]) -> None:
        """Remove every key of ``keys``."""

    def shutdown(self) -> None:
        """Release the store's resources (its data stays, if it is durable)."""


class WindowsStoreFactory(ABC):
    """Makes a task's :class:`WindowsStore` (Storm's ``WindowsStoreFactory``).

    Picklable: copied into every task of the window operation. ``create`` runs in the
    task; the window operation and the step that drops committed results call it in the
    same task and must get the same store, so a factory returns one store per copy.
    """

    @abstractmethod
    def create(self, conf: dict[str, Any]) -> WindowsStore:
        """The task's store (``conf``: the topology's configuration)."""


class InMemoryWindowsStore(WindowsStore):
    """A store in the task's memory, lost with its process (Storm's
    ``InMemoryWindowsStore``). With a ``backing_store``, every write also goes there and
    a key missing here is read from there; at most ``max_size`` keys are kept here."""

    def __init__(self, max_size: int | None = None, backing_store: WindowsStore | None = None):
        self._store: dict[str, Any] = {}
        self.max_size = max_size
        self.backing_store = backing_store

    def get(self, key: str | list[str]) -> Any:
        if isinstance(key, list):
            return [self.get(k) for k in key]
        value = self._store.get(key)
        if value is None and self.backing_store is not None:
            value = self.backing_store.get(key)
        return value

    def get_all_keys(self) -> Iterable[str]:
        if self.backing_store is not None:
            return self.backing_store.get_all_keys()
        return list(self._store)

    def _keep(self, key: str, value: Any) -> None:
        room = self.max_size is None or len(self._store) < self.max_size
        if self.backing_store is None or key in self._store or room:
            self._store[key] = value

    def put(self, key: str, value: Any) -> None:
        Entry(key, value)  # checks
        self._keep(key, value)
        if self.backing_store is not None:
            self.backing_store.put(key, value)

    def put_all(self, entries: Iterable[Entry]) -> None:
        entries = list(entries)
        for entry in entries:
            self._keep(entry.key, entry.value)
        if self.backing_store is not None:
            self.backing_store.put_all(entries)

    def remove(self, key: str) -> None:
        self._store.pop(key, None)
        if self.backing_store is not None:
            self.backing_store.remove(key)

    def remove_all(self, keys: Iterable[str]) -> None:
        keys = list(keys)
        for key in keys:
            self._store.pop(key, None)
        if self.backing_store is not None:
            self.backing_store.remove_all(keys)

    def shutdown(self) -> None:
        self._store.clear()
        if self.backing_store is not None:
            self.backing_store.shutdown()

    def __len__(self) -> int:
        return len(self._store)

    def __repr__(self) -> str:
        return (
            f"InMemoryWindowsStore(size={len(self._store)}, backing_store={self.backing_store!r})"
        )


class InMemoryWindowsStoreFactory(WindowsStoreFactory):
    """Makes an :class:`InMemoryWindowsStore` (Storm's ``InMemoryWindowsStoreFactory``):
    one per copy of the factory, so per task. Windows kept in memory are lost when the
    topology stops; see ``StateProviderWindowsStoreFactory`` for windows that survive a
    restart."""

    def __init__(self) -> None:
        self._store: InMemoryWindowsStore | None = None

    def create(self, conf: dict[str, Any]) -> InMemoryWindowsStore:
        """The task's store (made at the first call)."""
        if self._store is None:
            self._store = InMemoryWindowsStore()
        return self._store

    def __getstate__(self) -> dict[str, Any]:
        return {"_store": None}  # a copy (another task) starts with a store of its own

    def __repr__(self) -> str:
        return "InMemoryWindowsStoreFactory()"


__all__ = [
    "KEY_SEPARATOR",
    "Entry",
    "InMemoryWindowsStore",
    "InMemoryWindowsStoreFactory",
    "WindowsStore",
    "WindowsStoreFactory",
]
