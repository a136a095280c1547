"""squall on a Spark standalone cluster: a master and two workers, the second with a
private ``/tmp`` and, where it can be set up, a network namespace and address of its
own, as another host (see ``tests/spark_standalone.py``). Each run is a driver in a
process of its own (a session on the cluster's master)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import table_row
from tests.servers import REQUIRE_SERVERS, PostgresServer, RedisServer
from tests.spark_standalone import StandaloneCluster, Unavailable, start_cluster

# One cluster for the module: every test in the same test process.
pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark-standalone")]

ROOT = Path(__file__).resolve().parent.parent

WORD_COUNT = """
from squall import BasicBolt, TopologyBuilder
from squall.testing import FixedTupleSpout

SENTENCES = [[f"w{n % 7} w{n % 11} w{n % 13}"] for n in range(600)]


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup, collector):
        for word in tup["sentence"].split():
            collector.emit([word])


class Count(BasicBolt):
    outputs = ["word", "count"]

    def prepare(self, conf, context):
        self.counts = {}

    def execute(self, tup, collector):
        word = tup["word"]
        self.counts[word] = self.counts.get(word, 0) + 1
        collector.emit([word, self.counts[word]])


def build_topology():
    builder = TopologyBuilder()
    builder.set_spout("sentences", FixedTupleSpout(SENTENCES, ["sentence"]))
    builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", Count(), 2).fields_grouping("split", ["word"])
    return builder.create_topology()
"""


@pytest.fixture(scope="module")
def standalone() -> Iterator[StandaloneCluster]:
    try:
        cluster = start_cluster()
    except Unavailable as error:
        if os.environ.get(REQUIRE_SERVERS) == "1":
            pytest.fail(str(error))
        pytest.skip(str(error))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def cluster_redis(standalone: StandaloneCluster) -> Iterator[RedisServer]:
    """A Redis server the executors of both workers reach (on the cluster's address)."""
    server = RedisServer(host=standalone.host).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.directory, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster_postgres_dsn(standalone: StandaloneCluster) -> Iterator[str]:
    """A PostgreSQL database the executors of both workers reach."""
    server = PostgresServer(host=standalone.host)
    try:
        server.start()
        yield server.create_database("words")
    finally:
        server.close()


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the driver and both workers see (not under /tmp)."""
    path = Path(tempfile.mkdtemp(prefix="squall-shared-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def own_environment(standalone: StandaloneCluster) -> dict[str, str]:
    """This environment without the Python choices of the tests' local session (a
    launcher under /tmp, which a worker on another host does not have), with the
    driver's address on the cluster's network."""
    inherited = {key: value for key, value in os.environ.items() if not key.startswith("PYSPARK_")}
    return {**inherited, **standalone.driver_environment(), "COLUMNS": "200"}


#: Settings that make a session wait for both workers' executors before its first job
#: (the isolated worker's executor registers later), so every test's stages can run
#: on both.
BOTH_EXECUTORS = {"spark.cores.max": "2", "spark.scheduler.minRegisteredResourcesRatio": "1.0"}
BOTH_EXECUTORS_OPTIONS = [f"--spark-conf={key}={value}" for key, value in BOTH_EXECUTORS.items()]


def run_driver(
    standalone: StandaloneCluster, command: list[str]
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (a driver program) from the checkout, in :func:`own_environment`."""
    return subprocess.run(
        command,
        cwd=ROOT,
        env=own_environment(standalone),
        capture_output=True,
        text=True,
        timeout=240,
    )


