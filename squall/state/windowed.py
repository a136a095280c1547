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
        """The stateful bolt that runs this windowed bolt (used by ``set_bolt``)."""
        if self._persistent:
            return PersistentWindowedBoltExecutor(self)
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
