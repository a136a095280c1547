"""The local engine: topologies on threads in this process."""

from squall.local.cluster import LocalCluster

__all__ = ["LocalCluster"]
