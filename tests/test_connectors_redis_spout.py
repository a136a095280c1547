"""RedisStreamSpout against a real redis-server: every entry emitted and acknowledged
once, failed tuples replayed, malformed entries on the errors stream, the ``decode``
option, pending entries of a restarted or dead consumer taken over, a Spark snapshot
restored without losing or repeating entries, and wrong options refused at submit.

The key cases run on LocalCluster and on SparkCluster (the ``engine`` fixture) with the
same assertions."""

from __future__ import annotations

import pickle
import time
from typing import Any

import pytest

from squall import InvalidTopologyError, LocalCluster, TopologyBuilder
from squall.connectors.redis import EntryReader, MalformedEntryError, RedisStreamSpout
from squall.connectors.redis.spout import Phase
from tests.conftest import Engine, unique_name
from tests.connectors_redis_topologies import Recorder, client, fill, numbered, pending
from tests.helpers import wait_until
from tests.servers import RedisServer


def topology(spout: RedisStreamSpout, recorder: Recorder, parallelism: int = 1) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("events", spout, parallelism)
    builder.set_bolt("record", recorder).shuffle_grouping("events").shuffle_grouping(
        "events", "errors"
    )
    return builder.create_topology()


def test_every_entry_is_emitted_and_acknowledged_once(
    engine: Engine, redis_server: RedisServer
) -> None:
    stream, group = unique_name("events"), unique_name("group")
    entries = numbered(40)
    ids = fill(redis_server.url, stream, entries)
    recorder = Recorder()
    spout = RedisStreamSpout(redis_server.url, stream, group, batch=7)
    with engine.running(topology(spout, recorder), name="spout") as run:
        run.wait_until(lambda: len(recorder.seen()) >= 40, engine.timeout)
        run.wait_idle()
        wait_until(lambda: pending(redis_server.url, stream, group) == 0, timeout=10.0)
        stats = run.info().components["events"]
        assert (stats.acked, stats.failed) == (40, 0)
    assert sorted(recorder.seen()) == sorted([i, e] for i, e in zip(ids, entries, strict=True))
    assert recorder.seen("errors") == []


def test_failed_tuples_are_replayed_then_acknowledged(
    engine: Engine, redis_server: RedisServer
) -> None:
    stream, group = unique_name("events"), unique_name("group")
    entries = numbered(30)
    ids = fill(redis_server.url, stream, entries)
    failing = frozenset(range(0, 30, 3))
    recorder = Recorder(fail_once=failing)
    spout = RedisStreamSpout(redis_server.url, stream, group, batch=10)
    with engine.running(topology(spout, recorder), name="replays") as run:
        run.wait_until(lambda: len(recorder.seen()) >= 30 + len(failing), engine.timeout)
        run.wait_idle()
        wait_until(lambda: pending(redis_server.url, stream, group) == 0, timeout=10.0)
        stats = run.info().components["events"]
        assert (stats.acked, stats.failed) == (30, len(failing))
    seen = recorder.seen()
    assert len(seen) == 30 + len(failing)
    expected = [[i, e] for i, e in zip(ids, entries, strict=True)]
    replayed = [[i, e] for i, e in zip(ids, entries, strict=True) if int(e["n"]) in failing]
    assert sorted(seen) == sorted(expected + replayed)
    assert sorted(recorder.record.get("failed")) == sorted(v[0] for v in replayed)


def test_malformed_entries_go_to_the_errors_stream_and_decode_converts(
    engine: Engine, redis_server: RedisServer
) -> None:
    stream, group = unique_name("events"), unique_name("group")
    entries = [
        {"n": "1", "word": "apple"},
        {"n": "2"},
        {"n": "three", "word": "fig"},
        {"word": "plum", "n": "4", "extra": "x"},
    ]
    ids = fill(redis_server.url, stream, entries)
    recorder = Recorder()
    spout = RedisStreamSpout(
        redis_server.url, stream, group, fields=("n", "id", "word"), decode={"n": int}
    )
    with engine.running(topology(spout, recorder), name="malformed") as run:
        run.wait_until(lambda: len(recorder.record.get("seen")) >= 4, engine.timeout)
        run.wait_idle()
        wait_until(lambda: pending(redis_server.url, stream, group) == 0, timeout=10.0)
        assert run.info().components["events"].acked == 4
    assert sorted(recorder.seen()) == [[1, ids[0], "apple"], [4, ids[3], "plum"]]
    assert sorted(recorder.seen("errors")) == [
        [stream, ids[1], {"n": "2"}, "the entry has no field 'word'"],
        [
            stream,
            ids[2],
            {"n": "three", "word": "fig"},
            "field 'n': int('three') raised ValueError: invalid literal for int() with "
            "base 10: 'three'",
        ],
    ]


