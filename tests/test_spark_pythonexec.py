"""The Python executable of a local session's processes: a launcher that puts Spark's
zip and jar entries last on the import path, so PySpark imports from its installed,
compiled files (and anything only in Spark's files still imports)."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall import BasicBolt, Spout, TopologyBuilder
from squall.spark import SparkCluster
from squall.spark.launch import session
from squall.spark.launch.pythonexec import is_local_master, launcher_path, worker_python
from squall.testing import SharedRecord

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the launcher is a POSIX script")


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local[2, 4]", True),
        ("local-cluster[2, 1, 1024]", True),
        ("spark://host:7077", False),
        ("yarn", False),
        ("k8s://https://host:443", False),
        ("localhost", False),
    ],
)
def test_local_masters_are_told_apart(master: str, local: bool) -> None:
    assert is_local_master(master) is local


def test_a_cluster_master_runs_this_interpreter_itself() -> None:
    assert worker_python("spark://host:7077") == sys.executable


def run_launcher(launcher: str, spark_home: str, python_path: str, *arguments: str) -> str:
    environment = {**os.environ, "SPARK_HOME": spark_home, "PYTHONPATH": python_path}
    done = subprocess.run(
        [launcher, *arguments], env=environment, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_launcher_moves_spark_entries_last_and_passes_arguments_intact(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "launchers"
    launcher = launcher_path(str(folder))
    assert launcher is not None
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert launcher_path(str(folder)) == launcher  # one launcher per interpreter
    home = "/opt/my spark"
    spark_entries = [
        f"{home}/python/lib/pyspark.zip",
        f"{home}/python/lib/py4j-0.10.9.9-src.zip",
        f"{home}/jars/spark-core_2.13-4.3.0.jar",
    ]
    own = ["/srv/app", "/srv/with space", "/srv/lib.zip", f"{home}/python"]
    python_path = ":".join([*spark_entries, *own])
    printed = run_launcher(
        launcher,
        home,
        python_path,
        "-c",
        "import os, sys; print(os.environ['PYTHONPATH']); print(sys.argv[1:])",
        "a *",
        "$HOME",
    )
    path_line, arguments_line = printed.splitlines()
    assert path_line == ":".join([*own, *spark_entries])
    assert arguments_line == "['a *', '$HOME']"


def test_the_launcher_leaves_a_path_without_spark_entries_alone(tmp_path: Path) -> None:
    launcher = launcher_path(str(tmp_path / "launchers"))
    assert launcher is not None
    code = "import os; print(os.environ['PYTHONPATH'])"
    assert run_launcher(launcher, "/opt/spark", "/a:/b", "-c", code) == "/a:/b\n"


def test_no_launcher_in_a_directory_others_can_write(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    assert launcher_path(str(shared)) is None
    assert list(shared.iterdir()) == []


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's environment and squall's choice, restored after the test."""
    saved = dict(os.environ)
    monkeypatch.setattr(session, "_chosen_python", None)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.usefixtures("environment")
def test_the_users_own_python_is_kept() -> None:
    os.environ["PYSPARK_PYTHON"] = "/usr/bin/python3"
    session._prepare_environment(False, {"spark.master": "local[2]"})
    assert os.environ["PYSPARK_PYTHON"] == "/usr/bin/python3"


@pytest.mark.usefixtures("environment")
def test_squalls_choice_follows_the_master() -> None:
    os.environ.pop("PYSPARK_PYTHON", None)
    session._prepare_environment(False, {"spark.master": "local[2]"})
    local = os.environ["PYSPARK_PYTHON"]
    assert local != sys.executable and os.access(local, os.X_OK)
    session._prepare_environment(False, {"spark.master": "spark://host:7077"})
    assert os.environ["PYSPARK_PYTHON"] == sys.executable


@pytest.mark.usefixtures("environment")
def test_spark_pyspark_python_is_the_users_choice() -> None:
    os.environ.pop("PYSPARK_PYTHON", None)
    settings = {"spark.master": "local[2]", "spark.pyspark.python": "/opt/python3"}
    session._prepare_environment(False, settings)
    assert os.environ["PYSPARK_PYTHON"] == "/opt/python3"


class WhereIsPySpark(Spout):
    """Records, from the process it runs in, the file PySpark was imported from."""

    outputs = ["n"]

    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        import pyspark

        self.record.append("spout", pyspark.__file__)
        self.collector = collector
        self.emitted = False

    def next_tuple(self) -> None:
        if not self.emitted:
            self.emitted = True
            self.collector.emit([1], 1)


class Where(BasicBolt):
    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def execute(self, tup: Any, collector: Any) -> None:
        import pyspark

        self.record.append("bolt", pyspark.__file__)


def test_spark_processes_import_pyspark_from_its_installed_files(
    spark: Any, tmp_path: Path
) -> None:
    """The source's process and the workers import the PySpark this process imports."""
    record = SharedRecord()
    builder = TopologyBuilder()
    builder.set_spout("spout", WhereIsPySpark(record))
    builder.set_bolt("bolt", Where(record)).shuffle_grouping("spout")
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path / "checkpoint"))
    try:
        cluster.submit_topology(
            "where", {"topology.spark.batch.interval.millis": 50}, builder.create_topology()
        )
        assert cluster.wait_idle("where")
    finally:
        cluster.shutdown()
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None
    assert set(record.get("spout")) == {spec.origin}
    assert set(record.get("bolt")) == {spec.origin}
