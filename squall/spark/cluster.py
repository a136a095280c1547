"""``SparkCluster``: runs topologies on Apache Spark through PySpark (micro-batches)."""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any

import cloudpickle

from squall.model.errors import InvalidTopologyError
from squall.model.fields import Fields
from squall.model.topology import StormTopology
from squall.runtime.metrics import ComponentStats, TopologyInfo
from squall.runtime.registry import TopologyRegistry
from squall.spark.plan import TridentPlan, trident_plan
from squall.spark.runner import TridentRunner
from squall.spark.session import get_session
from squall.spark.source import SOURCE_NAME, SpoutSource
from squall.spark.spoutlog import SpoutLog
from squall.spark.stages import forget

BATCH_INTERVAL_KEY = "topology.spark.batch.interval.millis"
DEFAULT_BATCH_INTERVAL_MS = 100


@dataclass
class _Running:
    name: str
    topology: StormTopology
    plan: TridentPlan
    query: Any
    runner: TridentRunner
    directory: str
    run_key: str
    started: float
    status: str = "ACTIVE"


def find_unpicklable(value: Any, path: str, depth: int = 0) -> str | None:
    """The path of the first attribute of ``value`` that cannot be pickled, or None."""
    try:
        cloudpickle.dumps(value)
        return None
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
    if depth < 8:
        children: list[tuple[str, Any]] = []
        if isinstance(value, dict):
            children = [(f"{path}[{k!r}]", v) for k, v in value.items()]
        elif isinstance(value, list | tuple):
            children = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
        elif hasattr(value, "__dict__"):
            children = [(f"{path}.{k}", v) for k, v in vars(value).items()]
        for child_path, child in children:
            found = find_unpicklable(child, child_path, depth + 1)
            if found:
                return found
    return f"{path} ({type(value).__name__}; {reason})"


def _user_modules(value: Any, found: dict[str, Any], seen: set[int], depth: int = 0) -> None:
    """Collect the modules of user code reachable from ``value`` (classes and functions
    defined outside installed packages and squall)."""
    if id(value) in seen or depth > 8:
        return
    seen.add(id(value))
    for candidate in (value, type(value)):
        module = sys.modules.get(getattr(candidate, "__module__", "") or "")
        path = getattr(module, "__file__", None) or ""
        if (
            module is not None
            and path
            and "site-packages" not in path
            and not module.__name__.startswith(("squall", "pyspark", "builtins"))
            and not path.startswith(sys.base_prefix)
        ):
            found[module.__name__] = module
    if isinstance(value, dict):
        children: list[Any] = list(value.values())
    elif isinstance(value, list | tuple | set | frozenset):
        children = list(value)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        children = list(vars(value).values())
    else:
        children = []
    for child in children:
        _user_modules(child, found, seen, depth + 1)


def pickle_user_code_by_value(topology: StormTopology) -> list[str]:
    """Make user modules travel with the pickled components.

    A topology loaded from a file (``squall run app.py``) lives in a module Spark's
    Python workers cannot import; pickling its code by value lets them run it anyway.
    Returns the module names.
    """
    from pyspark import cloudpickle as spark_cloudpickle

    found: dict[str, Any] = {}
    seen: set[int] = set()
    for spec in topology:
        _user_modules(spec.component, found, seen)
    for module in found.values():
        cloudpickle.register_pickle_by_value(module)
        spark_cloudpickle.register_pickle_by_value(module)
    return sorted(found)


