"""Shared fixtures: a LocalCluster per test (shut down after), a manual clock, one
SparkSession for the run, an ``engine`` to run a test on each engine, and a check that
no engine thread outlives its test."""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from squall import Config, LocalCluster, ManualClock
from squall.model.topology import StormTopology
from squall.runtime.metrics import ErrorInfo, TopologyInfo

#: The most xdist workers ``-n auto`` starts: each one runs its own Spark JVM.
MAX_WORKERS = 4


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: a worker per core, at most :data:`MAX_WORKERS`."""
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that runs Spark (it uses the ``spark`` fixture, directly or through
    ``engine``'s Spark case) with ``spark``, so ``-m "not spark"`` is the fast path."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_spark = callspec is not None and callspec.params.get("engine") == "spark"
        if on_spark or "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    """A LocalCluster on the real clock, shut down after the test."""
    with LocalCluster() as local:
        yield local


@pytest.fixture
def clock() -> ManualClock:
    """A clock that moves only when the test advances it."""
    return ManualClock(start_ms=1_000_000.0)


@pytest.fixture
def manual_cluster(clock: ManualClock) -> Iterator[LocalCluster]:
    """A LocalCluster driven by the ``clock`` fixture (timeouts, tick tuples)."""
    with LocalCluster(clock=clock) as local:
        yield local


#: The test session's JVM: the tests' micro-batches are tiny, so the JIT's first tier
#: (quick to compile) and a serial collector cost far less CPU than the defaults.
TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One SparkSession for every Spark test of the run (of each xdist worker): starting
    one takes seconds."""
    from squall.spark.runtime.session import get_session

    session = get_session(
        "local[2, 4]",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.extraJavaOptions": TEST_JAVA_OPTIONS,
        },
    )
    yield session
    session.stop()


ENGINES = ["local", "spark"]

#: Topology configuration each engine adds to a test's: new transactions as fast as the
#: topology takes them (local engine: 1 ms apart; Spark: a 50 ms trigger), and on Spark
#: no second run of a failed micro-batch (the tests inject no failures: one is a bug).
ENGINE_CONF: dict[str, dict[str, Any]] = {
    "local": {Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 1},
    "spark": {"topology.spark.batch.interval.millis": 50, "topology.spark.batch.retries": 0},
}


@dataclass
class Run:
    """A topology running as ``name`` on ``cluster`` (a SparkCluster if ``spark``)."""

    cluster: Any
    name: str
    spark: bool = False

    def info(self) -> TopologyInfo:
        """``get_topology_info`` of the topology."""
        return self.cluster.get_topology_info(self.name)

    def errors(self) -> dict[str, list[ErrorInfo]]:
        """Component id -> the errors it reported (components with none left out)."""
        return {
            cid: list(stats.errors)
            for cid, stats in self.info().components.items()
            if stats.errors_total
        }

    def failure(self) -> str:
        """The topology's errors, one line each: the innermost exception of each (a
        component's, or on Spark a failed micro-batch's)."""
        lines = [
            f"micro-batch: {error.splitlines()[0]}" for error in self.info().extra.get("errors", [])
        ]
        for cid, errors in self.errors().items():
            for error in errors:
                raised = [
                    line.strip()
                    for line in error.error.splitlines()
                    if re.match(r"\s*[\w.]+(Error|Exception|Exit)\b", line)
                ]
                lines.append(f"{cid}: {(raised or error.error.splitlines() or [''])[-1]}")
        return "\n".join(dict.fromkeys(lines)) or "no errors reported"

    def wait_until(self, condition: Callable[[], bool], timeout: float) -> None:
        """Poll ``condition`` until true. Fail after ``timeout`` seconds, or as soon as
        the topology has failed (Spark: its query stopped), naming the errors."""
        deadline = time.monotonic() + timeout
        interval = 0.02 if self.spark else 0.002
        while not condition():
            if self.spark and self.info().status == "FAILED":
                raise AssertionError(f"the topology failed:\n{self.failure()}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"condition not met within {timeout} s; errors:\n{self.failure()}"
                )
            time.sleep(interval)

    def result(self, future: Future[Any], timeout: float) -> Any:
        """``future.result()``, waiting at most ``timeout`` seconds; fail as soon as the
        topology has failed (Spark: a query stopped, e.g. its source could not start),
        naming the errors, instead of waiting for a DRPC timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return future.result(timeout=0.05)
            except FutureTimeout:
                if self.spark and self.info().status == "FAILED":
                    raise AssertionError(f"the topology failed:\n{self.failure()}") from None
                if time.monotonic() > deadline:
                    raise

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Wait until nothing is queued and no tuple tree is pending (local), or until
        every batch the spouts have now is processed and its trees acked or failed
        (Spark); fail if the topology failed or did not settle."""
        if self.spark:
            if not self.cluster.wait_idle(self.name, max(timeout, 120.0)):
                raise AssertionError(f"the topology failed or did not settle:\n{self.failure()}")
        elif not self.cluster.wait_idle(self.name, timeout):
            raise AssertionError(f"not idle within {timeout} s; errors:\n{self.failure()}")

    def drain(self) -> None:
        """Spark: process everything the spouts have (they must run dry); fail if the
        topology failed. Local: nothing (its spouts never run dry: empty batches)."""
        if self.spark and not self.cluster.wait_idle(self.name):
            raise AssertionError(f"the topology failed:\n{self.failure()}")


