"""Whether every executor reaches the checkpoint location as the driver does.

On a cluster, executors read what the driver's side writes under the checkpoint (spout
logs, set-ups) and write what the driver reads (task snapshots, what partitions
emitted). A location only the driver sees (its own ``/tmp``) would fail the first
micro-batch with a missing file; :func:`check_executors_reach` finds it at once with a
small Spark job: each task reads a file the driver wrote and writes one the driver then
looks for.

Runs on the driver (the job's tasks on executors).
"""

from __future__ import annotations

import socket
import uuid
from functools import partial
from typing import TYPE_CHECKING

from squall.spark.control import storage
from squall.spark.control.location import CheckpointLocationError
from squall.spark.control.storage import join

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: What a probe task answers: its host, and what went wrong there ("" if nothing).
Answer = tuple[str, str]


def _probe(probe: str, token: str, index: int) -> Answer:
    """Read the driver's probe file and write this task's answer beside it (executor)."""
    host = socket.gethostname()
    try:
        found = storage.read_text(probe)
        if found != token:
            return host, f"{probe} holds {found!r}, not what the driver wrote"
        storage.write_bytes(f"{probe}.{index}", host.encode(), durable=False)
    except Exception as error:
        return host, f"{type(error).__name__}: {error}"
    return host, ""


def check_executors_reach(spark: SparkSession, location: str) -> None:
    """Check, with one task per core of the session, that the executors read and write
    ``location`` as the driver does.

    Raises:
        CheckpointLocationError: an executor cannot read the driver's file there, or
            the driver does not see the file an executor wrote; the message names the
            hosts and the location.
    """
    context = spark.sparkContext
    tasks = max(1, int(context.defaultParallelism))
    storage.makedirs(location)
    probe = join(location, f".squall-probe-{uuid.uuid4().hex}")
    token = uuid.uuid4().hex
    storage.write_bytes(probe, token.encode(), durable=False)
    try:
        job = context.parallelize(range(tasks), tasks).map(partial(_probe, probe, token))
        answers: list[Answer] = job.collect()
        problems = [f"{host}: {problem}" for host, problem in answers if problem]
        problems += [
            f"{host}: the driver does not see the file the executor wrote"
            for index, (host, problem) in enumerate(answers)
            if not problem and not storage.exists(f"{probe}.{index}")
        ]
    finally:
        storage.remove(probe)
        for index in range(tasks):
            storage.remove(f"{probe}.{index}")
    if problems:
        raise CheckpointLocationError(
            f"checkpoint location {location!r} is not shared by the driver and the "
            f"executors ({'; '.join(sorted(set(problems)))}): on a cluster use a location "
            "every node reaches (a shared mount, hdfs://, s3a://)"
        )
