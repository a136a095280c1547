"""What the engine-neutral runners know of the checkpoint protocol of stateful bolts:
the stream's name and the hook a spout task uses (implemented in
:mod:`squall.state.spouts`)."""

from __future__ import annotations

from typing import Protocol

from squall.model.tuple import Tuple

#: The stream of checkpoint tuples (``[txid, action, seq]``).
CHECKPOINT_STREAM = "$checkpoint"


class SpoutCheckpointing(Protocol):
    """A spout task's part in the checkpoint protocol, called on the task's thread."""

    @property
    def initialized(self) -> bool:
        """Whether recovery is over: the spout may emit (``next_tuple`` is not called
        before)."""
        ...

    def start(self) -> None:
        """Connect to the state provider (after the spout's ``open``)."""
        ...

    def on_checkpoint(self, tup: Tuple) -> None:
        """Do the checkpoint tuple's action and pass it on behind what the spout
        emitted so far."""
        ...

    def close(self) -> None:
        """Release the task's connection to the state provider."""
        ...
