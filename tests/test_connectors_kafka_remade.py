"""KafkaSpout and a topic made again while the broker was away: an in-memory broker
killed and started again empty, the topic made again with new records. Every record of
the new log is emitted, from its first offset, and the group's committed offset never
passes a record of the new log that was not emitted, whether the spout comes back after
the topic was made and filled, or first.

The race is made deterministic by deactivating the topology while the broker is
replaced: the spout's code runs again only once the new topic is in place (its client
may reconnect meanwhile, as it would in a real race)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from squall import LocalCluster
from squall.connectors.kafka import KafkaSpout, spoutpartitions
from tests.conftest import unique_name
from tests.connectors_kafka_spout_topologies import Recorder, records, topology
from tests.helpers import settle, wait_until
from tests.kafka_broker import TansuBroker

OPTIONS = {"commit_period_ms": 200, "partition_refresh_ms": 100, "poll_timeout_ms": 50}


def values(count: int, prefix: str) -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


def errors(cluster: LocalCluster, name: str) -> list[str]:
    return [e.error for e in cluster.get_topology_info(name).components["events"].errors]


class CommitWatch:
    """Samples the group's committed offset of partition 0 on a thread of its own and
    keeps every sample that passes a record of the new log (values starting with
    ``prefix``) the recorder has not received yet."""

    def __init__(self, broker: TansuBroker, group: str, topic: str, recorder: Recorder) -> None:
        self.broker, self.group, self.topic, self.recorder = broker, group, topic, recorder
        self.samples = 0
        self.violations: list[tuple[int, list[int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> CommitWatch:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                committed = self.broker.committed(self.group, self.topic, 1)[0]
            except Exception:  # the broker starting: sampled again
                continue
            # The committed offset first, then what was received: a record is received
            # before its ack, and acked before it is committed.
            emitted = {v[2] for v in self.recorder.seen() if str(v[4]).startswith("w")}
            missing = [offset for offset in range(max(committed, 0)) if offset not in emitted]
            if missing:
                self.violations.append((committed, missing[:5]))
            self.samples += 1
            self._stop.wait(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def replace_broker(broker: TansuBroker, topic: str, produce: int) -> None:
    """Kill the broker, start it again empty on the same port, make ``topic`` again and
    write ``produce`` records ``w0``, ``w1``, ... to it."""
    broker.kill()
    broker.start()
    broker.create_topic(topic)
    if produce:
        broker.produce(topic, values(produce, "w"))


def start_reading(
    cluster: LocalCluster, broker: TansuBroker, name: str
) -> tuple[str, str, Recorder]:
    """A topic of 300 records ``v0``... read, acked and committed by a topology."""
    topic, group = broker.create_topic(unique_name("events")), unique_name("group")
    broker.produce(topic, values(300, "v"))
    recorder = Recorder()
    spout = KafkaSpout(broker.bootstrap, topic, group, **OPTIONS)  # type: ignore[arg-type]
    cluster.submit_topology(name, {}, topology(spout, recorder))
    wait_until(lambda: broker.committed(group, topic, 1) == [300], timeout=30.0)
    assert recorder.seen() == records(topic, values(300, "v"))
    return topic, group, recorder


#: Which check finds the new log -> the checks turned off (as on a broker without topic
#: ids, or one that kept no committed offsets) and the reason reported.
DECIDED_BY = {
    "topic id": ((), "the topic's id is "),
    "committed offset": (
        ("topic_ids",),
        "the group's committed offset is none where the broker had confirmed 300",
    ),
    "record at the position": (
        ("topic_ids", "committed_lost"),
        "the record at offset 299 is not the one the spout read",
    ),
}


def no_ids(*args: Any) -> dict[str, str]:
    return {}


def nothing_lost(*args: Any) -> None:
    return None


@pytest.mark.parametrize(
    ("decided_by", "new"),
    [(check, 500) for check in sorted(DECIDED_BY)] + [("record at the position", 300)],
)
def test_a_topic_made_again_and_filled_before_the_spout_is_back_is_read_from_its_start(
    memory_broker: TansuBroker, monkeypatch: pytest.MonkeyPatch, decided_by: str, new: int
) -> None:
    """``new`` records in the new log: past the spout's position (300), or as many as
    the old log had (its end not behind the position)."""
    broker = memory_broker
    off, reason = DECIDED_BY[decided_by]
    if "topic_ids" in off:
        monkeypatch.setattr(spoutpartitions, "topic_ids", no_ids)
    if "committed_lost" in off:
        monkeypatch.setattr(spoutpartitions, "committed_lost", nothing_lost)
    with LocalCluster() as cluster:
        topic, group, recorder = start_reading(cluster, broker, "remade")
        cluster.deactivate("remade")
        settle(cluster, "remade")
        replace_broker(broker, topic, new)
        watch = CommitWatch(broker, group, topic, recorder).start()
        cluster.activate("remade")
        wait_until(lambda: broker.committed(group, topic, 1) == [new], timeout=60.0)
        assert cluster.wait_idle("remade")
        watch.stop()
        found = errors(cluster, "remade")
        cluster.kill_topology("remade")
    assert recorder.seen()[300:] == records(topic, values(new, "w"))
    assert watch.violations == []
    assert watch.samples > 0
    again = [e for e in found if f"partition {topic}/0: " in e and "reading it again" in e]
    assert len(again) == 1, found
    assert again[0].startswith(
        f"ConnectorError: KafkaSpout 'events': partition {topic}/0: its log is not the one "
        f"the spout read ({reason}"
    )
    assert again[0].endswith("); reading it again from the earliest offset")


def test_a_topic_made_again_before_its_records_is_read_from_its_start(
    memory_broker: TansuBroker,
) -> None:
    """The spout is back while the new topic is still empty: it starts it again before
    any record is written."""
    broker = memory_broker
    with LocalCluster() as cluster:
        topic, group, recorder = start_reading(cluster, broker, "remade")
        cluster.deactivate("remade")
        settle(cluster, "remade")
        replace_broker(broker, topic, 0)
        watch = CommitWatch(broker, group, topic, recorder).start()
        cluster.activate("remade")
        wait_until(lambda: any("reading it again" in e for e in errors(cluster, "remade")), 30.0)
        broker.produce(topic, values(500, "w"))
        wait_until(lambda: broker.committed(group, topic, 1) == [500], timeout=60.0)
        assert cluster.wait_idle("remade")
        watch.stop()
        found = errors(cluster, "remade")
        cluster.kill_topology("remade")
    assert recorder.seen()[300:] == records(topic, values(500, "w"))
    assert watch.violations == []
    again = [e for e in found if f"partition {topic}/0: " in e and "reading it again" in e]
    assert len(again) == 1, found