def squall_run(
    standalone: StandaloneCluster, app: Path, *arguments: str
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from squall.cli.main import main; main()", "run"]
    options = ["--engine", "spark", "--until-idle", "--seconds", "120", "--no-live"]
    return run_driver(standalone, [*command, str(app), *options, *arguments])


def test_a_word_count_runs_on_both_workers_with_exact_counts(
    standalone: StandaloneCluster, shared_dir: Path
) -> None:
    """Every micro-batch's stages run on both workers (one of which sees none of the
    driver's /tmp) without a failed task, and every tuple is counted once."""
    app = shared_dir / "words.py"
    app.write_text(textwrap.dedent(WORD_COUNT), encoding="utf-8")
    checkpoint = shared_dir / "checkpoint"
    done = squall_run(
        standalone,
        app,
        "--master",
        standalone.master_url,
        "--checkpoint",
        str(checkpoint),
        *BOTH_EXECUTORS_OPTIONS,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    sentences, split = table_row(done.stdout, "sentences"), table_row(done.stdout, "split")
    count = table_row(done.stdout, "count")
    assert (sentences["emitted"], sentences["acked"], sentences["failed"]) == ("600", "600", "0")
    assert (split["executed"], split["emitted"]) == ("600", "1800")
    assert (count["executed"], count["acked"], count["failed"]) == ("1800", "1800", "0")
    for worker in standalone.workers:
        assert worker.task_failures() == []
        assert worker.finished_tasks() > 0, f"no task ran on worker {worker.work_dir}"


TRIDENT_DRPC = """
import json
import sys
import time

sys.path.insert(0, sys.argv[3])
from trident_word_count import CONF, all_counted, build_topology

from squall.drpc import LocalDRPC
from squall.spark import SparkCluster

with LocalDRPC(timeout_secs=60.0) as drpc, SparkCluster(
    master=sys.argv[1], checkpoint_dir=sys.argv[2], spark_conf=json.loads(sys.argv[4])
) as cluster:
    cluster.submit_topology("trident-words", CONF, build_topology(drpc))
    deadline = time.monotonic() + 150.0
    while not all_counted(drpc):
        assert time.monotonic() < deadline, "the sentences were not counted in time"
        time.sleep(0.1)
    queries = ["cow four", "the", "to be", "unknown words"]
    print(json.dumps({query: drpc.execute("words", query) for query in queries}))
    cluster.kill_topology("trident-words")
"""


def test_the_trident_word_count_answers_drpc_queries_exactly(
    standalone: StandaloneCluster, shared_dir: Path
) -> None:
    """The example's Trident word count on the cluster: its DRPC stream answers from
    counts that hold every sentence once, and both workers run its tasks."""
    app = shared_dir / "trident_words.py"
    app.write_text(textwrap.dedent(TRIDENT_DRPC), encoding="utf-8")
    before = [worker.finished_tasks() for worker in standalone.workers]
    checkpoint = str(shared_dir / "checkpoint")
    done = run_driver(
        standalone,
        [
            sys.executable,
            str(app),
            standalone.master_url,
            checkpoint,
            str(ROOT / "examples"),
            json.dumps(BOTH_EXECUTORS),
        ],
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    assert answers == {
        "cow four": "[[2]]",
        "the": "[[5]]",
        "to be": "[[5]]",
        "unknown words": "[[0]]",
    }
    for worker, earlier in zip(standalone.workers, before, strict=True):
        assert worker.task_failures() == []
        assert worker.finished_tasks() > earlier, f"no task ran on worker {worker.work_dir}"


def test_a_cluster_run_needs_a_checkpoint_every_node_reaches(
    standalone: StandaloneCluster, shared_dir: Path
) -> None:
    """Without a checkpoint location, a run on a cluster master is refused at once
    (a temporary directory of the driver's would be seen by no executor)."""
    app = shared_dir / "words.py"
    app.write_text(textwrap.dedent(WORD_COUNT), encoding="utf-8")
    done = squall_run(standalone, app, "--master", standalone.master_url)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert (
        f"Error: on the cluster {standalone.master_url} the checkpoint must be a location "
        "every node reaches" in done.stdout + done.stderr
    )


def test_a_checkpoint_only_the_driver_sees_is_refused_naming_it(
    standalone: StandaloneCluster, shared_dir: Path
) -> None:
    """A checkpoint under the driver's /tmp, which the isolated worker does not see, is
    found by the probe job before any topology starts, and the run exits 1 saying so."""
    app = shared_dir / "words.py"
    app.write_text(textwrap.dedent(WORD_COUNT), encoding="utf-8")
    private = tempfile.mkdtemp(prefix="squall-driver-only-")  # under the driver's /tmp
    try:
        done = squall_run(
            standalone,
            app,
            "--master",
            standalone.master_url,
            "--checkpoint",
            private,
            # The session waits for both executors, so the probe reaches the isolated one.
            *BOTH_EXECUTORS_OPTIONS,
        )
    finally:
        shutil.rmtree(private, ignore_errors=True)
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, output[-3000:]
    assert (
        f"Error: checkpoint location '{private}' is not shared by the driver and the executors"
        in output
    )
    assert "FileNotFoundError" in output
    assert "Topology" not in output  # nothing was submitted


#: Added to WORD_COUNT: its split bolt saying where its Python found squall.
SUBMITTED_APP = """
import os

import squall

WHERE = {where!r}


class WhereSplit(Split):
    def prepare(self, conf, context):
        # Where this executor's Python found squall.
        with open(os.path.join(WHERE, str(os.getpid())), "w") as handle:
            handle.write(squall.__file__)


def build_topology():
    sentences = [[f"w{{n % 7}} w{{n % 11}}"] for n in range(300)]
    builder = TopologyBuilder()
    builder.set_spout("sentences", FixedTupleSpout(sentences, ["sentence"]))
    builder.set_bolt("split", WhereSplit(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", Count(), 2).fields_grouping("split", ["word"])
    return builder.create_topology()
"""


def python_without_squall(folder: Path) -> Path:
    """A Python whose import path has squall's dependencies (this environment's
    site-packages) but not squall, packed as an archive holding ``bin/python``."""
    import site
    import tarfile

    venv = folder / "deps-only"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    packages = next(Path(p) for p in site.getsitepackages() if (Path(p) / "pyarrow").is_dir())
    (next((venv / "lib").glob("python3*")) / "site-packages" / "deps.pth").write_text(
        f"{packages}\n", encoding="utf-8"
    )
    launcher = folder / "python"
    launcher.write_text(f'#!/bin/sh\nexec {venv}/bin/python "$@"\n', encoding="utf-8")
    launcher.chmod(0o755)
    archive = folder / "env.tar.gz"
    with tarfile.open(archive, "w:gz") as packed:
        packed.add(launcher, "bin/python")
    return archive


def test_squall_submit_ships_squall_to_executors_whose_python_lacks_it(
    standalone: StandaloneCluster, shared_dir: Path
) -> None:
    """``squall submit`` runs the word count through spark-submit: the driver runs this
    Python, the executors the Python of an archive (``./env/bin/python``) that has
    squall's dependencies but not squall, which they import from the zip shipped with
    the job. Counts are exact and the run exits 0."""
    where = shared_dir / "where"
    where.mkdir()
    app = shared_dir / "submitted.py"
    source = textwrap.dedent(WORD_COUNT) + SUBMITTED_APP.format(where=str(where))
    app.write_text(source, encoding="utf-8")
    archive = python_without_squall(shared_dir)
    before = [worker.finished_tasks() for worker in standalone.workers]
    check = subprocess.run(
        [str(shared_dir / "deps-only" / "bin" / "python"), "-c", "import squall"],
        cwd=shared_dir,
        env={k: v for k, v in own_environment(standalone).items() if k != "PYTHONPATH"},
        capture_output=True,
    )
    assert check.returncode != 0  # that Python cannot import squall by itself
    command = [sys.executable, "-c", "from squall.cli.main import main; main()", "submit"]
    done = run_driver(
        standalone,
        [
            *command,
            str(app),
            "--master",
            standalone.master_url,
            "--checkpoint",
            str(shared_dir / "checkpoint"),
            "--archives",
            f"{archive}#env",
            "--executor-python",
            "./env/bin/python",
            *BOTH_EXECUTORS_OPTIONS,
            "--until-idle",
            "--seconds",
            "120",
            "--no-live",
        ],
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"on SparkCluster ({standalone.master_url}" in done.stdout
    sentences, count = table_row(done.stdout, "sentences"), table_row(done.stdout, "count")
    assert (sentences["emitted"], sentences["acked"], sentences["failed"]) == ("300", "300", "0")
    assert (count["executed"], count["acked"], count["failed"]) == ("600", "600", "0")
    found = {path.read_text(encoding="utf-8") for path in where.iterdir()}
    assert found and all("squall-for-executors.zip" in place for place in found), found
    for worker, earlier in zip(standalone.workers, before, strict=True):
        assert worker.task_failures() == []
        assert worker.finished_tasks() > earlier, f"no task ran on worker {worker.work_dir}"


TRIDENT_REDIS = """
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, sys.argv[6])
from trident_word_count import Split

from squall import Fields
from squall.connectors.postgres import PostgresMapState
from squall.spark import SparkCluster
from squall.trident import Count, FixedBatchSpout, TridentTopology
from squall.trident.state import RedisMapState, StateType

master, checkpoint, redis_url, dsn, marker = sys.argv[1:6]
SENTENCES = [f"w{n % 7} w{n % 11} w{n % 13}" for n in range(64)]
spout = FixedBatchSpout(Fields("sentence"), 4, *[[s] for s in SENTENCES])
in_redis = RedisMapState.factory(redis_url, key_prefix="cluster-crash:")
in_postgres = PostgresMapState.factory(dsn, "crash_words", StateType.TRANSACTIONAL)
topology = TridentTopology()
words = (
    topology.new_stream("sentences", spout)
    .each(Fields("sentence"), Split(), Fields("word"))
    .parallelism_hint(2)
)
for factory in (in_redis, in_postgres):
    (
        words.group_by(Fields("word"))
        .persistent_aggregate(factory, Count(), Fields("count"))
        .parallelism_hint(2)
    )
with SparkCluster(master=master, checkpoint_dir=checkpoint) as cluster:
    cluster.submit_topology("crash-words", {}, topology.build())
    while not Path(marker).exists():  # the test kills what it kills, then says go on
        info = cluster.get_topology_info("crash-words")
        assert info.status == "ACTIVE", info.extra.get("failure")
        print(json.dumps({"batch": info.extra["last_batch_id"] or -1}), flush=True)
        time.sleep(0.2)
    assert cluster.wait_idle("crash-words", 150.0), "the topology did not go idle"
    redis_counts = {key[0]: value for key, value in RedisMapState.contents(in_redis).items()}
    postgres = PostgresMapState.contents(in_postgres)
    expected = Counter(word for sentence in SENTENCES for word in sentence.split())
    resumed = cluster.get_topology_info("crash-words").extra.get("resumed_from_batch")
    print(json.dumps({
        "redis": redis_counts,
        "postgres": {key[0]: value for key, value in postgres.items()},
        "expected": dict(expected),
        "resumed": resumed,
    }))
"""


@pytest.mark.timeout(420)
def test_a_worker_and_then_the_driver_killed_mid_run_lose_and_repeat_no_word(
    standalone: StandaloneCluster,
    shared_dir: Path,
    cluster_redis: RedisServer,
    cluster_postgres_dsn: str,
) -> None:
    """The Trident word count into Redis (opaque) and PostgreSQL (transactional), two
    tasks per stage on the executors: a worker and its executors SIGKILLed while
    batches run, later the driver SIGKILLed too; started again on the same checkpoint,
    the run ends with every word counted exactly once in both."""
    app = shared_dir / "crash_words.py"
    app.write_text(textwrap.dedent(TRIDENT_REDIS), encoding="utf-8")
    marker = shared_dir / "go-on"
    command = [
        sys.executable,
        str(app),
        standalone.master_url,
        str(shared_dir / "checkpoint"),
        cluster_redis.url,
        cluster_postgres_dsn,
        str(marker),
        str(ROOT / "examples"),
    ]

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            command,
            cwd=ROOT,
            env=own_environment(standalone),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its JVM too: killed as one
        )

    def read_until_batch(driver: subprocess.Popen[str], batch: int) -> None:
        assert driver.stdout is not None and driver.stderr is not None
        for line in driver.stdout:
            if json.loads(line)["batch"] >= batch:
                return
        raise AssertionError(f"the driver ended early ({driver.wait()}): {driver.stderr.read()}")

    first_worker = standalone.workers[0]
    try:
        driver = start()
        read_until_batch(driver, 2)
        first_worker.kill()  # mid-run: its tasks go to the other worker
        read_until_batch(driver, 6)
        os.killpg(driver.pid, signal.SIGKILL)  # the driver, mid-commit or near it
        driver.wait(timeout=30)
    finally:
        standalone.restart(first_worker)
    marker.write_text("go on", encoding="utf-8")
    restarted = run_driver(standalone, command)
    assert restarted.returncode == 0, restarted.stdout[-3000:] + restarted.stderr[-3000:]
    final = json.loads(restarted.stdout.strip().splitlines()[-1])
    assert final["resumed"] is not None and final["resumed"] >= 5  # after what was committed
    assert final["redis"] == final["expected"]
    assert final["postgres"] == final["expected"]
