"""The in-memory store: a state kept in the process that uses it, as Storm's
``InMemoryKeyValueState``.

Each store is its own: nothing is shared between stores, even of one namespace, and
everything is lost when the process ends. A store is plain dictionaries of bytes, so it
pickles with its data (on Spark a bolt and its state are snapshotted by pickling).
"""

from __future__ import annotations

from collections.abc import Iterator

from squall.state.base import StateStore


class MemoryStore(StateStore):
    """A namespace's committed entries, prepared transaction and committed txid, in
    this process's memory.

    Runs in the task that owns it; every operation is immediate and cannot fail (the
    codec's bytes are kept as they are).
    """

    def __init__(self, namespace: str) -> None:
        #: The namespace this store holds (for messages and debugging).
        self.namespace = namespace
        self._entries: dict[bytes, bytes] = {}
        self._prepared: tuple[int, dict[bytes, bytes | None]] | None = None
        self._committed_txid: int | None = None

    def __repr__(self) -> str:
        return f"MemoryStore(namespace={self.namespace!r}, entries={len(self._entries)})"

    def get(self, key: bytes) -> bytes | None:
        """The committed value of ``key``, or None."""
        return self._entries.get(key)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every committed ``(key, value)``, as they are when called."""
        return iter(list(self._entries.items()))

    def count(self) -> int:
        """The number of committed keys."""
        return len(self._entries)

    def prepared(self) -> tuple[int, dict[bytes, bytes | None]] | None:
        """The prepared transaction (a copy), or None."""
        if self._prepared is None:
            return None
        txid, changes = self._prepared
        return txid, dict(changes)

    def prepare(self, txid: int, changes: dict[bytes, bytes | None]) -> None:
        """Replace the prepared transaction with a copy of ``(txid, changes)``."""
        self._prepared = (txid, dict(changes))

    def commit(self, txid: int) -> None:
        """Apply the prepared transaction if it is ``txid``; otherwise nothing."""
        if self._prepared is None or self._prepared[0] != txid:
            return
        for key, value in self._prepared[1].items():
            if value is None:
                self._entries.pop(key, None)
            else:
                self._entries[key] = value
        self._committed_txid = txid
        self._prepared = None

    def rollback(self) -> None:
        """Drop the prepared transaction, if any."""
        self._prepared = None

    def committed_txid(self) -> int | None:
        """The txid of the last commit, or None before the first."""
        return self._committed_txid


__all__ = ["MemoryStore"]
