"""The Spark engine: topologies run on Apache Spark through PySpark, in micro-batches.

It needs the ``spark`` extra (``pip install 'squall[spark]'``): importing this package
without it raises :class:`SparkExtraMissingError`, which names the command.
"""

from squall.spark.errors import SparkUnavailableError
from squall.spark.requirements import SparkExtraMissingError, require_spark_extra

require_spark_extra()

from squall.spark.cluster import SparkCluster  # noqa: E402  (needs the extra checked first)
from squall.spark.control.location import CheckpointLocationError  # noqa: E402
from squall.spark.control.shape import CheckpointMismatchError  # noqa: E402

__all__ = [
    "CheckpointLocationError",
    "CheckpointMismatchError",
    "SparkCluster",
    "SparkExtraMissingError",
    "SparkUnavailableError",
]
