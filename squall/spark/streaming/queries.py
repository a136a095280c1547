"""The streaming queries of a topology: starting them and steering them.

A Trident or transactional topology has a query for its regular spouts and one per DRPC
stream; a core topology has one. Each reads its sources (one per spout, their packets
unioned) and runs every micro-batch through a
:class:`~squall.spark.streaming.driver.MicroBatchDriver`. The cluster steers a query
through its run directory (see ``control.rundir``): pausing, closing a core topology's
spouts, and reading what the sources say about their polls.

Runs on the driver.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from squall.drpc.bridge import LocalDRPCBridges
from squall.model.clock import Clock
from squall.model.fields import Fields
from squall.runtime import codepickle
from squall.spark.control import storage
from squall.spark.control.rundir import QueryDirectory
from squall.spark.execute.taskstate import CoreSetup, write_setup
from squall.spark.plan.batch import QueryPlan, SourcePlan
from squall.spark.plan.core import CorePlan
from squall.spark.sources.datasource import SOURCE_NAME
from squall.spark.sources.setup import SourceSetup
from squall.spark.sources.spoutlog import SpoutLog
from squall.spark.streaming.batchpipeline import BatchPipeline
from squall.spark.streaming.corepipeline import CorePipeline
from squall.spark.streaming.driver import MicroBatchDriver, Pipeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

BATCH_INTERVAL_KEY = "topology.spark.batch.interval.millis"
DEFAULT_BATCH_INTERVAL_MS = 100
#: How long killing a core topology waits for its spouts to be closed.
CLOSE_WAIT_SECS = 5.0

#: ``(host, invocations port, token)`` where a DRPC stream's source fetches requests.
DRPCAddress = Callable[[SourcePlan], tuple[str, int, str | None]]


class AvailableWaiter:
    """Runs a query's ``processAllAvailable`` on a thread of its own, so that a caller can
    wait for it with a timeout (the call itself has none: with a spout that always has
    data it may never return). Ends with the query at the latest."""

    def __init__(self, query: StreamingQuery) -> None:
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
class Query:
    """One streaming query of a topology: its plan (a Trident or transactional query
    plan, or a core topology's plan), the running query and its driver."""

    plan: QueryPlan | CorePlan
    query: StreamingQuery
    driver: MicroBatchDriver
    directory: QueryDirectory
    #: A core query's set-up file (its tasks' workers keep their tasks while it exists).
    setup_path: str | None = None
    #: The last micro-batch its checkpoint had committed when it started (it resumed
    #: after that batch), or None (a new checkpoint).
    resumed_from_batch: int | None = None
    #: Set once the query is found failed (reported by ``get_topology_info``).
    failed: bool = False
    #: The query's id (Spark's, as a string): read once, it is a call into the JVM.
    query_id: str = ""
    #: A ``processAllAvailable`` still running from a ``wait_idle`` that timed out.
    waiter: AvailableWaiter | None = None
    #: Whether the error the query stopped with was reported (:meth:`stopped_with`).
    stop_reported: bool = False

    def __post_init__(self) -> None:
        if not self.query_id:
            self.query_id = str(self.query.id)

    @property
    def key(self) -> str:
        """The query's name in ``get_topology_info``'s ``spark.queries``."""
        return self.plan.key if isinstance(self.plan, QueryPlan) else "core"

    @property
    def sources(self) -> list[str]:
        """The sources' component ids."""
        if isinstance(self.plan, QueryPlan):
            return [source.component_id for source in self.plan.sources]
        return list(self.plan.spouts)

    @property
    def is_core(self) -> bool:
        """Whether the query runs a core topology."""
        return self.setup_path is not None

    def wait_idle(self, timeout_secs: float) -> bool:
        """Wait until the query has processed what its sources have; False if it
        stopped or failed (``failed`` is then set) or is not idle in time."""
        if self.is_core:
            return self._wait_core_idle(timeout_secs)
        return self._wait_batch_idle(timeout_secs)

    def _failed(self, error: BaseException) -> None:
        self.failed = True
        self.driver.figures.record(error, attribute=False)
        self.stopped_with(error)

    def stopped_with(self, error: BaseException | str) -> None:
        """The query stopped with ``error`` (the exception a wait received, or Spark's
        message of the query's end): a component's code that raised it outside a
        micro-batch (a Trident batch spout emits in its source) reports it in its
        errors, once per query (see ``BatchFigures.record_stop``)."""
        if self.stop_reported:
            return
        self.stop_reported = True
        self.driver.figures.record_stop(error)

    def _wait_batch_idle(self, timeout_secs: float) -> bool:
        waiter = self.waiter
        if waiter is None:
            waiter = self.waiter = AvailableWaiter(self.query)
        if not waiter.done.wait(timeout_secs):
            return False  # still waiting: a later call goes on with the same waiter
        self.waiter = None
        if waiter.error is not None:
            if self.query.isActive or self.query.exception() is not None:
                self._failed(waiter.error)
            return False
        return True

    def _wait_core_idle(self, timeout_secs: float) -> bool:
        """Idle once every spout's source has polled twice since the call, the last
        poll emitted nothing, and every batch holding tuples has had its trees acked or
        failed (empty batches carrying tick tuples go on)."""
        sources = [self.directory.source(spout_id) for spout_id in self.sources]
        started = [source.read_polls() for source in sources]
        deadline = time.monotonic() + timeout_secs
        while True:
            if not self.query.isActive:
                exception = self.query.exception()
                if exception is not None:
                    self._failed(exception)
                return False
            polls = [source.read_polls() for source in sources]
            if all(
                poll is not None
                and poll.polls >= (first.polls if first is not None else 0) + 2
                and poll.emitted == 0
                and poll.unfinished == 0
                for poll, first in zip(polls, started, strict=True)
            ):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop the query after the micro-batch in progress (a core topology's spouts
        closed first, waiting up to ``CLOSE_WAIT_SECS``); an interrupted micro-batch is
        not run again. A core run's set-up file is removed: workers then drop the run's
        live tasks (see ``execute.bolttasks``)."""
        if self.is_core:
            self._close_spouts()
        self.driver.stop()
        self.query.stop()
        if self.setup_path is not None:
            self.directory.remove_core_setup(self.setup_path)

    def _close_spouts(self) -> None:
        """Have a core query's sources deactivate and close their spout tasks (at their
        next trigger)."""
        self.directory.close()
        sources = [self.directory.source(spout_id) for spout_id in self.sources]
        deadline = time.monotonic() + CLOSE_WAIT_SECS
        while self.query.isActive and time.monotonic() < deadline:
            if all(source.is_closed() for source in sources):
                return
            time.sleep(0.01)


def _start(
    frame: DataFrame,
    pipeline: Pipeline,
    directory: QueryDirectory,
    conf: dict[str, Any],
    name: str,
    clock: Clock,
) -> tuple[StreamingQuery, MicroBatchDriver]:
    """Start the streaming query writing ``frame`` through a driver of ``pipeline``."""
    checkpoint = directory.checkpoint
    driver = MicroBatchDriver(pipeline, checkpoint, conf, name, clock)
    interval = int(conf.get(BATCH_INTERVAL_KEY, DEFAULT_BATCH_INTERVAL_MS))
    query = (
        frame.writeStream.foreachBatch(driver)
        .option("checkpointLocation", checkpoint.path)
        .trigger(processingTime=f"{interval} milliseconds")
        .queryName(f"squall-{name}-{directory.name}")
        .start()
    )
    return query, driver


def start_batch_query(
    spark: SparkSession,
    directory: QueryDirectory,
    name: str,
    conf: dict[str, Any],
    plan: QueryPlan,
    run_key: str,
    drpc_address: DRPCAddress,
    clock: Clock,
) -> Query:
    """Write the sources' set-up files and start the streaming query of ``plan`` (a
    Trident or transactional topology's): one reader per source, their rows unioned."""
    directory.make()
    resumed_from = directory.checkpoint.last_committed_batch()
    logs: dict[str, SpoutLog] = {}
    frame = None
    for source in plan.sources:
        files = directory.source(source.component_id)
        files.make()
        setup = SourceSetup(
            source.component_id,
            source.kind,
            source.spout,
            source.outputs,
            Fields(list(source.fields)),
            conf,
            plan.layout,
            source.coordinator_id,
            source.drpc_function,
            source.tasks,
            source.output_fields,
            files.coordination,
        )
        storage.write_bytes(files.setup, codepickle.dumps(setup))
        logs[source.component_id] = SpoutLog(files.spout_log)
        reader = (
            spark.readStream.format(SOURCE_NAME)
            .option("setup", files.setup)
            .option("source", source.component_id)
            .option("run", run_key)
            .option("query_dir", directory.path)
            .option("source_dir", files.path)
        )
        if source.kind == "drpc":
            host, port, token = drpc_address(source)
            reader = reader.option("drpc_host", host).option("drpc_port", str(port))
            if token is not None:  # Spark redacts options named like *token*
                reader = reader.option("drpc_token", token)
        loaded = reader.load()
        frame = loaded if frame is None else frame.unionAll(loaded)
    assert frame is not None
    pipeline = BatchPipeline(plan, conf, run_key, spark, logs)
    query, driver = _start(frame, pipeline, directory, conf, name, clock)
    return Query(plan, query, driver, directory, resumed_from_batch=resumed_from)