class Engine:
    """Runs a test's topologies on LocalCluster or on SparkCluster.

    Local: each ``running`` block gets a new ``LocalCluster``, the topology named
    ``trident``. Spark: one ``SparkCluster`` per test on the session's ``spark`` (made
    at the first ``running`` block, shut down after the test), each topology under a
    new name (``trident-1``, ``trident-2``...) so none resumes another's checkpoint.
    """

    def __init__(self, name: str, spark: Any = None, checkpoint_dir: Path | None = None):
        self.name = name
        self.is_spark = name == "spark"
        #: Seconds a test waits for a result (Spark: a micro-batch takes 0.3 s to 1 s,
        #: the first of a session waits for Python workers to start).
        self.timeout = 60.0 if self.is_spark else 10.0
        self._spark = spark
        self._checkpoint_dir = checkpoint_dir
        self._cluster: Any = None
        self._names = (f"trident-{i}" for i in itertools.count(1))

    def conf(self, conf: dict[str, Any] | None = None) -> dict[str, Any]:
        """``conf`` with this engine's fast-batch settings under it."""
        return {**ENGINE_CONF[self.name], **(conf or {})}

    def _spark_cluster(self) -> Any:
        if self._cluster is None:
            from squall.spark import SparkCluster

            self._cluster = SparkCluster(
                spark=self._spark, checkpoint_dir=str(self._checkpoint_dir)
            )
        return self._cluster

    @contextmanager
    def running(self, topology: StormTopology, conf: dict[str, Any] | None = None) -> Iterator[Run]:
        """Submit ``topology`` (with :meth:`conf`); kill it when the block ends."""
        if not self.is_spark:
            with LocalCluster() as cluster:
                cluster.submit_topology("trident", self.conf(conf), topology)
                yield Run(cluster, "trident")
            return
        cluster = self._spark_cluster()
        name = next(self._names)
        cluster.submit_topology(name, self.conf(conf), topology)
        try:
            yield Run(cluster, name, spark=True)
        finally:
            cluster.kill_topology(name)

    def close(self) -> None:
        """Shut the SparkCluster down (the session stays up for the next test)."""
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = None


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """The test once per engine: ``local`` (LocalCluster) and ``spark`` (SparkCluster on
    the session's ``spark``, checkpoints under ``tmp_path``). Parametrize ``engine``
    indirectly to mark one engine's case (e.g. a strict xfail)."""
    if request.param == "spark":
        chosen = Engine("spark", request.getfixturevalue("spark"), tmp_path / "checkpoint")
    else:
        chosen = Engine("local")
    try:
        yield chosen
    finally:
        chosen.close()


@pytest.fixture(autouse=True)
def no_leftover_engine_threads() -> Iterator[None]:
    """Every test must leave no squall worker thread running."""
    yield
    deadline = time.monotonic() + 2.0
    while True:
        alive = [t.name for t in threading.enumerate() if t.name.startswith("squall-")]
        if not alive:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"engine threads left running: {alive}")
        time.sleep(0.01)
