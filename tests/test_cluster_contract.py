"""The one contract both engines implement: ``squall.runtime.cluster.Cluster``."""

from __future__ import annotations

import os
from typing import Any

import pytest

from squall import LocalCluster
from squall.runtime.cluster import Cluster
from squall.runtime.registry import TopologyRegistry

#: What an engine implements.
CONTRACT = {
    "engine",
    "resources",
    "submit_topology",
    "wait_idle",
    "wait_complete",
    "activate",
    "deactivate",
    "kill_topology",
    "rebalance",
    "check_rebalance",
    "get_topology_info",
    "get_topology",
    "get_topology_conf",
    "topology_names",
    "metric_windows",
    "in_window",
    "shutdown",
}


def test_the_contract_is_every_abstract_method_of_cluster() -> None:
    assert Cluster.__abstractmethods__ == CONTRACT


def test_the_registry_leaves_the_engine_its_own_part() -> None:
    shared = {"topology_names", "metric_windows", "in_window"}
    assert TopologyRegistry.__abstractmethods__ == CONTRACT - shared


@pytest.mark.parametrize("missing", sorted(CONTRACT))
def test_an_engine_missing_a_method_cannot_be_made(missing: str) -> None:
    members: dict[str, Any] = {name: getattr(LocalCluster, name) for name in CONTRACT}
    del members[missing]
    incomplete = type("Incomplete", (Cluster,), members)
    with pytest.raises(TypeError, match=rf"abstract method '?{missing}'?"):
        incomplete()


def test_local_cluster_is_a_cluster() -> None:
    with LocalCluster() as cluster:
        assert isinstance(cluster, Cluster)
        assert cluster.engine == "local"
        assert cluster.resources == f"this process, {os.cpu_count()} cores"
