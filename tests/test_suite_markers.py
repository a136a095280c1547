"""The contributors' fast path, ``pytest -m "not spark"``: every test that runs Spark
(through the ``spark`` fixture, or the ``engine`` fixture's Spark case) is marked
``spark`` by this suite's ``conftest.py``, and left out."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CONFTEST = """
import pytest

from tests.conftest import pytest_collection_modifyitems  # the hook under test


@pytest.fixture
def spark():
    return "a session"


@pytest.fixture
def uses_spark(spark):
    return spark


@pytest.fixture(params=["local", "spark"])
def engine(request):
    return request.param
"""

TESTS = """
def test_plain():
    pass


def test_with_the_session(spark):
    pass


def test_through_another_fixture(uses_spark):
    pass


def test_on_each_engine(engine):
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
    assert collected(tmp_path, "not spark") == ["test_on_each_engine[local]", "test_plain"]


def test_the_spark_marker_selects_exactly_those_tests(tmp_path: Path) -> None:
    assert collected(tmp_path, "spark") == [
        "test_on_each_engine[spark]",
        "test_through_another_fixture",
        "test_with_the_session",
    ]
