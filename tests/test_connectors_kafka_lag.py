"""KafkaSpout's lag metrics before a partition is committed or fetched: its records are
counted from where the task started it (the committed offset it found, the end for the
``latest`` strategies, the log's start otherwise), and a partition not fetched yet from
the start and end the broker answers."""

from __future__ import annotations

from typing import Any

from squall import LocalCluster, TopologyBuilder
from squall.connectors.kafka import KafkaSpout
from squall.connectors.kafka.offsets import PartitionOffsets, offset_metrics
from tests.conftest import unique_name
from tests.helpers import HoldingBolt, wait_until
from tests.kafka_broker import KafkaBroker

#: No commit while the tests look (the lag before the first commit).
OPTIONS = {"commit_period_ms": 600_000, "partition_refresh_ms": 100, "poll_timeout_ms": 50}


class Watermarks:
    """A consumer whose fetches gave ``cached`` (partition -> (start, end)); the others
    are not fetched yet."""

    def __init__(self, cached: dict[tuple[str, int], tuple[int, int]]) -> None:
        self.cached = cached

    def get_watermark_offsets(self, partition: Any, cached: bool = False) -> tuple[int, int]:
        assert cached
        return self.cached.get((partition.topic, partition.partition), (-1001, -1001))


def lags(values: dict[str, float]) -> dict[str, float]:
    return {name: value for name, value in values.items() if "Lag" in name}


def test_partitions_not_committed_count_from_where_the_task_started_them() -> None:
    parts = {
        ("t", 0): PartitionOffsets(committed=10, next_offset=10),  # committed offset found
        ("t", 1): PartitionOffsets(),  # earliest, nothing committed
        ("t", 2): PartitionOffsets(next_offset=40),  # latest: the end when taken
    }
    parts[("t", 2)].emitted(40)  # read on since: the lag still counts from the start
    consumer = Watermarks({("t", 0): (0, 100), ("t", 1): (5, 1005), ("t", 2): (0, 45)})
    values = offset_metrics(consumer, sorted(parts), parts)
    assert lags(values) == {
        "t/partition_0/spoutLag": 90,
        "t/partition_1/spoutLag": 1000,
        "t/partition_2/spoutLag": 5,
        "t/totalSpoutLag": 90 + 1000 + 5,
    }
    assert "t/partition_1/latestCompletedOffset" not in values


def test_partitions_not_fetched_count_from_the_start_and_end_the_broker_gave() -> None:
    parts = {("t", 0): PartitionOffsets(committed=10, next_offset=10), ("t", 1): PartitionOffsets()}
    consumer = Watermarks({})
    values = offset_metrics(
        consumer, sorted(parts), parts, {("t", 0): (0, 70), ("t", 1): (100, 16_000)}
    )
    assert lags(values) == {
        "t/partition_0/spoutLag": 60,
        "t/partition_1/spoutLag": 15_900,
        "t/totalSpoutLag": 15_960,
    }
    assert values["t/partition_1/latestTimeOffset"] == 16_000
    assert lags(offset_metrics(consumer, sorted(parts), parts)) == {}  # nothing known


def lag_metrics(cluster: LocalCluster, name: str) -> dict[str, float]:
    custom = cluster.get_topology_info(name).components["events"].custom
    return {metric: value for metric, value in custom.items() if "Lag" in metric}


def test_the_lag_counts_records_waiting_before_the_first_commit(kafka_broker: KafkaBroker) -> None:
    """Nothing is acked (so nothing committed) and each partition stops after one record:
    the lag is every record of each partition."""
    broker = kafka_broker
    topic, group = broker.create_topic(unique_name("events"), 2), unique_name("group")
    broker.produce(topic, [f"a{i}" for i in range(4)], partition=0)
    broker.produce(topic, [f"b{i}" for i in range(6)], partition=1)
    holder = HoldingBolt()
    spout = KafkaSpout(
        broker.bootstrap,
        topic,
        group,
        max_uncommitted_offsets=1,
        **OPTIONS,  # type: ignore[arg-type]
    )
    builder = TopologyBuilder()
    builder.set_spout("events", spout)
    builder.set_bolt("hold", holder).shuffle_grouping("events")
    expected = {
        f"{topic}/partition_0/spoutLag": 4,
        f"{topic}/partition_1/spoutLag": 6,
        f"{topic}/totalSpoutLag": 10,
    }
    with LocalCluster() as cluster:
        cluster.submit_topology("lag", {}, builder.create_topology())
        wait_until(lambda: len(holder.record.get("held")) == 2, timeout=30.0)
        wait_until(lambda: lag_metrics(cluster, "lag") == expected, timeout=30.0)
        cluster.kill_topology("lag")


def test_the_lag_of_a_latest_start_counts_records_written_since(
    kafka_broker: KafkaBroker,
) -> None:
    broker = kafka_broker
    topic, group = broker.create_topic(unique_name("events")), unique_name("group")
    broker.produce(topic, [f"old{i}" for i in range(5)])
    holder = HoldingBolt()
    spout = KafkaSpout(
        broker.bootstrap,
        topic,
        group,
        first_poll_offset="latest",
        max_uncommitted_offsets=1,
        **OPTIONS,  # type: ignore[arg-type]
    )
    builder = TopologyBuilder()
    builder.set_spout("events", spout)
    builder.set_bolt("hold", holder).shuffle_grouping("events")
    end = f"{topic}/partition_0/latestTimeOffset"
    with LocalCluster() as cluster:
        cluster.submit_topology("latest", {}, builder.create_topology())
        wait_until(
            lambda: cluster.get_topology_info("latest").components["events"].custom.get(end) == 5,
            timeout=30.0,
        )
        broker.produce(topic, [f"new{i}" for i in range(3)])
        wait_until(lambda: len(holder.record.get("held")) == 1, timeout=30.0)
        expected = {f"{topic}/partition_0/spoutLag": 3, f"{topic}/totalSpoutLag": 3}
        wait_until(lambda: lag_metrics(cluster, "latest") == expected, timeout=30.0)
        cluster.kill_topology("latest")
    assert holder.record.get("held") == [[topic, 0, 5, None, "new0"]]
