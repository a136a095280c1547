"""``SparkCluster``: runs topologies on Apache Spark through PySpark (micro-batches)."""

from __future__ import annotations

import logging
import secrets
import statistics
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from squall.compiled import warn_if_interpreted
from squall.drpc.bridge import LocalDRPCBridges
from squall.model.clock import SYSTEM_CLOCK, Clock
from squall.model.config import warn_unknown_keys
from squall.model.errors import InvalidTopologyError, SquallError
from squall.model.topology import StormTopology
from squall.runtime.cluster import EmitListener
from squall.runtime.engine_figures import QueryFigures, SparkFigures
from squall.runtime.metrics import ComponentStats, TopologyInfo
from squall.runtime.registry import TopologyRegistry
from squall.spark.control import storage
from squall.spark.control.location import CheckpointLocationError, checkpoint_location
from squall.spark.control.reach import check_executors_reach
from squall.spark.control.rundir import QueryDirectory
from squall.spark.control.shape import check_shape
from squall.spark.control.taskcache import LIVE_RUNS, TASKS
from squall.spark.control.watch import TerminationWatch
from squall.spark.execute.figures import BatchFigures
from squall.spark.execute.listener import EMIT_LISTENER_KEY
from squall.spark.launch.coreform import core_form, describe
from squall.spark.launch.javaerrors import python_failure
from squall.spark.launch.pythonexec import is_local_master
from squall.spark.launch.resources import Resources
from squall.spark.launch.session import get_session
from squall.spark.plan.batch import SourcePlan, query_plans
from squall.spark.plan.core import core_plan, is_core
from squall.spark.plan.pickling import pickle_user_code_by_value
from squall.spark.sources.datasource import SpoutSource
from squall.spark.streaming.queries import Query, start_batch_query, start_core_query
from squall.transactional.ir import TransactionalIR

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from squall.drpc import DRPCServer

logger = logging.getLogger("squall")


@dataclass
class _Running:
    name: str
    topology: StormTopology
    queries: list[Query]
    run_key: str
    started: float
    bridges: list[DRPCServer]
    conf: dict[str, Any]
    status: str = "ACTIVE"


