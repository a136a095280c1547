"""The REST API of a SparkCluster: the same pages, and the micro-batches beside the
components."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from squall.ui import UIServer
from tests.helpers import wait_until
from tests.test_ui_api import words_topology

pytestmark = pytest.mark.spark


def test_a_spark_topology_page_lists_its_micro_batches(spark: Any, tmp_path: Path) -> None:
    from squall.spark import SparkCluster

    with (
        SparkCluster(spark=spark, checkpoint_dir=str(tmp_path)) as cluster,
        UIServer(cluster, port=0) as ui,
        httpx.Client(base_url=ui.url, timeout=30.0) as client,
    ):
        cluster.submit_topology(
            "words", {"topology.spark.batch.interval.millis": 50}, words_topology()
        )
        wait_until(
            lambda: cluster.get_topology_info("words").components["words"].acked == 4,
            timeout=120.0,
        )
        summary = client.get("api/v1/cluster/summary").json()
        assert (summary["engine"], summary["topologies"]) == ("spark", 1)
        assert summary["resources"].startswith("local[2, 4]")
        page = client.get("api/v1/topology/words").json()
        spark_figures = page["spark"]
        recent = spark_figures["recent"]
        assert spark_figures["batches"] == len(recent) >= 1
        assert [batch["batchId"] for batch in recent] == sorted(b["batchId"] for b in recent)
        assert recent[-1]["batchId"] == spark_figures["lastBatchId"]
        assert sum(batch["rows"] for batch in recent) == spark_figures["rowsTotal"] == 6
        spout = page["spouts"][0]
        assert (spout["spoutId"], spout["emitted"], spout["acked"], spout["failed"]) == (
            "words",
            6,
            4,
            2,
        )
        bolts = {bolt["boltId"]: bolt for bolt in page["bolts"]}
        assert (bolts["upper"]["executed"], bolts["sink"]["executed"]) == (6, 4)
        assert bolts["upper"]["lastError"] == "ValueError: boom is not a word"
        refused = client.post(
            "api/v1/topology/words/rebalance/0", json={"rebalanceOptions": {"numWorkers": 2}}
        )
        assert refused.status_code == 409
        assert refused.json()["errorMessage"].startswith(
            "SparkCluster cannot rebalance topology 'words': each micro-batch runs"
        )
        graph = client.get("topology/words/graph.svg")
        assert graph.headers["content-type"] == "image/svg+xml"
        assert ">upper</text>" in graph.text


def test_a_trident_topologys_micro_batches_show_their_state_commits(
    spark: Any, tmp_path: Path
) -> None:
    """Each micro-batch of a Trident count commits one state partition per task of its
    persistent aggregate (parallelism 2): the UI's batches say so."""
    from squall import Fields
    from squall.spark import SparkCluster
    from squall.trident import Count, FixedBatchSpout, TridentTopology
    from squall.trident.state import MemoryMapState

    rows = [[f"w{i % 3} w{i % 5}"] for i in range(12)]
    spout = FixedBatchSpout(Fields("sentence"), 4, *rows)
    spout.set_cycle(False)
    factory = MemoryMapState.factory()
    topology = TridentTopology()
    (
        topology.new_stream("sentences", spout)
        .each(Fields("sentence"), lambda tup: tup[0].split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(factory, Count(), Fields("count"))
        .parallelism_hint(2)
    )
    with (
        SparkCluster(spark=spark, checkpoint_dir=str(tmp_path)) as cluster,
        UIServer(cluster, port=0) as ui,
        httpx.Client(base_url=ui.url, timeout=30.0) as client,
    ):
        cluster.submit_topology(
            "counts", {"topology.spark.batch.interval.millis": 50}, topology.build()
        )

        def counted() -> int:
            return sum(MemoryMapState.contents(factory).values())

        wait_until(lambda: counted() == 24, timeout=120.0)
        recent = client.get("api/v1/topology/counts").json()["spark"]["recent"]
        with_rows = [batch for batch in recent if batch["rows"]]
        assert sum(batch["rows"] for batch in with_rows) == 12
        assert [batch["stateCommits"] for batch in with_rows] == [2] * len(with_rows)
