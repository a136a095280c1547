"""Window lengths and sliding intervals: ``Count`` and ``Duration``, and a window's spec."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from squall.model.errors import InvalidTopologyError


@dataclass(frozen=True)
class Count:
    """A number of tuples (a window length or sliding interval)."""

    value: int

    def __post_init__(self) -> None:
        if not isinstance(self.value, int) or isinstance(self.value, bool) or self.value < 1:
            raise ValueError(f"Count must be an integer >= 1, got {self.value!r}")

    @staticmethod
    def of(value: int) -> Count:
        """``Count(value)``."""
        return Count(value)


@dataclass(frozen=True)
class Duration:
    """A span of time in integer milliseconds (a window length, sliding interval or lag)."""

    value: int

    def __post_init__(self) -> None:
        if not isinstance(self.value, int) or isinstance(self.value, bool) or self.value < 0:
            raise ValueError(
                f"Duration must be a whole number of milliseconds >= 0, got {self.value!r}"
            )

    @property
    def ms(self) -> int:
        """The duration in milliseconds."""
        return self.value

    @staticmethod
    def milliseconds(ms: int) -> Duration:
        """A duration of ``ms`` milliseconds."""
        return Duration(int(ms))

    @staticmethod
    def seconds(seconds: float) -> Duration:
        """A duration of ``seconds`` seconds."""
        return Duration(round(seconds * 1000))

    @staticmethod
    def minutes(minutes: float) -> Duration:
        """A duration of ``minutes`` minutes."""
        return Duration(round(minutes * 60_000))

    @staticmethod
    def hours(hours: float) -> Duration:
        """A duration of ``hours`` hours."""
        return Duration(round(hours * 3_600_000))

    @staticmethod
    def days(days: float) -> Duration:
        """A duration of ``days`` days."""
        return Duration(round(days * 86_400_000))


Span = Count | Duration

DEFAULT_WATERMARK_INTERVAL = Duration(1000)
LATE_TUPLE_FIELD = "late_tuple"


@dataclass(frozen=True)
class WindowSpec:
    """Everything that defines a windowed bolt's windows.

    ``sliding`` is ``Count(1)`` for "every tuple". Event time is on when
    ``timestamp_field`` or ``timestamp_extractor`` is set.
    """

    length: Span
    sliding: Span
    timestamp_field: str | None = None
    timestamp_extractor: Callable[[Any], Any] | None = None
    lag: Duration = Duration(0)
    watermark_interval: Duration = DEFAULT_WATERMARK_INTERVAL
    late_stream: str | None = None

    @property
    def event_time(self) -> bool:
        """Whether windows follow tuple timestamps (else: arrival time)."""
        return self.timestamp_field is not None or self.timestamp_extractor is not None

    @property
    def tick_interval_ms(self) -> int | None:
        """How often the bolt needs a tick: the watermark interval with event time, the
        sliding interval for processing-time windows that slide by time, else never."""
        if self.event_time:
            return self.watermark_interval.value
        if isinstance(self.sliding, Duration):
            return self.sliding.value
        return None

    def validate(self, where: str) -> None:
        """Check the combination of settings.

        Raises:
            InvalidTopologyError: naming ``where`` and the problem.
        """
        for label, span in (("window length", self.length), ("sliding interval", self.sliding)):
            if not isinstance(span, Count | Duration):
                raise InvalidTopologyError(
                    f"{where}: the {label} must be a Count or a Duration, got {span!r}"
                )
            if isinstance(span, Duration) and span.value < 1:
                raise InvalidTopologyError(f"{where}: the {label} must be at least 1 ms")
        if self.timestamp_field is not None and self.timestamp_extractor is not None:
            raise InvalidTopologyError(
                f"{where}: set either a timestamp field or a timestamp extractor, not both"
            )
        if not self.event_time:
            for label, used in (
                ("a lag", self.lag.value != 0),
                ("a watermark interval", self.watermark_interval != DEFAULT_WATERMARK_INTERVAL),
                ("a late tuple stream", self.late_stream is not None),
            ):
                if used:
                    raise InvalidTopologyError(
                        f"{where}: {label} only applies to event time: also call "
                        "with_timestamp_field(name) or with_timestamp_extractor(fn)"
                    )
        if self.watermark_interval.value < 1:
            raise InvalidTopologyError(f"{where}: the watermark interval must be at least 1 ms")
        if self.late_stream is not None and (
            not isinstance(self.late_stream, str) or not self.late_stream
        ):
            raise InvalidTopologyError(f"{where}: the late tuple stream id must be a string")

    def check_message_timeout(self, where: str, timeout_secs: float) -> None:
        """Storm's rule: a window's time span must fit in the message timeout.

        Window tuples are acked only when they leave the window, so a tuple may live
        up to the window length plus the sliding interval; past the message timeout its
        spout tuple would be failed and replayed while the window still holds it.

        Raises:
            InvalidTopologyError: explaining the fix.
        """
        parts = [s.value for s in (self.length, self.sliding) if isinstance(s, Duration)]
        if not parts:
            return
        span_ms = sum(parts)
        timeout_ms = timeout_secs * 1000
        if span_ms > timeout_ms:
            spans = " + ".join(
                f"{label} {_describe(s)}"
                for label, s in (("length", self.length), ("sliding interval", self.sliding))
                if isinstance(s, Duration)
            )
            raise InvalidTopologyError(
                f"{where}: the window's {spans} = {span_ms} ms exceeds "
                f"topology.message.timeout.secs ({timeout_secs:g} s). Window tuples are acked "
                "only when they leave the window, so they would time out and be replayed "
                "while still in it. Set the message timeout above the window span, e.g. "
                f"conf.set_message_timeout_secs({int(span_ms // 1000) + 10}), or use a "
                "shorter window."
            )


def check_max_spout_pending(spec: WindowSpec, where: str, max_pending: int) -> None:
    """Storm's rule: a count window must fit in ``topology.max.spout.pending``.

    Window tuples are acked only when they leave the window, so a spout that may have
    at most ``max_pending`` tuples pending could never fill a window that needs more:
    the window would wait until the tuples time out.

    Raises:
        InvalidTopologyError: explaining the fix.
    """
    counts = [s.value for s in (spec.length, spec.sliding) if isinstance(s, Count)]
    if not counts or sum(counts) <= max_pending:
        return
    spans = " + ".join(
        f"{label} {s.value}"
        for label, s in (("length", spec.length), ("sliding interval", spec.sliding))
        if isinstance(s, Count)
    )
    raise InvalidTopologyError(
        f"{where}: the window's count ({spans} = {sum(counts)} tuples) is more than "
        f"topology.max.spout.pending ({max_pending}). Window tuples are acked only when "
        "they leave the window, so the spouts would stop before the window fills. Raise "
        f"topology.max.spout.pending to at least {sum(counts)}, or use a smaller window."
    )


def _describe(span: Span) -> str:
    if isinstance(span, Count):
        return f"{span.value} tuple(s)"
    return f"{span.value} ms"
