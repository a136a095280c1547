"""Topologies of the KafkaTridentSpout tests, shared with the child process of the crash
test (which runs this module).

    python -m tests.connectors_kafka_topologies ENGINE BOOTSTRAP TOPIC DIR DB FLAG KIND

LocalCluster (``ENGINE`` local; the coordination store in ``DIR``) or SparkCluster
(``spark``; its checkpoints in ``DIR``) runs :func:`trident_crash_topology` until its
state SIGKILLs the process.
"""

from __future__ import annotations

import json
import time
from collections import Counter

from squall import Config, Fields
from squall.connectors.kafka import KafkaTridentSpout
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


def word_spout(bootstrap: str, topics: list[str], kind: str, batch: int) -> KafkaTridentSpout:
    """A spout of ``("word",)`` read from JSON values; opaque for opaque state."""
    return KafkaTridentSpout(
        bootstrap,
        topics,
        opaque=StateType[kind] is StateType.OPAQUE,
        fields=("word",),
        value_format="json",
        max_batch_records=batch,
    )


def trident_crash_topology(
    bootstrap: str, topic: str, database: str, flag: str, kind: str
) -> TridentTopology:
    """Word counts of ``topic`` into SQLite; the state's partition 1 kills the process
    in transaction 2 while ``flag`` exists."""
    factory = KillingFactory(database, StateType[kind], kill_partition=1, flag=flag, kill_txid=2)
    topology = TridentTopology()
    topology.new_stream("words", word_spout(bootstrap, [topic], kind, 4)).group_by(
        Fields("word")
    ).persistent_aggregate(factory, Count(), Fields("count")).parallelism_hint(2)
    return topology


def trident_counts(database: str, kind: str) -> dict[str, int]:
    """The counts in the SQLite state."""
    contents = SqliteMapState.contents(SqliteMapState.factory(database, StateType[kind]))
    return {key[0]: value for key, value in contents.items()}


def _main(arguments: list[str]) -> None:
    from squall import LocalCluster

    engine, bootstrap, topic, directory, database, flag, kind = arguments[:7]
    topology = trident_crash_topology(bootstrap, topic, database, flag, kind).build()
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
    raise SystemExit("the state did not kill the process")


if __name__ == "__main__":
    import sys

    _main(sys.argv[1:])
