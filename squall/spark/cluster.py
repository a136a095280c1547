"""``SparkCluster``: runs topologies on Apache Spark through PySpark (micro-batches)."""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import cloudpickle

from squall.model.config import warn_unknown_keys
from squall.model.errors import InvalidTopologyError
from squall.model.fields import Fields
from squall.model.topology import StormTopology
from squall.runtime.clock import SYSTEM_CLOCK, Clock
from squall.runtime.metrics import ComponentStats, TopologyInfo
from squall.runtime.registry import TopologyRegistry
from squall.spark.execute.batchbolts import forget as forget_batch_bolts
from squall.spark.execute.batchpipeline import BatchPipeline
from squall.spark.execute.bolttasks import forget as forget_bolt_tasks
from squall.spark.execute.corepipeline import CorePipeline
from squall.spark.execute.driver import MicroBatchDriver
from squall.spark.execute.figures import BatchFigures
from squall.spark.execute.stages import forget
from squall.spark.execute.taskstate import CoreSetup, write_setup
from squall.spark.plan.batch import QueryPlan, SourcePlan, query_plans
from squall.spark.plan.core import CorePlan, core_plan, is_core
from squall.spark.plan.pickling import pickle_user_code_by_value
from squall.spark.runtime.resources import Resources
from squall.spark.runtime.session import get_session
from squall.spark.sources.coresource import read_poll
from squall.spark.sources.datasource import SOURCE_NAME, SpoutSource
from squall.spark.sources.offsets import OffsetLog, last_committed_batch
from squall.spark.sources.readers import READERS
from squall.spark.sources.setup import SourceSetup
from squall.spark.sources.spoutlog import SpoutLog

logger = logging.getLogger("squall")

BATCH_INTERVAL_KEY = "topology.spark.batch.interval.millis"
DEFAULT_BATCH_INTERVAL_MS = 100
#: How long killing a core topology waits for its spouts to be closed.
CLOSE_WAIT_SECS = 5.0


@dataclass
class _Query:
    """One streaming query of a topology: its sources and the stages they feed (a
    Trident or transactional query plan, or a core topology's plan)."""

    plan: QueryPlan | None
    query: Any
    driver: MicroBatchDriver
    directory: str
    core: CorePlan | None = None
    #: A core query's set-up file (its tasks' workers cache it by path).
    setup_path: str | None = None
    #: A ``processAllAvailable`` still running from a ``wait_idle`` that timed out.
    waiter: _AvailableWaiter | None = None
    #: The last micro-batch its checkpoint had committed when it started (it resumed
    #: after that batch), or None (a new checkpoint).
    resumed_from_batch: int | None = None


class _AvailableWaiter:
    """Runs a query's ``processAllAvailable`` on a thread of its own, so that a caller can
    wait for it with a timeout (the call itself has none: with a spout that always has
    data it may never return). Ends with the query at the latest."""

    def __init__(self, query: Any) -> None:
        self._query = query
        self.done = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name="squall-spark-wait-idle", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            self._query.processAllAvailable()
        except BaseException as exc:  # the query failed or was stopped
            self.error = exc
        finally:
            self.done.set()


@dataclass
class _Running:
    name: str
    topology: StormTopology
    queries: list[_Query]
    run_key: str
    started: float
    bridges: list[Any]
    status: str = "ACTIVE"


