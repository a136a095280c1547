"""The state of a stateful bolt: Storm's ``State`` and ``KeyValueState``, and the store
interface the providers implement.

A state is committed in three phases driven by the checkpoint mechanism:

* ``prepare_commit(txid)``: the changes made since the last prepare are written to the
  store as *prepared* for ``txid`` (not yet visible as committed). The same txid may be
  prepared again (the new changes join the prepared ones); the next txid is prepared only
  after ``txid`` is committed or rolled back.
* ``commit(txid)``: the prepared changes become the committed state, atomically, and
  the store records ``txid`` as its last committed transaction. Committing a txid that is
  already committed does nothing (recovery may send a commit twice).
* ``rollback()``: prepared and unprepared changes are dropped; the state is the last
  committed one again.

Reads see every change made so far (committed, prepared and not yet prepared).

Where it runs: a state object belongs to one bolt task and is used from that task's
thread only (its store's connection is the task's own).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

from squall.state.codec import StateSerializationError, decode, encode


class State(ABC):
    """A bolt's state, saved by the checkpoint mechanism (Storm's ``State``)."""

    @abstractmethod
    def prepare_commit(self, txid: int) -> None:
        """Save the changes since the last prepare as prepared for ``txid``.

        Raises:
            StateSerializationError: a key or value cannot be stored.
        """

    @abstractmethod
    def commit(self, txid: int) -> None:
        """Make the changes prepared for ``txid`` the committed state (idempotent)."""

    @abstractmethod
    def rollback(self) -> None:
        """Drop every change not committed: the state is the last committed one."""


class KeyValueState(State):
    """A key-value mapping saved by the checkpoint mechanism (Storm's ``KeyValueState``).

    Keys and values are stored with :mod:`squall.state.codec` (see it for the supported
    types). A value is encoded when the state is prepared, so a mutable value changed in
    place after ``put`` is stored as it is at the checkpoint; ``put`` it again to make
    the change explicit.
    """

    @abstractmethod
    def put(self, key: Any, value: Any) -> None:
        """Map ``key`` to ``value``.

        Raises:
            StateSerializationError: ``key`` or ``value`` holds a type that cannot be
                stored; the message names the state and the key.
        """

    @abstractmethod
    def get(self, key: Any, default: Any = None) -> Any:
        """The value of ``key``, or ``default`` if it has none."""

    @abstractmethod
    def delete(self, key: Any) -> None:
        """Remove ``key`` (nothing happens if it has no value)."""

    @abstractmethod
    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        """Every ``(key, value)`` pair, in no particular order."""

    @abstractmethod
    def __len__(self) -> int:
        """The number of keys with a value."""

    def __contains__(self, key: Any) -> bool:
        return self.get(key, _MISSING) is not _MISSING


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"

    def __reduce__(self) -> str:
        return "_MISSING"  # unpickled as the one sentinel: a pickled state keeps deletions


_MISSING: Any = _Missing()
#: Not in a dict (a sentinel of this module only, never stored).
_ABSENT: Any = object()


class StateStore(ABC):
    """Where one state (one namespace) is kept: its committed entries, its prepared
    changes and the txid of its last commit. Keys and values are the codec's bytes.

    A provider implements this; :class:`BufferedKeyValueState` does the rest. Every
    method may raise the backend's errors (a server that went away): the engine reports
    them and retries the checkpoint. Used from one thread at a time.
    """

    @abstractmethod
    def get(self, key: bytes) -> bytes | None:
        """The committed value of ``key``, or None."""

    @abstractmethod
    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every committed ``(key, value)``."""

    @abstractmethod
    def count(self) -> int:
        """The number of committed keys."""

    @abstractmethod
    def prepared(self) -> tuple[int, dict[bytes, bytes | None]] | None:
        """The prepared transaction, ``(txid, changes)`` (a None value deletes its key),
        or None if there is none."""

    @abstractmethod
    def prepare(self, txid: int, changes: dict[bytes, bytes | None]) -> None:
        """Replace the prepared transaction with ``(txid, changes)``, atomically."""

    @abstractmethod
    def commit(self, txid: int) -> None:
        """If the prepared transaction is ``txid``: apply its changes to the committed
        entries, record ``txid`` as committed and drop it, all atomically. Otherwise
        nothing (it was committed already)."""

    @abstractmethod
    def rollback(self) -> None:
        """Drop the prepared transaction, if any."""

    @abstractmethod
    def committed_txid(self) -> int | None:
        """The txid of the last commit, or None before the first."""

    def close(self) -> None:
        """Release connections (the store's data stays)."""


class BufferedKeyValueState(KeyValueState):
    """A :class:`KeyValueState` over a :class:`StateStore`: changes are kept in memory
    until prepared, then written as one prepared transaction.

    Args:
        store: the namespace's store.
        label: names the state in errors (``bolt 'count' task 2``).
    """

    def __init__(self, store: StateStore, label: str) -> None:
        self.store = store
        self.label = label
        #: Changes since the last prepare: key -> value, or ``_MISSING`` (deleted).
        self._pending: dict[Any, Any] = {}
        #: Changes prepared and not yet committed, encoded (None: deleted).
        self._prepared: dict[bytes, bytes | None] = {}
        found = store.prepared()
        if found is not None:  # a prepared transaction the recovery will settle
            self._prepared = dict(found[1])

    # -- reads and writes -------------------------------------------------------------

    def put(self, key: Any, value: Any) -> None:
        kind = type(value)
        if kind is not int and kind is not str and kind is not float:
            self._check(key, value)  # other types are checked now, with the caller's stack
        elif type(key) is not str:
            self._encode_key(key)
        self._pending[key] = value

    def get(self, key: Any, default: Any = None) -> Any:
        value = self._pending.get(key, _ABSENT)
        if value is not _ABSENT:
            return default if value is _MISSING else value
        encoded_key = self._encode_key(key)
        if encoded_key in self._prepared:
            raw = self._prepared[encoded_key]
        else:
            raw = self.store.get(encoded_key)
        return default if raw is None else decode(raw)

    def delete(self, key: Any) -> None:
        self._encode_key(key)
        self._pending[key] = _MISSING

    def discard_unsaved(self, key: Any) -> None:
        """Forget the change to ``key`` made since the last prepare, for a key that was
        never prepared nor committed (a put and a delete that cancel out: nothing is
        written). For engine code that knows which keys those are."""
        self._pending.pop(key, None)

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        merged = self._merged_raw()
        pending = self._pending
        for raw_key, raw_value in merged.items():
            key = decode(raw_key)
            if key in pending or raw_value is None:
                continue
            yield key, decode(raw_value)
        for key, value in list(pending.items()):
            if value is not _MISSING:
                yield key, value

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def _merged_raw(self) -> dict[bytes, bytes | None]:
        merged: dict[bytes, bytes | None] = dict(self.store.items())
        merged.update(self._prepared)
        return merged

    # -- the three phases -------------------------------------------------------------

    def prepare_commit(self, txid: int) -> None:
        changes = dict(self._prepared)
        for key, value in self._pending.items():
            changes[self._encode_key(key)] = (
                None if value is _MISSING else self._encode_value(key, value)
            )
        self.store.prepare(txid, changes)
        self._prepared = changes
        self._pending = {}

    def commit(self, txid: int) -> None:
        self.store.commit(txid)
        self._prepared = {}

    def rollback(self) -> None:
        self.store.rollback()
        self._prepared = {}
        self._pending = {}

    def committed_txid(self) -> int | None:
        """The txid of the last commit, or None before the first."""
        return self.store.committed_txid()

    def close(self) -> None:
        """Close the store's connections (unprepared changes are dropped)."""
        self.store.close()

    # -- encoding ---------------------------------------------------------------------

    def _check(self, key: Any, value: Any) -> None:
        self._encode_key(key)
        self._encode_value(key, value)

    def _encode_key(self, key: Any) -> bytes:
        try:
            hash(key)
            return encode(key)
        except (StateSerializationError, TypeError) as error:
            raise StateSerializationError(
                f"{self.label}: key {key!r} cannot be stored: {error}"
            ) from None

    def _encode_value(self, key: Any, value: Any) -> bytes:
        try:
            return encode(value)
        except StateSerializationError as error:
            raise StateSerializationError(
                f"{self.label}: the value of key {key!r} cannot be stored: {error}"
            ) from None
