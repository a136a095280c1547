"""Window configurations of Trident windowing (Storm's ``trident.windowing.config``).

A configuration says how long a window is and how far it slides, in tuples (count
windows) or in milliseconds of processing time (duration windows). Each one turns into
the :class:`~squall.windowing.spec.WindowSpec` that squall's window manager runs, so
Trident windows fire exactly as windowed bolts' do (Storm shares its ``WindowManager``
between the two the same way).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from squall.model.errors import InvalidTopologyError
from squall.windowing.spec import Count, Duration, WindowSpec


class WindowType(enum.Enum):
    """The four kinds of Trident window (Storm's ``WindowConfig.Type``)."""

    SLIDING_COUNT = "sliding-count"
    TUMBLING_COUNT = "tumbling-count"
    SLIDING_DURATION = "sliding-duration"
    TUMBLING_DURATION = "tumbling-duration"


def _count(value: Any, what: str, where: str) -> int:
    if isinstance(value, Count):
        return value.value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidTopologyError(f"{where}: the {what} must be an int >= 1, got {value!r}")
    return value


def _duration(value: Any, what: str, where: str) -> int:
    if not isinstance(value, Duration):
        raise InvalidTopologyError(
            f"{where}: the {what} must be a Duration (e.g. Duration.seconds(10)), got {value!r}"
        )
    if value.ms < 1:
        raise InvalidTopologyError(f"{where}: the {what} must be at least 1 ms, got {value!r}")
    return value.ms


@dataclass(frozen=True)
class WindowConfig(ABC):
    """A window's length and sliding interval (Storm's ``WindowConfig``).

    Attributes:
        window_length: tuples (count windows) or milliseconds (duration windows).
        sliding_length: the same unit: how far each window slides.
    """

    window_length: int
    sliding_length: int

    #: The kind of window (a class attribute of each configuration).
    TYPE: ClassVar[WindowType] = WindowType.SLIDING_COUNT

    def get_window_length(self) -> int:
        """The window's length: tuples, or milliseconds for a duration window."""
        return self.window_length

    def get_sliding_length(self) -> int:
        """How far a window slides: tuples, or milliseconds for a duration window."""
        return self.sliding_length

    def get_type(self) -> WindowType:
        """The kind of window."""
        return self.TYPE

    def validate(self) -> None:
        """Check the lengths (at build time, as Storm's ``Stream.window`` does).

        Raises:
            InvalidTopologyError: the sliding length exceeds the window length.
        """
        if self.sliding_length > self.window_length:
            raise InvalidTopologyError(
                f"Trident window {self}: the sliding length {self.sliding_length} must not "
                f"exceed the window length {self.window_length}"
            )

    @abstractmethod
    def window_spec(self) -> WindowSpec:
        """The spec the window manager runs (processing time)."""


@dataclass(frozen=True)
class TumblingCountWindow(WindowConfig):
    """Windows of ``n`` tuples, one after another: a window fires at every ``n``-th
    tuple, with the last ``n`` tuples."""

    TYPE = WindowType.TUMBLING_COUNT

    @staticmethod
    def of(window_count: int | Count) -> TumblingCountWindow:
        """Tumbling windows of ``window_count`` tuples.

        Raises:
            InvalidTopologyError: ``window_count`` is not an int >= 1.
        """
        count = _count(window_count, "window count", "TumblingCountWindow.of")
        return TumblingCountWindow(count, count)

    def window_spec(self) -> WindowSpec:
        return WindowSpec(Count(self.window_length), Count(self.sliding_length))


@dataclass(frozen=True)
class SlidingCountWindow(WindowConfig):
    """Windows of the last ``window_count`` tuples, one at every ``sliding_count``-th
    tuple (the first windows hold fewer while the stream is shorter)."""

    TYPE = WindowType.SLIDING_COUNT

    @staticmethod
    def of(window_count: int | Count, sliding_count: int | Count) -> SlidingCountWindow:
        """Sliding windows of ``window_count`` tuples every ``sliding_count`` tuples.

        Raises:
            InvalidTopologyError: a count is not an int >= 1.
        """
        where = "SlidingCountWindow.of"
        return SlidingCountWindow(
            _count(window_count, "window count", where),
            _count(sliding_count, "sliding count", where),
        )

    def window_spec(self) -> WindowSpec:
        return WindowSpec(Count(self.window_length), Count(self.sliding_length))


@dataclass(frozen=True)
class TumblingDurationWindow(WindowConfig):
    """Windows of a span of processing time, one after another: every ``duration``, a
    window with the tuples that arrived since the previous one."""

    TYPE = WindowType.TUMBLING_DURATION

    @staticmethod
    def of(window_duration: Duration) -> TumblingDurationWindow:
        """Tumbling windows of ``window_duration``.

        Raises:
            InvalidTopologyError: ``window_duration`` is not a Duration of at least 1 ms.
        """
        ms = _duration(window_duration, "window duration", "TumblingDurationWindow.of")
        return TumblingDurationWindow(ms, ms)

    def window_spec(self) -> WindowSpec:
        return WindowSpec(Duration(self.window_length), Duration(self.sliding_length))


@dataclass(frozen=True)
class SlidingDurationWindow(WindowConfig):
    """Every ``sliding_duration`` of processing time, a window with the tuples that
    arrived in the last ``window_duration``."""

    TYPE = WindowType.SLIDING_DURATION

    @staticmethod
    def of(window_duration: Duration, sliding_duration: Duration) -> SlidingDurationWindow:
        """Windows of ``window_duration`` every ``sliding_duration``.

        Raises:
            InvalidTopologyError: a duration is not a Duration of at least 1 ms.
        """
        where = "SlidingDurationWindow.of"
        return SlidingDurationWindow(
            _duration(window_duration, "window duration", where),
            _duration(sliding_duration, "sliding duration", where),
        )

    def window_spec(self) -> WindowSpec:
        return WindowSpec(Duration(self.window_length), Duration(self.sliding_length))


__all__ = [
    "SlidingCountWindow",
    "SlidingDurationWindow",
    "TumblingCountWindow",
    "TumblingDurationWindow",
    "WindowConfig",
    "WindowType",
]
