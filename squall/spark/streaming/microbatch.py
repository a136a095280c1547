"""Helpers both ``foreachBatch`` functions (core and Trident) use to run a micro-batch's
plan with as few Spark jobs as it needs.

Runs on the Spark driver, inside the streaming query's ``foreachBatch`` call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: The query's session: adaptive execution splits every exchange into a job of its own
#: and can change nothing in these plans (their partition counts are task counts).
ADAPTIVE_EXECUTION_KEY = "spark.sql.adaptive.enabled"


def plan_without_adaptive_execution(frame: DataFrame) -> None:
    """Turn adaptive query execution off for the plans built on ``frame``.

    ``frame.sparkSession`` is the streaming query's own copy of the session (Spark makes
    one per query), so the user's session keeps its setting. One exchange then costs one
    stage of a single job instead of a job per exchange.
    """
    frame.sparkSession.conf.set(ADAPTIVE_EXECUTION_KEY, "false")


def run_for_effects(output: DataFrame) -> None:
    """Compute ``output`` (and every stage before it not yet run) for the effects of its
    tasks, dropping its rows: a ``noop`` write, one job, without the extra aggregation
    stage a ``count()`` adds."""
    output.write.format("noop").mode("overwrite").save()
