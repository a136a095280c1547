"""The collectors components emit, ack and fail through: the interfaces.

A spout gets a :class:`SpoutOutputCollector` in ``open``, a bolt an
:class:`OutputCollector` in ``prepare``, a basic bolt a :class:`BasicOutputCollector`
with each ``execute``. Every engine passes in its own implementation of these classes
(``isinstance(collector, OutputCollector)`` holds for what a bolt receives); components
and the wrappers that adapt them (windowed and stateful bolts) depend only on these
interfaces.

A collector belongs to one task and is used only from that task's thread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from squall.model.tuple import DEFAULT_STREAM, Tuple

Anchors = Tuple | Sequence[Tuple] | None
"""What a bolt's emit is anchored to: one input tuple, several, or none."""


class OutputCollector(ABC):
    """A bolt's collector: emit anchored tuples, ack or fail inputs.

    Storm's semantics: an emit anchored to inputs extends their tuple trees; every input
    must be acked or failed exactly once, or its spout tuple times out.
    """

    __slots__ = ()

    @abstractmethod
    def emit(
        self,
        values: Sequence[Any],
        anchors: Anchors = None,
        stream: str = DEFAULT_STREAM,
    ) -> list[int]:
        """Emit ``values`` on ``stream``, anchored to ``anchors`` (a Tuple or a list).

        Returns the ids of the tasks the tuple was sent to.

        Raises:
            ValueError: the stream is not declared, is direct, or the number of values
                differs from its fields.
        """

    @abstractmethod
    def emit_direct(
        self,
        task_id: int,
        values: Sequence[Any],
        anchors: Anchors = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """Emit ``values`` to task ``task_id`` on direct stream ``stream``.

        Raises:
            ValueError: the stream is not direct, or ``task_id`` does not subscribe to it.
        """

    @abstractmethod
    def ack(self, tup: Tuple) -> None:
        """Mark ``tup`` processed. Every input must be acked or failed exactly once."""

    @abstractmethod
    def fail(self, tup: Tuple) -> None:
        """Fail ``tup``: its spout tuple's ``fail`` is called (and a reliable spout replays)."""

    @abstractmethod
    def reset_timeout(self, tup: Tuple) -> None:
        """Restart the message timeout of every tree ``tup`` belongs to (long work)."""

    @abstractmethod
    def report_error(self, error: BaseException | str) -> None:
        """Record an error in this component's metrics (with traceback) and the log."""


class SpoutOutputCollector(ABC):
    """A spout's collector: emit tuples, tracked when given a ``msg_id``."""

    __slots__ = ()

    @abstractmethod
    def emit(
        self, values: Sequence[Any], msg_id: Any = None, stream: str = DEFAULT_STREAM
    ) -> list[int]:
        """Emit ``values`` on ``stream``; with ``msg_id`` the tuple tree is tracked.

        ``ack(msg_id)``/``fail(msg_id)`` are later called on this spout task. Returns the
        ids of the tasks the tuple was sent to.

        Raises:
            ValueError: the stream is not declared, is direct, or the number of values
                differs from its fields.
        """

    @abstractmethod
    def emit_direct(
        self, task_id: int, values: Sequence[Any], msg_id: Any = None, stream: str = DEFAULT_STREAM
    ) -> None:
        """Emit ``values`` to task ``task_id`` on direct stream ``stream``.

        Raises:
            ValueError: the stream is not direct, or ``task_id`` does not subscribe to it.
        """

    @abstractmethod
    def report_error(self, error: BaseException | str) -> None:
        """Record an error in this component's metrics (with traceback) and the log."""


class BasicOutputCollector(ABC):
    """A basic bolt's collector: emits are anchored to the input being executed, which
    is acked when ``execute`` returns."""

    __slots__ = ()

    @property
    @abstractmethod
    def output_collector(self) -> OutputCollector:
        """The bolt collector this one emits through."""

    @abstractmethod
    def emit(self, values: Sequence[Any], stream: str = DEFAULT_STREAM) -> list[int]:
        """Emit ``values`` on ``stream`` anchored to the current input; returns task ids."""

    @abstractmethod
    def emit_direct(
        self, task_id: int, values: Sequence[Any], stream: str = DEFAULT_STREAM
    ) -> None:
        """Emit ``values`` to task ``task_id`` on direct ``stream``, anchored to the input."""

    @abstractmethod
    def reset_timeout(self, tup: Tuple) -> None:
        """Restart the message timeout of ``tup``'s trees."""

    @abstractmethod
    def report_error(self, error: BaseException | str) -> None:
        """Record an error in this component's metrics and the log."""


__all__ = ["Anchors", "BasicOutputCollector", "OutputCollector", "SpoutOutputCollector"]
