"""``WindowedBoltExecutor``: runs a ``WindowedBolt`` as an ordinary bolt.

As in Storm, a windowed bolt is wrapped in a bolt that feeds a window manager: each
input tuple is added (with its arrival time or its event timestamp), tick tuples bring
time (processing-time triggers, watermarks), windows that fire call the user's
``execute(window)``, and tuples leaving the windows are acked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from squall.model.clock import Clock
from squall.model.components import Bolt
from squall.model.config import Config
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.hooks import ReportsMetrics, SettlesBatch, ValidatesSubmission
from squall.model.tuple import DEFAULT_STREAM, Tuple, is_tick_tuple
from squall.runtime.checkpointing import CHECKPOINT_STREAM
from squall.runtime.collectors import OutputCollector, engine_collector
from squall.runtime.context import TopologyContext
from squall.windowing.bolt import WindowedBolt
from squall.windowing.manager import WindowManager
from squall.windowing.spec import LATE_TUPLE_FIELD, check_max_spout_pending
from squall.windowing.watermarks import WatermarkTracker
from squall.windowing.window import TupleWindow

#: The counter of the tuples a windowed bolt's windows hold, in its component's ``custom``
#: figures.
WINDOW_TUPLES_HELD = "window_tuples_held"


class WindowedOutputCollector(OutputCollector):
    """The collector a windowed bolt emits through (on the task's thread): the task's
    collector, with window anchoring.

    ``emit`` anchors to every tuple of the window being executed unless ``anchors`` is
    given. Window tuples are acked by the engine when they expire, so ``ack`` does
    nothing; ``fail`` fails a tuple at once (it is then not acked on expiry).
    """

    def __init__(self, out: OutputCollector, failed: dict[int, Tuple]) -> None:
        self._out = out
        self._failed = failed
        #: The tuples of the window being executed (set by the executor).
        self.window_tuples: list[Tuple] | None = None

    def emit(
        self,
        values: Sequence[Any],
        anchors: Tuple | Sequence[Tuple] | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> list[int]:
        """Emit ``values`` on ``stream``, anchored to the window's tuples by default."""
        return self._out.emit(values, self._anchors(anchors), stream)

    def emit_direct(
        self,
        task_id: int,
        values: Sequence[Any],
        anchors: Tuple | Sequence[Tuple] | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """Emit ``values`` to task ``task_id`` on a direct stream, anchored likewise."""
        self._out.emit_direct(task_id, values, self._anchors(anchors), stream)

    def _anchors(self, anchors: Tuple | Sequence[Tuple] | None) -> Tuple | Sequence[Tuple] | None:
        """What an emit is anchored to: ``anchors`` if given, else the window's tuples."""
        return self.window_tuples if anchors is None else anchors

    def ack(self, tup: Tuple) -> None:
        """No effect: window tuples are acked when they leave the window."""

    def fail(self, tup: Tuple) -> None:
        """Fail ``tup`` now (its spout tuple is replayed). A tuple of the window being
        executed is then not acked when it expires; fail only tuples of ``window.get()``
        (an expired tuple was already acked)."""
        if id(tup) in self._failed:
            return
        self._out.fail(tup)
        window = self.window_tuples
        if window is not None and any(t is tup for t in window):
            # Kept (not just its id) until it expires, so the id cannot be reused.
            self._failed[id(tup)] = tup

    def reset_timeout(self, tup: Tuple) -> None:
        """Restart the message timeout of ``tup``'s trees."""
        self._out.reset_timeout(tup)

    def report_error(self, error: BaseException | str) -> None:
        """Record an error in the component's metrics and the log."""
        self._out.report_error(error)


class WindowedBoltExecutor(Bolt, ValidatesSubmission, SettlesBatch, ReportsMetrics):
    """The bolt an engine runs for a :class:`WindowedBolt`; see the module docstring."""

    def __init__(self, bolt: WindowedBolt) -> None:
        self.bolt = bolt
        self.spec = bolt.window_spec()
        self.spec.validate(f"windowed bolt {type(bolt).__name__}")

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        self.bolt.declare_output_fields(declarer)
        if self.spec.late_stream is not None:
            declarer.declare_stream(self.spec.late_stream, [LATE_TUPLE_FIELD])

    def get_component_configuration(self) -> dict[str, Any] | None:
        conf = dict(self.bolt.get_component_configuration() or {})
        interval = self.spec.tick_interval_ms
        if interval is not None:
            conf[Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS] = interval / 1000.0
        return conf

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Submit-time checks (message timeout vs window span), run by the engines.

        Raises:
            InvalidTopologyError: the window cannot work with this configuration.
        """
        acking = conf.get(Config.TOPOLOGY_ACKER_EXECUTORS) != 0
        where = f"windowed bolt {component_id!r}"
        if acking and conf.get(Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True):
            timeout = float(conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS) or 30)
            self.spec.check_message_timeout(where, timeout)
        max_pending = conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING)
        if acking and max_pending:
            check_max_spout_pending(self.spec, where, int(max_pending))

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector
        self.component_id = context.component_id
        self.clock: Clock = context.clock
        self.failed: dict[int, Tuple] = {}
        self.late_tuples = 0
        self.windows_fired = 0
        self.window_collector = self.make_window_collector(collector)
        self.manager = self.new_manager()
        self.watermarks: WatermarkTracker | None = None
        if self.spec.event_time:
            # System streams (e.g. "__system") and checkpoints carry no event time:
            # they do not hold the watermark back.
            streams = [
                (s.component_id, s.stream_id)
                for s in context.get_this_sources()
                if not s.stream_id.startswith("__") and s.stream_id != CHECKPOINT_STREAM
            ]
            self.watermarks = WatermarkTracker(streams, self.spec.lag.value)
        self.bolt.prepare(conf, context, self.window_collector)

    def execute(self, tup: Tuple) -> None:
        if is_tick_tuple(tup):
            self._on_tick()
            return
        watermarks = self.watermarks
        if watermarks is None:
            self.keep(tup, int(self.clock.now_ms()))
            return
        ts = self._timestamp(tup)
        if watermarks.track((tup.source_component, tup.source_stream), ts):
            self.keep(tup, ts)
            return
        self.late_tuples += 1
        if self.spec.late_stream is not None:
            self.collector.emit([list(tup.values)], tup, self.spec.late_stream)
        self.collector.ack(tup)

    def new_manager(self) -> WindowManager:
        """Empty windows, starting now: the first processing-time window starts from
        the current time."""
        return WindowManager(self.spec, self._activate, self._expire, int(self.clock.now_ms()))

    def make_window_collector(self, collector: OutputCollector) -> WindowedOutputCollector:
        """The collector the windowed bolt gets (in ``prepare``)."""
        return WindowedOutputCollector(collector, self.failed)

    def keep(self, tup: Tuple, ts: int) -> None:
        """Put an input tuple (not late) in the windows, at timestamp ``ts``."""
        self.manager.add(tup, ts)

    def _on_tick(self) -> None:
        if self.watermarks is None:
            self.manager.on_time(int(self.clock.now_ms()))
            return
        watermark = self.watermarks.advance()
        if watermark is not None:
            self.manager.on_watermark(watermark)

    def _timestamp(self, tup: Tuple) -> int:
        spec = self.spec
        where = f"windowed bolt {self.component_id!r}"
        if spec.timestamp_field is not None:
            name = spec.timestamp_field
            if not tup.contains(name):
                raise ValueError(
                    f"{where}: tuple from {tup.source_component!r} stream "
                    f"{tup.source_stream!r} has no timestamp field {name!r} "
                    f"(its fields are {tup.fields.to_list()})"
                )
            ts = tup.get_value_by_field(name)
            source = f"timestamp field {name!r}"
        else:
            assert spec.timestamp_extractor is not None
            ts = spec.timestamp_extractor(tup)
            source = "the timestamp extractor's result"
        if not isinstance(ts, int) or isinstance(ts, bool):
            raise ValueError(
                f"{where}: {source} must be an integer (epoch milliseconds), got {ts!r} "
                f"({type(ts).__name__}) in tuple {list(tup.values)!r}"
            )
        return ts

    def _activate(self, window: TupleWindow) -> None:
        self.windows_fired += 1
        collector = self.window_collector
        collector.window_tuples = window.get()
        try:
            self.bolt.execute(window)
        except Exception as exc:
            self.collector.report_error(exc)
            self.window_failed(window)
        finally:
            collector.window_tuples = None

    def window_failed(self, window: TupleWindow) -> None:
        """The bolt's ``execute(window)`` raised (the error is reported): its tuples are
        failed."""
        fail = self.window_collector.fail
        for tup in window.get():
            fail(tup)

    def _expire(self, tuples: list[Tuple]) -> None:
        failed = self.failed
        ack = self.collector.ack
        for tup in tuples:
            if failed and failed.get(id(tup)) is tup:
                del failed[id(tup)]
            else:
                ack(tup)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled (a task restored from its snapshot): failed tuples are kept by
        object id, and their ids are new."""
        self.__dict__.update(state)
        failed = state.get("failed")
        if failed:
            tuples = list(failed.values())
            failed.clear()
            failed.update((id(tup), tup) for tup in tuples)

    def settle_batch(self) -> None:
        """Called by the Spark engine at the end of each micro-batch, after which the
        task's state (windows included) is snapshotted: the tuples held in windows are
        acked now (their trees complete with the batch), not when they expire. Tuples
        failed in the batch stay failed."""
        failed = self.failed
        settle = engine_collector(self.collector, f"windowed bolt {self.component_id!r}").settle
        for tup in self.manager.held():
            if not (failed and failed.get(id(tup)) is tup):
                settle(tup)

    def cleanup(self) -> None:
        self.bolt.cleanup()

    def metrics(self) -> dict[str, int]:
        """Counters for ``get_topology_info``: late tuples, windows fired, tuples held."""
        return {
            "late_tuples": self.late_tuples,
            "windows_fired": self.windows_fired,
            WINDOW_TUPLES_HELD: len(self.manager),
        }


__all__ = ["WINDOW_TUPLES_HELD", "WindowedBoltExecutor", "WindowedOutputCollector"]
