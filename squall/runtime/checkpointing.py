"""What the engine-neutral runners know of the checkpoint protocol of stateful bolts:
the stream's name and the hook a spout task uses (implemented in
:mod:`squall.state.spouts`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

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


@runtime_checkable
class BoltCheckpointing(Protocol):
    """A bolt task's component that takes part in the checkpoint protocol (see
    :mod:`squall.state.executors`), for which the runner keeps its basic-bolt fast path:
    it executes the wrapped basic bolt itself and hands the component only what needs
    it (checkpoint tuples, tuples while it holds some back, failures). Called on the
    task's thread."""

    #: The user's basic bolt the component runs, or None (the runner then calls the
    #: component's own ``execute`` for every tuple).
    basic_bolt: Any

    @property
    def holding(self) -> bool:
        """Whether data tuples may have to wait (not ready yet, or a checkpoint is
        being aligned): every tuple then goes to :meth:`take`."""
        ...

    def take(self, tup: Tuple) -> None:
        """Handle a checkpoint tuple, or a data tuple while :attr:`holding`."""
        ...

    def failed(self, tup: Tuple) -> None:
        """The engine failed ``tup`` (its execute raised)."""
        ...

    def execute_inputs(
        self,
        popleft: Callable[[], Tuple],
        count: int,
        meter: Any,
        stop_at: int,
        on_error: Callable[[Tuple, Exception], None],
    ) -> int:
        """For a component without a basic bolt: execute up to ``count`` tuples taken
        with ``popleft``, stopping before an execute once ``meter.transferred`` reaches
        ``stop_at`` (when a meter is given); a tuple whose execute raised goes to
        ``on_error`` (which fails it). Returns how many tuples were taken."""
        ...
