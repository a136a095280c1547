"""Transaction attempts and the status of a transaction at its coordinator."""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class TransactionAttempt:
    """One attempt at processing transaction ``transaction_id``.

    Every tuple of a transactional batch carries its attempt as its first value. A
    batch that fails is replayed under the same transaction id with a new attempt id, so
    state updates key on ``transaction_id`` and per-attempt bookkeeping on the attempt.
    """

    transaction_id: int
    attempt_id: int

    @property
    def txid(self) -> int:
        """Short for ``transaction_id``."""
        return self.transaction_id

    def __repr__(self) -> str:
        return f"TransactionAttempt(txid={self.transaction_id}, attempt={self.attempt_id:#x})"


class AttemptStatus(enum.Enum):
    """Where a transaction stands at the coordinator (an explicit state machine).

    ``PROCESSING`` -> ``PROCESSED`` when its batch tree is acked; ``PROCESSED`` ->
    ``COMMITTING`` when every earlier transaction has committed; ``COMMITTING`` ends
    with the commit tree acked (the transaction is then forgotten). A failure in either
    phase drops the transaction and every later one: they are replayed with new attempts.
    """

    PROCESSING = "processing"
    PROCESSED = "processed"
    COMMITTING = "committing"

    def can_become(self, status: AttemptStatus) -> bool:
        """Whether the transition ``self -> status`` is allowed."""
        return (self, status) in _TRANSITIONS


_TRANSITIONS = {
    (AttemptStatus.PROCESSING, AttemptStatus.PROCESSED),
    (AttemptStatus.PROCESSED, AttemptStatus.COMMITTING),
}
