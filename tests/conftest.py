"""Shared fixtures: a LocalCluster per test (shut down after), a manual clock, one
SparkSession for the run, and a check that no engine thread outlives its test.

The engine contract's conformance tests take the one ``engine`` fixture: it runs the
test once per engine of :data:`ENGINES` (LocalCluster, SparkCluster) with the same
assertions. :func:`on_engine` and :func:`on_engines` choose a test's cases per engine
and mark an engine's case a strict xfail naming that engine's gaps; a module whose
tests need other engine settings overrides the ``engine_settings`` fixture."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from squall import Clock, Config, LocalCluster, ManualClock
from squall.compiled import pure_python_chosen, stale_modules
from squall.model.topology import StormTopology
from squall.runtime.metrics import ErrorInfo, TopologyInfo
from squall.trident import TridentTopology
from tests.kafka_broker import KafkaBroker, TansuBroker, restartable_broker, session_broker
from tests.servers import PostgresServer, RedisServer, S3Server

T = TypeVar("T")

#: The most xdist workers ``-n auto`` starts: each one runs its own Spark JVM.
MAX_WORKERS = 4


def pytest_configure(config: pytest.Config) -> None:
    """Refuse to run on a compiled core older than its sources: the tests would run the
    old code (an editable install compiles in place; ``pip install -e .`` again)."""
    stale = stale_modules()
    if stale and not pure_python_chosen():
        pytest.exit(
            f"the compiled core is older than its sources ({', '.join(stale)}): run "
            "pip install -e . again, or set SQUALL_PURE_PYTHON=1",
            returncode=4,
        )


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: a worker per core, at most :data:`MAX_WORKERS`."""
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


_MEMORY_STATE = (
    "MemoryMapState lives in the worker process holding the partition (as in Storm): "
    "the test process cannot read it"
)
_IN_PROCESS_DATABASE = (
    "the example's Database is an object of the test process: worker processes commit "
    "to copies of their own"
)

