"""The set-up of each Python process Spark starts for squall (sources and workers).

PySpark's worker daemon runs a full garbage collection after every task of a reused
worker. A worker's heap is mostly what importing PySpark, PyArrow and squall made, and
a full collection walks all of it: measured on a word count of one sentence per
micro-batch, those collections were most of the workers' CPU time and a third of the
whole micro-batch's. :func:`prepare_process` moves that start-up heap out of the
collector's reach once (``gc.freeze``), so each collection walks only what the tasks
made since.
"""

from __future__ import annotations

import gc

from squall.spark.launch.workerlog import configure_worker_logging

_prepared = False


def prepare_process() -> None:
    """Configure squall's logging (see :mod:`squall.spark.launch.workerlog`) and freeze the
    start-up heap; once per process, later calls do nothing.

    Runs in a source's or worker's Python process, at the start of squall's function,
    before any component code runs. Frozen objects are still freed by reference
    counting; only cycles among them are never collected, and they were made once.
    """
    global _prepared
    if _prepared:
        return
    _prepared = True
    configure_worker_logging()
    gc.collect()
    gc.freeze()
