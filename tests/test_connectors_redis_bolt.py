"""RedisStreamBolt against a real redis-server: the entries hold exactly the tuples'
fields, encoded as documented; each tuple is acked only once its entry is in the stream;
``fields`` chooses and orders the fields; ``maxlen`` trims (exactly, or about); a write
the server refuses fails its tuples; wrong options are refused at submit."""

from __future__ import annotations

from typing import Any

import pytest

from squall import InvalidTopologyError, LocalCluster, TopologyBuilder
from squall.connectors.redis import RedisStreamBolt
from squall.testing import FixedTupleSpout
from tests.conftest import Engine, unique_name
from tests.connectors_redis_topologies import ListSpout, client
from tests.helpers import wait_until
from tests.servers import RedisServer

PAYLOADS: list[Any] = [{"a": [1, 2]}, None, True, 2.5, "text", b"raw", [1, "x"], 7]
ENCODED = ['{"a": [1, 2]}', "null", "true", "2.5", "text", "raw", '[1, "x"]', "7"]


def entries(url: str, stream: str) -> list[dict[str, str]]:
    connection = client(url)
    try:
        return [fields for _, fields in connection.xrange(stream)]  # type: ignore[union-attr]
    finally:
        connection.close()


def sink_topology(spout: Any, bolt: RedisStreamBolt) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("rows", spout)
    builder.set_bolt("sink", bolt).shuffle_grouping("rows")
    return builder.create_topology()


def test_entries_hold_the_fields_encoded_and_tuples_are_acked_after_the_write(
    engine: Engine, redis_server: RedisServer
) -> None:
    out = unique_name("out")
    rows = [[n, f"label-{n}", PAYLOADS[n % len(PAYLOADS)]] for n in range(16)]
    spout = ListSpout(rows, check_url=redis_server.url, check_stream=out)
    bolt = RedisStreamBolt(redis_server.url, out, batch=4)
    with engine.running(sink_topology(spout, bolt), name="sink") as run:
        run.wait_until(lambda: len(spout.record.get("acked")) >= 16, engine.timeout)
        run.wait_idle()
        stats = run.info().components["sink"]
        assert (stats.acked, stats.failed, stats.errors_total) == (16, 0, 0)
    assert sorted(spout.record.get("acked")) == [[n, True] for n in range(16)]
    assert spout.record.get("failed") == []
    written = sorted(entries(redis_server.url, out), key=lambda fields: int(fields["n"]))
    assert written == [
        {"n": str(n), "label": f"label-{n}", "payload": ENCODED[n % len(ENCODED)]}
        for n in range(16)
    ]
    assert [list(fields) for fields in written] == [["n", "label", "payload"]] * 16


def test_listed_fields_in_their_order_and_exact_trimming(
    engine: Engine, redis_server: RedisServer
) -> None:
    out = unique_name("out")
    rows = [[n, f"label-{n}", None] for n in range(20)]
    spout = ListSpout(rows)
    bolt = RedisStreamBolt(
        redis_server.url, out, maxlen=5, fields=["label", "n"], batch=3, approximate=False
    )
    with engine.running(sink_topology(spout, bolt), name="trim") as run:
        run.wait_until(lambda: len(spout.record.get("acked")) >= 20, engine.timeout)
        run.wait_idle()
    written = entries(redis_server.url, out)
    assert [list(fields) for fields in written] == [["label", "n"]] * 5
    assert sorted(int(fields["n"]) for fields in written) == list(range(15, 20))


def test_approximate_trimming_keeps_about_maxlen_entries(redis_server: RedisServer) -> None:
    out = unique_name("out")
    spout = ListSpout([[n, "x", None] for n in range(1000)])
    bolt = RedisStreamBolt(redis_server.url, out, maxlen=100, batch=50)
    with LocalCluster() as cluster:
        cluster.submit_topology("about", {}, sink_topology(spout, bolt))
        wait_until(lambda: len(spout.record.get("acked")) >= 1000, timeout=10.0)
        cluster.kill_topology("about")
    connection = client(redis_server.url)
    length = int(connection.xlen(out))  # type: ignore[arg-type]
    connection.close()
    assert 100 <= length < 200  # whole nodes of 100 entries are trimmed


def test_a_write_the_server_refuses_fails_its_tuples(redis_server: RedisServer) -> None:
    out = unique_name("out")
    connection = client(redis_server.url)
    connection.set(out, "not a stream")
    connection.close()
    spout = FixedTupleSpout([[n, "x", None] for n in range(3)], ["n", "label", "payload"])
    bolt = RedisStreamBolt(redis_server.url, out, batch=3)
    with LocalCluster() as cluster:
        cluster.submit_topology("refused", {}, sink_topology(spout, bolt))
        wait_until(lambda: len(spout.failed) == 3, timeout=10.0)
        stats = cluster.get_topology_info("refused").components["sink"]
        cluster.kill_topology("refused")
    assert spout.acked == [] and sorted(spout.failed) == [0, 1, 2]
    assert stats.failed == 3 and stats.errors_total == 1
    assert stats.custom == {"entries_written": 0, "failed_writes": 1}
    assert (
        f"ConnectorError: RedisStreamBolt 'sink': writing 3 entries to stream {out!r} on "
        f"{redis_server.url} failed: WRONGTYPE Operation against a key holding the wrong kind "
        "of value; the tuples are failed"
    ) in stats.errors[0].error.splitlines()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"maxlen": 0}, "maxlen must be an int > 0, got 0"),
        ({"batch": 0}, "batch must be an int > 0, got 0"),
        ({"fields": []}, "fields must be a non-empty list of field names, got ()"),
        ({"max_delay_secs": 0}, "max_delay_secs must be a number > 0, got 0"),
        ({"approximate": "yes"}, "approximate must be True or False, got 'yes'"),
        ({"url": "127.0.0.1:6379"}, "url must be a URL (redis://, rediss://, unix://)"),
        ({"connect_timeout": float("inf")}, "connect_timeout must be a finite number"),
    ],
)
def test_wrong_options_are_refused_at_submit_naming_the_component(
    options: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {"url": "redis://127.0.0.1:1/0", "stream": "out"}
    arguments.update(options)
    spout = FixedTupleSpout([[1, "x", None]], ["n", "label", "payload"])
    topology = sink_topology(spout, RedisStreamBolt(**arguments))
    with LocalCluster() as cluster, pytest.raises(InvalidTopologyError) as raised:
        cluster.submit_topology("wrong", {}, topology)
    assert str(raised.value).startswith("component 'sink' (RedisStreamBolt): ")
    assert message in str(raised.value)
