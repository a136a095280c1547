"""``squall run`` options about engines and outcomes, on the local engine: which options
belong to Spark, --fail-on-error, and help that names both engines."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from squall.cli.main import main
from tests.helpers import table_row

ALWAYS_FAILS = """
from squall import BasicBolt, TopologyBuilder
from squall.testing import FixedTupleSpout


class Fails(BasicBolt):
    def execute(self, tup, collector):
        raise RuntimeError(f"cannot take {tup['n']}")


class Fine(BasicBolt):
    def execute(self, tup, collector):
        pass


def failing():
    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[1], [2], [3]], ["n"]))
    builder.set_bolt("fails", Fails()).shuffle_grouping("numbers")
    return builder.create_topology()


def fine():
    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[1], [2], [3]], ["n"]))
    builder.set_bolt("fine", Fine()).shuffle_grouping("numbers")
    return builder.create_topology()
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "200"})


def run_until_idle(target: str, *options: str) -> Result:
    return invoke("run", target, "--until-idle", "--seconds", "60", "--no-live", *options)


def write_app(tmp_path: Path) -> str:
    path = tmp_path / "outcomes.py"
    path.write_text(textwrap.dedent(ALWAYS_FAILS), encoding="utf-8")
    return str(path)


def test_fail_on_error_exits_1_after_the_summary_when_errors_were_reported(
    tmp_path: Path,
) -> None:
    app = write_app(tmp_path)
    failed = run_until_idle(f"{app}:failing", "--fail-on-error")
    assert failed.exit_code == 1, failed.output
    assert table_row(failed.output, "fails")["errors"] == "3"  # the summary, then the exit
    assert failed.output.rstrip().endswith(
        "Errors were reported during the run: exit code 1 (--fail-on-error)."
    )

    without_flag = run_until_idle(f"{app}:failing")
    assert without_flag.exit_code == 0, without_flag.output
    assert table_row(without_flag.output, "fails")["errors"] == "3"

    clean = run_until_idle(f"{app}:fine", "--fail-on-error")
    assert clean.exit_code == 0, clean.output
    assert "--fail-on-error" not in clean.output


def test_spark_options_are_refused_with_the_local_engine(tmp_path: Path) -> None:
    app = write_app(tmp_path)
    for options, named in [
        (["--checkpoint", str(tmp_path / "cp")], "--checkpoint apply"),
        (["--master", "local[2]"], "--master apply"),
        (["--master", "local[2]", "--checkpoint", "cp"], "--master and --checkpoint apply"),
    ]:
        result = invoke("run", f"{app}:fine", *options)
        assert result.exit_code == 2, result.output
        assert f"Error: {named} to --engine spark only" in result.output
    assert not (tmp_path / "cp").exists()


def test_help_names_both_engines_and_which_options_are_spark_only() -> None:
    top = invoke("--help")
    assert top.exit_code == 0
    assert "local engine (LocalCluster, the default) or on Apache Spark (--engine spark)" in (
        " ".join(top.output.split())
    )
    run_help = invoke("run", "--help")
    assert run_help.exit_code == 0
    text = " ".join(run_help.output.split())
    assert "on the local engine (LocalCluster), or on Spark with --engine spark" in text
    assert re.search(r"--master URL Spark only:", text)
    assert "--checkpoint DIR|URI Spark only:" in text
    assert "--fail-on-error" in text
    assert "With --engine spark, also Spark's own output" in text


def test_a_local_spark_run_keeps_sparks_scratch_space_in_a_directory_it_removes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from squall.cli import main as cli_main

    monkeypatch.setattr(cli_main, "_active_spark_session", lambda: False)
    with cli_main.spark_scratch("spark", "local[2]", {"spark.executor.memory": "1g"}) as settings:
        scratch = settings["spark.local.dir"]
        assert os.path.isdir(scratch)
        assert settings["spark.driver.extraJavaOptions"] == f"-Djava.io.tmpdir={scratch}"
        assert settings["spark.executor.memory"] == "1g"
    assert not os.path.exists(scratch)
    chosen = {"spark.local.dir": "/data/spark", "spark.driver.extraJavaOptions": "-Xss4m"}
    with cli_main.spark_scratch("spark", None, chosen) as settings:
        scratch = settings["spark.driver.extraJavaOptions"].split("=", 1)[1]
        assert settings["spark.local.dir"] == "/data/spark"  # the user's setting wins
        assert settings["spark.driver.extraJavaOptions"] == f"-Xss4m -Djava.io.tmpdir={scratch}"
    for engine, master in (("spark", "spark://10.0.0.5:7077"), ("local", None)):
        with cli_main.spark_scratch(engine, master, {}) as settings:
            assert settings == {}
    # Under spark-submit, its JVM runs already (its master may be a cluster): no change.
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")
    with cli_main.spark_scratch("spark", None, {"spark.executor.memory": "1g"}) as settings:
        assert settings == {"spark.executor.memory": "1g"}
