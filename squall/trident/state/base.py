"""The state interfaces of Trident (Storm's ``State``, ``MapState``, ``IBackingMap``,
``StateFactory``) and the stored value wrappers; the errors of states
(:mod:`squall.runtime.state_errors`) are importable from here too.

Everything here is engine-neutral: states are made by a picklable factory wherever a
Trident partition runs (a local engine executor, a Spark executor in another process),
and are used by one task at a time.
"""

from __future__ import annotations

import copy
import enum
import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NamedTuple

from squall.model.context import TopologyContext

# The state errors live in a module every layer of states can import (squall.state,
# this package, the connectors' backends); they are re-exported here, where they were
# first defined.
from squall.runtime.state_errors import (
    NotInCommitError as NotInCommitError,
)
from squall.runtime.state_errors import (
    ReadOnlyStateError as ReadOnlyStateError,
)
from squall.runtime.state_errors import (
    StateConnectionError as StateConnectionError,
)
from squall.runtime.state_errors import (
    StateError as StateError,
)

#: The key of a global (ungrouped) aggregate: no group-by values.
GLOBAL_KEY: tuple[Any, ...] = ()

#: Computes a key's new value from its old one (``None`` when the key has no value yet).
Updater = Callable[[Any], Any]


class StateType(enum.Enum):
    """The fault-tolerance level of a state, matched to the spout that feeds it.

    ``NON_TRANSACTIONAL``: updates are applied as they come; a replayed batch is applied
    again (over-counts; at-least-once). ``TRANSACTIONAL``: the stored value carries the
    txid of the batch that last changed it; a batch whose txid is already stored is
    skipped (exactly-once when a batch is identical on replay). ``OPAQUE``: the stored
    value also keeps the value before that batch, so a replayed batch, even with
    different tuples, is recomputed from it (exactly-once with opaque spouts).
    """

    NON_TRANSACTIONAL = "non-transactional"
    TRANSACTIONAL = "transactional"
    OPAQUE = "opaque"


class StateLocality(enum.Enum):
    """Where the states of a factory can be used: what an engine needs to know to place
    the tasks that update or query them.

    ``SHARED``: every process that makes a state of the factory reaches the same data (a
    database server, read-only data the factory carries), so the tasks may run in any
    process. ``ONE_WRITER_FILE``: the states live in a file that admits one writer at a
    time (SQLite), on the machine of the process that made the topology; processes there
    share it, but tasks spread over processes would only wait for each other, so an
    engine keeps them in that process (on Spark, the driver). ``IN_PROCESS``: each
    process has its own store, so every task using the state must run in one process
    (on Spark, the driver).
    """

    SHARED = "shared"
    ONE_WRITER_FILE = "one-writer-file"
    IN_PROCESS = "in-process"


def locality_of(factory: object) -> StateLocality:
    """The locality of ``factory``'s states: what it declares, ``SHARED`` for a factory
    that is not a :class:`StateFactory` (any object with ``make_state``). Used where an
    engine places the tasks using a state (on the driver that submits the topology)."""
    return factory.locality if isinstance(factory, StateFactory) else StateLocality.SHARED


class TransactionalValue(NamedTuple):
    """A value stored by a transactional state: the txid of the batch that last changed
    it, and the value. Serialised as ``[txid, value]``."""

    txid: int
    value: Any


class OpaqueValue(NamedTuple):
    """A value stored by an opaque state: the txid of the batch that last changed it, the
    value after that batch (``curr``) and the value before it (``prev``). Serialised as
    ``[txid, curr, prev]``."""

    txid: int
    curr: Any
    prev: Any


def current_value(stored: Any) -> Any:
    """The user-visible value of a stored value (``value`` of a
    :class:`TransactionalValue`, ``curr`` of an :class:`OpaqueValue`, else itself)."""
    if isinstance(stored, TransactionalValue):
        return stored.value
    if isinstance(stored, OpaqueValue):
        return stored.curr
    return stored


_IMMUTABLE_TYPES = frozenset({type(None), bool, int, float, complex, str, bytes})


def private_copy(value: Any) -> Any:
    """A deep copy of ``value`` that shares nothing mutable with it (immutable scalars
    are returned as they are, so copying counts is free)."""
    if type(value) in _IMMUTABLE_TYPES:
        return value
    if isinstance(value, TransactionalValue):
        return TransactionalValue(value.txid, private_copy(value.value))
    if isinstance(value, OpaqueValue):
        return OpaqueValue(value.txid, private_copy(value.curr), private_copy(value.prev))
    return copy.deepcopy(value)


