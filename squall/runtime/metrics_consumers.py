"""Metrics consumers: the registrations of ``topology.metrics.consumer.register`` and
the system bolt that feeds each consumer (Storm's ``MetricsConsumerBolt``).

As in Storm, every registered consumer becomes a bolt ``__metrics_<ClassName>`` (the
same class again: ``#2``, ``#3``...) with the registered parallelism, subscribed with a
shuffle grouping to the ``__metrics`` stream of every user component. Each task of it
makes its own consumer and hands it the data points on a thread of its own, so a slow
consumer never holds up the bolt's task; it keeps at most
:data:`MAX_RETAINED` buckets waiting (the oldest are dropped beyond, as in Storm).
"""

from __future__ import annotations

import copy
import importlib
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from squall.model.collectors import OutputCollector
from squall.model.components import Bolt
from squall.model.config import Config
from squall.model.context import TopologyContext
from squall.model.errors import InvalidTopologyError
from squall.model.metrics import METRICS_COMPONENT_PREFIX, IMetricsConsumer
from squall.model.tuple import Tuple

#: Buckets a consumer task keeps waiting for its consumer (Storm's default of
#: ``max.retain.metric.tuples``); beyond, the oldest is dropped.
MAX_RETAINED = 100
#: Seconds ``cleanup`` waits for the consumer's thread to hand over what is waiting.
CLEANUP_WAIT_SECS = 5.0


@dataclass(frozen=True)
class ConsumerRegistration:
    """One registered consumer: the component id of its bolt, what makes the consumer
    (a class, or an instance each task copies), its argument and parallelism."""

    component_id: str
    consumer: Any
    argument: Any
    parallelism: int


def _resolve(entry: Any, position: int) -> Any:
    where = f"metrics consumer {position + 1} of {Config.TOPOLOGY_METRICS_CONSUMER_REGISTER}"
    if not isinstance(entry, dict) or "class" not in entry:
        raise InvalidTopologyError(
            f"{where}: {entry!r} is not a dict with a 'class' (use "
            "Config.register_metrics_consumer)"
        )
    consumer = entry["class"]
    if isinstance(consumer, str):
        module, _, name = consumer.rpartition(".")
        try:
            consumer = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError) as exc:
            raise InvalidTopologyError(
                f"{where}: cannot import class {entry['class']!r} ({type(exc).__name__}: {exc})"
            ) from None
    is_class = isinstance(consumer, type) and issubclass(consumer, IMetricsConsumer)
    if not is_class and not isinstance(consumer, IMetricsConsumer):
        raise InvalidTopologyError(
            f"{where}: {consumer!r} is not an IMetricsConsumer class or instance"
        )
    return consumer


def consumer_registrations(conf: dict[str, Any]) -> list[ConsumerRegistration]:
    """The consumers ``conf`` registers, checked, with their bolts' component ids.

    Raises:
        InvalidTopologyError: an entry is not a registration of an ``IMetricsConsumer``
            class, instance or importable class path, or its parallelism is not a
            whole number above 0.
    """
    entries = conf.get(Config.TOPOLOGY_METRICS_CONSUMER_REGISTER) or []
    if not isinstance(entries, (list, tuple)):
        raise InvalidTopologyError(
            f"{Config.TOPOLOGY_METRICS_CONSUMER_REGISTER} must be a list of registrations, "
            f"not {type(entries).__name__}"
        )
    occurrences: dict[str, int] = {}
    registrations = []
    for position, entry in enumerate(entries):
        consumer = _resolve(entry, position)
        parallelism = entry.get("parallelism.hint", 1)
        if parallelism is None:
            parallelism = 1
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
            raise InvalidTopologyError(
                f"metrics consumer {position + 1} of "
                f"{Config.TOPOLOGY_METRICS_CONSUMER_REGISTER}: parallelism.hint "
                f"{parallelism!r} is not a whole number above 0"
            )
        name = (consumer if isinstance(consumer, type) else type(consumer)).__name__
        occurrences[name] = occurrences.get(name, 0) + 1
        suffix = "" if occurrences[name] == 1 else f"#{occurrences[name]}"
        registrations.append(
            ConsumerRegistration(
                f"{METRICS_COMPONENT_PREFIX}{name}{suffix}",
                consumer,
                entry.get("argument"),
                parallelism,
            )
        )
    return registrations


