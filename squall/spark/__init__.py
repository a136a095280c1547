"""The Spark engine: topologies run on Apache Spark through PySpark, in micro-batches."""

from squall.spark.cluster import SparkCluster
from squall.spark.session import SparkUnavailableError

__all__ = ["SparkCluster", "SparkUnavailableError"]
