"""Shared fixtures: a LocalCluster per test (shut down after), a manual clock, and a
check that no engine thread outlives its test."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from squall import LocalCluster, ManualClock


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
def spark() -> Iterator[object]:
    """One SparkSession for every Spark test of the run (starting one takes seconds)."""
    from squall.spark.session import get_session

    session = get_session("local[2, 4]", {"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


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
