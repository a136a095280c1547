"""``squall run --engine spark``: quiet output with an intact table, and checkpoints.

One test runs ``squall`` in a process of its own (a new SparkSession, as a user gets:
one JVM start); the others run the command in this process, on the tests' session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from squall.cli.main import main
from squall.spark.control.rundir import last_committed_batch
from tests.helpers import table_row

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent

FINITE = """
from squall import BasicBolt, TopologyBuilder
from squall.testing import FixedTupleSpout


class Picky(BasicBolt):
    def execute(self, tup, collector):
        if tup["n"] % 5 == 0:
            raise ValueError(f"no multiples of five: {tup['n']}")


def build_topology():
    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[n] for n in range(1, 21)], ["n"]))
    builder.set_bolt("picky", Picky(), 2).shuffle_grouping("numbers")
    return builder.create_topology()
"""


def write_app(tmp_path: Path) -> str:
    path = tmp_path / "finite.py"
    path.write_text(textwrap.dedent(FINITE), encoding="utf-8")
    return str(path)


def test_a_spark_run_prints_no_spark_output_and_an_intact_table(tmp_path: Path) -> None:
    """A new session, output to pipes: no JVM or Spark warning, no progress bar, no log
    record from Spark's Python workers (the bolt's errors are in the summary), and the
    final table holds the exact counts. --fail-on-error: exit code 1 after it."""
    arguments = ["run", write_app(tmp_path), "--engine", "spark", "--master", "local[2]"]
    arguments += ["--until-idle", "--seconds", "300", "--no-live", "--fail-on-error"]
    scratch = tmp_path / "tmp"  # the run's temporary files, and Spark's
    scratch.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", "from squall.cli.main import main; main()", *arguments],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    for noise in ("WARN", "[Stage", "Traceback", "log level", "log4j"):
        assert noise not in output, output
    assert "on SparkCluster (local[2]: 2 cores) until idle" in done.stdout
    numbers, picky = table_row(done.stdout, "numbers"), table_row(done.stdout, "picky")
    assert (numbers["emitted"], numbers["acked"], numbers["failed"]) == ("20", "16", "4")
    assert (picky["executed"], picky["acked"], picky["failed"]) == ("20", "16", "4")
    assert "ValueError: no multiples of five" in done.stdout
    assert done.stderr == "Errors were reported during the run: exit code 1 (--fail-on-error).\n"
    # Nothing left behind but the interpreter's launcher (if the run made one), kept for
    # the next runs.
    assert {path.name for path in scratch.iterdir()} <= {f"squall-{os.getuid()}"}


def run_in_process(*arguments: str) -> Result:
    return CliRunner().invoke(main, ["run", *arguments], env={"COLUMNS": "200"})


def test_a_run_on_a_checkpoint_directory_resumes_the_next_run_and_says_so(
    spark: object, tmp_path: Path
) -> None:
    app, checkpoint = write_app(tmp_path), str(tmp_path / "checkpoint")
    arguments = [app, "--engine", "spark", "--checkpoint", checkpoint, "--name", "resumable"]
    arguments += ["--until-idle", "--seconds", "120", "--no-live"]
    arguments += ["--conf", "topology.spark.batch.max.tuples=8"]
    arguments += ["--conf", "topology.spark.batch.interval.millis=50"]

    first = run_in_process(*arguments)
    assert first.exit_code == 0, first.output
    assert "Resuming" not in first.output
    assert table_row(first.output, "numbers")["emitted"] == "20"
    last = last_committed_batch(os.path.join(checkpoint, "resumable", "core", "checkpoint"))
    assert last is not None and last >= 2  # 20 tuples, at most 8 a micro-batch

    second = run_in_process(*arguments)
    assert second.exit_code == 0, second.output
    assert (
        f"Resuming 'resumable' from checkpoint {checkpoint} after batch {last} "
        "(its spouts continue from there)."
    ) in second.output.replace("\n", " ")
    assert table_row(second.output, "numbers")["emitted"] == "0"  # nothing left to emit


def test_another_topology_on_the_checkpoint_is_refused_and_fresh_starts_it_afresh(
    spark: object, tmp_path: Path
) -> None:
    app, checkpoint = write_app(tmp_path), str(tmp_path / "checkpoint")
    changed = tmp_path / "changed.py"  # the bolt with 3 tasks
    changed.write_text(
        textwrap.dedent(FINITE).replace("Picky(), 2)", "Picky(), 3)"), encoding="utf-8"
    )
    options = ["--engine", "spark", "--checkpoint", checkpoint, "--name", "shapes"]
    options += ["--until-idle", "--seconds", "120", "--no-live"]
    options += ["--conf", "topology.spark.batch.interval.millis=50"]
    first = run_in_process(app, *options)
    assert first.exit_code == 0, first.output

    refused = run_in_process(str(changed), *options)
    assert refused.exit_code == 1, refused.output
    assert (
        f"Error: topology 'shapes' cannot resume from the checkpoint in "
        f"{os.path.join(checkpoint, 'shapes')}: another topology wrote it (component "
        "'picky': 3 tasks, was 2)."
    ) in refused.output.replace("\n", " ")

    fresh = run_in_process(str(changed), *options, "--fresh")
    assert fresh.exit_code == 0, fresh.output
    assert "Resuming" not in fresh.output
    assert table_row(fresh.output, "numbers")["emitted"] == "20"
    assert table_row(fresh.output, "picky")["tasks"] == "3"


def test_fresh_applies_to_spark_only(tmp_path: Path) -> None:
    done = run_in_process(write_app(tmp_path), "--fresh", "--seconds", "1")
    assert done.exit_code == 2
    assert "--fresh apply to --engine spark only" in done.output


BROKEN = """
from squall import BasicBolt, TopologyBuilder
from squall.testing import FixedTupleSpout


class NoDatabase(BasicBolt):
    def prepare(self, conf, context):
        raise ConnectionError("database unreachable")

    def execute(self, tup, collector):
        pass


def build_topology():
    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[1]], ["n"]))
    builder.set_bolt("store", NoDatabase()).shuffle_grouping("numbers")
    return builder.create_topology()
"""


def test_a_topology_that_fails_ends_the_run_with_exit_code_1_and_the_reason(
    spark: object, tmp_path: Path
) -> None:
    app = tmp_path / "broken.py"
    app.write_text(textwrap.dedent(BROKEN), encoding="utf-8")
    arguments = [str(app), "--engine", "spark", "--name", "broken", "--seconds", "120"]
    arguments += ["--no-live", "--conf", "topology.spark.batch.retries=0"]
    result = run_in_process(*arguments)
    assert result.exit_code == 1, result.output
    assert result.stderr.endswith(
        "Topology 'broken' failed: RuntimeError: bolt 'store' task 3: prepare raised "
        "ConnectionError: database unreachable\n"
    )
    assert table_row(result.stdout, "numbers")["emitted"] == "1"


def test_spark_settings_are_key_value_pairs_for_the_spark_engine_only(tmp_path: Path) -> None:
    app = write_app(tmp_path)
    result = run_in_process(app, "--spark-conf", "spark.executor.memory=2g")
    assert result.exit_code == 2
    assert "--spark-conf apply to --engine spark only" in result.output
    result = run_in_process(app, "--engine", "spark", "--spark-conf", "spark.executor.memory")
    assert result.exit_code == 2
    assert "'spark.executor.memory' is not KEY=VALUE" in result.output