class SparkCluster(TopologyRegistry[_Running]):
    """Runs topologies on Spark: the same ``StormTopology`` objects as ``LocalCluster``.

    Each micro-batch of the topology's streaming query is one transaction (txid = batch
    id + 1). Spouts run as streaming sources whose batches are logged under the
    checkpoint directory, so a restarted cluster (same ``checkpoint_dir``) resumes where
    the last run committed and no batch is applied twice to transactional or opaque
    state.

    Args:
        master: Spark master URL (default: a local session, ``local[*, 4]``).
        spark: an existing ``SparkSession`` to use (not stopped by ``shutdown``).
        checkpoint_dir: where query checkpoints and spout logs live (default: a new
            temporary directory).
        spark_conf: extra Spark configuration for a session this cluster creates.
    """

    def __init__(
        self,
        master: str | None = None,
        spark: Any = None,
        checkpoint_dir: str | None = None,
        spark_conf: dict[str, Any] | None = None,
    ) -> None:
        if spark is None:
            from pyspark.sql import SparkSession

            self._owns_session = SparkSession.getActiveSession() is None
            spark = get_session(master, spark_conf)
        else:
            self._owns_session = False
        super().__init__()
        self.spark = spark
        self.spark.dataSource.register(SpoutSource)
        self.checkpoint_dir = checkpoint_dir or tempfile.mkdtemp(prefix="squall-spark-")

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
        with self._lock:
            self._claim(name)
        plan = trident_plan(topology)
        pickle_user_code_by_value(topology)
        for spec in topology:
            culprit = find_unpicklable(spec.component, spec.component_id)
            if culprit:
                raise InvalidTopologyError(
                    f"component {spec.component_id!r} cannot be sent to Spark executors: "
                    f"{culprit} cannot be pickled; create such resources in "
                    "prepare/open instead of __init__"
                )
        directory = os.path.join(self.checkpoint_dir, name)
        os.makedirs(directory, exist_ok=True)
        spout_file = os.path.join(directory, "spout.pickle")
        with open(spout_file, "wb") as handle:
            handle.write(cloudpickle.dumps(plan.spout))
        routes_file = os.path.join(directory, "routes.pickle")
        with open(routes_file, "wb") as handle:
            handle.write(cloudpickle.dumps((plan.spout_outputs, Fields(list(plan.spout_fields)))))
        pause_file = os.path.join(directory, "paused")
        if os.path.exists(pause_file):
            os.remove(pause_file)
        run_key = f"{name}-{uuid.uuid4().hex}"
        log_dir = os.path.join(directory, "spout-log")
        runner = TridentRunner(plan, conf, run_key, self.spark, SpoutLog(log_dir))
        interval = int(conf.get(BATCH_INTERVAL_KEY, DEFAULT_BATCH_INTERVAL_MS))
        stream = (
            self.spark.readStream.format(SOURCE_NAME)
            .option("log", log_dir)
            .option("spout", spout_file)
            .option("routes", routes_file)
            .option("pause", pause_file)
            .load()
        )
        query = (
            stream.writeStream.foreachBatch(runner)
            .option("checkpointLocation", os.path.join(directory, "checkpoint"))
            .trigger(processingTime=f"{interval} milliseconds")
            .queryName(f"squall-{name}")
            .start()
        )
        with self._lock:
            self._topologies[name] = _Running(
                name, topology, plan, query, runner, directory, run_key, time.monotonic()
            )

    def wait_idle(self, name: str, timeout_secs: float = 60.0) -> bool:
        """Process every batch the spout has now; False if the query stopped or failed."""
        running = self._get(name)
        try:
            running.query.processAllAvailable()
        except Exception as exc:  # the query failed: reported by get_topology_info
            running.status = "FAILED"
            running.runner._record(exc)
            return False
        return True

    def deactivate(self, name: str) -> None:
        """Stop polling the spout (batches already planned still run)."""
        running = self._get(name)
        open(os.path.join(running.directory, "paused"), "w").close()
        running.status = "INACTIVE"

    def activate(self, name: str) -> None:
        """Resume polling the spout."""
        running = self._get(name)
        pause = os.path.join(running.directory, "paused")
        if os.path.exists(pause):
            os.remove(pause)
        running.status = "ACTIVE"

    def kill_topology(self, name: str, wait_secs: float | None = None) -> None:
        """Stop the query (after the batch in progress) and release the operations."""
        running = self._get(name)
        try:
            running.query.stop()
        finally:
            for processor in forget(running.run_key):
                processor.cleanup()
            with self._lock:
                self._topologies.pop(name, None)

    def get_topology_info(self, name: str) -> TopologyInfo:
        """Micro-batch figures and errors (``extra``), and the components."""
        running = self._get(name)
        figures = running.runner.figures
        exception = running.query.exception() if not running.query.isActive else None
        status = running.status if running.query.isActive else ("FAILED" if exception else "KILLED")
        components = {
            running.plan.spout_id: ComponentStats(
                running.plan.spout_id,
                "spout",
                [0],
                emitted=figures.rows_total,
                errors=list(figures.errors),
            )
        }
        for segment in running.plan.segments:
            components[segment.component_id] = ComponentStats(
                segment.component_id, "bolt", list(range(segment.tasks))
            )
        return TopologyInfo(
            name=name,
            status=status,
            uptime_secs=time.monotonic() - running.started,
            workers=0,
            components=components,
            extra={
                "batches": figures.batches,
                "last_batch_id": figures.last_batch_id,
                "last_batch_rows": figures.last_rows,
                "last_batch_ms": figures.last_duration_ms,
                "retries": figures.retries,
            },
        )

    def get_topology(self, name: str) -> StormTopology:
        """The topology submitted as ``name``."""
        return self._get(name).topology

    def shutdown(self) -> None:
        """Stop every topology; stop the SparkSession if this cluster started it."""
        for name in list(self._topologies):
            self.kill_topology(name)
        if self._owns_session:
            self.spark.stop()


__all__ = ["SparkCluster", "find_unpicklable", "pickle"]
