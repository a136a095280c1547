"""``StatefulWindowedBolt``: a windowed bolt with a ``KeyValueState`` the engine
checkpoints (Storm's ``IStatefulWindowedBolt``).

The windows work as for any :class:`~squall.windowing.WindowedBolt`; the bolt's own
state (totals over windows, say) is saved with every checkpoint and handed back by
``init_state`` after a restart. By default the window contents are not part of the
state: a tuple still held in a window at a crash is replayed by its spout (at least
once), and the windows are built again from the replays. ``with_persistence()`` saves
them too (see :mod:`squall.state.persistent_windows`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from squall.model.errors import InvalidTopologyError
from squall.state.bolt import StatefulBolt
from squall.state.persistent_windows import PersistentWindows
from squall.windowing.bolt import WindowedBolt
from squall.windowing.executor import WindowedBoltExecutor

if TYPE_CHECKING:
    from squall.model.components import Bolt
    from squall.state.base import KeyValueState


class StatefulWindowedBolt(WindowedBolt):
    """A windowed bolt with a checkpointed :class:`~squall.state.base.KeyValueState`.

    Configure the window as for a ``WindowedBolt`` and implement ``execute(window)``;
    ``init_state(state)`` runs once per task after ``prepare`` and before the first
    window, with the state as last committed. See ``docs/state.md``.
    """

    _persistent = False
    _message_id_field: str | None = None
    _max_events_in_memory: int | None = None

    def with_message_id_field(self, field: str) -> StatefulWindowedBolt:
        """Name the input field holding each tuple's message id, an integer increasing
        per source task and stream (Storm's ``withMessageIdField``): after a restart,
        replayed tuples already out of every window are dropped and those a window
        evaluated go back in the windows without firing them again (see
        :mod:`squall.state.window_progress`). Persistent windows restore their
        contents from the state and do not need it.

        Raises:
            InvalidTopologyError: ``field`` is not a non-empty string.
        """
        if not isinstance(field, str) or not field:
            raise InvalidTopologyError(
                f"{type(self).__name__}.with_message_id_field: the field must be a "
                f"non-empty string, got {field!r}"
            )
        self._message_id_field = field
        return self

    def with_max_events_in_memory(self, max_events: int) -> StatefulWindowedBolt:
        """Keep at most ``max_events`` window tuples' values in memory (Storm's
        ``withMaxEventsInMemory``; with ``with_persistence()``). The windows still hold
        any number of tuples and fire the same windows: the values of the
        ``max_events`` tuples saved last stay in memory, the others are read back from
        the window state when a window fires (see
        :mod:`squall.state.persistent_windows`).

        Raises:
            InvalidTopologyError: ``max_events`` is not a positive int.
        """
        if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1:
            raise InvalidTopologyError(
                f"{type(self).__name__}.with_max_events_in_memory: the number of events "
                f"must be a positive int, got {max_events!r}"
            )
        self._max_events_in_memory = max_events
        return self

    @property
    def message_id_field(self) -> str | None:
        """The field ``with_message_id_field`` named, or None."""
        return self._message_id_field

    @property
    def max_events_in_memory(self) -> int | None:
        """What ``with_max_events_in_memory`` set, or None."""
        return self._max_events_in_memory

    def with_persistence(self) -> StatefulWindowedBolt:
        """Keep the window contents in the state too (Storm's persistent windowing): a
        restarted topology fires the same windows, window tuples are acked once saved
        (so the window span is not bounded by the message timeout), and emits are not
        anchored. See ``docs/state.md``."""
        self._persistent = True
        return self

    @property
    def persistent(self) -> bool:
        """Whether ``with_persistence()`` was called."""
        return self._persistent

    def init_state(self, state: KeyValueState) -> None:
        """Receive the task's state (after ``prepare``, before any window)."""

    def pre_prepare(self, txid: int) -> None:
        """Called just before the state is prepared for ``txid``."""

    def pre_commit(self, txid: int) -> None:
        """Called just before the state prepared for ``txid`` is committed."""

    def pre_rollback(self) -> None:
        """Called just before the state's uncommitted changes are dropped."""

    def to_bolt(self) -> Bolt:
        """The stateful bolt that runs this windowed bolt (used by ``set_bolt``).

        Raises:
            InvalidTopologyError: ``with_max_events_in_memory`` without
                ``with_persistence``.
        """
        limit = self._max_events_in_memory
        if limit is not None and not self._persistent:
            raise InvalidTopologyError(
                f"{type(self).__name__}: with_max_events_in_memory({limit}) bounds "
                "persistent windows: call with_persistence() too, or remove it"
            )
        if self._persistent:
            executor = PersistentWindowedBoltExecutor(self)
            executor.max_events_in_memory = limit
            return executor
        if self._message_id_field is not None:
            from squall.state.window_progress import MessageIdWindowedBoltExecutor

            return MessageIdWindowedBoltExecutor(self)
        return StatefulWindowedBoltExecutor(self)


class StatefulWindowedBoltExecutor(WindowedBoltExecutor, StatefulBolt):
    """Runs a :class:`StatefulWindowedBolt`: a windowed bolt executor that is itself a
    stateful bolt, so the engine checkpoints it like any (see
    :class:`~squall.windowing.executor.WindowedBoltExecutor`)."""

    bolt: StatefulWindowedBolt

    def init_state(self, state: KeyValueState) -> None:
        """Hand the state to the windowed bolt."""
        self.bolt.init_state(state)

    def pre_prepare(self, txid: int) -> None:
        self.bolt.pre_prepare(txid)

    def pre_commit(self, txid: int) -> None:
        self.bolt.pre_commit(txid)

    def pre_rollback(self) -> None:
        self.bolt.pre_rollback()


class PersistentWindowedBoltExecutor(PersistentWindows, StatefulWindowedBoltExecutor):
    """Runs a :class:`StatefulWindowedBolt` made with ``with_persistence()``: its
    windows are saved with every checkpoint (see :mod:`squall.state.persistent_windows`)."""
