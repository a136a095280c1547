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
