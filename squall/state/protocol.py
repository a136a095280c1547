"""The checkpoint protocol's transaction record and its transitions (Storm's
``CheckPointState``), as pure functions.

The checkpoint spout keeps one record, ``(txid, phase)``, in the state provider and
moves it through these phases::

                  ROLLBACK(t)
              <----------------
    COMMITTED(t-1) ----------> PREPARING(t) ----------> COMMITTING(t) ----------> COMMITTED(t)
                   PREPARE(t)                COMMIT(t)

Normal flow: every interval, ``PREPARE`` of the next txid; once every bolt has prepared
(the checkpoint tuple's tree is acked), ``COMMIT``; once every bolt has committed, the
transaction is recorded as committed. A ``PREPARE`` that fails (a bolt failed the
checkpoint tuple or it timed out) is undone by ``ROLLBACK``; a failed ``COMMIT`` or
``ROLLBACK`` is sent again (both are idempotent).

Recovery, when the topology starts: a transaction left ``PREPARING`` is rolled back
(some bolts may not have prepared it), one left ``COMMITTING`` is committed (some bolts
may have committed it already); then ``INITSTATE`` hands every stateful bolt its state.
Any failed action is followed by the same recovery, ending with ``INITSTATE``: a task
started again in a new worker process waits for its state (it fails every ``PREPARE``
until then), and a task that has its state ignores another ``INITSTATE``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Phase(str, Enum):
    """Where the last transaction stands."""

    COMMITTED = "COMMITTED"
    PREPARING = "PREPARING"
    COMMITTING = "COMMITTING"


class Action(str, Enum):
    """What a checkpoint tuple asks every bolt to do."""

    PREPARE = "PREPARE"
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    INITSTATE = "INITSTATE"


@dataclass(frozen=True)
class Record:
    """The checkpoint spout's record: the last transaction and its phase."""

    txid: int
    phase: Phase

    @classmethod
    def initial(cls) -> Record:
        """The record of a topology that never checkpointed: txid 0, committed."""
        return cls(0, Phase.COMMITTED)

    def recovery_action(self) -> Action:
        """The first action at start: settle an unfinished transaction, else hand out
        the states."""
        if self.phase is Phase.PREPARING:
            return Action.ROLLBACK
        if self.phase is Phase.COMMITTING:
            return Action.COMMIT
        return Action.INITSTATE

    def before(self, action: Action) -> Record:
        """The record to save before a tuple of ``action`` is emitted (a crash after the
        save and before the tuple's tree completes recovers from it)."""
        if action is Action.PREPARE:
            return Record(self.txid + 1, Phase.PREPARING)
        return self

    def after(self, action: Action) -> Record:
        """The record once every bolt has done ``action``."""
        if action is Action.PREPARE:
            return Record(self.txid, Phase.COMMITTING)
        if action is Action.COMMIT:
            return Record(self.txid, Phase.COMMITTED)
        if action is Action.ROLLBACK:
            return Record(self.txid - 1, Phase.COMMITTED) if self.phase is Phase.PREPARING else self
        return self

    def to_value(self) -> list[object]:
        """The stored form."""
        return [self.txid, self.phase.value]

    @classmethod
    def from_value(cls, value: object) -> Record:
        """The record from its stored form.

        Raises:
            ValueError: ``value`` is not a stored record.
        """
        if (
            not isinstance(value, list)
            or len(value) != 2
            or type(value[0]) is not int
            or value[1] not in Phase._value2member_map_
        ):
            raise ValueError(f"not a checkpoint record: {value!r}")
        return cls(value[0], Phase(value[1]))
