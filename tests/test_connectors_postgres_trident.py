"""Trident topologies counting into PostgresMapState on LocalCluster and SparkCluster,
with the same assertions: exact counts (and on Spark, the state committed from the
executors' processes), exact counts after the process running the topology is killed
half-way through a transaction and restarted, and after the server went away and came
back, with an error naming the state and the server (password hidden) meanwhile."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from squall import Config
from squall.connectors.postgres import PostgresMapState
from squall.testing import SharedRecord
from squall.trident.state import StateConnectionError, StateType
from tests.conftest import ENGINE_SETTINGS, SPARK_RETRIES, Engine, EngineSettings, on_engines
from tests.helpers import wait_until
from tests.postgres_topologies import (
    CHECKPOINT,
    COORDINATION,
    CRASH_CONF,
    GatedSpout,
    NotingPostgresFactory,
    chunk_counts,
    crash_counts,
    crash_topology,
    create_notes,
    noted,
    release,
    sentence_counts,
    word_count,
)
from tests.servers import PostgresServer
from tests.spark_spouts import CRASH_ROWS, true_counts

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "s3cret"


@pytest.fixture
def engine_settings() -> dict[str, EngineSettings]:
    """20 s for a result locally; on Spark, runs of a failed micro-batch enough to
    outlast an outage."""
    return {
        "local": ENGINE_SETTINGS["local"].tuned(timeout=20.0),
        "spark": ENGINE_SETTINGS["spark"].tuned({SPARK_RETRIES: 20}, timeout=90.0),
    }


@pytest.mark.parametrize("state_type", [StateType.TRANSACTIONAL, StateType.OPAQUE], ids=str)
def test_word_count_is_exact_and_committed_where_the_partitions_run(
    engine: Engine, postgres_dsn: str, state_type: StateType
) -> None:
    """Locally the state is committed in this process (in the worker processes on the
    ``process`` engine); on Spark in the executors' Python workers, never the driver.
    Each partition commits its transactions once, in order."""
    factory = NotingPostgresFactory(postgres_dsn, "word_counts", state_type)
    create_notes(factory)
    with engine.running(word_count(factory), name="words") as run:
        run.wait_until(
            lambda: PostgresMapState.contents(factory) == sentence_counts(), engine.timeout
        )
        run.drain()
        if engine.is_spark:
            from squall.spark.streaming.batchpipeline import runs_on_driver

            stages = run.cluster._get(run.name).queries[0].plan.segments
            assert not runs_on_driver(next(stage for stage in stages if stage.committer))
    assert PostgresMapState.contents(factory) == sentence_counts()
    notes = noted(factory)
    pids = {pid for _, _, pid in notes}
    if engine.is_spark or engine.name == "process":
        assert pids and os.getpid() not in pids
    else:
        assert pids == {os.getpid()}
    for partition in (0, 1):
        txids = [txid for p, txid, _ in notes if p == partition]
        assert txids == sorted(set(txids))  # once each, in order
        assert set(range(1, 4)) <= set(txids)  # the three batches of sentences


@pytest.mark.parametrize(
    ("engine", "state_type"),
    on_engines(local=[("TRANSACTIONAL",), ("OPAQUE",)], spark=[("OPAQUE",)]),
    indirect=["engine"],
)
def test_a_run_killed_half_way_through_a_transaction_restarts_exactly_once(
    engine: Engine, postgres_dsn: str, tmp_path: Path, state_type: str
) -> None:
    """A child process counts words into PostgreSQL; once partition 1 of the state has
    written transaction 2, the child is killed (SIGKILL). The test restarts the
    topology on the same coordination directory (local) or checkpoint (Spark): the
    table ends with the true counts, transaction 2 applied once."""
    flag = str(tmp_path / "kill")
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.postgres_topologies",
            engine.name,
            str(tmp_path),
            postgres_dsn,
            "word_counts",
            flag,
            state_type,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=180,
        start_new_session=True,
    )
    assert child.returncode == -9, child.stderr[-3000:]
    partial = crash_counts(postgres_dsn, "word_counts", state_type)
    expected = true_counts(CRASH_ROWS)
    assert partial and partial != expected  # transaction 2 half written, 3 not begun

    os.remove(flag)
    topology = crash_topology(postgres_dsn, "word_counts", flag, state_type)
    if engine.is_spark:
        from squall.spark import SparkCluster

        cluster = SparkCluster(spark=engine._spark, checkpoint_dir=str(tmp_path / CHECKPOINT))
        try:
            cluster.submit_topology("crash", CRASH_CONF, topology.build())
            assert cluster.wait_idle("crash")
        finally:
            cluster.shutdown()
    else:
        conf = {**CRASH_CONF, Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR: str(tmp_path / COORDINATION)}
        with engine.running(topology, conf, name="crash"):
            wait_until(
                lambda: crash_counts(postgres_dsn, "word_counts", state_type) == expected,
                timeout=engine.timeout,
            )
    assert crash_counts(postgres_dsn, "word_counts", state_type) == expected


# --- the server goes away --------------------------------------------------------------


@pytest.fixture
def server() -> Any:
    """A PostgreSQL server of the test's own, to stop and start again."""
    own = PostgresServer()
    try:
        own.start()
        yield own
    finally:
        own.close()


def stored(factory: Any) -> dict[tuple[Any, ...], Any] | None:
    """The counts in the table, or None while the server cannot be reached."""
    try:
        return PostgresMapState.contents(factory)
    except StateConnectionError:
        return None


def error_texts(info: Any) -> list[str]:
    """Every error the topology reported: each component's, and on Spark the failed
    micro-batches'."""
    texts = [e.error for stats in info.components.values() for e in stats.errors]
    return texts + list(info.extra.get("errors", []))


def test_a_server_that_goes_away_fails_batches_naming_the_state_then_counts_are_exact(
    engine: Engine, server: PostgresServer
) -> None:
    dsn = server.create_database("app").replace("squall@", f"squall:{PASSWORD}@")
    redacted = f"postgresql://squall:***@127.0.0.1:{server.port}/app"
    factory = PostgresMapState.factory(dsn, "word_counts", StateType.OPAQUE, connect_timeout=2)
    record = SharedRecord()
    conf = {
        Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 5,
        Config.TOPOLOGY_TRIDENT_BATCH_RETRY_INITIAL_MILLIS: 50,
        Config.TOPOLOGY_TRIDENT_BATCH_RETRY_MAX_MILLIS: 200,
    }
    named = re.compile(
        rf"PostgresMapState cannot reach {re.escape(redacted)} \(table 'word_counts', "
        r"component '(?P<component>[^']+)' partition \d of 2\): "
    )
    with engine.running(word_count(factory, GatedSpout(record)), conf, name="outage") as run:
        release(record)
        wait_until(lambda: stored(factory) == chunk_counts(1), timeout=engine.timeout)
        server.stop()
        release(record)
        wait_until(lambda: any(map(named.search, error_texts(run.info()))), timeout=engine.timeout)
        server.start()
        wait_until(lambda: stored(factory) == chunk_counts(2), timeout=engine.timeout)
        release(record)
        wait_until(lambda: stored(factory) == chunk_counts(3), timeout=engine.timeout)
        info = run.info()

    texts = error_texts(info)
    assert texts and all(PASSWORD not in text for text in texts)
    assert all(named.search(text) for text in texts), texts  # no other error
    component = next(m["component"] for t in texts if (m := named.search(t)))
    assert component in info.components  # the state's own component
    assert PostgresMapState.contents(factory) == chunk_counts(3)
