"""KafkaSpout when the broker goes away: a broker that cannot be reached at the start,
a durable broker killed and started again mid-run (nothing lost), and an in-memory
broker restarted (its topic gone: a clear error, then reading goes on once the topic
exists again)."""

from __future__ import annotations

from squall import LocalCluster
from squall.connectors.kafka import KafkaSpout
from tests.conftest import unique_name
from tests.connectors_kafka_spout_topologies import Recorder, records, topology
from tests.helpers import wait_until
from tests.kafka_broker import TansuBroker
from tests.servers import free_port

FAST = {"commit_period_ms": 50, "partition_refresh_ms": 100, "poll_timeout_ms": 50}


def values(count: int, prefix: str = "v") -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


def errors(cluster: LocalCluster, name: str) -> list[str]:
    return [e.error for e in cluster.get_topology_info(name).components["events"].errors]


def reported(cluster: LocalCluster, name: str, text: str) -> bool:
    return any(text in error for error in errors(cluster, name))


def test_a_broker_that_cannot_be_reached_is_reported_not_raised() -> None:
    address = f"127.0.0.1:{free_port()}"
    spout = KafkaSpout(address, "events", unique_name("group"), **FAST)  # type: ignore[arg-type]
    with LocalCluster() as cluster:
        cluster.submit_topology("down", {}, topology(spout, Recorder()))
        wait_until(
            lambda: len(errors(cluster, "down")) >= 2, timeout=20.0
        )  # reported, and tried again
        found = errors(cluster, "down")
        cluster.kill_topology("down")
    assert all(f"KafkaSpout 'events' cannot reach {address}: " in error for error in found), found
    assert "(attempt 1; retrying in 0.1 s)" in found[0]


def test_a_durable_broker_killed_and_started_again_loses_nothing(
    durable_kafka_broker: TansuBroker,
) -> None:
    """The broker is killed while records are in flight and not committed: every record
    is processed (some maybe twice, as at-least-once allows), all committed at the end."""
    broker = durable_kafka_broker
    topic, group = broker.create_topic(unique_name("events")), unique_name("group")
    broker.produce(topic, values(20))
    recorder = Recorder(delay=0.05)
    spout = KafkaSpout(broker.bootstrap, topic, group, **FAST)  # type: ignore[arg-type]
    with LocalCluster() as cluster:
        cluster.submit_topology("outage", {}, topology(spout, recorder))
        wait_until(lambda: len(recorder.seen()) >= 5, timeout=20.0)
        broker.kill()
        down = f"KafkaSpout 'events' cannot reach {broker.bootstrap}"
        wait_until(lambda: reported(cluster, "outage", down), timeout=30.0)
        broker.start()
        broker.produce(topic, values(10, prefix="w"))
        wait_until(lambda: broker.committed(group, topic, 1) == [30], timeout=60.0)
        assert cluster.wait_idle("outage")
        cluster.kill_topology("outage")
    expected = records(topic, values(20)) + records(topic, values(10, prefix="w"), start=20)
    seen = recorder.seen()
    assert sorted(map(tuple, set(map(tuple, seen)))) == sorted(map(tuple, expected))
    assert len(seen) >= 30


def test_a_restarted_in_memory_broker_is_reported_and_reading_goes_on(
    memory_broker: TansuBroker,
) -> None:
    broker = memory_broker
    topic, group = broker.create_topic(unique_name("events")), unique_name("group")
    broker.produce(topic, values(5))
    recorder = Recorder()
    spout = KafkaSpout(broker.bootstrap, topic, group, **FAST)  # type: ignore[arg-type]
    with LocalCluster() as cluster:
        cluster.submit_topology("restart", {}, topology(spout, recorder))
        wait_until(lambda: broker.committed(group, topic, 1) == [5], timeout=20.0)
        broker.stop()
        broker.start()
        gone = f"KafkaSpout 'events': topic {topic!r} no longer exists on {broker.bootstrap}"
        wait_until(lambda: reported(cluster, "restart", gone), timeout=30.0)
        broker.create_topic(topic)
        broker.produce(topic, values(3, prefix="new"))
        wait_until(lambda: len(recorder.seen()) >= 8, timeout=30.0)
        wait_until(lambda: broker.committed(group, topic, 1) == [3], timeout=30.0)
        assert cluster.wait_idle("restart")
        back = f"KafkaSpout 'events': topic {topic!r} exists again on {broker.bootstrap}"
        assert reported(cluster, "restart", back)
        cluster.kill_topology("restart")
    assert recorder.seen() == records(topic, values(5)) + records(topic, values(3, prefix="new"))
