"""KafkaSpout across a crash: a child process runs a topology reading a topic and
writing each record's value to another topic (through KafkaBolt, acked on the broker's
confirmation); the process (on Spark: the driver with its JVM and workers) is SIGKILLed
in the middle of the topic; the topology started again on the same group (on Spark: the
same checkpoint) writes every record at least once, none missing, and commits the
group's offsets to the topic's end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from squall import Bolt, LocalCluster, TopologyBuilder
from squall.connectors.kafka import KafkaBolt, KafkaSpout
from squall.model.topology import StormTopology
from tests.conftest import unique_name
from tests.helpers import wait_until
from tests.kafka_broker import KafkaBroker

ROOT = Path(__file__).resolve().parent.parent
RECORDS = 200
#: Small batches and a short commit period, so the kill falls in the middle of the topic
#: with offsets committed before it.
LOCAL_CONF = {"topology.max.spout.pending": 10}
SPARK_CONF = {"topology.spark.batch.interval.millis": 50, "topology.spark.batch.max.tuples": 10}


class Killer(Bolt):
    """Passes each record's value on, anchored; SIGKILLs its own process at record
    ``r100`` while ``flag`` exists."""

    outputs = ["value"]

    def __init__(self, flag: str) -> None:
        self.flag = flag

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        if tup["value"] == "r100" and os.path.exists(self.flag):
            os.kill(os.getpid(), signal.SIGKILL)
        self.collector.emit([tup["value"]], anchors=[tup])
        self.collector.ack(tup)


class Pacer(Bolt):
    """Passes each record's value on, anchored, ``seconds`` after it arrives: the topic
    takes seconds, so a kill once 30 records are out falls in its middle however busy
    the machine is."""

    outputs = ["value"]

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        time.sleep(self.seconds)
        self.collector.emit([tup["value"]], anchors=[tup])
        self.collector.ack(tup)


def crash_topology(
    bootstrap: str,
    source: str,
    group: str,
    out: str,
    flag: str | None = None,
    pace: float | None = None,
) -> StormTopology:
    """source -> KafkaSpout -> (Killer, with ``flag``; Pacer, with ``pace``) -> KafkaBolt
    -> out (each record's value)."""
    builder = TopologyBuilder()
    spout = KafkaSpout(bootstrap, source, group, commit_period_ms=50, partition_refresh_ms=500)
    builder.set_spout("records", spout)
    feed = "records"
    if flag is not None:
        builder.set_bolt("killer", Killer(flag)).shuffle_grouping("records")
        feed = "killer"
    if pace is not None:
        builder.set_bolt("pacer", Pacer(pace)).shuffle_grouping("records")
        feed = "pacer"
    # Records wait 50 ms for their batch: with 10 tuples pending at most, the topic takes
    # about a second, so the kill falls in its middle.
    bolt = KafkaBolt(bootstrap, out, producer_conf={"linger.ms": 50})
    builder.set_bolt("out", bolt).shuffle_grouping(feed)
    return builder.create_topology()


def _local_child(bootstrap: str, source: str, group: str, out: str, flag: str) -> None:
    cluster = LocalCluster()
    topology = crash_topology(bootstrap, source, group, out, flag)
    cluster.submit_topology("crash", LOCAL_CONF, topology)
    time.sleep(120)


def _spark_child(bootstrap: str, source: str, group: str, out: str, checkpoint: str) -> None:
    from squall.spark import SparkCluster

    cluster = SparkCluster(
        master="local[2]",
        checkpoint_dir=checkpoint,
        spark_conf={"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"},
    )
    topology = crash_topology(bootstrap, source, group, out, pace=0.03)
    cluster.submit_topology("crash", SPARK_CONF, topology)
    time.sleep(120)


def written(broker: KafkaBroker, topic: str) -> list[bytes | None]:
    """The values ``topic`` holds, duplicates included."""
    count = broker.records_in(topic)
    return [value for _, _, _, value in broker.read(topic, count)] if count else []


def run_and_kill(broker: KafkaBroker, out: str, child: str, *arguments: str) -> None:
    """Run ``child`` of this module in a session of its own; SIGKILL its process group
    once ``out`` holds 30 records."""
    code = (
        f"import sys; from tests.test_connectors_kafka_crash import {child}; {child}(*sys.argv[1:])"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, *arguments],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_until(lambda: broker.records_in(out) >= 30, timeout=120.0, interval=0.01)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)


def prepare(broker: KafkaBroker) -> tuple[str, str, str, list[bytes]]:
    source, group = broker.create_topic(unique_name("source"), 2), unique_name("group")
    out = broker.create_topic(unique_name("out"))
    values = [f"r{i}" for i in range(RECORDS)]
    broker.produce(source, values, partition=[i % 2 for i in range(RECORDS)])
    return source, group, out, [value.encode() for value in values]


def test_a_local_topology_killed_mid_topic_loses_nothing_after_a_restart(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    """The topology SIGKILLs its own process at a record in the middle of the topic."""
    source, group, out, values = prepare(kafka_broker)
    flag = tmp_path / "kill"
    flag.touch()
    code = (
        "import sys; from tests.test_connectors_kafka_crash import _local_child; "
        "_local_child(*sys.argv[1:])"
    )
    arguments = (kafka_broker.bootstrap, source, group, out, str(flag))
    process = subprocess.Popen(
        [sys.executable, "-c", code, *arguments],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL, stderr[-3000:]
    assert b"r100" not in written(kafka_broker, out)  # killed in the middle
    flag.unlink()

    with LocalCluster() as cluster:
        topology = crash_topology(kafka_broker.bootstrap, source, group, out, str(flag))
        cluster.submit_topology("crash", LOCAL_CONF, topology)
        wait_until(lambda: set(written(kafka_broker, out)) == set(values), timeout=60.0)
        wait_until(
            lambda: kafka_broker.committed(group, source, 2) == [RECORDS // 2] * 2, timeout=10.0
        )
        cluster.kill_topology("crash")
    assert sorted(set(written(kafka_broker, out))) == sorted(values)


def test_a_spark_driver_killed_mid_topic_loses_nothing_after_a_restart(
    spark: Any, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    """A new SparkCluster on the same checkpoint resumes the spout from its last
    snapshot (its positions and records in flight)."""
    from squall.spark import SparkCluster

    source, group, out, values = prepare(kafka_broker)
    checkpoint = str(tmp_path / "checkpoint")
    arguments = (kafka_broker.bootstrap, source, group, out, checkpoint)
    run_and_kill(kafka_broker, out, "_spark_child", *arguments)
    assert len(set(written(kafka_broker, out))) < RECORDS  # killed in the middle

    cluster = SparkCluster(spark=spark, checkpoint_dir=checkpoint)
    try:
        resumed = {**SPARK_CONF, "topology.spark.batch.max.tuples": 1000}  # the rest at once
        # The same shape as the killed run's (a checkpoint resumes only its own topology).
        topology = crash_topology(kafka_broker.bootstrap, source, group, out, pace=0.0)
        cluster.submit_topology("crash", resumed, topology)
        wait_until(lambda: set(written(kafka_broker, out)) == set(values), timeout=60.0)
        assert cluster.wait_idle("crash")
        wait_until(
            lambda: kafka_broker.committed(group, source, 2) == [RECORDS // 2] * 2, timeout=10.0
        )
    finally:
        cluster.shutdown()
    assert sorted(set(written(kafka_broker, out))) == sorted(values)
