"""Map states over a :class:`BackingMap`: Storm's ``NonTransactionalMap``,
``TransactionalMap`` and ``OpaqueMap``, plus a read-only map for static lookups.

Each map state runs in the task that owns its partition. The engine brackets a batch's
updates with ``begin_commit(txid)`` ... ``commit(txid)`` and applies batches in txid
order; under that contract transactional and opaque maps apply every batch exactly once,
however often it is replayed.

Several ``multi_update`` calls within one commit accumulate (Storm's
``CachedBatchReadsMap``): a key this state already wrote during the current commit is
updated again rather than treated as a replay. Exactly-once therefore also requires that
a batch's writes to a key are made by one state object (a Trident partition) and that a
failed attempt's partial writes are replayed by the same calls, which is how Trident
applies a batch (one ``multi_update`` per partition and batch).

Updaters receive values they may mutate in place: backing maps hand out copies, and the
opaque map copies the value it also keeps as ``prev``.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from squall.runtime.state_errors import NotInCommitError, ReadOnlyStateError, StateError
from squall.trident.state.base import (
    BackingMap,
    MapState,
    OpaqueValue,
    StateType,
    TransactionalValue,
    Updater,
    as_keys,
    as_txid,
    current_value,
    private_copy,
)


class _CommittingMap(MapState):
    """What the three map states share: the commit bracket, the keys written in the
    current commit, and the read-update-write loop of ``multi_update``."""

    def __init__(self, backing: BackingMap) -> None:
        #: The map the stored values live in.
        self.backing = backing
        self._txid: int | None = None
        self._written: set[tuple[Any, ...]] = set()

    @property
    def current_txid(self) -> int | None:
        """The txid being committed, or ``None`` between commits."""
        return self._txid

    def begin_commit(self, txid: int) -> None:
        """Start batch ``txid``: later writes are stamped with it.

        Runs in the owning task before each attempt of the batch. Forgets which keys an
        earlier, uncommitted attempt wrote, so a replay is recognised as one.
        """
        self._txid = as_txid(txid)
        self._written = set()

    def commit(self, txid: int) -> None:
        """Finish batch ``txid``. The backing map already holds its writes (each
        ``multi_update`` writes through), so nothing is flushed here.

        Raises:
            StateError: no ``begin_commit`` is open, or it was for another txid.
        """
        txid = as_txid(txid)
        if self._txid is None:
            raise StateError(f"{type(self).__name__}.commit({txid}) without begin_commit({txid})")
        if txid != self._txid:
            raise StateError(
                f"{type(self).__name__}.commit({txid}) does not match the open "
                f"begin_commit({self._txid})"
            )
        self._txid = None
        self._written = set()

    def close(self) -> None:
        """Close the backing map. Runs in the owning task at shutdown, if at all."""
        self.backing.close()

    def _require_commit(self, operation: str) -> int:
        if self._txid is None:
            raise NotInCommitError(
                f"{type(self).__name__}.{operation} outside a commit: state writes are only "
                "allowed between begin_commit(txid) and commit(txid)"
            )
        return self._txid

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any | None]:
        """The value of each key (``None`` where it has none). One backing read.

        Runs in the owning task, in or out of a commit.
        """
        keys = as_keys(keys)
        if not keys:
            return []
        stored_values = self.backing.multi_get(keys)
        return [
            None if stored is None else self._visible(key, stored)
            for key, stored in zip(keys, stored_values, strict=True)
        ]

    def multi_update(self, keys: list[tuple[Any, ...]], updaters: list[Updater]) -> list[Any]:
        """Update each key with its updater and write the changed values in one
        ``multi_put``; return the new values in the order of ``keys``.

        Runs in the owning task within a commit. One backing read for the distinct keys,
        one backing write. A key repeated in ``keys`` is updated in turn, each updater
        seeing the previous one's result.

        Raises:
            NotInCommitError: outside ``begin_commit`` ... ``commit``.
            ValueError: ``keys`` and ``updaters`` differ in length.
        """
        txid = self._require_commit("multi_update")
        keys = as_keys(keys)
        if len(keys) != len(updaters):
            raise ValueError(f"{len(keys)} keys but {len(updaters)} updaters")
        if not keys:
            return []
        distinct = list(dict.fromkeys(keys))
        fetched = dict(zip(distinct, self.backing.multi_get(distinct), strict=True))
        pending: dict[tuple[Any, ...], Any] = {}
        results: list[Any] = []
        for key, updater in zip(keys, updaters, strict=True):
            if key in pending:
                # Updated earlier in this call: a copy, as the caller gets the original.
                stored, written = private_copy(pending[key]), True
            else:
                stored, written = fetched[key], key in self._written
            changed, new_stored, result = self._update(key, txid, stored, written, updater)
            if changed:
                pending[key] = new_stored
            results.append(result)
        if pending:
            self.backing.multi_put(list(pending), list(pending.values()))
            self._written.update(pending)
        return results

    @abstractmethod
    def _visible(self, key: tuple[Any, ...], stored: Any) -> Any:
        """The value a reader sees of the stored value ``stored`` of ``key``."""

    @abstractmethod
    def _update(
        self, key: tuple[Any, ...], txid: int, stored: Any, written: bool, updater: Updater
    ) -> tuple[bool, Any, Any]:
        """Apply ``updater`` to one key: (changed, new stored value, new value)."""


class NonTransactionalMap(_CommittingMap):
    """Plain values, updated every time (Storm's ``NonTransactionalMap``).

    Guarantee: at-least-once. A batch that is replayed after it was written is applied
    again, so counts over-count under replays. The txid of the commit is required (writes
    only within a commit) but not stored.
    """

    def _visible(self, key: tuple[Any, ...], stored: Any) -> Any:
        return stored

    def _update(
        self, key: tuple[Any, ...], txid: int, stored: Any, written: bool, updater: Updater
    ) -> tuple[bool, Any, Any]:
        new = updater(stored)
        return True, new, new

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        """Store the values as they are. Runs in the owning task within a commit."""
        self._require_commit("multi_put")
        written = _last_value_per_key(keys, values)
        if written:
            self.backing.multi_put(list(written), list(written.values()))
            self._written.update(written)


class TransactionalMap(_CommittingMap):
    """Values stored as :class:`TransactionalValue` ``(txid, value)`` (Storm's
    ``TransactionalMap``), for transactional spouts (a batch is identical on replay).

    During the commit of batch ``T``, a key whose stored txid is ``T`` was already updated
    by this very batch before a replay: its value is returned unchanged and its updater is
    not called. Any other key gets ``updater(value or None)`` stored as ``(T, new)``.
    Guarantee: exactly-once, given that batches are applied in txid order and a replayed
    batch holds the same tuples.
    """

    def _visible(self, key: tuple[Any, ...], stored: Any) -> Any:
        return _transactional(key, stored).value

    def _update(
        self, key: tuple[Any, ...], txid: int, stored: Any, written: bool, updater: Updater
    ) -> tuple[bool, Any, Any]:
        if stored is None:
            new = updater(None)
            return True, TransactionalValue(txid, new), new
        stored = _transactional(key, stored)
        if stored.txid == txid and not written:
            return False, stored, stored.value  # this batch is already applied
        new = updater(stored.value)
        return True, TransactionalValue(txid, new), new

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        """Store each value as ``(txid, value)``. Runs in the owning task within a
        commit."""
        txid = self._require_commit("multi_put")
        written = _last_value_per_key(keys, values)
        if written:
            self.backing.multi_put(
                list(written), [TransactionalValue(txid, value) for value in written.values()]
            )
            self._written.update(written)


class OpaqueMap(_CommittingMap):
    """Values stored as :class:`OpaqueValue` ``(txid, curr, prev)`` (Storm's
    ``OpaqueMap``), for opaque spouts (a replayed batch may hold different tuples).

    During the commit of batch ``T``: a key whose stored txid is ``T`` was written by an
    earlier attempt of this batch, so that attempt is discarded and the value recomputed
    from ``prev``: ``(T, updater(prev), prev)``. A key with an older txid gets
    ``(T, updater(curr), curr)``. A stored txid newer than ``T`` means batches arrived out
    of order and raises :class:`StateError`. Guarantee: exactly-once (the value reflects
    the last attempt of every batch once), given that batches are applied in txid order.

    Reads: between commits, and for keys this commit already wrote, ``multi_get``
    returns ``curr``; during the commit of ``T``, a key stored at ``T`` by an earlier
    attempt reads as ``prev`` (the value before batch ``T``).
    """

    def _visible(self, key: tuple[Any, ...], stored: Any) -> Any:
        stored = _opaque(key, stored)
        txid = self._txid
        if txid is None or key in self._written or stored.txid < txid:
            return stored.curr
        if stored.txid == txid:
            return stored.prev
        raise _behind(key, txid, stored.txid)

    def _update(
        self, key: tuple[Any, ...], txid: int, stored: Any, written: bool, updater: Updater
    ) -> tuple[bool, Any, Any]:
        if stored is None:
            new = updater(None)
            return True, OpaqueValue(txid, new, None), new
        stored = _opaque(key, stored)
        if written:  # a later update of this commit: builds on this commit's value
            base, prev = stored.curr, stored.prev
        elif stored.txid < txid:
            base, prev = stored.curr, stored.curr
        elif stored.txid == txid:  # a replay: the earlier attempt is discarded
            base, prev = stored.prev, stored.prev
        else:
            raise _behind(key, txid, stored.txid)
        # The updater gets its own copy: it may mutate it, and ``prev`` must not change.
        new = updater(private_copy(base))
        return True, OpaqueValue(txid, new, prev), new

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        """Set each value as an update (Storm's replace updater), so ``prev`` is kept
        as for ``multi_update``. Runs in the owning task within a commit."""
        self._require_commit("multi_put")
        written = _last_value_per_key(keys, values)
        self.multi_update(list(written), [_Replace(value) for value in written.values()])


class ReadOnlyMapState(MapState):
    """A map state that only answers ``multi_get`` (Storm's ``ReadOnlyMapState``), for
    static lookup states (``TridentTopology.new_static_state``) queried with ``MapGet``.

    Stored :class:`TransactionalValue`/:class:`OpaqueValue` are unwrapped to their current
    value, so it can also read a map that a transactional or opaque state writes.
    ``begin_commit``/``commit`` are accepted and do nothing; writes raise
    :class:`ReadOnlyStateError`.
    """

    def __init__(self, backing: BackingMap) -> None:
        #: The map the values are read from.
        self.backing = backing

    def begin_commit(self, txid: int) -> None:
        """Nothing to do: a read-only state has no writes to bracket."""

    def commit(self, txid: int) -> None:
        """Nothing to do: a read-only state has no writes to bracket."""

    def close(self) -> None:
        """Close the backing map. Runs in the owning task at shutdown, if at all."""
        self.backing.close()

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any | None]:
        """The value of each key, ``None`` where it has none. Runs in the querying
        task; one backing read."""
        keys = as_keys(keys)
        if not keys:
            return []
        return [current_value(stored) for stored in self.backing.multi_get(keys)]

    def multi_update(self, keys: list[tuple[Any, ...]], updaters: list[Updater]) -> list[Any]:
        """Always raises :class:`ReadOnlyStateError`."""
        raise ReadOnlyStateError("a read-only map state cannot be updated (multi_update)")

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        """Always raises :class:`ReadOnlyStateError`."""
        raise ReadOnlyStateError("a read-only map state cannot be written (multi_put)")


_MAP_CLASSES: dict[StateType, type[_CommittingMap]] = {
    StateType.NON_TRANSACTIONAL: NonTransactionalMap,
    StateType.TRANSACTIONAL: TransactionalMap,
    StateType.OPAQUE: OpaqueMap,
}


def map_state_for(backing: BackingMap, state_type: StateType) -> MapState:
    """The map state of ``state_type`` over ``backing`` (what factories return)."""
    if not isinstance(state_type, StateType):
        raise TypeError(f"state_type must be a StateType, got {state_type!r}")
    return _MAP_CLASSES[state_type](backing)


class _Replace:
    """An updater that ignores the old value (Storm's ``ReplaceUpdater``)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self, old: Any) -> Any:
        return self.value


def _last_value_per_key(keys: list[tuple[Any, ...]], values: list[Any]) -> dict[Any, Any]:
    keys = as_keys(keys)
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys but {len(values)} values")
    return dict(zip(keys, values, strict=True))


def _transactional(key: tuple[Any, ...], stored: Any) -> TransactionalValue:
    if not isinstance(stored, TransactionalValue):
        raise StateError(
            f"the stored value of {key!r} is not a TransactionalValue: {stored!r} "
            "(was it written by a state of another type?)"
        )
    return stored


def _opaque(key: tuple[Any, ...], stored: Any) -> OpaqueValue:
    if not isinstance(stored, OpaqueValue):
        raise StateError(
            f"the stored value of {key!r} is not an OpaqueValue: {stored!r} "
            "(was it written by a state of another type?)"
        )
    return stored


def _behind(key: tuple[Any, ...], txid: int, stored_txid: int) -> StateError:
    return StateError(
        f"batch {txid} is behind the state: {key!r} was already written by batch "
        f"{stored_txid}. State updates must arrive in txid order; was this state reused by "
        "a topology whose transaction ids started again?"
    )
