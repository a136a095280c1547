"""Barrier alignment: a bolt task acts on a checkpoint tuple once it has arrived from
every task that sends it tuples.

Each upstream task passes a checkpoint tuple on behind the tuples it emitted before
it, on the same queue, so when the tuple has arrived from every sender, everything
emitted before the checkpoint has been received. While a ``PREPARE`` is aligning, the
tuples of senders whose checkpoint tuple has arrived already are held back (they come
after the cut) and executed once the task has prepared.

Runs on the bolt task's thread.
"""

from __future__ import annotations

from collections import deque

from squall.model.tuple import Tuple


class BarrierAlignment:
    """The checkpoint tuples of the current round, and the data tuples held back.

    Args:
        senders: the task ids that send this task checkpoint tuples.
    """

    def __init__(self, senders: frozenset[int]) -> None:
        self.senders = senders
        #: The round being aligned (the checkpoint tuple's ``seq``), 0 before the first.
        self.seq = 0
        #: Sender task -> its checkpoint tuple of this round.
        self.arrived: dict[int, Tuple] = {}
        #: Whether data from senders in ``arrived`` is held back (a PREPARE).
        self.holding = False
        #: Data tuples held back, in arrival order.
        self.held: deque[Tuple] = deque()

    def blocks(self, tup: Tuple) -> bool:
        """Whether ``tup`` (a data tuple) must wait until the round completes."""
        return self.holding and tup.source_task in self.arrived

    def hold(self, tup: Tuple) -> None:
        """Keep ``tup`` until :meth:`release`."""
        self.held.append(tup)

    def starts_round(self, tup: Tuple) -> bool:
        """Whether the checkpoint tuple ``tup`` opens a new round (the tuples held back
        for an unfinished older one must then be executed first: they came before the
        new checkpoint)."""
        return bool(tup[2] > self.seq)

    def arrive(self, tup: Tuple, holds: bool) -> tuple[list[Tuple], list[Tuple]]:
        """Record the checkpoint tuple ``tup`` (its ``seq`` is ``tup[2]``).

        Args:
            tup: a checkpoint tuple.
            holds: whether this round holds back data (a ``PREPARE``).

        Returns:
            ``(complete, abandoned)``: the round's checkpoint tuples once every sender's
            has arrived (else empty), and the checkpoint tuples of an older round this
            one replaced or of an old round arriving late (their trees have failed
            already: acknowledge them and do nothing else).
        """
        seq = tup[2]
        if seq < self.seq:
            return [], [tup]
        abandoned: list[Tuple] = []
        if seq > self.seq:
            abandoned = list(self.arrived.values())
            self.arrived = {}
            self.seq = seq
            self.holding = holds
        self.arrived[tup.source_task] = tup
        if not self.senders.issubset(self.arrived):
            return [], abandoned
        complete = list(self.arrived.values())
        self.arrived = {}
        self.holding = False
        return complete, abandoned

    def release(self) -> list[Tuple]:
        """The data tuples held back, to execute now (in arrival order)."""
        held = list(self.held)
        self.held.clear()
        return held
