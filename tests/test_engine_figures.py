"""The engines' own figures of a topology: typed on ``TopologyInfo`` (``local``,
``spark``), and as the plain dict ``TopologyInfo.extra`` (and ``to_dict()``) gives."""

from __future__ import annotations

import json

from squall import LocalCluster, TopologyBuilder
from squall.runtime.engine_figures import LocalFigures, QueryFigures, SparkFigures, WorkerProcess
from squall.runtime.metrics import ComponentStats, TopologyInfo
from squall.testing import CapturingBolt, FixedTupleSpout
from tests.helpers import wait_until


def test_local_figures_of_worker_threads_as_a_dict() -> None:
    figures = LocalFigures(pending=2, queued=3, ack_messages=7, executors={"a": 1, "__acker": 1})
    assert figures.as_dict() == {
        "pending": 2,
        "queued": 3,
        "ack_messages": 7,
        "executors": {"a": 1, "__acker": 1},
    }


def test_local_figures_of_worker_processes_as_a_dict() -> None:
    figures = LocalFigures(
        pending=1,
        queued=0,
        ack_messages=4,
        executors={"a": 2},
        worker_kind="process",
        worker_processes=[WorkerProcess(0, 101), WorkerProcess(1, 102, restarts=1)],
        transferred_between_workers=9,
        dropped_between_workers=2,
    )
    assert figures.as_dict() == {
        "pending": 1,
        "queued": 0,
        "ack_messages": 4,
        "executors": {"a": 2},
        "worker_kind": "process",
        "worker_processes": [
            {"worker": 0, "pid": 101, "restarts": 0},
            {"worker": 1, "pid": 102, "restarts": 1},
        ],
        "transferred_between_workers": 9,
        "dropped_between_workers": 2,
    }


def _query(batches: int, resumed: int | None = None) -> QueryFigures:
    return QueryFigures(
        batches=batches,
        last_batch_id=batches - 1,
        last_batch_rows=5,
        last_batch_ms=12.5,
        median_batch_ms=10.0,
        recent_batches=[(batches - 1, 5, 12.5, 0)],
        rows_total=5 * batches,
        retries=1,
        errors=["OSError: down"],
        resumed_from_batch=resumed,
    )


def test_spark_figures_as_a_dict_the_first_query_at_the_top() -> None:
    figures = SparkFigures(
        queries={"spouts": _query(3, resumed=1), "drpc-words": _query(2)},
        checkpoint_dir="/checkpoints",
        resources="local[2, 4]: 2 cores",
        failure="ValueError: bad",
    )
    first = {
        "resumed_from_batch": 1,
        "batches": 3,
        "last_batch_id": 2,
        "last_batch_rows": 5,
        "last_batch_ms": 12.5,
        "median_batch_ms": 10.0,
        "recent_batches": [(2, 5, 12.5, 0)],
        "rows_total": 15,
        "retries": 1,
        "errors": ["OSError: down"],
    }
    second = {
        "batches": 2,
        "last_batch_id": 1,
        "last_batch_rows": 5,
        "last_batch_ms": 12.5,
        "median_batch_ms": 10.0,
        "recent_batches": [(1, 5, 12.5, 0)],
        "rows_total": 10,
        "retries": 1,
        "errors": ["OSError: down"],
    }
    assert figures.first.batches == 3
    assert figures.as_dict() == {
        **first,
        "queries": {"spouts": first, "drpc-words": second},
        "checkpoint_dir": "/checkpoints",
        "failure": "ValueError: bad",
        "resources": "local[2, 4]: 2 cores",
    }
    # No failure, no resources line, not resumed: those keys are left out.
    quiet = SparkFigures({"core": _query(1)}, "/c").as_dict()
    assert set(quiet) == {*second, "queries", "checkpoint_dir"}


def test_topology_info_gives_the_engines_figures_as_extra_and_in_to_dict() -> None:
    components = {"a": ComponentStats("a", "bolt", [1])}
    local = TopologyInfo("t", "ACTIVE", 1.0, 1, components, local=LocalFigures(pending=4))
    assert local.spark is None
    assert local.extra == local["extra"] == LocalFigures(pending=4).as_dict()
    data = json.loads(json.dumps(local.to_dict()))
    assert sorted(data) == ["components", "extra", "name", "status", "uptime_secs", "workers"]
    assert data["extra"]["pending"] == 4
    spark = TopologyInfo("t", "ACTIVE", 1.0, 0, components, spark=SparkFigures({}, "/c"))
    assert spark.local is None
    assert spark.extra == SparkFigures({}, "/c").as_dict()
    assert TopologyInfo("t", "ACTIVE", 1.0, 0, components).extra == {}


def test_local_cluster_reports_typed_figures() -> None:
    spout = FixedTupleSpout([[1], [2], [3]], ["n"])
    builder = TopologyBuilder()
    builder.set_spout("numbers", spout)
    builder.set_bolt("sink", CapturingBolt(), 2).shuffle_grouping("numbers")
    with LocalCluster() as cluster:
        cluster.submit_topology("typed", {}, builder.create_topology())
        wait_until(lambda: len(spout.acked) == 3)
        assert cluster.wait_idle("typed", 10.0)
        info = cluster.get_topology_info("typed")
        assert info.spark is None and info.local is not None
        assert (info.local.pending, info.local.queued) == (0, 0)
        assert info.local.executors == {"__acker": 1, "numbers": 1, "sink": 2}
        assert (info.local.worker_kind, info.local.worker_processes) == ("thread", [])
        assert info.local.ack_messages >= 3  # at least one init per tree
        assert info.extra == info.local.as_dict()
