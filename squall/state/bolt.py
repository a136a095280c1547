"""``StatefulBolt``: a bolt whose state the engine saves and restores (Storm's
``IStatefulBolt``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from squall.model.components import Bolt

if TYPE_CHECKING:
    from squall.state.base import KeyValueState


class StatefulBolt(Bolt):
    """A bolt with a :class:`~squall.state.base.KeyValueState` that the checkpoint
    mechanism saves every ``topology.state.checkpoint.interval.ms`` and gives back after
    a restart.

    Lifecycle, per task: ``prepare`` (as any bolt), then ``init_state`` with the state
    as last committed (empty the first time), then ``execute`` for each tuple; no tuple
    reaches ``execute`` before ``init_state`` has returned. Checkpoint tuples never reach
    user code.

    Acking: anchor emits to the input and ack it once processed, as any reliable bolt.
    The engine holds back the ack of each input until the state holding its effect is
    committed, so a tuple whose effect could be lost in a crash is replayed by its
    spout. See ``docs/state.md`` for the guarantees.

    Where it runs: like a bolt (the task's worker thread locally, an executor on Spark).
    """

    def init_state(self, state: KeyValueState) -> None:
        """Receive the task's state. Runs once per task, after ``prepare`` and before
        the first ``execute``; the state is the last committed one (empty at the first
        run). Keep it: reads and writes go through it from then on.
        """

    def pre_prepare(self, txid: int) -> None:
        """Called just before the state is prepared for transaction ``txid`` (a hook
        for components built on stateful bolts; most bolts leave it alone)."""

    def pre_commit(self, txid: int) -> None:
        """Called just before the state prepared for ``txid`` is committed."""

    def pre_rollback(self) -> None:
        """Called just before the state's uncommitted changes are dropped."""
