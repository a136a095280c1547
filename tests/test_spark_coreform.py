"""The form of squall's core (compiled or pure Python) on the driver and the executors:
the driver's choice (``SQUALL_PURE_PYTHON``) reaches the executors of a session squall
starts, and a topology's Spark figures say which form each side runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from squall import BasicBolt, TopologyBuilder
from squall.compiled import PURE_PYTHON_ENV, compiled_core
from squall.spark import SparkCluster
from squall.testing import CapturingBolt, FixedTupleSpout
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parent.parent


class Double(BasicBolt):
    outputs = ["n"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([2 * tup["n"]])


def test_the_figures_say_which_form_the_driver_and_the_executors_run(
    spark: Any, tmp_path: Path
) -> None:
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[1], [2]], ["n"]))
    builder.set_bolt("double", Double()).shuffle_grouping("numbers")
    builder.set_bolt("sink", sink).shuffle_grouping("double")
    with SparkCluster(spark=spark, checkpoint_dir=str(tmp_path)) as cluster:
        cluster.submit_topology("forms", {}, builder.create_topology())
        assert cluster.wait_idle("forms")
        wait_until(lambda: sorted(sink.values()) == [[2], [4]], 30.0, 0.02)
        figures = cluster.get_topology_info("forms").spark
    assert figures is not None
    # The test session runs with the tests' own choice: its executors run the same form.
    driver = "compiled" if compiled_core() else "pure"
    assert (figures.driver_core, figures.executor_core) == (driver, driver)
    assert figures.as_dict()["executor_core"] == driver


#: A driver of its own: chooses the form, starts a session, runs a core topology and
#: prints the forms its figures report. With ``drop``, the variable is taken out of the
#: driver's environment once squall is imported, before Spark starts: as on a cluster,
#: whose executors do not inherit the driver's environment, only the session's own
#: settings can carry the choice.
DRIVER = textwrap.dedent(
    """
    import json, os, sys
    import squall
    from squall.compiled import compiled_core
    if sys.argv[1] == "drop":
        os.environ.pop("SQUALL_PURE_PYTHON", None)
    from squall import BasicBolt, TopologyBuilder
    from squall.spark import SparkCluster
    from squall.testing import FixedTupleSpout
    from tests.test_spark_coreform import Double

    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[1], [2]], ["n"]))
    builder.set_bolt("double", Double()).shuffle_grouping("numbers")
    with SparkCluster(master="local[2]", checkpoint_dir=sys.argv[2]) as cluster:
        cluster.submit_topology("forms", {}, builder.create_topology())
        assert cluster.wait_idle("forms", 120)
        figures = cluster.get_topology_info("forms").spark
        print(json.dumps([compiled_core(), figures.driver_core, figures.executor_core]))
    """
)


def run_driver(tmp_path: Path, pure: bool) -> list[Any]:
    """Run :data:`DRIVER` in a process of its own, with ``SQUALL_PURE_PYTHON=1`` set for
    squall's import if ``pure`` (and dropped before Spark starts); its printed forms."""
    environment = {k: v for k, v in os.environ.items() if k != PURE_PYTHON_ENV}
    environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), environment.get("PYTHONPATH", "")])
    if pure:
        environment[PURE_PYTHON_ENV] = "1"
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, "drop", str(tmp_path / "checkpoint")],
        env=environment,
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: list[Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.spark
def test_the_pure_python_choice_of_the_driver_reaches_the_executors(tmp_path: Path) -> None:
    assert run_driver(tmp_path, pure=True) == [False, "pure", "pure"]


@pytest.mark.spark
def test_without_the_choice_both_sides_run_the_installed_form(tmp_path: Path) -> None:
    compiled, driver, executors = run_driver(tmp_path, pure=False)
    form = "compiled" if compiled else "pure"
    assert (driver, executors) == (form, form)
