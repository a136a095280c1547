"""KafkaSpout naming a topic that does not exist: reported on the component, naming the
topic, with the connectors' back-off, until the topic exists; then read."""

from __future__ import annotations

from squall import LocalCluster
from squall.connectors.kafka import KafkaSpout
from tests.conftest import unique_name
from tests.connectors_kafka_spout_topologies import Recorder, records, topology
from tests.helpers import wait_until
from tests.kafka_broker import KafkaBroker

OPTIONS = {"commit_period_ms": 50, "partition_refresh_ms": 60_000, "poll_timeout_ms": 50}


def missing_reports(cluster: LocalCluster, name: str, topic: str) -> list[str]:
    errors = cluster.get_topology_info(name).components["events"].errors
    return [e.error for e in errors if f"topic {topic!r} does not exist" in e.error]


def test_a_topic_that_does_not_exist_is_reported_with_the_back_off_until_it_exists(
    kafka_broker: KafkaBroker,
) -> None:
    broker = kafka_broker
    topic, group = unique_name("evnts"), unique_name("group")
    recorder = Recorder()
    # Listed every minute otherwise: the reports (and the listings) follow the back-off.
    spout = KafkaSpout(broker.bootstrap, [topic], group, **OPTIONS)  # type: ignore[arg-type]
    with LocalCluster() as cluster:
        cluster.submit_topology("missing", {}, topology(spout, recorder))
        wait_until(lambda: len(missing_reports(cluster, "missing", topic)) >= 3, timeout=30.0)
        first = missing_reports(cluster, "missing", topic)[:3]
        broker.create_topic(topic)
        broker.produce(topic, ["a", "b", "c"])
        wait_until(lambda: len(recorder.seen()) == 3, timeout=30.0)
        reported = len(missing_reports(cluster, "missing", topic))
        wait_until(lambda: broker.committed(group, topic, 1) == [3], timeout=30.0)
        assert cluster.wait_idle("missing")
        after = len(missing_reports(cluster, "missing", topic))
        cluster.kill_topology("missing")
    prefix = f"ConnectorError: KafkaSpout 'events': topic {topic!r} does not exist on "
    assert first == [
        f"{prefix}{broker.bootstrap} (attempt 1; checking again in 0.1 s); it is read once it "
        "exists",
        f"{prefix}{broker.bootstrap} (attempt 2; checking again in 0.2 s); it is read once it "
        "exists",
        f"{prefix}{broker.bootstrap} (attempt 3; checking again in 0.4 s); it is read once it "
        "exists",
    ]
    assert after == reported  # none once the topic exists
    assert recorder.seen() == records(topic, ["a", "b", "c"])
