"""Base classes for user components: spouts, bolts and basic bolts.

Every lifecycle method below says where it runs and how often. On the local engine a
task's methods are all called from the thread of the worker that hosts the task, never
concurrently with each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from squall.model.declarer import OutputFieldsDeclarer
from squall.model.tuple import DEFAULT_STREAM, Tuple

if TYPE_CHECKING:
    from squall.model.collectors import (
        BasicOutputCollector,
        OutputCollector,
        SpoutOutputCollector,
    )
    from squall.model.context import TopologyContext

OutputsSpec = Iterable[str] | Mapping[str, Iterable[str]] | None


class Component:
    """What spouts and bolts share: output declaration and component configuration.

    Set the class attribute ``outputs`` to declare streams without writing
    ``declare_output_fields``: ``outputs = ["word"]`` declares the default stream,
    ``outputs = {"default": ["a"], "errors": ["msg"]}`` several streams.
    """

    outputs: ClassVar[OutputsSpec] = None

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Declare the streams this component emits. Runs once, at build time.

        The default declares what the ``outputs`` class attribute lists (nothing if it
        is unset).
        """
        outputs = type(self).outputs
        if outputs is None:
            return
        if isinstance(outputs, Mapping):
            for stream_id, names in outputs.items():
                declarer.declare_stream(stream_id, list(names))
        else:
            declarer.declare_stream(DEFAULT_STREAM, list(outputs))

    def get_component_configuration(self) -> dict[str, Any] | None:
        """Configuration that overrides the topology's for this component (build time)."""
        return None


class Spout(Component):
    """A source of streams. Subclass it and implement ``next_tuple``.

    Reliability: emit with a ``msg_id`` to have the tuple tracked; ``ack(msg_id)`` is
    called once its whole tuple tree is processed, ``fail(msg_id)`` if any part of it
    fails or times out. Replaying a failed tuple is the spout's job (re-emit it).
    """

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        """Called once per task, on its worker thread, before any other call.

        Keep the collector to emit later. The default stores it as ``self.collector``.
        """
        self.collector = collector

    def next_tuple(self) -> None:
        """Emit zero or more tuples. Called repeatedly on the task's thread while active.

        Must not block: return without emitting when there is nothing to send. Not called
        while ``TOPOLOGY_MAX_SPOUT_PENDING`` trees are pending, while the topology is
        deactivated, or while downstream queues are full (backpressure).
        """

    def ack(self, msg_id: Any) -> None:
        """The tuple tree of ``msg_id`` completed. Called on this task's thread, once."""

    def fail(self, msg_id: Any) -> None:
        """The tuple tree of ``msg_id`` failed or timed out. Called on this task's thread.

        Called at most once per emit; an ack after a timeout's fail is not delivered.
        """

    def activate(self) -> None:
        """The topology was activated: ``next_tuple`` calls resume. On this task's thread."""

    def deactivate(self) -> None:
        """The topology was deactivated: no ``next_tuple`` calls until ``activate``."""

    def close(self) -> None:
        """The topology is being killed: release resources. Called once, not guaranteed
        if the process dies."""


class Bolt(Component):
    """A processing step. Subclass it and implement ``execute``.

    Emit with ``anchors`` to extend the input's tuple tree, and ``ack`` or ``fail`` every
    input: an input never acked times its spout tuple out.
    """

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        """Called once per task, on its worker thread, before any ``execute``.

        The default stores the collector as ``self.collector``.
        """
        self.collector = collector

    def execute(self, tup: Tuple) -> None:
        """Process one input tuple. Called on the task's thread, one tuple at a time.

        An exception raised here fails ``tup`` (so a reliable spout replays it) and is
        reported with its traceback in the component's errors; the task keeps running.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement execute(tup)")

    def cleanup(self) -> None:
        """The topology is being killed: release resources. Called once per task, on its
        thread, after the last ``execute``; not guaranteed if the process dies."""


class BasicBolt(Component):
    """A bolt whose acking is automatic.

    Emits through the :class:`BasicOutputCollector` are anchored to the input; the input is
    acked when ``execute`` returns and failed when it raises (:class:`FailedException` fails
    it quietly, any other exception also reports the error with its traceback).
    """

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Called once per task, on its worker thread, before any ``execute``."""

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        """Process one input tuple; emit results through ``collector``."""
        raise NotImplementedError(f"{type(self).__name__} must implement execute(tup, collector)")

    def cleanup(self) -> None:
        """The topology is being killed. Called once per task, on its thread."""
