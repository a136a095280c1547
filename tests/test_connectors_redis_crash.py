"""RedisStreamSpout across a crash: a child process runs a topology reading a stream
through a consumer group and writing what it processed to another stream (through
RedisStreamBolt, acked after the write); the process is SIGKILLed in the middle of the
stream; the topology started again on the same group processes every entry at least
once, none missing, and leaves no entry pending."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from squall import LocalCluster, TopologyBuilder
from squall.connectors.redis import RedisStreamBolt, RedisStreamSpout
from squall.spark import SparkCluster
from tests.conftest import unique_name
from tests.connectors_redis_topologies import (
    CORE_CONF,
    client,
    core_crash_topology,
    fill,
    numbered,
    pending,
)
from tests.helpers import wait_until
from tests.servers import RedisServer

ROOT = Path(__file__).resolve().parent.parent
ENTRIES = 200


def processed(url: str, out: str) -> list[str]:
    """The source entry ids written to ``out``, duplicates included."""
    connection = client(url)
    try:
        return [fields["id"] for _, fields in connection.xrange(out)]  # type: ignore[union-attr]
    finally:
        connection.close()


def child(*arguments: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.connectors_redis_topologies", *arguments],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_a_local_topology_killed_mid_stream_loses_nothing_after_a_restart(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    url = redis_server.url
    stream, group, out = unique_name("events"), unique_name("group"), unique_name("out")
    ids = fill(url, stream, numbered(ENTRIES))
    flag = tmp_path / "kill"
    flag.touch()
    process = child("core", url, stream, group, out, str(flag))
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL, stderr[-3000:]
    before = processed(url, out)
    assert 0 < len(set(before)) < ENTRIES  # killed in the middle of the stream
    assert pending(url, stream, group) > 0  # entries read and not acknowledged

    flag.unlink()
    with LocalCluster() as cluster:
        topology = core_crash_topology(url, stream, group, out, str(flag))
        cluster.submit_topology("crash", CORE_CONF, topology)
        wait_until(lambda: set(processed(url, out)) == set(ids), timeout=20.0)
        wait_until(lambda: pending(url, stream, group) == 0, timeout=10.0)
        cluster.kill_topology("crash")
    assert sorted(set(processed(url, out))) == sorted(ids)


def spark_topology(url: str, stream: str, group: str, out: str) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("events", RedisStreamSpout(url, stream, group, batch=10))
    builder.set_bolt("out", RedisStreamBolt(url, out, max_delay_secs=None)).shuffle_grouping(
        "events"
    )
    return builder.create_topology()


#: Small micro-batches, so the kill falls in the middle of the stream.
SPARK_CONF = {"topology.spark.batch.interval.millis": 50, "topology.spark.batch.max.tuples": 10}


def _spark_child(url: str, stream: str, group: str, out: str, checkpoint: str) -> None:
    cluster = SparkCluster(
        master="local[2]",
        checkpoint_dir=checkpoint,
        spark_conf={"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"},
    )
    cluster.submit_topology("crash", SPARK_CONF, spark_topology(url, stream, group, out))
    time.sleep(120)


def test_a_spark_driver_killed_mid_stream_loses_nothing_after_a_restart(
    spark: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    """The driver (with its JVM and Python workers: the whole process group) is killed
    once some entries were written; a new SparkCluster on the same checkpoint resumes
    the spout from its last snapshot and the group's pending entries."""
    url = redis_server.url
    stream, group, out = unique_name("events"), unique_name("group"), unique_name("out")
    ids = fill(url, stream, numbered(ENTRIES))
    checkpoint = str(tmp_path / "checkpoint")
    code = (
        "import sys; from tests.test_connectors_redis_crash import _spark_child; "
        "_spark_child(*sys.argv[1:])"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, url, stream, group, out, checkpoint],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_until(lambda: len(processed(url, out)) >= 30, timeout=120.0, interval=0.01)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)
    assert len(set(processed(url, out))) < ENTRIES  # killed in the middle of the stream

    cluster = SparkCluster(spark=spark, checkpoint_dir=checkpoint)
    try:
        resumed = {**SPARK_CONF, "topology.spark.batch.max.tuples": 1000}  # the rest at once
        cluster.submit_topology("crash", resumed, spark_topology(url, stream, group, out))
        wait_until(lambda: set(processed(url, out)) == set(ids), timeout=60.0, interval=0.05)
        assert cluster.wait_idle("crash")
        wait_until(lambda: pending(url, stream, group) == 0, timeout=10.0)
    finally:
        cluster.shutdown()
    assert sorted(set(processed(url, out))) == sorted(ids)