#: Conformance cases the ``process`` engine skips: ``(test function, a part of its
#: parameters' id, why)``. What they read lives in the test's own process, which worker
#: processes do not share (the other engines run those parts in it); they would wait
#: out their timeouts for changes made in the workers' copies.
#: ``tests/test_local_processes.py`` shows that such objects are not shared.
PROCESS_GAPS: list[tuple[str, str, str]] = [
    ("test_transactional_and_opaque_state_are_exact_under_replays", "memory", _MEMORY_STATE),
    ("test_transactional_partitioned_spout_gives_exact_state", "memory", _MEMORY_STATE),
    (
        "test_opaque_spout_replaying_different_tuples_gives_exact_opaque_state",
        "memory",
        _MEMORY_STATE,
    ),
    ("test_state_updates_are_applied_in_txid_order_per_partition", "", _MEMORY_STATE),
    (
        "test_persistent_aggregate_grouped_and_ungrouped_with_combiner_and_reducer",
        "",
        _MEMORY_STATE,
    ),
    ("test_a_batch_spout_gets_each_transaction_id", "", _MEMORY_STATE),
    ("test_partition_persist_applies_a_state_updater_per_partition_and_batch", "", _MEMORY_STATE),
    ("test_malformed_records_arrive_in_the_error_field", "", _MEMORY_STATE),
    ("test_one_transaction_at_a_time_without_max_spout_pending", "", _IN_PROCESS_DATABASE),
    ("test_restart_on_the_same_state_dir_continues_txids", "", _IN_PROCESS_DATABASE),
    ("test_transactional_spout_with_its_own_coordinator", "", _IN_PROCESS_DATABASE),
    (
        "test_debug_prints_each_tuple_and_keeps_it",
        "",
        "the worker processes print to their own output, not the test's captured one",
    ),
    (
        "test_batches_failing_while_redis_is_down_back_off_then_counts_are_exact",
        "",
        "it drives the back-off with a manual clock, which worker processes cannot follow",
    ),
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that runs Spark (it uses the ``spark`` fixture, directly or through
    ``engine``'s Spark case) with ``spark``, so ``-m "not spark"`` is the fast path; mark
    the engine contract's conformance tests (those taking ``engine``) with
    ``conformance``; skip the ``process`` engine's cases of :data:`PROCESS_GAPS`, saying
    why."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        engine = callspec.params.get("engine") if callspec is not None else None
        if engine is not None:
            item.add_marker(pytest.mark.conformance)
        if engine == "spark" or "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        if engine == "process":
            function = getattr(item, "originalname", item.name)
            for name, part, reason in PROCESS_GAPS:
                if function == name and part in callspec.id:  # type: ignore[union-attr]
                    item.add_marker(pytest.mark.skip(reason=f"worker processes: {reason}"))


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


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A throwaway ``redis-server`` shared by the session's tests (of each xdist worker):
    tests keep apart by key names of their own (see :func:`unique_name`)."""
    server = RedisServer().start()
    yield server
    server.stop()
    shutil.rmtree(server.directory, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL server shared by the session's tests (of each xdist
    worker); each test gets a database of its own through ``postgres_dsn``."""
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.close()


_databases = itertools.count()


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """A Kafka-protocol broker shared by the session's tests (of each xdist worker): an
    in-memory Tansu broker, or the one ``SQUALL_KAFKA_BOOTSTRAP`` names. Tests keep
    apart by topic and group names of their own (see :func:`unique_name`)."""
    broker = session_broker()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def memory_broker() -> Iterator[TansuBroker]:
    """An in-memory Tansu broker of the test's own (a restart loses everything)."""
    broker = restartable_broker(None)
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def durable_kafka_broker() -> Iterator[TansuBroker]:
    """A Tansu broker of the test's own storing in a ``moto_server`` S3 bucket, so it can
    be stopped (or killed) and started again with its topics, records and committed
    offsets (skipped when ``SQUALL_KAFKA_BOOTSTRAP`` is set)."""
    s3 = S3Server().start()
    try:
        broker = restartable_broker(s3)
        try:
            yield broker
        finally:
            broker.close()
    finally:
        s3.stop()


@pytest.fixture
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """The connection string of a new, empty database for this test."""
    return postgres_server.create_database(f"test_{os.getpid()}_{next(_databases)}")


_names = itertools.count()


def unique_name(prefix: str) -> str:
    """A name no other test of the run uses (keys, streams, tables on shared servers)."""
    return f"{prefix}-{os.getpid()}-{next(_names)}"


#: The test session's JVM: the tests' micro-batches are tiny, so the JIT's first tier
#: (quick to compile) and a serial collector cost far less CPU than the defaults.
TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One SparkSession for every Spark test of the run (of each xdist worker): starting
    one takes seconds."""
    from squall.spark.launch.session import get_session

    # Spark's scratch space (spark-*, blockmgr-*, artifacts-*, native libraries) goes to
    # a directory of the run, removed at its end, not to the system's /tmp.
    scratch = tempfile.mkdtemp(prefix="squall-spark-tests-")
    session = get_session(
        "local[2, 4]",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.local.dir": scratch,
            "spark.driver.extraJavaOptions": f"{TEST_JAVA_OPTIONS} -Djava.io.tmpdir={scratch}",
        },
    )
    yield session
    session.stop()
    shutil.rmtree(scratch, ignore_errors=True)


#: The engines a conformance test runs on: the ``engine`` fixture's parameters. ``local``
#: is LocalCluster with its workers as threads, ``process`` LocalCluster with two worker
#: processes, ``spark`` SparkCluster.
ENGINES = ["local", "process", "spark"]

#: The Spark engine's keys the tests set: the trigger interval of its micro-batches, and
#: how many times it runs a failed micro-batch again.
SPARK_INTERVAL = "topology.spark.batch.interval.millis"
SPARK_RETRIES = "topology.spark.batch.retries"


@dataclass(frozen=True)
class EngineSettings:
    """What an engine adds to each test: topology configuration, under the test's own,
    and the seconds the test waits for a result."""

    conf: Mapping[str, Any]
    timeout: float

    def tuned(
        self, conf: Mapping[str, Any] | None = None, timeout: float | None = None
    ) -> EngineSettings:
        """These settings with ``conf`` added (over this configuration) and ``timeout``
        instead of this one, if given."""
        return EngineSettings(
            {**self.conf, **(conf or {})}, self.timeout if timeout is None else timeout
        )


#: Each engine's settings: new transactions as fast as the topology takes them (local
#: engine: 1 ms apart; Spark: a 50 ms trigger), and on Spark no second run of a failed
#: micro-batch (the tests inject no failures: one is a bug). A Spark micro-batch takes
#: 0.3 s to 1 s, the first of a session waits for Python workers to start: 60 s for a
#: result there, 10 s locally. A module whose tests need other settings (e.g. a failed
#: micro-batch run again) overrides the ``engine_settings`` fixture.
ENGINE_SETTINGS: dict[str, EngineSettings] = {
    "local": EngineSettings(
        {
            Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 1,
            Config.TOPOLOGY_WORKER_KIND: "thread",
        },
        10.0,
    ),
    "spark": EngineSettings({SPARK_INTERVAL: 50, SPARK_RETRIES: 0}, 60.0),
}


def on_engine(engine: str, *values: Any, xfail: str | Sequence[str] = ()) -> Any:
    """The parameters ``(engine, *values)`` of a test's case on ``engine``, for
    ``pytest.mark.parametrize`` of ``engine`` (indirect): a strict xfail if ``xfail``
    names gaps of that engine (the reason names them all)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} (one of {ENGINES})")
    gaps = [xfail] if isinstance(xfail, str) else list(xfail)
    marks = [pytest.mark.xfail(strict=True, reason="; ".join(gaps))] if gaps else []
    return pytest.param(engine, *values, marks=marks)


def on_engines(
    local: Iterable[tuple[Any, ...]] = ((),),
    spark: Iterable[tuple[Any, ...]] = ((),),
    xfail: Mapping[str, str | Sequence[str]] | None = None,
) -> list[Any]:
    """The cases of a test on every engine (see :func:`on_engine`): each tuple of
    ``local`` on LocalCluster, each of ``spark`` on SparkCluster; by default one case
    each, without values. An engine in ``xfail`` has its cases strict xfails naming its
    gaps. ``on_engines(spark=[])``: the local engine only. The ``process`` engine (the
    local engine in worker processes) takes the ``local`` cases."""
    cases = {"local": local, "process": local, "spark": spark}
    gaps = xfail or {}
    if set(gaps) - set(ENGINES):
        raise ValueError(f"unknown engines {sorted(set(gaps) - set(ENGINES))} in xfail")
    return [
        on_engine(engine, *values, xfail=gaps.get(engine, ()))
        for engine in ENGINES
        for values in cases[engine]
    ]


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
    """Runs a test's topologies on LocalCluster or on SparkCluster (on the session's
    ``spark``, its checkpoints under the test's ``tmp_path``), with the engine's
    :class:`EngineSettings`.

    ``running`` blocks run a topology each: locally on a new ``LocalCluster`` each; on
    Spark on one ``SparkCluster`` per test (made at the first block), each topology under
    a new name (``trident-1``, ``trident-2``...) so none resumes another's checkpoint,
    unless the block asks for a cluster of its own (a checkpoint directory, a clock).
    ``new_cluster`` makes clusters a test drives itself. Every cluster is shut down when
    the test ends (:meth:`close`).
    """

    def __init__(
        self,
        name: str,
        settings: EngineSettings,
        spark: Any = None,
        directory: Path | None = None,
    ) -> None:
        self.name = name
        self.is_spark = name == "spark"
        self.settings = settings
        #: Seconds a test waits for a result.
        self.timeout = settings.timeout
        self._spark = spark
        self._directory = directory
        self._clusters: list[Any] = []
        self._shared: Any = None
        self._runs = itertools.count(1)

    def pick(self, local: T, spark: T) -> T:
        """This engine's value of a figure that differs between the engines."""
        return spark if self.is_spark else local

    def conf(self, conf: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``conf`` with this engine's settings under it."""
        return {**self.settings.conf, **(conf or {})}

    def _make_cluster(self, checkpoint: str, clock: Clock | None) -> Any:
        if not self.is_spark:
            return LocalCluster(clock=clock)
        from squall.spark import SparkCluster

        assert self._directory is not None
        return SparkCluster(
            spark=self._spark, checkpoint_dir=str(self._directory / checkpoint), clock=clock
        )

    def new_cluster(self, checkpoint: str = "checkpoint", clock: Clock | None = None) -> Any:
        """A new cluster on ``clock``, shut down when the test ends. Spark: its
        checkpoints in directory ``checkpoint`` of the test's ``tmp_path`` (a topology
        submitted under the same name on a cluster on the same directory resumes where
        the last run committed)."""
        cluster = self._make_cluster(checkpoint, clock)
        self._clusters.append(cluster)
        return cluster

    @contextmanager
    def running(
        self,
        topology: StormTopology | TridentTopology,
        conf: Mapping[str, Any] | None = None,
        *,
        name: str = "trident",
        checkpoint: str | None = None,
        clock: Clock | None = None,
    ) -> Iterator[Run]:
        """Submit ``topology`` (a Trident topology is built first) with :meth:`conf`;
        kill it when the block ends.

        Local: on a new LocalCluster on ``clock``, shut down after the block, as
        ``name``. Spark: on the test's SparkCluster, as ``name-1``, ``name-2``... (a new
        name each run); with ``checkpoint`` or ``clock``, on a new SparkCluster on them
        (see :meth:`new_cluster`), shut down after the block, as ``name`` (so a later
        run with the same ``checkpoint`` resumes this one).
        """
        built = topology.build() if isinstance(topology, TridentTopology) else topology
        if not self.is_spark or checkpoint is not None or clock is not None:
            with self._make_cluster(checkpoint or "checkpoint", clock) as cluster:
                cluster.submit_topology(name, self.conf(conf), built)
                yield Run(cluster, name, spark=self.is_spark)
            return
        if self._shared is None:
            self._shared = self.new_cluster()
        run_name = f"{name}-{next(self._runs)}"
        self._shared.submit_topology(run_name, self.conf(conf), built)
        try:
            yield Run(self._shared, run_name, spark=True)
        finally:
            self._shared.kill_topology(run_name)

    def close(self) -> None:
        """Shut down the clusters made for the test (the session stays up)."""
        clusters, self._clusters, self._shared = self._clusters, [], None
        for cluster in clusters:
            cluster.shutdown()


#: What the ``process`` engine adds to the ``local`` engine's settings.
PROCESS_CONF = {Config.TOPOLOGY_WORKERS: 2, Config.TOPOLOGY_WORKER_KIND: "process"}


@pytest.fixture
def engine_settings() -> dict[str, EngineSettings]:
    """Each engine's settings for a test: :data:`ENGINE_SETTINGS`. A module overrides
    this fixture to change them for its tests (e.g. ``ENGINE_SETTINGS["spark"].tuned``)."""
    return ENGINE_SETTINGS


@pytest.fixture(params=ENGINES)
def engine(
    request: pytest.FixtureRequest, tmp_path: Path, engine_settings: dict[str, EngineSettings]
) -> Iterator[Engine]:
    """The test once per engine: ``local`` (LocalCluster) and ``spark`` (SparkCluster on
    the session's ``spark``, checkpoints under ``tmp_path``). Parametrize ``engine``
    indirectly to choose or mark an engine's cases (see :func:`on_engines`)."""
    spark = request.getfixturevalue("spark") if request.param == "spark" else None
    if request.param == "process":
        settings = engine_settings.get("process") or engine_settings["local"].tuned(PROCESS_CONF)
    else:
        settings = engine_settings[request.param]
    chosen = Engine(request.param, settings, spark, tmp_path)
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
