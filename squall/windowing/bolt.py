"""``WindowedBolt``: the base class users extend to process windows of tuples."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from squall.model.components import Component
from squall.model.hooks import AdaptsToBolt
from squall.windowing.spec import (
    DEFAULT_WATERMARK_INTERVAL,
    Count,
    Duration,
    Span,
    WindowSpec,
)
from squall.windowing.window import TupleWindow

if TYPE_CHECKING:
    from squall.model.components import Bolt
    from squall.runtime.context import TopologyContext
    from squall.windowing.executor import WindowedOutputCollector

SelfBolt = TypeVar("SelfBolt", bound="WindowedBolt")


def _duration(value: Duration | int, what: str) -> Duration:
    if isinstance(value, Duration):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return Duration(value)
    raise TypeError(f"{what} must be a Duration (or int milliseconds), got {value!r}")


class WindowedBolt(Component, ABC, AdaptsToBolt):
    """A bolt that processes windows of tuples instead of single tuples.

    Configure the window with the ``with_*`` methods (each returns the bolt) and
    implement ``execute(window)``. Add it to a topology with ``set_bolt`` like any bolt.

    Reliability: every tuple in a window is acked automatically when it leaves the last
    window that can hold it; emits from ``execute`` are anchored to every tuple of the
    window. If ``execute`` raises, the error is reported and the window's tuples are
    failed (so reliable spouts replay them).
    """

    _window_length: Span | None = None
    _window_sliding: Span | None = None
    _timestamp_field: str | None = None
    _timestamp_extractor: Callable[[Any], Any] | None = None
    _lag: Duration = Duration(0)
    _watermark_interval: Duration = DEFAULT_WATERMARK_INTERVAL
    _late_stream: str | None = None

    def with_window(self: SelfBolt, length: Span, sliding: Span | None = None) -> SelfBolt:
        """A sliding window of ``length`` (``Count`` or ``Duration``), sliding every
        ``sliding`` (``Count`` or ``Duration``; default: every tuple)."""
        self._window_length = length
        self._window_sliding = sliding if sliding is not None else Count(1)
        return self

    def with_tumbling_window(self: SelfBolt, length: Span) -> SelfBolt:
        """Back-to-back windows of ``length``: every tuple is in exactly one window."""
        return self.with_window(length, length)

    def with_timestamp_field(self: SelfBolt, name: str) -> SelfBolt:
        """Event time: each tuple's timestamp (integer epoch ms) is its field ``name``."""
        self._timestamp_field = name
        return self

    def with_timestamp_extractor(self: SelfBolt, extractor: Callable[[Any], Any]) -> SelfBolt:
        """Event time: ``extractor(tup)`` returns each tuple's timestamp (integer ms)."""
        self._timestamp_extractor = extractor
        return self

    def with_lag(self: SelfBolt, lag: Duration | int) -> SelfBolt:
        """Event time: how far out of order tuples may arrive (default 0)."""
        self._lag = _duration(lag, "the lag")
        return self

    def with_watermark_interval(self: SelfBolt, interval: Duration | int) -> SelfBolt:
        """Event time: how often a watermark is computed (default 1 s)."""
        self._watermark_interval = _duration(interval, "the watermark interval")
        return self

    def with_late_tuple_stream(self: SelfBolt, stream_id: str) -> SelfBolt:
        """Event time: emit late tuples on ``stream_id`` (one field, ``"late_tuple"``,
        holding the late tuple's values) instead of dropping them. The stream is declared
        automatically."""
        self._late_stream = stream_id
        return self

    def window_spec(self) -> WindowSpec:
        """The configured window.

        Raises:
            ValueError: no window was configured.
        """
        if self._window_length is None or self._window_sliding is None:
            raise ValueError(
                f"{type(self).__name__} has no window: call with_window(...) or "
                "with_tumbling_window(...)"
            )
        return WindowSpec(
            length=self._window_length,
            sliding=self._window_sliding,
            timestamp_field=self._timestamp_field,
            timestamp_extractor=self._timestamp_extractor,
            lag=self._lag,
            watermark_interval=self._watermark_interval,
            late_stream=self._late_stream,
        )

    def to_bolt(self) -> Bolt:
        """The plain bolt that runs this windowed bolt (used by ``set_bolt``)."""
        from squall.windowing.executor import WindowedBoltExecutor

        return WindowedBoltExecutor(self)

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: WindowedOutputCollector
    ) -> None:
        """Called once per task, on its worker thread, before any window.

        The default stores the collector as ``self.collector``; its ``emit`` anchors to
        the tuples of the window being executed.
        """
        self.collector = collector

    @abstractmethod
    def execute(self, window: TupleWindow) -> None:
        """Process one window. Called on the task's thread each time a window fires."""

    def cleanup(self) -> None:
        """The topology is being killed. Called once per task, on its thread."""