def test_entry_reader_maps_fields_and_decodes_the_data_dict() -> None:
    plain = EntryReader(("id", "data"), None)
    assert plain.values("1-0", {"a": "1"}) == ["1-0", {"a": "1"}]
    decoded = EntryReader(("id", "data"), {"a": int})
    assert decoded.values("1-0", {"a": "1", "b": "x"}) == ["1-0", {"a": 1, "b": "x"}]
    assert decoded.values("2-0", {"b": "x"}) == ["2-0", {"b": "x"}]  # absent: not decoded
    with pytest.raises(MalformedEntryError, match=r"^field 'a': int\('x'\) raised ValueError"):
        decoded.values("3-0", {"a": "x"})
    named = EntryReader(("ts", "id"), {"ts": float})
    assert named.values("4-0", {"ts": "2.5", "id": "ignored"}) == [2.5, "4-0"]
    with pytest.raises(MalformedEntryError, match=r"^the entry has no field 'ts'$"):
        named.values("5-0", {})


def test_a_restarted_consumer_and_a_dead_one_lose_nothing(redis_server: RedisServer) -> None:
    """Entries pending at this task's consumer name (a crash before their XACK) are
    emitted again at open; entries pending at another, idle consumer are claimed."""
    stream, group = unique_name("events"), unique_name("group")
    entries = numbered(30)
    ids = fill(redis_server.url, stream, entries)
    connection = client(redis_server.url)
    connection.xgroup_create(stream, group, id="0")
    connection.xreadgroup(group, "events-0", {stream: ">"}, count=5)  # this task, earlier
    connection.xreadgroup(group, "gone", {stream: ">"}, count=6)  # a consumer that died
    connection.xdel(stream, ids[1])  # deleted while pending
    time.sleep(0.05)
    recorder = Recorder()
    spout = RedisStreamSpout(redis_server.url, stream, group, claim_idle_ms=20)
    with LocalCluster() as cluster:
        cluster.submit_topology("restart", {}, topology(spout, recorder))
        wait_until(lambda: len(recorder.seen()) >= 29, timeout=10.0)
        assert cluster.wait_idle("restart")
        wait_until(lambda: pending(redis_server.url, stream, group) == 0, timeout=10.0)
        custom = cluster.get_topology_info("restart").components["events"].custom
        cluster.kill_topology("restart")
    kept = [[i, e] for index, (i, e) in enumerate(zip(ids, entries, strict=True)) if index != 1]
    assert sorted(recorder.seen()) == sorted(kept)
    assert custom["reclaimed"] == 4 + 6
    consumers = {c["name"] for c in connection.xinfo_consumers(stream, group)}  # type: ignore[union-attr]
    assert consumers == {"events-0", "gone"}
    connection.close()


def test_each_task_reads_as_a_consumer_of_its_own(redis_server: RedisServer) -> None:
    stream, group = unique_name("events"), unique_name("group")
    ids = fill(redis_server.url, stream, numbered(50))
    recorder = Recorder()
    spout = RedisStreamSpout(redis_server.url, stream, group, consumer="reader", batch=5)
    with LocalCluster() as cluster:
        cluster.submit_topology("tasks", {}, topology(spout, recorder, parallelism=2))
        wait_until(lambda: len(recorder.seen()) >= 50, timeout=10.0)
        assert cluster.wait_idle("tasks")
        cluster.kill_topology("tasks")
    assert sorted(values[0] for values in recorder.seen()) == sorted(ids)
    connection = client(redis_server.url)
    consumers = {c["name"] for c in connection.xinfo_consumers(stream, group)}  # type: ignore[union-attr]
    connection.close()
    assert consumers == {"reader-0", "reader-1"}


