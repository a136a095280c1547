"""Topology configuration: a ``dict`` with Storm's key names, and the check that warns
about ``topology.*`` keys squall does not know (misspelled ones, mostly)."""

from __future__ import annotations

import difflib
import warnings
from typing import Any


class Config(dict[str, Any]):
    """Topology configuration, keyed by Storm's configuration names.

    ``Config`` is a plain ``dict`` (``conf["topology.workers"] = 2`` works) with Storm's
    key names as class constants and setters for the common ones. A component's own
    configuration (``get_component_configuration()`` or ``add_configuration``) overrides
    the topology's for the keys in :data:`COMPONENT_KEYS`.
    """

    TOPOLOGY_NAME = "topology.name"
    TOPOLOGY_WORKERS = "topology.workers"
    TOPOLOGY_ACKER_EXECUTORS = "topology.acker.executors"
    TOPOLOGY_MESSAGE_TIMEOUT_SECS = "topology.message.timeout.secs"
    TOPOLOGY_MAX_SPOUT_PENDING = "topology.max.spout.pending"
    TOPOLOGY_DEBUG = "topology.debug"
    TOPOLOGY_TICK_TUPLE_FREQ_SECS = "topology.tick.tuple.freq.secs"
    TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS = "topology.enable.message.timeouts"
    TOPOLOGY_MAX_TASK_PARALLELISM = "topology.max.task.parallelism"
    TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE = "topology.executor.receive.buffer.size"
    TOPOLOGY_STATS_SAMPLE_RATE = "topology.stats.sample.rate"
    TOPOLOGY_SLEEP_SPOUT_WAIT_STRATEGY_TIME_MS = "topology.sleep.spout.wait.strategy.time.ms"
    TOPOLOGY_TRANSACTIONAL_ID = "topology.transactional.id"
    TOPOLOGY_TRANSACTIONAL_STATE_DIR = "topology.transactional.state.dir"
    TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS = "topology.trident.batch.emit.interval.millis"
    #: Wait after a batch's first failure before it is run again (doubling per
    #: consecutive failure; 0: no wait).
    TOPOLOGY_TRIDENT_BATCH_RETRY_INITIAL_MILLIS = "topology.trident.batch.retry.initial.millis"
    #: The longest wait between two attempts of a failing batch.
    TOPOLOGY_TRIDENT_BATCH_RETRY_MAX_MILLIS = "topology.trident.batch.retry.max.millis"
    TOPOLOGY_ERROR_THROTTLE_INTERVAL_SECS = "topology.error.throttle.interval.secs"
    TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL = "topology.max.error.report.per.interval"
    #: Milliseconds between checkpoints of stateful bolts (below the message timeout).
    TOPOLOGY_STATE_CHECKPOINT_INTERVAL = "topology.state.checkpoint.interval.ms"
    #: Where stateful bolts keep their state: ``memory``, ``sqlite``, ``redis``,
    #: ``postgres``.
    TOPOLOGY_STATE_PROVIDER = "topology.state.provider"
    #: The provider's settings (a dict: directory, url or dsn, namespace).
    TOPOLOGY_STATE_PROVIDER_CONFIG = "topology.state.provider.config"
    #: What a worker of the local engine is: ``"process"`` (a process of its own, as in
    #: Storm), ``"thread"`` (a thread of the submitting process), or ``"auto"``:
    #: processes when ``topology.workers`` > 1 on the system clock, else a thread.
    TOPOLOGY_WORKER_KIND = "topology.worker.kind"
    #: Whether the local engine freezes a worker's start-up heap (``gc.freeze``) so
    #: that full garbage collections walk only what the tasks made since: unset (the
    #: default) freezes in worker processes and not in the submitting process.
    TOPOLOGY_WORKER_GC_FREEZE = "topology.worker.gc.freeze"
    #: The young-generation threshold of CPython's garbage collector (the first value
    #: of ``gc.set_threshold``) while a worker runs: a collection after this many new
    #: container objects, not Python's 700, so the short-lived tuples of a stream do
    #: not trigger one every few hundred tuples. Default 10000; 0 leaves Python's
    #: setting alone. In the submitting process the setting is raised (never lowered)
    #: from the topology's start to its kill.
    TOPOLOGY_WORKER_GC_THRESHOLD = "topology.worker.gc.threshold"
    #: The metrics consumers: a list of ``{"class", "argument", "parallelism.hint"}``
    #: dicts (see :meth:`register_metrics_consumer`).
    TOPOLOGY_METRICS_CONSUMER_REGISTER = "topology.metrics.consumer.register"
    #: Seconds between two sends of the built-in metrics (``__ack-count``...) to the
    #: metrics consumers (default 60).
    TOPOLOGY_BUILTIN_METRICS_BUCKET_SIZE_SECS = "topology.builtin.metrics.bucket.size.secs"

    def set_num_workers(self, workers: int) -> Config:
        """Number of workers the topology runs in (``topology.workers``)."""
        self[self.TOPOLOGY_WORKERS] = workers
        return self

    def set_worker_kind(self, kind: str) -> Config:
        """Run the local engine's workers as ``"process"``es, ``"thread"``s, or choose
        (``"auto"``, the default; see ``topology.worker.kind``)."""
        self[self.TOPOLOGY_WORKER_KIND] = kind
        return self

    def register_metrics_consumer(
        self, klass: Any, argument: Any = None, parallelism_hint: int = 1
    ) -> Config:
        """Send every task's metrics to a consumer: ``klass`` is an
        ``IMetricsConsumer`` class (an instance, or a dotted class path, work too).

        The engine adds a bolt ``__metrics_<ClassName>`` (``#2``, ``#3``... for the
        same class again) with ``parallelism_hint`` tasks; each makes its consumer and
        calls ``prepare(conf, argument, context, error_reporter)``. As in Storm, it may
        be called on the class with a configuration dict:
        ``Config.register_metrics_consumer(conf, LoggingMetricsConsumer)``. Appends to
        the ``topology.metrics.consumer.register`` list.
        """
        registered = list(self.get(Config.TOPOLOGY_METRICS_CONSUMER_REGISTER) or [])
        registered.append(
            {"class": klass, "argument": argument, "parallelism.hint": parallelism_hint}
        )
        self[Config.TOPOLOGY_METRICS_CONSUMER_REGISTER] = registered
        return self

    def set_num_ackers(self, ackers: int) -> Config:
        """Number of acker executors; 0 turns acking off (at-most-once)."""
        self[self.TOPOLOGY_ACKER_EXECUTORS] = ackers
        return self

    def set_message_timeout_secs(self, seconds: float) -> Config:
        """Seconds a tuple tree may take before its spout tuple is failed."""
        self[self.TOPOLOGY_MESSAGE_TIMEOUT_SECS] = seconds
        return self

    def set_max_spout_pending(self, pending: int) -> Config:
        """Bound on un-acked tuple trees per spout task."""
        self[self.TOPOLOGY_MAX_SPOUT_PENDING] = pending
        return self

    def set_debug(self, debug: bool) -> Config:
        """Log every emitted tuple (``topology.debug``)."""
        self[self.TOPOLOGY_DEBUG] = debug
        return self

    def set_tick_tuple_freq_secs(self, seconds: float) -> Config:
        """Send a tick tuple to every bolt task every ``seconds``."""
        self[self.TOPOLOGY_TICK_TUPLE_FREQ_SECS] = seconds
        return self

    def set_message_timeouts_enabled(self, enabled: bool) -> Config:
        """Turn message timeouts on or off (``topology.enable.message.timeouts``)."""
        self[self.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS] = enabled
        return self

    def set_max_task_parallelism(self, parallelism: int) -> Config:
        """Cap on any component's executors and tasks."""
        self[self.TOPOLOGY_MAX_TASK_PARALLELISM] = parallelism
        return self


