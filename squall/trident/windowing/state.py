"""Dropping committed window results (Storm's ``WindowsState``, ``WindowsStateFactory``
and ``WindowsStateUpdater``).

A window operation's results stay in its task's windows store until the batch that
emitted them commits, so a batch run again emits them again. The window operation's
stream is followed, in the same segment, by ``partition_persist(WindowsStateFactory(),
["_task_info"], WindowsStateUpdater(store_factory))``, which drops them at the commit.
"""

from __future__ import annotations

from typing import Any

from squall.model.context import TopologyContext
from squall.trident.operations import StateUpdater, TridentCollector
from squall.trident.state.base import State, StateFactory
from squall.trident.tuple import TridentTuple
from squall.trident.windowing.processor import (
    TRIGGER_FIELD_NAME,
    TriggerInfo,
    window_trigger_inprocess_key,
)
from squall.trident.windowing.store import WindowsStore, WindowsStoreFactory


class WindowsState(State):
    """Knows the txid being committed (Storm's ``WindowsState``)."""

    def __init__(self) -> None:
        self.current_txid: int | None = None

    def begin_commit(self, txid: int) -> None:
        self.current_txid = txid

    def commit(self, txid: int) -> None:
        """Nothing to do: the updater removed the results during the commit."""

    def get_current_tx_id(self) -> int | None:
        """The txid of the commit under way."""
        return self.current_txid


class WindowsStateFactory(StateFactory):
    """Makes a :class:`WindowsState` per task."""

    def make_state(
        self,
        conf: dict[str, Any],
        context: TopologyContext | None,
        partition_index: int,
        num_partitions: int,
    ) -> WindowsState:
        return WindowsState()

    def __repr__(self) -> str:
        return "WindowsStateFactory()"


class WindowsStateUpdater(StateUpdater):
    """At a batch's commit, drops the window results it emitted from the window task's
    store (the store ``window_store_factory`` gives in this task: the window
    operation's)."""

    def __init__(self, window_store_factory: WindowsStoreFactory) -> None:
        self.window_store_factory = window_store_factory
        self.store: WindowsStore | None = None

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        self.store = self.window_store_factory.create(conf)

    def update_state(
        self, state: WindowsState, tuples: list[TridentTuple], collector: TridentCollector
    ) -> None:
        """Remove each tuple's trigger result and the record of the batch's triggers.

        Raises:
            TypeError: a tuple's ``_task_info`` is not a ``TriggerInfo``.
        """
        assert self.store is not None, "WindowsStateUpdater was not prepared"
        txid = state.get_current_tx_id()
        keys: dict[str, None] = {}
        for tup in tuples:
            info = tup.get_value_by_field(TRIGGER_FIELD_NAME)
            if not isinstance(info, TriggerInfo):
                raise TypeError(
                    f"WindowsStateUpdater: expected a TriggerInfo in {TRIGGER_FIELD_NAME!r}, "
                    f"got {type(info).__name__}"
                )
            keys[info.generate_trigger_key()] = None
            keys[window_trigger_inprocess_key(info.window_task_id, txid or 0)] = None
        if keys:
            self.store.remove_all(list(keys))


__all__ = ["WindowsState", "WindowsStateFactory", "WindowsStateUpdater"]