class SparkCluster(TopologyRegistry[_Running]):
    """Runs topologies on Spark: the same ``StormTopology`` objects as ``LocalCluster``.

    Each micro-batch of the topology's streaming query is one transaction (txid = batch
    id + 1). Spouts run as streaming sources whose batches are logged under the
    checkpoint directory, so a restarted cluster (same ``checkpoint_dir``) resumes where
    the last run committed and no batch is applied twice to transactional or opaque
    state. A topology that resumes says so when submitted (a warning on the ``squall``
    logger, and ``extra["resumed_from_batch"]`` in its info).

    Args:
        master: Spark master URL (default: a local session, ``local[*, 4]``). A
            malformed URL, or a ``spark://`` master that cannot be reached, raises
            ``SparkUnavailableError`` before any JVM starts.
        spark: an existing ``SparkSession`` to use (not stopped by ``shutdown``, never
            reconfigured).
        checkpoint_dir: where query checkpoints and spout logs live (default: a new
            temporary directory, removed by ``shutdown``).
        spark_conf: extra Spark configuration for a session this cluster creates.
        clock: what the driver waits on between the attempts of a failed micro-batch;
            tests pass a :class:`~squall.runtime.clock.ManualClock` (its waits are
            instant and exact).
        verbose: for a session this cluster creates, Spark's own console output (its
            log at WARN, progress bars) and squall's log records in Spark's Python
            processes; by default a new session is quiet (see
            :func:`~squall.spark.session.get_session`).
    """

    def __init__(
        self,
        master: str | None = None,
        spark: Any = None,
        checkpoint_dir: str | None = None,
        spark_conf: dict[str, Any] | None = None,
        clock: Clock | None = None,
        verbose: bool = False,
    ) -> None:
        if spark is None:
            from pyspark.sql import SparkSession

            self._owns_session = SparkSession.getActiveSession() is None
            spark = get_session(master, spark_conf, verbose)
        else:
            self._owns_session = False
        super().__init__()
        self.spark = spark
        self.spark.dataSource.register(SpoutSource)
        self._temporary_checkpoint = not checkpoint_dir
        self.checkpoint_dir = checkpoint_dir or tempfile.mkdtemp(prefix="squall-spark-")
        self.clock = clock or SYSTEM_CLOCK
        self.resources = Resources(self.spark.sparkContext)

    def submit_topology(
        self, name: str, conf: dict[str, Any] | None, topology: StormTopology
    ) -> None:
        """Start ``topology`` as a streaming query named ``name``.

        Raises:
            SquallError: a topology called ``name`` is running.
            InvalidTopologyError: the topology is invalid, uses a feature the Spark
                engine does not run (the message says which), or a component cannot be
                pickled (the message names the component and attribute).
        """
        if not isinstance(topology, StormTopology):
            raise InvalidTopologyError(
                f"submit_topology({name!r}) needs a StormTopology, got {type(topology).__name__}"
            )
        conf = dict(conf or {})
        warn_unknown_keys(conf)
        with self._lock:
            self._claim(name)
        pickle_user_code_by_value(topology)
        run_key = f"{name}-{uuid.uuid4().hex}"
        bridges: list[Any] = []
        queries: list[_Query] = []
        if is_core(topology):
            core = core_plan(name, topology, conf)  # first: what the engine cannot run
            queries.append(self._start_core_query(name, core, run_key))
            with self._lock:
                self._topologies[name] = _Running(
                    name, topology, queries, run_key, time.monotonic(), bridges
                )
            self._say_if_resumed(name, queries)
            return
        plans = query_plans(topology)  # first: what the engine cannot run at all
        try:
            for plan in plans:
                queries.append(self._start_query(name, conf, plan, run_key, bridges))
        except BaseException:
            for started in queries:
                started.query.stop()
            for bridge in bridges:
                bridge.stop()
            raise
        with self._lock:
            self._topologies[name] = _Running(
                name, topology, queries, run_key, time.monotonic(), bridges
            )
        self._say_if_resumed(name, queries)

    def _say_if_resumed(self, name: str, queries: list[_Query]) -> None:
        """Log a warning when a query of ``name`` resumed from its checkpoint: its spouts
        continue where that run left off (a finite spout may have nothing left)."""
        resumed = [q.resumed_from_batch for q in queries if q.resumed_from_batch is not None]
        if resumed:
            logger.warning(
                "topology %r resumes from checkpoint %s after batch %d: its spouts continue "
                "from there (another name or checkpoint directory starts afresh)",
                name,
                os.path.join(self.checkpoint_dir, name),
                resumed[0],
            )

    def _start_query(
        self, name: str, conf: dict[str, Any], plan: QueryPlan, run_key: str, bridges: list[Any]
    ) -> _Query:
        """Write the sources' set-up files and start the streaming query of ``plan``: one
        reader per source, their rows unioned."""
        directory = os.path.join(self.checkpoint_dir, name, plan.key.replace("/", "_"))
        os.makedirs(directory, exist_ok=True)
        pause_file = os.path.join(directory, "paused")
        if os.path.exists(pause_file):
            os.remove(pause_file)
        checkpoint = os.path.join(directory, "checkpoint")
        resumed_from = last_committed_batch(checkpoint)
        logs: dict[str, SpoutLog] = {}
        frame = None
        for source in plan.sources:
            source_dir = os.path.join(directory, source.component_id.replace("/", "_"))
            os.makedirs(source_dir, exist_ok=True)
            setup_file = os.path.join(source_dir, "setup.pickle")
            setup = SourceSetup(
                source.component_id,
                READERS[source.kind],
                source.spout,
                source.outputs,
                Fields(list(source.fields)),
                conf,
                source.drpc_function,
                source.tasks,
                source.output_fields,
                {s.component_id: s.tasks for s in plan.segments},
                os.path.join(source_dir, "coordination"),
            )
            with open(setup_file, "wb") as handle:
                handle.write(cloudpickle.dumps(setup))
            log_dir = os.path.join(source_dir, "spout-log")
            logs[source.component_id] = SpoutLog(log_dir)
            reader = (
                self.spark.readStream.format(SOURCE_NAME)
                .option("source", source.component_id)
                .option("run", run_key)
                .option("log", log_dir)
                .option("setup", setup_file)
                .option("pause", pause_file)
            )
            if source.kind == "drpc":
                host, port, token = self._drpc_address(source, conf, bridges)
                reader = reader.option("drpc_host", host).option("drpc_port", str(port))
                if token is not None:  # Spark redacts options named like *token*
                    reader = reader.option("drpc_token", token)
            loaded = reader.load()
            frame = loaded if frame is None else frame.unionAll(loaded)
        pipeline = BatchPipeline(plan, conf, run_key, self.spark, logs)
        driver = MicroBatchDriver(pipeline, OffsetLog(checkpoint), conf, name, self.clock)
        interval = int(conf.get(BATCH_INTERVAL_KEY, DEFAULT_BATCH_INTERVAL_MS))
        assert frame is not None
        query = (
            frame.writeStream.foreachBatch(driver)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=f"{interval} milliseconds")
            .queryName(f"squall-{name}-{plan.key.replace('/', '_')}")
            .start()
        )
        return _Query(plan, query, driver, directory, resumed_from_batch=resumed_from)

    def _start_core_query(self, name: str, core: CorePlan, run_key: str) -> _Query:
        """Start the streaming query of a core topology: one source per spout, their
        packets unioned, each micro-batch run by a ``CorePipeline``."""
        directory = os.path.join(self.checkpoint_dir, name, "core")
        os.makedirs(directory, exist_ok=True)
        pause_file = os.path.join(directory, "paused")
        close_file = os.path.join(directory, "closing")
        for leftover in (pause_file, close_file):
            if os.path.exists(leftover):
                os.remove(leftover)
        checkpoint = os.path.join(directory, "checkpoint")
        resumed_from = last_committed_batch(checkpoint)
        for name_in_dir in os.listdir(directory):  # the set-ups of earlier runs
            if name_in_dir.startswith("setup-") and name_in_dir.endswith(".pickle"):
                os.remove(os.path.join(directory, name_in_dir))
        # One file per run: Python workers cache a set-up by its path.
        setup_path = os.path.join(directory, f"setup-{run_key}.pickle")
        write_setup(setup_path, CoreSetup(run_key, core, os.path.join(directory, "state")))
        logs: dict[str, SpoutLog] = {}
        stats_paths: dict[str, str] = {}
        tick_secs = core.min_tick_secs()
        frame = None
        for position, spout_id in enumerate(core.spouts):
            source_dir = os.path.join(directory, spout_id.replace("/", "_"))
            log_dir = os.path.join(source_dir, "spout-log")
            logs[spout_id] = SpoutLog(log_dir)
            stats_paths[spout_id] = os.path.join(source_dir, "stats.pickle")
            closed = os.path.join(source_dir, "closed")
            polls = os.path.join(source_dir, "polls")
            for leftover in (closed, polls):
                if os.path.exists(leftover):
                    os.remove(leftover)
            reader = (
                self.spark.readStream.format(SOURCE_NAME)
                .option("setup", setup_path)
                .option("source", spout_id)
                .option("run", run_key)
                .option("log", log_dir)
                .option("stats", stats_paths[spout_id])
                .option("pause", pause_file)
                .option("close", close_file)
                .option("closed", closed)
                .option("polls", polls)
            )
            if position == 0 and tick_secs is not None:  # idle batches bring ticks
                reader = reader.option("ticks", str(tick_secs))
            loaded = reader.load()
            frame = loaded if frame is None else frame.unionAll(loaded)
        pipeline = CorePipeline(core, setup_path, self.spark, logs, stats_paths)
        driver = MicroBatchDriver(pipeline, OffsetLog(checkpoint), core.conf, name, self.clock)
        interval = int(core.conf.get(BATCH_INTERVAL_KEY, DEFAULT_BATCH_INTERVAL_MS))
        assert frame is not None
        query = (
            frame.writeStream.foreachBatch(driver)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=f"{interval} milliseconds")
            .queryName(f"squall-{name}-core")
            .start()
        )
        return _Query(
            None, query, driver, directory, core, setup_path, resumed_from_batch=resumed_from
        )

    def _drpc_address(
        self, source: SourcePlan, conf: dict[str, Any], bridges: list[Any]
    ) -> tuple[str, int, str | None]:
        """``(host, invocations port, token)`` where the source fetches DRPC requests:
        a loopback server in front of a ``LocalDRPC`` of this process, serving only its
        invocations side and requiring a random token (so no other local user can fetch
        or answer its requests), or the DRPC server named in the configuration."""
        from squall.drpc import (
            DRPC_INVOCATIONS_AUTHORIZATION_TOKEN,
            DRPCServer,
            invocations_clients_from_conf,
        )
        from squall.drpc.config import token_from_conf

        if source.drpc is None:
            servers = conf.get("drpc.servers") or ["127.0.0.1"]
            client = invocations_clients_from_conf({**conf, "drpc.servers": servers})[0]
            token = token_from_conf(conf, DRPC_INVOCATIONS_AUTHORIZATION_TOKEN)
            return client.host, client.port, token
        token = secrets.token_urlsafe(32)
        bridge = DRPCServer(
            "127.0.0.1", None, broker=source.drpc.broker, invocations_token=token
        ).start()
        bridges.append(bridge)
        return "127.0.0.1", bridge.invocations_port, token

    def wait_idle(self, name: str, timeout_secs: float = 60.0) -> bool:
        """Wait until every batch the spouts have is processed; False if a query stopped
        or failed, or the topology did not go idle within ``timeout_secs``.

        A Trident or transactional topology is idle once its queries have processed
        everything their sources offer (Spark's ``processAllAvailable``; a spout that
        always has data never is). A core topology is idle once every spout's source has
        polled twice since the call, the last poll emitted nothing, and every batch
        holding tuples has had its trees acked or failed (empty batches carrying tick
        tuples go on)."""
        running = self._get(name)
        deadline = time.monotonic() + timeout_secs
        for item in running.queries:
            left = max(0.0, deadline - time.monotonic())
            if item.core is not None:
                if not self._wait_core_idle(running, item, left):
                    return False
                continue
            if not self._wait_batch_idle(running, item, left):
                return False
        return True

    def _wait_batch_idle(self, running: _Running, item: _Query, timeout_secs: float) -> bool:
        waiter = item.waiter
        if waiter is None:
            waiter = item.waiter = _AvailableWaiter(item.query)
        if not waiter.done.wait(timeout_secs):
            return False  # still waiting: a later call goes on with the same waiter
        item.waiter = None
        if waiter.error is not None:
            if item.query.isActive or item.query.exception() is not None:
                # The query failed: reported by get_topology_info.
                running.status = "FAILED"
                item.driver.figures.record(waiter.error)
            return False
        return True

    def _wait_core_idle(self, running: _Running, item: _Query, timeout_secs: float) -> bool:
        assert item.core is not None
        paths = [
            os.path.join(item.directory, spout_id.replace("/", "_"), "polls")
            for spout_id in item.core.spouts
        ]
        started = [read_poll(path) for path in paths]
        deadline = time.monotonic() + timeout_secs
        while True:
            if not item.query.isActive:
                exception = item.query.exception()
                if exception is not None:
                    running.status = "FAILED"
                    item.driver.figures.record(exception)
                return False
            polls = [read_poll(path) for path in paths]
            if all(
                poll is not None
                and poll[0] >= (first[0] if first is not None else 0) + 2
                and poll[1] == 0
                and poll[2] == 0
                for poll, first in zip(polls, started, strict=True)
            ):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    def deactivate(self, name: str) -> None:
        """Stop polling the spouts (batches already read still run)."""
        running = self._get(name)
        for item in running.queries:
            open(os.path.join(item.directory, "paused"), "w").close()
        running.status = "INACTIVE"

    def activate(self, name: str) -> None:
        """Resume polling the spouts."""
        running = self._get(name)
        for item in running.queries:
            pause = os.path.join(item.directory, "paused")
            if os.path.exists(pause):
                os.remove(pause)
        running.status = "ACTIVE"

    def kill_topology(self, name: str, wait_secs: float | None = None) -> None:
        """Stop the queries (after the batches in progress) and release the operations."""
        running = self._get(name)
        try:
            for item in running.queries:
                if item.core is not None:
                    self._close_spouts(item)
                item.driver.stop()  # an interrupted batch is not run again
                item.query.stop()
                if item.setup_path is not None:
                    # Gone: workers drop this run's live tasks (see bolttasks.live_bolt).
                    os.remove(item.setup_path)
        finally:
            for bridge in running.bridges:
                bridge.stop()
            for processor in forget(running.run_key):
                processor.cleanup()
            forget_batch_bolts(running.run_key)
            forget_bolt_tasks(running.run_key)
            with self._lock:
                self._topologies.pop(name, None)

    def _close_spouts(self, item: _Query) -> None:
        """Have a core query's sources deactivate and close their spout tasks (at their
        next trigger); wait up to ``CLOSE_WAIT_SECS`` for them."""
        assert item.core is not None
        open(os.path.join(item.directory, "closing"), "w").close()
        markers = [
            os.path.join(item.directory, spout_id.replace("/", "_"), "closed")
            for spout_id in item.core.spouts
        ]
        deadline = time.monotonic() + CLOSE_WAIT_SECS
        while item.query.isActive and time.monotonic() < deadline:
            if all(os.path.exists(marker) for marker in markers):
                return
            time.sleep(0.01)

    def get_topology_info(self, name: str) -> TopologyInfo:
        """Micro-batch figures and errors (``extra``: of the first query, the spout's;
        ``extra["queries"]``: every query's), and the components.

        ``extra`` also holds ``resources`` (what the session runs on, e.g.
        ``"local[2, 4]: 2 cores"``), ``checkpoint_dir``, and ``resumed_from_batch``
        when the query resumed from its checkpoint. A bolt's (or stage's) capacity is
        measured against the recent micro-batches' wall time (see
        :mod:`squall.spark.control.capacity`)."""
        running = self._get(name)
        status = running.status
        components: dict[str, ComponentStats] = {}
        per_query: dict[str, Any] = {}
        for item in running.queries:
            if not item.query.isActive:
                status = "FAILED" if item.query.exception() else "KILLED"
            components.update(item.driver.component_stats())
            key = "core" if item.plan is None else item.plan.key
            per_query[key] = _batch_figures(item.driver.figures, item.resumed_from_batch)
        first = next(iter(per_query.values()))
        extra = {**first, "queries": per_query, "checkpoint_dir": self.checkpoint_dir}
        resources = self.resources.line()
        if resources:
            extra["resources"] = resources
        return TopologyInfo(
            name=name,
            status=status,
            uptime_secs=time.monotonic() - running.started,
            workers=0,
            components=components,
            extra=extra,
        )

    def get_topology(self, name: str) -> StormTopology:
        """The topology submitted as ``name``."""
        return self._get(name).topology

    def shutdown(self) -> None:
        """Stop every topology; stop the SparkSession if this cluster started it, and
        remove the checkpoint directory if it is the temporary one it made."""
        try:
            for name in list(self._topologies):
                self.kill_topology(name)
            if self._owns_session:
                self.spark.stop()
        finally:
            if self._temporary_checkpoint:
                shutil.rmtree(self.checkpoint_dir, ignore_errors=True)


def _batch_figures(figures: BatchFigures, resumed_from_batch: int | None) -> dict[str, Any]:
    """What ``get_topology_info`` reports about a query's micro-batches (with
    ``resumed_from_batch`` if the query resumed from its checkpoint)."""
    resumed = {} if resumed_from_batch is None else {"resumed_from_batch": resumed_from_batch}
    return {
        **resumed,
        "batches": figures.batches,
        "last_batch_id": figures.last_batch_id,
        "last_batch_rows": figures.last_rows,
        "last_batch_ms": figures.last_duration_ms,
        "median_batch_ms": statistics.median(figures.recent_ms) if figures.recent_ms else 0.0,
        "rows_total": figures.rows_total,
        "retries": figures.retries,
        "errors": [error.error for error in figures.errors],
    }


__all__ = ["SparkCluster"]
