"""Windowed bolts: count and time windows, tumbling and sliding, processing or event
time with watermarks, lag and late-tuple streams; ``JoinBolt``, the windowed join of
streams. Engine-neutral logic."""

from squall.windowing.bolt import WindowedBolt
from squall.windowing.executor import WindowedBoltExecutor, WindowedOutputCollector
from squall.windowing.join import JoinBolt
from squall.windowing.manager import WindowManager
from squall.windowing.spec import Count, Duration, WindowSpec
from squall.windowing.watermarks import WatermarkTracker
from squall.windowing.window import TupleWindow

__all__ = [
    "Count",
    "Duration",
    "JoinBolt",
    "TupleWindow",
    "WatermarkTracker",
    "WindowManager",
    "WindowSpec",
    "WindowedBolt",
    "WindowedBoltExecutor",
    "WindowedOutputCollector",
]