#: Defaults the engines apply under the user's configuration (Storm's defaults).
DEFAULTS: dict[str, Any] = {
    Config.TOPOLOGY_WORKERS: 1,
    Config.TOPOLOGY_ACKER_EXECUTORS: None,  # None: one acker executor per worker
    Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30,
    Config.TOPOLOGY_MAX_SPOUT_PENDING: None,
    Config.TOPOLOGY_DEBUG: False,
    Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: None,
    Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: True,
    Config.TOPOLOGY_MAX_TASK_PARALLELISM: None,
    Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE: 32768,
    Config.TOPOLOGY_STATS_SAMPLE_RATE: 0.05,
    Config.TOPOLOGY_SLEEP_SPOUT_WAIT_STRATEGY_TIME_MS: 1,
    Config.TOPOLOGY_ERROR_THROTTLE_INTERVAL_SECS: 10,
    Config.TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL: 5,
    Config.TOPOLOGY_WORKER_KIND: "auto",
}

#: Keys a component's own configuration may override (Storm's list, plus tick tuples,
#: which Storm also honours per component).
COMPONENT_KEYS: frozenset[str] = frozenset(
    {
        Config.TOPOLOGY_DEBUG,
        Config.TOPOLOGY_MAX_SPOUT_PENDING,
        Config.TOPOLOGY_MAX_TASK_PARALLELISM,
        Config.TOPOLOGY_TRANSACTIONAL_ID,
        Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS,
    }
)


def effective_config(topology_conf: dict[str, Any]) -> dict[str, Any]:
    """The topology's configuration over squall's defaults."""
    merged = dict(DEFAULTS)
    merged.update(topology_conf)
    return merged


def component_config(
    topology_conf: dict[str, Any], component_conf: dict[str, Any] | None
) -> dict[str, Any]:
    """The configuration a component's tasks see: topology keys, overridden where allowed.

    Keys outside :data:`COMPONENT_KEYS` and keys starting with ``topology.`` that Storm
    does not let a component set are ignored, as in Storm; any other key (a component's
    own settings, such as a windowing length) is passed through.
    """
    merged = dict(topology_conf)
    for key, value in (component_conf or {}).items():
        if (
            key in COMPONENT_KEYS
            or not key.startswith("topology.")
            or key.startswith("topology.bolts.")
        ):
            merged[key] = value
    return merged


