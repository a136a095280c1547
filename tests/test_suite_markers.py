"""The contributors' fast path, ``pytest -m "not spark"``: every test that runs Spark
(through the ``spark`` fixture, another fixture using it, or the ``engine`` fixture's
Spark case, however its cases are chosen) is marked ``spark`` by this suite's
``conftest.py``, and left out. Also: the helpers choosing and marking an engine's
cases."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ENGINES, on_engine, on_engines

ROOT = Path(__file__).resolve().parent.parent

# The suite's own hook and fixtures (collected, never run: no Spark starts).
CONFTEST = """
import pytest

from tests.conftest import engine, engine_settings, pytest_collection_modifyitems, spark


@pytest.fixture
def uses_spark(spark):
    return spark


@pytest.fixture
def uses_the_engine(engine):
    return engine
"""

TESTS = """
import pytest

from tests.conftest import on_engines


def test_plain():
    pass


def test_with_the_session(spark):
    pass


def test_through_another_fixture(uses_spark):
    pass


def test_on_each_engine(engine):
    pass


def test_through_a_fixture_using_the_engine(uses_the_engine):
    pass


@pytest.mark.parametrize("engine", ["local"], indirect=True)
def test_on_the_local_engine_only(engine):
    pass


@pytest.mark.parametrize(
    ("engine", "n"),
    on_engines([(1,), (2,)], [(3,)], xfail={"spark": "a gap"}),
    indirect=["engine"],
)
def test_a_matrix(engine, n):
    pass
"""


def collected(tmp_path: Path, expression: str) -> list[str]:
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST), encoding="utf-8")
    (tmp_path / "test_sample.py").write_text(textwrap.dedent(TESTS), encoding="utf-8")
    options = ["-p", "no:xdist", "-p", "no:cacheprovider", "--collect-only", "-q"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *options,
            "-m",
            expression,
            "-c",
            os.devnull,
            str(tmp_path),
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return sorted(line.split("::", 1)[1] for line in done.stdout.splitlines() if "::" in line)


def test_the_fast_path_leaves_out_every_test_that_runs_spark(tmp_path: Path) -> None:
    assert collected(tmp_path, "not spark") == [
        "test_a_matrix[local-1]",
        "test_a_matrix[local-2]",
        "test_a_matrix[process-1]",
        "test_a_matrix[process-2]",
        "test_on_each_engine[local]",
        "test_on_each_engine[process]",
        "test_on_the_local_engine_only[local]",
        "test_plain",
        "test_through_a_fixture_using_the_engine[local]",
        "test_through_a_fixture_using_the_engine[process]",
    ]


def test_the_spark_marker_selects_exactly_those_tests(tmp_path: Path) -> None:
    assert collected(tmp_path, "spark") == [
        "test_a_matrix[spark-3]",
        "test_on_each_engine[spark]",
        "test_through_a_fixture_using_the_engine[spark]",
        "test_through_another_fixture",
        "test_with_the_session",
    ]


def test_the_engine_fixture_runs_a_test_on_every_engine() -> None:
    assert ENGINES == ["local", "process", "spark"]
    assert [case.values for case in on_engines()] == [("local",), ("process",), ("spark",)]
    assert all(not case.marks for case in on_engines())


def test_an_engines_case_can_be_a_strict_xfail_naming_its_gaps() -> None:
    case = on_engine("spark", 1, "a", xfail=("the first gap", "the second"))
    assert case.values == ("spark", 1, "a")
    [mark] = case.marks
    assert mark.name == "xfail"
    assert mark.kwargs == {"strict": True, "reason": "the first gap; the second"}
    assert on_engine("local", xfail="one gap").marks[0].kwargs["reason"] == "one gap"
    assert not on_engine("local", 1).marks


def test_on_engines_gives_each_engine_its_cases_and_marks_only_the_failing_engine() -> None:
    cases = on_engines([(1,), (2,)], [(3,)], xfail={"spark": "a gap"})
    assert [case.values for case in cases] == [
        ("local", 1),
        ("local", 2),
        ("process", 1),
        ("process", 2),
        ("spark", 3),
    ]
    assert [bool(case.marks) for case in cases] == [False, False, False, False, True]
    assert [case.values for case in on_engines(spark=[])] == [("local",), ("process",)]


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown engine 'flink'"):
        on_engine("flink")
    with pytest.raises(ValueError, match=r"unknown engines \['sprak'\] in xfail"):
        on_engines(xfail={"sprak": "a gap"})