class SparkCluster(TopologyRegistry[_Running]):
    """Runs topologies on Spark: the same ``StormTopology`` objects as ``LocalCluster``.

    Each micro-batch of the topology's streaming query is one transaction (txid = batch
    id + 1). Spouts run as streaming sources whose batches are logged under the
    checkpoint directory, so a restarted cluster (same ``checkpoint_dir``) resumes where
    the last run committed and no batch is applied twice to transactional or opaque
    state. A topology that resumes says so when submitted (a warning on the ``squall``
    logger, and ``resumed_from_batch`` in its info's ``spark`` figures); another topology
    submitted under the name of a checkpoint is refused unless it asks for a fresh
    start (see :meth:`submit_topology`).

    Args:
        master: Spark master URL (default: a local session, ``local[*, 4]``). A
            malformed URL, or a ``spark://`` master that cannot be reached, raises
            ``SparkUnavailableError`` before any JVM starts.
        spark: an existing ``SparkSession`` to use (not stopped by ``shutdown``, never
            reconfigured).
        checkpoint_dir: where query checkpoints, spout logs and task snapshots live: a
            path, a ``file:`` URI, or a URI of a file system Spark and ``pyarrow.fs``
            both reach (``hdfs://``, ``s3a://`` ...). Default: Spark's
            ``spark.sql.streaming.checkpointLocation`` if set, else on a local master a
            new temporary directory (removed by ``shutdown``). On a cluster (any other
            master) the location must be one every node reaches; it is checked with a
            small Spark job when the cluster is made, and a cluster master without
            either setting raises ``CheckpointLocationError``, as does a location
            squall cannot use.
        spark_conf: extra Spark configuration for a session this cluster creates.
        clock: what the driver waits on between the attempts of a failed micro-batch;
            tests pass a :class:`~squall.model.clock.ManualClock` (its waits are
            instant and exact).
        verbose: for a session this cluster creates, Spark's own console output (its
            log at WARN, progress bars) and squall's log records in Spark's Python
            processes; by default a new session is quiet (see
            :func:`~squall.spark.session.get_session`).
    """

    def __init__(
        self,
        master: str | None = None,
        spark: SparkSession | None = None,
        checkpoint_dir: str | None = None,
        spark_conf: dict[str, Any] | None = None,
        clock: Clock | None = None,
        verbose: bool = False,
    ) -> None:
        # Checked before a session starts: a bad location fails at once.
        location = checkpoint_location(checkpoint_dir) if checkpoint_dir else None
        if spark is None:
            from pyspark.sql import SparkSession

            self._owns_session = SparkSession.getActiveSession() is None
            spark = get_session(master, spark_conf, verbose)
        else:
            self._owns_session = False
        try:
            location = self._location(spark, location)
        except BaseException:
            if self._owns_session:
                spark.stop()
            raise
        super().__init__()
        self.spark = spark
        self.spark.dataSource.register(SpoutSource)
        self._temporary_checkpoint = location is None
        self.checkpoint_dir = location or tempfile.mkdtemp(prefix="squall-spark-")
        self.clock = clock or SYSTEM_CLOCK
        self._resources = Resources(self.spark.sparkContext)
        self.watch = TerminationWatch()
        self.watch.attach(self.spark)

    @property
    def engine(self) -> str:
        """``"spark"``."""
        return "spark"

    @property
    def resources(self) -> str:
        """What the session runs on: ``"local[2, 4]: 2 cores"``, or the master, its
        executors and their cores (asked of Spark at most once a second; ``""`` once the
        session is stopped)."""
        return self._resources.line()

    @staticmethod
    def _location(spark: SparkSession, given: str | None) -> str | None:
        """The checkpoint location: the one given, else Spark's
        ``spark.sql.streaming.checkpointLocation``, else on a local master None (a
        temporary directory). On a cluster, the location is checked to be shared by
        the driver and the executors.

        Raises:
            CheckpointLocationError: a cluster master and no location, a location
                squall cannot use, or one the executors do not share.
        """
        configured = spark.conf.get("spark.sql.streaming.checkpointLocation", None)
        location = given or (checkpoint_location(configured) if configured else None)
        master = spark.sparkContext.master or "local"
        if is_local_master(master):
            return location
        if location is None:
            raise CheckpointLocationError(
                f"on the cluster {master} the checkpoint must be a location every node "
                "reaches: give checkpoint_dir (squall run --checkpoint), e.g. a shared "
                "mount, hdfs:// or s3a://, or set spark.sql.streaming.checkpointLocation"
            )
        check_executors_reach(spark, location)
        return location

    def submit_topology(
        self,
        name: str,
        conf: dict[str, Any] | None,
        topology: StormTopology,
        *,
        fresh: bool = False,
        emit_listener: EmitListener | None = None,
    ) -> None:
        """Start ``topology`` as a streaming query named ``name``.

        The checkpoint ``<checkpoint_dir>/<name>`` resumes when the same topology (the
        same components, classes, tasks, streams and groupings) wrote it; one another
        topology wrote is refused. ``fresh=True`` discards what the checkpoint holds
        for ``name`` first, so the topology starts afresh.

        ``emit_listener``, if given, is called as ``emit_listener(component_id,
        stream_id, task_id, values, targets)`` for every tuple a spout or bolt emits,
        in the process where the emitting task runs (an executor's Python worker, the
        driver, a source's process): it must be picklable, and it sees again the emits
        of a micro-batch that is run again. Core and transactional topologies only.

        Raises:
            SquallError: a topology called ``name`` is running.
            InvalidTopologyError: the topology is invalid, uses a feature the Spark
                engine does not run (the message says which), or a component cannot be
                pickled (the message names the component and attribute).
            CheckpointMismatchError: without ``fresh``, the checkpoint of ``name`` was
                written by another topology (the message names the checkpoint and what
                differs).
        """
        if not isinstance(topology, StormTopology):
            raise InvalidTopologyError(
                f"submit_topology({name!r}) needs a StormTopology, got {type(topology).__name__}"
            )
        conf = dict(conf or {})
        warn_unknown_keys(conf)
        warn_if_interpreted()
        if emit_listener is not None:
            if topology.batch_ir is not None and not isinstance(topology.batch_ir, TransactionalIR):
                raise InvalidTopologyError(
                    f"submit_topology({name!r}): an emit_listener (and complete_topology) "
                    "on SparkCluster runs core and transactional topologies, not Trident "
                    "topologies (run them on LocalCluster)"
                )
            conf[EMIT_LISTENER_KEY] = emit_listener
        with self._lock:
            self._claim(name)
        pickle_user_code_by_value(topology)
        run_key = f"{name}-{uuid.uuid4().hex}"
        LIVE_RUNS.add(run_key)
        try:
            self._start(name, conf, topology, run_key, fresh)
        except BaseException:
            LIVE_RUNS.discard(run_key)
            raise

    def _start(
        self, name: str, conf: dict[str, Any], topology: StormTopology, run_key: str, fresh: bool
    ) -> None:
        """Start the queries of ``topology`` as run ``run_key`` (``fresh``: on a new
        checkpoint)."""
        bridges: list[DRPCServer] = []
        queries: list[Query] = []
        checkpoint = storage.join(self.checkpoint_dir, name)
        if is_core(topology):
            core = core_plan(name, topology, conf)  # first: what the engine cannot run
            check_shape(checkpoint, name, topology, fresh)
            directory = QueryDirectory.of(self.checkpoint_dir, name, "core")
            # A LocalDRPC a component holds (a DRPCSpout's) is reached from the sources'
            # and executors' processes through a loopback bridge.
            drpc_bridges = LocalDRPCBridges()
            try:
                queries.append(
                    start_core_query(self.spark, directory, core, run_key, self.clock, drpc_bridges)
                )
            except BaseException:
                drpc_bridges.stop()
                raise
            bridges.extend(drpc_bridges.servers)
            with self._lock:
                self._register(
                    name,
                    _Running(name, topology, queries, run_key, time.monotonic(), bridges, conf),
                )
            self._say_if_resumed(name, queries)
            return
        plans = query_plans(topology, conf, name)  # first: what the engine cannot run at all
        check_shape(checkpoint, name, topology, fresh)
        try:
            for plan in plans:
                directory = QueryDirectory.of(self.checkpoint_dir, name, plan.key)
                queries.append(
                    start_batch_query(
                        self.spark,
                        directory,
                        name,
                        conf,
                        plan,
                        run_key,
                        lambda source: self._drpc_address(source, conf, bridges),
                        self.clock,
                    )
                )
        except BaseException:
            for started in queries:
                started.query.stop()
            for bridge in bridges:
                bridge.stop()
            raise
        with self._lock:
            self._register(
                name, _Running(name, topology, queries, run_key, time.monotonic(), bridges, conf)
            )
        self._say_if_resumed(name, queries)

    def _say_if_resumed(self, name: str, queries: list[Query]) -> None:
        """Log a warning when a query of ``name`` resumed from its checkpoint: its spouts
        continue where that run left off (a finite spout may have nothing left)."""
        resumed = [q.resumed_from_batch for q in queries if q.resumed_from_batch is not None]
        if resumed:
            logger.warning(
                "topology %r resumes from checkpoint %s after batch %d: its spouts continue "
                "from there (another name or checkpoint directory starts afresh)",
                name,
                storage.join(self.checkpoint_dir, name),
                resumed[0],
            )

    def _drpc_address(
        self, source: SourcePlan, conf: dict[str, Any], bridges: list[DRPCServer]
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
            idle = item.wait_idle(max(0.0, deadline - time.monotonic()))
            if item.failed:
                running.status = "FAILED"
            if not idle:
                return False
        return True

    def wait_complete(self, name: str, timeout_secs: float) -> None:
        """Wait until ``name``'s spouts have emitted everything they have and every batch
        is processed (:meth:`wait_idle`: a core spout's polls emit nothing more and its
        trees are acked or failed; a Trident or transactional source has nothing more to
        offer). Runs on the caller's thread.

        Raises:
            SquallError: no topology ``name`` is running, or a query failed (the
                message gives the last error of its failed micro-batches).
            TimeoutError: not complete within ``timeout_secs``.
        """
        if self.wait_idle(name, timeout_secs):
            return
        info = self.get_topology_info(name)
        if info.status == "FAILED":
            queries = info.spark.queries.values() if info.spark is not None else ()
            errors = [error for query in queries for error in query.errors]
            raise SquallError(
                f"topology {name!r} failed on SparkCluster: {errors[-1] if errors else info.status}"
            )
        raise TimeoutError(
            f"topology did not complete in {timeout_secs} s on SparkCluster (its spouts "
            "still had batches to process)"
        )

    def deactivate(self, name: str) -> None:
        """Stop polling the spouts (batches already read still run)."""
        running = self._get(name)
        for item in running.queries:
            item.directory.pause()
        running.status = "INACTIVE"

    def activate(self, name: str) -> None:
        """Resume polling the spouts."""
        running = self._get(name)
        for item in running.queries:
            item.directory.resume()
        running.status = "ACTIVE"

    def kill_topology(self, name: str, wait_secs: float | None = None) -> None:
        """Stop the queries (after the batches in progress) and release the operations."""
        running = self._get(name)
        try:
            for item in running.queries:
                item.stop()
        finally:
            for bridge in running.bridges:
                bridge.stop()
            with self._lock:
                self._release(name)
            LIVE_RUNS.discard(running.run_key)
            TASKS.forget(running.run_key)

    def get_topology_info(self, name: str, window_secs: int | None = None) -> TopologyInfo:
        """The components' figures: since the topology started, or over its last
        ``window_secs`` seconds (one of :attr:`metric_windows`; see
        :mod:`squall.runtime.rolling`); and in ``spark``
        (:class:`~squall.runtime.engine_figures.SparkFigures`) every query's
        micro-batch figures and errors (``resumed_from_batch`` when it resumed from
        its checkpoint), ``resources`` (what the session runs on, e.g.
        ``"local[2, 4]: 2 cores"``), ``checkpoint_dir``, the form of squall's core the
        driver and the executors run (``driver_core``, ``executor_core``: compiled or
        pure), and ``failure`` (one line:
        the exception Spark's message comes from) when a query failed (``status``
        ``"FAILED"``). ``extra`` gives them as a dict, the first query's (the spout's)
        figures at the top. A bolt's (or stage's) capacity is measured against the
        recent micro-batches' wall time (see :mod:`squall.spark.control.capacity`).

        Raises:
            SquallError: no topology ``name`` is running.
            ValueError: ``window_secs`` is not a window the cluster keeps.
        """
        running = self._get(name)
        status = running.status
        components: dict[str, ComponentStats] = {}
        queries: dict[str, QueryFigures] = {}
        failure: str | None = None
        executor_cores: set[str] = set()
        for item in running.queries:
            end = self.watch.ended(item.query_id)
            if end is not None:
                status = "FAILED" if end.error else "KILLED"
                failure = failure or (python_failure(end.error) if end.error else None)
                if end.error:
                    item.stopped_with(end.error)
            components.update(item.driver.component_stats())
            queries[item.key] = _query_figures(item.driver.figures, item.resumed_from_batch)
            executor_cores.update(item.driver.figures.executor_cores)
        info = TopologyInfo(
            name=name,
            status=status,
            uptime_secs=time.monotonic() - running.started,
            workers=0,
            components=components,
            spark=SparkFigures(
                queries=queries,
                checkpoint_dir=self.checkpoint_dir,
                resources=self._resources.line(),
                failure=failure,
                driver_core=core_form(),
                executor_core=describe(executor_cores),
            ),
        )
        return self.in_window(name, info, window_secs)

    def get_topology(self, name: str) -> StormTopology:
        """The topology submitted as ``name``."""
        return self._get(name).topology

    def rebalance(
        self,
        name: str,
        num_workers: int | None = None,
        executors: Mapping[str, int] | None = None,
        wait_secs: float = 0.0,
    ) -> None:
        """Not possible on Spark: :meth:`check_rebalance` says why."""
        self.check_rebalance(name, num_workers, executors, wait_secs)

    def check_rebalance(
        self,
        name: str,
        num_workers: int | None = None,
        executors: Mapping[str, int] | None = None,
        wait_secs: float = 0.0,
    ) -> None:
        """Say why a rebalance is not possible on Spark.

        Raises:
            SquallError: always (naming the topology): a running query's stages keep
                one Spark task per task of their component, and the executors are the
                Spark cluster manager's.
        """
        self._get(name)
        raise SquallError(
            f"SparkCluster cannot rebalance topology {name!r}: each micro-batch runs a "
            "component's tasks as that many Spark tasks, on the executors Spark's cluster "
            "manager gives the application; size them with Spark (spark.cores.max, "
            "spark.executor.instances or dynamic allocation) and the parallelism hints"
        )

    def get_topology_conf(self, name: str) -> dict[str, Any]:
        """The configuration ``name`` was submitted with (a copy)."""
        conf = dict(self._get(name).conf)
        conf.pop(EMIT_LISTENER_KEY, None)
        return conf

    def shutdown(self) -> None:
        """Stop every topology; stop the SparkSession if this cluster started it, and
        remove the checkpoint directory if it is the temporary one it made."""
        try:
            for name in list(self._topologies):
                self.kill_topology(name)
            self.watch.detach()
            if self._owns_session:
                self.spark.stop()
        finally:
            if self._temporary_checkpoint:
                storage.remove_tree(self.checkpoint_dir)


def _query_figures(figures: BatchFigures, resumed_from_batch: int | None) -> QueryFigures:
    """What ``get_topology_info`` reports about a query's micro-batches (with
    ``resumed_from_batch`` if the query resumed from its checkpoint)."""
    return QueryFigures(
        batches=figures.batches,
        last_batch_id=figures.last_batch_id,
        last_batch_rows=figures.last_rows,
        last_batch_ms=figures.last_duration_ms,
        median_batch_ms=statistics.median(figures.recent_ms) if figures.recent_ms else 0.0,
        recent_batches=list(figures.recent)[-RECENT_SHOWN:],
        rows_total=figures.rows_total,
        retries=figures.retries,
        errors=[error.error for error in figures.errors],
        resumed_from_batch=resumed_from_batch,
        duration_ms_total=figures.duration_ms_total,
        duration_buckets=tuple(figures.duration_buckets),
    )


#: The recent micro-batches ``get_topology_info`` lists (``QueryFigures.recent_batches``).
RECENT_SHOWN = 20

__all__ = ["SparkCluster"]
