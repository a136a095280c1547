"""Topology configuration: a ``dict`` with Storm's key names."""

from __future__ import annotations

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

    def set_num_workers(self, workers: int) -> Config:
        """Number of workers the topology runs in (``topology.workers``)."""
        self[self.TOPOLOGY_WORKERS] = workers
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
