"""Topologies of the KafkaTridentSpout tests, shared with the child process of the crash
test (which runs this module).

    python -m tests.connectors_kafka_topologies ENGINE BOOTSTRAP TOPIC DIR DB FLAG KIND POINT

LocalCluster (``ENGINE`` local; the coordination store in ``DIR``) or SparkCluster
(``spark``; its checkpoints in ``DIR``) runs :func:`trident_crash_topology` until it
SIGKILLs its own process: its state in the middle of transaction 2 (``POINT``
``mid-batch``), or its spout's emitter (the whole process group) as it reads
transaction 3's first record, after transaction 2 committed (``between-batches``).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from typing import Any

from squall import Config, Fields
from squall.connectors.kafka import KafkaRecord, KafkaTridentSpout
from squall.trident import Count, TridentTopology
from squall.trident.state import SqliteMapState, StateType
from tests.spark_spouts import KillingFactory

WORDS = ["apple", "pear", "fig", "plum", "kiwi"]


def words(partition: int, count: int) -> list[str]:
    """The words of Kafka partition ``partition`` of the tests."""
    return [WORDS[(partition * 7 + i * 3) % len(WORDS)] for i in range(count)]


def word_values(partition: int, count: int) -> list[str]:
    """:func:`words` as JSON record values ``{"word": ...}``."""
    return [json.dumps({"word": word}) for word in words(partition, count)]


def true_counts(partitions: int, per_partition: int) -> dict[str, int]:
    """The words of :func:`words` over every partition, counted."""
    return dict(Counter(w for p in range(partitions) for w in words(p, per_partition)))


def word_spout(
    bootstrap: str, topics: list[str], kind: str, batch: int, translator: Any = None
) -> KafkaTridentSpout:
    """A spout of ``("word",)`` read from JSON values; opaque for opaque state."""
    return KafkaTridentSpout(
        bootstrap,
        topics,
        opaque=StateType[kind] is StateType.OPAQUE,
        fields=("word",),
        translator=translator,
        value_format="json",
        max_batch_records=batch,
    )


class KillingTranslator:
    """Reads the word of a record; at the record of ``partition`` and ``offset``, while
    ``flag`` exists, SIGKILLs the process group of its session's leader: the crash
    test's child (started in a session of its own), on Spark the driver with its JVM
    (the Python worker running this is in a process group of its own)."""

    def __init__(self, flag: str, partition: int, offset: int) -> None:
        self.flag = flag
        self.partition = partition
        self.offset = offset

    def __call__(self, record: KafkaRecord) -> list[Any]:
        if (record.partition, record.offset) == (self.partition, self.offset) and os.path.exists(
            self.flag
        ):
            os.killpg(os.getsid(0), signal.SIGKILL)
        return [record.value["word"]]


def trident_crash_topology(
    bootstrap: str, topic: str, database: str, flag: str, kind: str, point: str
) -> TridentTopology:
    """Word counts of ``topic`` (3 partitions, batches of 4 records per partition) into
    SQLite; while ``flag`` exists, the process is killed at ``point`` (see the module
    docstring)."""
    if point == "mid-batch":
        kill_partition, translator = 1, None
    else:  # between batches: at partition 0's record 8, the first of transaction 3
        kill_partition, translator = -1, KillingTranslator(flag, 0, 8)
    factory = KillingFactory(
        database, StateType[kind], kill_partition=kill_partition, flag=flag, kill_txid=2
    )
    topology = TridentTopology()
    spout = word_spout(bootstrap, [topic], kind, 4, translator)
    topology.new_stream("words", spout).group_by(Fields("word")).persistent_aggregate(
        factory, Count(), Fields("count")
    ).parallelism_hint(2)
    return topology


def trident_counts(database: str, kind: str) -> dict[str, int]:
    """The counts in the SQLite state."""
    contents = SqliteMapState.contents(SqliteMapState.factory(database, StateType[kind]))
    return {key[0]: value for key, value in contents.items()}


def _main(arguments: list[str]) -> None:
    from squall import LocalCluster

    engine, bootstrap, topic, directory, database, flag, kind, point = arguments[:8]
    topology = trident_crash_topology(bootstrap, topic, database, flag, kind, point).build()
    if engine == "local":
        conf = {
            Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR: directory,
            Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 1,
        }
        with LocalCluster() as cluster:
            cluster.submit_topology("crash", conf, topology)
            time.sleep(60)
    else:
        from squall.spark import SparkCluster

        spark = SparkCluster(
            master="local[2]",
            checkpoint_dir=directory,
            spark_conf={
                "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
            },
        )
        spark.submit_topology("crash", {"topology.spark.batch.interval.millis": 50}, topology)
        time.sleep(120)
    raise SystemExit("the topology did not kill its process")


if __name__ == "__main__":
    import sys

    _main(sys.argv[1:])