class ListCollector:
    """What a spout emits through: ``(stream, values, msg_id)`` of each emit."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, list[Any], Any]] = []
        self.errors: list[BaseException] = []

    def emit(self, values: list[Any], msg_id: Any = None, stream: str = "default") -> list[int]:
        self.emitted.append((stream, values, msg_id))
        return [1]

    def report_error(self, error: BaseException) -> None:
        self.errors.append(error)


class Context:
    component_id = "events"
    task_index = 0

    def get_component_tasks(self, component_id: str) -> list[int]:
        return [1]


def drain(spout: RedisStreamSpout, calls: int = 50) -> None:
    for _ in range(calls):
        spout.next_tuple()


def test_a_task_restored_from_a_snapshot_emits_what_the_snapshot_did_not_hold(
    redis_server: RedisServer,
) -> None:
    """Spark snapshots a spout task after each batch and restores the newest after a
    crash: the restored task must emit the entries read after the snapshot (pending at
    its consumer, not in the snapshot), not those in flight in the snapshot, whose
    outcome the engine still delivers."""
    stream, group = unique_name("events"), unique_name("group")
    ids = fill(redis_server.url, stream, numbered(10))
    spout = RedisStreamSpout(redis_server.url, stream, group, batch=4)
    first = ListCollector()
    spout.open({}, Context(), first)  # type: ignore[arg-type]
    for _ in range(3):
        spout.next_tuple()
    spout.ack(ids[0])  # acknowledged, not yet sent
    snapshot = pickle.dumps(spout)
    for _ in range(3):
        spout.next_tuple()  # emitted after the snapshot (4 read in two batches)
    assert [msg_id for _, _, msg_id in first.emitted] == ids[:6]

    restored: RedisStreamSpout = pickle.loads(snapshot)
    assert restored._client is None and restored._phase is Phase.RECOVER
    second = ListCollector()
    restored.collector = second  # type: ignore[assignment]
    drain(restored)
    assert [msg_id for _, _, msg_id in second.emitted] == ids[3:]
    for entry_id in ids[1:]:
        restored.ack(entry_id)  # the snapshot's trees, then the new ones
    drain(restored)
    assert pending(redis_server.url, stream, group) == 0
    assert restored.metrics()["reclaimed"] == 5  # ids[3:8] re-read from the consumer
    restored.close()
    spout.close()


def test_the_server_down_at_open_is_reported_and_nothing_is_emitted(
    tmp_path: Any,
) -> None:
    server = RedisServer(tmp_path)  # never started: its port refuses connections
    url = f"redis://:hunter2@127.0.0.1:{server.port}/0"
    spout = RedisStreamSpout(url, "s", "g")
    collector = ListCollector()
    spout.open({}, Context(), collector)  # type: ignore[arg-type]
    drain(spout, 20)
    assert collector.emitted == []
    assert len(collector.errors) == 1  # the back-off holds the next attempt
    message = str(collector.errors[0])
    assert message.startswith(
        f"RedisStreamSpout 'events' cannot reach redis://:***@127.0.0.1:{server.port}/0: "
    )
    assert message.endswith("(attempt 1; retrying in 0.1 s)")
    assert "hunter2" not in message
    spout.close()


WRONG_SPOUT_OPTIONS = [
    ({"batch": 0}, "batch must be an int > 0, got 0"),
    ({"url": "http://127.0.0.1/0"}, "url must be a URL (redis://, rediss://, unix://)"),
    ({"stream": ""}, "stream must be a non-empty string, got ''"),
    ({"group": None}, "group must be a non-empty string, got None"),
    ({"fields": []}, "fields must be a non-empty list of field names, got ()"),
    ({"start": "later"}, 'start must be "0", "$" or an entry id, got \'later\''),
    ({"decode": {"n": 3}}, "decode must map field names to callables, got 'n': 3"),
    ({"fields": ["n"], "decode": {"m": int}}, "decode names 'm', which is not one of"),
    ({"claim_idle_ms": -1}, "claim_idle_ms must be an int > 0, got -1"),
    ({"socket_timeout": 0}, "socket_timeout must be a number > 0, got 0"),
]


@pytest.mark.parametrize(("options", "message"), WRONG_SPOUT_OPTIONS)
def test_wrong_options_are_refused_at_submit_naming_the_component(
    options: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {"url": "redis://127.0.0.1:1/0", "stream": "s", "group": "g"}
    arguments.update(options)
    spout = RedisStreamSpout(**arguments)
    builder = TopologyBuilder()
    builder.set_spout("events", spout)
    builder.set_bolt("record", Recorder()).shuffle_grouping("events")
    with LocalCluster() as cluster, pytest.raises(InvalidTopologyError) as raised:
        cluster.submit_topology("wrong", {}, builder.create_topology())
    assert str(raised.value).startswith("component 'events' (RedisStreamSpout): ")
    assert message in str(raised.value)


def test_a_field_declared_twice_is_refused_when_the_topology_is_built() -> None:
    builder = TopologyBuilder()
    builder.set_spout("events", RedisStreamSpout("redis://h/0", "s", "g", fields=["a", "a"]))
    builder.set_bolt("record", Recorder()).shuffle_grouping("events")
    with pytest.raises(InvalidTopologyError, match=r"^component 'events', stream 'default': "):
        builder.create_topology()


def test_wrong_options_are_refused_at_submit_on_both_engines(engine: Engine) -> None:
    builder = TopologyBuilder()
    builder.set_spout("events", RedisStreamSpout("redis://127.0.0.1:1/0", "s", "g", batch=0))
    builder.set_bolt("record", Recorder()).shuffle_grouping("events")
    with pytest.raises(InvalidTopologyError) as raised, engine.running(builder.create_topology()):
        pass
    assert str(raised.value) == (
        "component 'events' (RedisStreamSpout): batch must be an int > 0, got 0"
    )
