"""``squall submit`` builds the spark-submit command: squall zipped for the executors, the
driver on this Python, the executors' Python apart, paths absolute. (A run on a real
cluster is in ``tests/test_spark_cluster.py``.)"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from squall.cli.main import main
from squall.cli.submit import (
    DRIVER_PROGRAM,
    SQUALL_ZIP,
    Submission,
    driver_directory,
    pack_squall,
    submit_command,
    with_absolute_paths,
)
from squall.spark.launch.javaoptions import QUICK_COMPILER


def test_squall_is_zipped_from_its_sources_without_caches(tmp_path: Path) -> None:
    names = zipfile.ZipFile(pack_squall(tmp_path)).namelist()
    assert "squall/__init__.py" in names
    assert "squall/cli/submit.py" in names
    assert not [name for name in names if "__pycache__" in name]


def test_the_command_sets_both_pythons_ships_squall_and_passes_run_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app.py").write_text("", encoding="utf-8")
    submission = with_absolute_paths(
        Submission(
            "app.py:build",
            master="spark://master:7077",
            checkpoint="shared/checkpoint",
            executor_python="./env/bin/python",
            py_files=["helpers.py"],
            archives=["env.tar.gz#env", "hdfs://nn/envs/other.tar.gz#other"],
            spark_conf={"spark.executor.memory": "2g"},
            name="words",
            run_options=["--until-idle", "--seconds", "60"],
        )
    )
    command = submit_command(submission, tmp_path / SQUALL_ZIP, "spark-submit", defaults={})
    assert command == [
        "spark-submit",
        "--master",
        "spark://master:7077",
        "--deploy-mode",
        "client",
        "--name",
        "squall-words",
        "--py-files",
        f"{tmp_path / SQUALL_ZIP},{tmp_path / 'helpers.py'}",
        "--archives",
        f"{tmp_path / 'env.tar.gz'}#env,hdfs://nn/envs/other.tar.gz#other",
        "--conf",
        f"spark.pyspark.driver.python={sys.executable}",
        "--conf",
        "spark.pyspark.python=./env/bin/python",
        "--conf",
        "spark.executor.memory=2g",
        "--conf",
        f"spark.driver.extraJavaOptions={QUICK_COMPILER}",
        str(DRIVER_PROGRAM),
        "run",
        f"{tmp_path / 'app.py'}:build",
        "--engine",
        "spark",
        "--checkpoint",
        str(tmp_path / "shared" / "checkpoint"),
        "--name",
        "words",
        "--until-idle",
        "--seconds",
        "60",
    ]


def test_the_drivers_jvm_gets_the_quick_compiler_after_the_options_in_effect(
    tmp_path: Path,
) -> None:
    def driver_options(spark_conf: dict[str, str], defaults: dict[str, str]) -> list[str]:
        submission = Submission("app.py", spark_conf=spark_conf)
        command = submit_command(submission, tmp_path / SQUALL_ZIP, "spark-submit", defaults)
        return [c for c in command if c.startswith("spark.driver.extraJavaOptions=")]

    site = {"spark.driver.extraJavaOptions": "-Dsite=1"}
    assert driver_options({}, site) == [f"spark.driver.extraJavaOptions=-Dsite=1 {QUICK_COMPILER}"]
    mine = {"spark.driver.extraJavaOptions": "-Xss4m"}
    assert driver_options(mine, site) == [f"spark.driver.extraJavaOptions=-Xss4m {QUICK_COMPILER}"]
    chosen = {"spark.driver.extraJavaOptions": "-XX:-TieredCompilation"}
    assert driver_options(chosen, {}) == ["spark.driver.extraJavaOptions=-XX:-TieredCompilation"]
    admin = {"spark.driver.defaultJavaOptions": "-XX:TieredStopAtLevel=4"}
    assert driver_options({}, admin) == []


def test_a_relative_executor_python_runs_this_python_in_the_drivers_directory(
    tmp_path: Path,
) -> None:
    """Spark starts the data sources' Python processes on the driver with the executors'
    Python: in the driver's directory, that relative path is this Python."""
    directory = driver_directory(Submission("app.py", executor_python="./env/bin/python"), tmp_path)
    assert directory is not None
    done = subprocess.run(
        ["./env/bin/python", "-c", "import sys; print(sys.executable)"],
        cwd=directory,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == sys.executable
    assert (
        driver_directory(Submission("app.py", executor_python="/usr/bin/python3"), tmp_path) is None
    )


def test_dry_run_prints_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app.py").write_text("", encoding="utf-8")
    arguments = ["submit", "app.py", "--master", "spark://m:7077", "--dry-run", "--until-idle"]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 0, result.output
    command = shlex.split(result.output)
    assert command[0].endswith("spark-submit")
    assert command[command.index("--master") + 1] == "spark://m:7077"
    assert command[-5:] == ["run", str(tmp_path / "app.py"), "--engine", "spark", "--until-idle"]
    assert os.path.basename(command[command.index("--py-files") + 1]) == SQUALL_ZIP


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["missing.py"], "Error: file 'missing.py' does not exist"),
        (
            ["app.py", "--checkpoint", "nosuch://place/squall"],
            "Error: checkpoint location 'nosuch://place/squall': squall cannot open the "
            "nosuch: file system here",
        ),
        (["app.py", "--spark-conf", "executor-memory"], "'executor-memory' is not KEY=VALUE"),
    ],
)
def test_bad_input_is_refused_before_spark_submit_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arguments: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app.py").write_text("", encoding="utf-8")
    result = CliRunner().invoke(main, ["submit", *arguments, "--master", "spark://m:7077"])
    assert result.exit_code in (1, 2), result.output
    assert message in " ".join(result.output.split())
    assert "spark-submit" not in result.output
