"""Watermarks: how far event time has progressed on a windowed bolt's inputs."""

from __future__ import annotations

from collections.abc import Iterable


class WatermarkTracker:
    """Storm's watermark generator for one windowed bolt task.

    It remembers the latest timestamp seen on each input stream. Every watermark
    interval the engine asks for a new watermark: the minimum over the input streams of
    their latest timestamp, minus the lag, produced only once every input stream has
    delivered a tuple, and only when it moves forward. A tuple whose timestamp is below
    the last watermark is late.
    """

    def __init__(self, input_streams: Iterable[tuple[str, str]], lag_ms: int) -> None:
        self.input_streams = frozenset(input_streams)
        self.lag_ms = lag_ms
        self.latest: dict[tuple[str, str], int] = {}
        self.last_watermark: int | None = None

    def track(self, stream: tuple[str, str], ts: int) -> bool:
        """Note a tuple's timestamp; False if it is late (below the last watermark)."""
        current = self.latest.get(stream)
        if current is None or ts > current:
            self.latest[stream] = ts
        return self.last_watermark is None or ts >= self.last_watermark

    def advance(self) -> int | None:
        """The new watermark, or None if it would not move forward."""
        if not self.input_streams or not self.input_streams <= self.latest.keys():
            return None
        watermark = min(self.latest[s] for s in self.input_streams) - self.lag_ms
        if self.last_watermark is not None and watermark <= self.last_watermark:
            return None
        self.last_watermark = watermark
        return watermark