def as_key(key: Any) -> tuple[Any, ...]:
    """``key`` as a state key: a tuple of group-by values (lists are converted)."""
    if isinstance(key, tuple):
        return key
    if isinstance(key, list):
        return tuple(key)
    raise TypeError(
        f"a state key is a tuple of group-by values, e.g. ('cow',) or () for a global "
        f"aggregate; got {key!r}"
    )


def as_keys(keys: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Every key of ``keys`` as a tuple (see :func:`as_key`)."""
    return [as_key(key) for key in keys]


def as_txid(txid: Any) -> int:
    """``txid`` as an ``int`` (any integer type is accepted, ``bool`` is not)."""
    if isinstance(txid, bool):
        raise TypeError(f"a transaction id is an integer, got {txid!r}")
    try:
        return operator.index(txid)
    except TypeError:
        raise TypeError(f"a transaction id is an integer, got {txid!r}") from None


class State(ABC):
    """Storm's ``State``: something updated batch by batch, in txid order.

    Runs in the task that owns the state (one state object per Trident partition, made by
    a :class:`StateFactory` in that task's process). The engine brackets every batch's
    updates with ``begin_commit(txid)`` and ``commit(txid)``, batches in increasing txid
    order; a batch that fails is begun again (same txid) without having been committed.
    """

    @abstractmethod
    def begin_commit(self, txid: int) -> None:
        """Start applying the updates of batch ``txid``.

        Runs in the owning task before the batch's first update, once per attempt of the
        batch. Beginning again without a commit (a replayed batch) is allowed.
        """

    @abstractmethod
    def commit(self, txid: int) -> None:
        """Finish applying the updates of batch ``txid``.

        Runs in the owning task after the batch's last update, once per successful batch.
        """

    def close(self) -> None:
        """Release the state's resources (connections). Runs in the owning task when the
        task shuts down; not guaranteed to be called (a killed process skips it)."""


class BackingMap(ABC):
    """Storm's ``IBackingMap``: a key-value store of the values a map state stores.

    Keys are tuples of group-by values (``("cow",)``; ``()`` for a global aggregate).
    Values are what the map state stores: :class:`TransactionalValue`,
    :class:`OpaqueValue` or plain values. Implementations hand out values that share
    nothing with what they store (they serialise or copy), so callers may mutate them.
    """

    @abstractmethod
    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any | None]:
        """The stored value of each key, ``None`` where a key has none.

        Runs in the owning task, once or more per batch. Same length and order as
        ``keys``.
        """

    @abstractmethod
    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        """Store ``values[i]`` at ``keys[i]``.

        Runs in the owning task within a commit. A durable backend writes all of them or
        none (one transaction), and they are stored when it returns.
        """

    def close(self) -> None:
        """Release connections. Not guaranteed to be called."""


class MapState(State):
    """Storm's ``MapState``: a state holding one value per key, updated per batch.

    ``multi_update`` and ``multi_put`` are only allowed between ``begin_commit(txid)``
    and ``commit(txid)``; ``multi_get`` is allowed any time (a state query reads between
    commits).
    """

    @abstractmethod
    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any | None]:
        """The current value of each key, ``None`` where a key has none.

        Runs in the owning task (state queries, ``MapGet``). Same length and order as
        ``keys``.
        """

    @abstractmethod
    def multi_update(self, keys: list[tuple[Any, ...]], updaters: list[Updater]) -> list[Any]:
        """Replace each key's value by ``updaters[i](old value or None)``; return the new
        values (same order as ``keys``).

        Runs in the owning task within a commit. How a replayed batch is treated depends
        on the state type (see the implementations).

        Raises:
            NotInCommitError: outside ``begin_commit`` ... ``commit``.
        """

    @abstractmethod
    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        """Set each key's value to ``values[i]``.

        Runs in the owning task within a commit.

        Raises:
            NotInCommitError: outside ``begin_commit`` ... ``commit``.
        """


class StateFactory(ABC):
    """Makes the state of each partition (Storm's ``StateFactory``).

    A factory is part of the topology declaration: it is picklable and travels to every
    process that runs a partition of the state (Spark executors included). The states it
    makes need not be picklable.

    ``locality`` says whether those processes see the same data (see
    :class:`StateLocality`): shared unless a factory says otherwise.
    """

    locality: ClassVar[StateLocality] = StateLocality.SHARED

    @abstractmethod
    def make_state(
        self,
        conf: dict[str, Any],
        context: TopologyContext | None,
        partition_index: int,
        num_partitions: int,
    ) -> State:
        """Make the state of partition ``partition_index`` of ``num_partitions`` (a
        :class:`MapState` for ``persistent_aggregate``; any :class:`State` its
        ``StateUpdater`` knows for ``partition_persist``).

        Runs in the process of the task that owns the partition, once per task (an
        engine may make it again after a restart). ``context`` is the task's topology
        context, or ``None`` where the engine has none.
        """