class _Handler:
    """A consumer and the thread that hands it the data points, in arrival order.

    Not part of a snapshot of its bolt (it pickles to None): a bolt restored from one
    starts a new handler (see :meth:`MetricsConsumerBolt.execute`).
    """

    def __init__(
        self, consumer: IMetricsConsumer, collector: OutputCollector, name: str, retained: int
    ) -> None:
        self.consumer = consumer
        self.collector = collector
        self.waiting: deque[tuple[Any, Any]] = deque(maxlen=retained)
        self.wake = threading.Condition()
        self.stopping = False
        self.thread = threading.Thread(target=self._handle, name=name, daemon=True)
        self.thread.start()

    def put(self, task_info: Any, data_points: Any) -> None:
        """Queue one bucket (the oldest is dropped when :data:`MAX_RETAINED` wait)."""
        with self.wake:
            self.waiting.append((task_info, data_points))
            self.wake.notify()

    def _handle(self) -> None:
        while True:
            with self.wake:
                while not self.waiting and not self.stopping:
                    self.wake.wait()
                if not self.waiting:
                    return
                task_info, data_points = self.waiting.popleft()
            try:
                self.consumer.handle_data_points(task_info, data_points)
            except Exception as exc:
                self.collector.report_error(exc)

    def stop(self) -> None:
        """Let the thread hand over what waits (up to :data:`CLEANUP_WAIT_SECS`), then
        call the consumer's ``cleanup``."""
        with self.wake:
            self.stopping = True
            self.wake.notify()
        self.thread.join(CLEANUP_WAIT_SECS)
        self.consumer.cleanup()

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _no_handler, ()


def _no_handler() -> None:
    """What a pickled :class:`_Handler` becomes."""
    return None


class MetricsConsumerBolt(Bolt):
    """The system bolt of one registered consumer: queues each ``__metrics`` tuple
    (``[TaskInfo, [DataPoint, ...]]``) for its consumer's thread and acks it.

    ``prepare`` (on the task's thread) makes the consumer, calls its ``prepare`` and
    starts the thread; the thread calls ``handle_data_points`` for each bucket in
    arrival order, and records what it raises in this component's errors; ``cleanup``
    lets the thread hand over what is waiting (up to :data:`CLEANUP_WAIT_SECS`), then
    calls the consumer's ``cleanup``.
    """

    def __init__(self, consumer: Any, argument: Any, max_retained: int = MAX_RETAINED) -> None:
        self.consumer_factory = consumer
        self.argument = argument
        self.max_retained = max_retained

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self._conf = conf
        self._context = context
        self._collector = collector
        self._handler: _Handler | None = self._start()

    def _start(self) -> _Handler:
        factory = self.consumer_factory
        consumer = factory() if isinstance(factory, type) else copy.deepcopy(factory)
        consumer.prepare(self._conf, self.argument, self._context, self._collector)
        name = f"squall-metrics-{self._context.component_id}-{self._context.task_id}"
        return _Handler(consumer, self._collector, name, self.max_retained)

    def execute(self, tup: Tuple) -> None:
        if self._handler is None:  # restored from a snapshot (the Spark engine)
            self._handler = self._start()
        self._handler.put(tup.values[0], tup.values[1])
        self._collector.ack(tup)

    def cleanup(self) -> None:
        handler = getattr(self, "_handler", None)
        if handler is not None:
            handler.stop()


__all__ = [
    "CLEANUP_WAIT_SECS",
    "MAX_RETAINED",
    "ConsumerRegistration",
    "MetricsConsumerBolt",
    "consumer_registrations",
]