class ConfigWarning(UserWarning):
    """A ``topology.*`` configuration key that squall does not know, probably misspelled.

    Issued once per key by ``submit_topology``; filter it like any warning, e.g.
    ``warnings.simplefilter("ignore", ConfigWarning)``.
    """


#: The Spark engine's keys (``squall.spark`` reads them; listed here so that checking a
#: configuration does not need the Spark extra).
SPARK_KEYS: frozenset[str] = frozenset(
    {
        "topology.spark.batch.interval.millis",
        "topology.spark.batch.max.tuples",
        "topology.spark.batch.retries",
    }
)

#: Storm's own keys that a Storm topology may set and squall accepts without using them
#: (serialization, JVM and scheduler settings...): no warning for these.
STORM_KEYS: frozenset[str] = frozenset(
    {
        "topology.auto-credentials",
        "topology.auto.task.hooks",
        "topology.backpressure.check.millis",
        "topology.backpressure.enable",
        "topology.batch.flush.interval.millis",
        "topology.bolt.wait.strategy",
        "topology.classpath",
        "topology.component.cpu.pcore.percent",
        "topology.component.resources.offheap.memory.mb",
        "topology.component.resources.onheap.memory.mb",
        "topology.disable.loadaware.messaging",
        "topology.environment",
        "topology.eventlogger.executors",
        "topology.executor.send.buffer.size",
        "topology.fall.back.on.java.serialization",
        "topology.groups",
        "topology.isolate.machines",
        "topology.kryo.decorators",
        "topology.kryo.factory",
        "topology.kryo.register",
        "topology.multilang.serializer",
        "topology.priority",
        "topology.producer.batch.size",
        "topology.scheduler.strategy",
        "topology.shellbolt.max.pending",
        "topology.skip.missing.kryo.registrations",
        "topology.spout.wait.strategy",
        "topology.submitter.principal",
        "topology.subprocess.timeout.secs",
        "topology.tasks",
        "topology.testing.always.try.serialize",
        "topology.transfer.batch.size",
        "topology.transfer.buffer.size",
        "topology.tuple.serializer",
        "topology.users",
        "topology.version",
        "topology.worker.childopts",
        "topology.worker.gc.childopts",
        "topology.worker.logwriter.childopts",
        "topology.worker.max.heap.size.mb",
        "topology.worker.shared.thread.pool.size",
        "topology.worker.timeout.secs",
    }
)

#: Prefixes of accepted keys: Storm's per-bolt settings (windowing and the like), which a
#: component's configuration passes through to its tasks.
KNOWN_PREFIXES: tuple[str, ...] = ("topology.bolts.",)

_PREFIX = "topology."


def known_keys() -> frozenset[str]:
    """Every ``topology.*`` key squall accepts without a warning: the keys it reads (the
    :class:`Config` constants, :data:`DEFAULTS`, :data:`COMPONENT_KEYS`,
    :data:`SPARK_KEYS`) and :data:`STORM_KEYS`."""
    constants = {
        value
        for name, value in vars(Config).items()
        if name.startswith("TOPOLOGY_") and isinstance(value, str)
    }
    return frozenset(constants | set(DEFAULTS) | COMPONENT_KEYS | SPARK_KEYS | STORM_KEYS)


def check_config_keys(conf: dict[str, Any]) -> list[str]:
    """One message per ``topology.*`` key of ``conf`` that squall does not know, in the
    order of ``conf``: ``unknown configuration key 'topology.workrs' (did you mean
    'topology.workers'?)``, or ``... (not used by squall)`` when no known key is close.

    Pure: runs wherever it is called and changes nothing. Keys outside ``topology.*``
    (the application's own) are never reported.
    """
    known = known_keys()
    suffixes = {key[len(_PREFIX) :]: key for key in known}
    messages = []
    for key in conf:
        if (
            not isinstance(key, str)
            or not key.startswith(_PREFIX)
            or key in known
            or key.startswith(KNOWN_PREFIXES)
        ):
            continue
        close = difflib.get_close_matches(key[len(_PREFIX) :], list(suffixes), n=1, cutoff=0.7)
        hint = f"did you mean {suffixes[close[0]]!r}?" if close else "not used by squall"
        messages.append(f"unknown configuration key {key!r} ({hint})")
    return messages


def warn_unknown_keys(conf: dict[str, Any], stacklevel: int = 2) -> list[str]:
    """Issue a :class:`ConfigWarning` for each message of :func:`check_config_keys`.

    Called by the engines' ``submit_topology``, on the submitting thread. The keys stay
    in ``conf``: components still receive them. ``stacklevel`` is counted from the
    caller, as for ``warnings.warn``: the default 2 points the warnings at the line
    that called the caller (the user's ``submit_topology`` call).

    Returns:
        The messages warned about.
    """
    messages = check_config_keys(conf)
    for message in messages:
        warnings.warn(message, ConfigWarning, stacklevel=stacklevel + 1)
    return messages
