"""What a SparkSession runs on, as one short line (``SparkCluster.resources``, and
``SparkFigures.resources`` of its topologies).

A local master: its URL and the cores it uses (``local[2, 4]: 2 cores``); a cluster
master: its URL, the executors registered and their cores
(``spark://host:7077: 3 executors, 12 cores``).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext

#: Seconds a description is reused before Spark is asked again.
REFRESH_SECS = 1.0


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def describe(spark_context: SparkContext) -> str:
    """The resources of ``spark_context`` (a PySpark ``SparkContext``), asked of the JVM.

    Runs on the driver; a few Py4J calls. Cores are the executors' as Spark's status
    store counts them (the driver's for a local master), or Spark's default parallelism
    where that store cannot be read.
    """
    master = spark_context.master
    if master is None:
        raise RuntimeError("the SparkContext has no master")
    context = spark_context._jsc.sc()
    try:
        listed = context.statusStore().executorList(True)
        executors = [listed.apply(index) for index in range(listed.size())]
        workers = [e for e in executors if e.id() != "driver"]
        cores = sum(e.totalCores() for e in (workers or executors))
        count = len(workers)
    except Exception:  # an internal API of Spark's: fall back on public figures
        cores = spark_context.defaultParallelism
        count = max(0, context.getExecutorMemoryStatus().size() - 1)
    if master.startswith("local") and not master.startswith("local-cluster"):
        return f"{master}: {_count(cores, 'core')}"
    return f"{master}: {_count(count, 'executor')}, {_count(cores, 'core')}"


class Resources:
    """:func:`describe` of one session, asked again at most every ``REFRESH_SECS``
    (executors may come and go); ``""`` once the session cannot answer (stopped)."""

    def __init__(self, spark_context: SparkContext) -> None:
        self._context = spark_context
        self._lock = threading.Lock()
        self._line = ""
        self._asked = float("-inf")

    def line(self) -> str:
        """The current description (any thread)."""
        with self._lock:
            now = time.monotonic()
            if now - self._asked >= REFRESH_SECS:
                self._asked = now
                try:
                    self._line = describe(self._context)
                except Exception:
                    self._line = ""
            return self._line
