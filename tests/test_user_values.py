"""Tuple values whose class is defined in the user's own module (``__main__``, the file
given to ``squall run``): they travel between processes as the components do, on every
engine, and ``CapturingBolt`` records them in any process.

The user's module is made at run time here (a module object registered under a name no
other process can import), as ``__main__`` or a file run by ``squall run`` is to Spark's
Python processes and the local engine's worker processes.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from squall import TopologyBuilder
from squall.cli.main import main
from squall.runtime import codepickle
from squall.testing import CapturingBolt, FixedTupleSpout
from tests.conftest import Engine, on_engines
from tests.helpers import table_row

USER_CODE = """
from dataclasses import dataclass

from squall import BasicBolt


@dataclass(frozen=True)
class Vehicle:
    name: str
    speed: int


class Faster(BasicBolt):
    outputs = ["vehicle", "name"]

    def execute(self, tup, collector):
        vehicle = tup["vehicle"]
        collector.emit([Vehicle(vehicle.name, vehicle.speed * 2), vehicle.name])
"""

MODULE = "squall_test_user_values_app"


@pytest.fixture
def user_module() -> Iterator[types.ModuleType]:
    """A module made at run time, as a user's ``__main__`` is: importable only here."""
    module = types.ModuleType(MODULE)
    sys.modules[MODULE] = module
    try:
        exec(compile(textwrap.dedent(USER_CODE), "<user module>", "exec"), module.__dict__)
        yield module
    finally:
        del sys.modules[MODULE]


@pytest.mark.parametrize("engine", on_engines(), indirect=True)
def test_values_of_a_users_class_travel_and_are_captured(
    engine: Engine, user_module: types.ModuleType
) -> None:
    """Vehicles from the spout (its source's process on Spark) go to two tasks of a
    bolt defined in the user's module (executors; on two worker processes, some in the
    other worker), which emits new ones to a CapturingBolt (one task)."""
    vehicle = user_module.Vehicle
    spout = FixedTupleSpout([[vehicle(f"v{n}", n)] for n in range(8)], ["vehicle"])
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("vehicles", spout)
    builder.set_bolt("faster", user_module.Faster(), 2).shuffle_grouping("vehicles")
    builder.set_bolt("sink", sink).global_grouping("faster")
    with engine.running(builder.create_topology(), name="vehicles") as run:
        # On Spark, the first micro-batch of a session waits for its Python workers.
        run.wait_until(lambda: len(spout.acked) == 8, engine.pick(engine.timeout, 180.0))
        info = run.info()
    assert sorted(spout.acked) == list(range(8))
    assert spout.failed == []
    received = sorted(sink.values(), key=lambda values: values[1])
    assert received == [[vehicle(f"v{n}", 2 * n), f"v{n}"] for n in range(8)]
    assert all(type(values[0]) is vehicle for values in received)
    assert sum(stats.errors_total for stats in info.components.values()) == 0


def test_a_value_of_a_class_of_a_module_others_cannot_import_loads_elsewhere(
    user_module: types.ModuleType,
) -> None:
    """Plain pickle would write the class by reference, which this process resolves
    but another cannot: such a value is pickled with its class."""
    payload = codepickle.dumps_value([user_module.Vehicle("v1", 3), "plain"])
    loaded = subprocess.run(
        [sys.executable, "-c", "import pickle, sys; print(pickle.loads(sys.stdin.buffer.read()))"],
        input=payload,
        capture_output=True,
        check=False,
    )
    assert loaded.returncode == 0, loaded.stderr.decode()
    assert loaded.stdout.decode() == "[Vehicle(name='v1', speed=3), 'plain']\n"
    # Values of importable classes stay plain pickles, as fast as before.
    assert codepickle.dumps_value([1, "a", (2.5, None)]) == pickle.dumps(
        [1, "a", (2.5, None)], pickle.HIGHEST_PROTOCOL
    )


RANKINGS_APP = """
from squall import BasicBolt, Bolt, TopologyBuilder
from squall.testing import FixedTupleSpout


class Rankings:
    def __init__(self, words):
        self.words = sorted(words)


class Rank(BasicBolt):
    outputs = ["rankings"]

    def execute(self, tup, collector):
        collector.emit([Rankings([tup["word"], "zebra"])])


class Total(BasicBolt):
    def execute(self, tup, collector):
        assert tup["rankings"].words[-1] == "zebra"


def build_topology():
    builder = TopologyBuilder()
    builder.set_spout("words", FixedTupleSpout([[w] for w in "abcdef"], ["word"]))
    builder.set_bolt("rank", Rank(), 2).shuffle_grouping("words")
    builder.set_bolt("total", Total()).global_grouping("rank")
    return builder.create_topology()
"""


@pytest.mark.spark
def test_a_file_run_on_spark_sends_values_of_its_own_classes(spark: object, tmp_path: Path) -> None:
    """``squall run app.py --engine spark``: the values of a class of the file go from
    the bolt's tasks to the next bolt's, none failed."""
    app = tmp_path / "rankings_app.py"
    app.write_text(textwrap.dedent(RANKINGS_APP), encoding="utf-8")
    arguments = ["run", str(app), "--engine", "spark", "--until-idle", "--seconds", "120"]
    arguments += ["--no-live", "--fail-on-error"]
    arguments += ["--conf", "topology.spark.batch.interval.millis=50"]
    done = CliRunner().invoke(main, arguments, env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    total = table_row(done.output, "total")
    assert (total["executed"], total["acked"], total["failed"]) == ("6", "6", "0")
    assert table_row(done.output, "words")["acked"] == "6"