def start_core_query(
    spark: SparkSession,
    directory: QueryDirectory,
    core: CorePlan,
    run_key: str,
    clock: Clock,
    drpc_bridges: LocalDRPCBridges,
) -> Query:
    """Write the run's set-up and start the streaming query of a core topology: one
    source per spout, their packets unioned. A ``LocalDRPC`` in the set-up is written as
    a client of its bridge in ``drpc_bridges`` (started here; the caller stops them)."""
    directory.make()
    resumed_from = directory.checkpoint.last_committed_batch()
    setup_path = directory.core_setup(run_key)
    write_setup(setup_path, CoreSetup(run_key, core, directory.state), drpc_bridges)
    logs: dict[str, SpoutLog] = {}
    tick_secs = core.min_tick_secs()
    frame = None
    for position, spout_id in enumerate(core.spouts):
        files = directory.source(spout_id)
        files.clear_markers()
        logs[spout_id] = SpoutLog(files.spout_log)
        reader = (
            spark.readStream.format(SOURCE_NAME)
            .option("setup", setup_path)
            .option("source", spout_id)
            .option("run", run_key)
            .option("query_dir", directory.path)
            .option("source_dir", files.path)
        )
        if position == 0 and tick_secs is not None:  # idle batches bring ticks
            reader = reader.option("ticks", str(tick_secs))
        loaded = reader.load()
        frame = loaded if frame is None else frame.unionAll(loaded)
    assert frame is not None
    pipeline = CorePipeline(core, run_key, setup_path, spark, logs, directory)
    query, driver = _start(frame, pipeline, directory, core.conf, core.name, clock)
    return Query(core, query, driver, directory, setup_path, resumed_from)
