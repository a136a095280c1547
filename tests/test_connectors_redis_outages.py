"""The Redis Streams connectors while their server is down, on LocalCluster and on
SparkCluster with the same assertions.

Each test has a redis-server of its own with an append-only file synced on every
write, stopped and started again on the same port with its data. A spout whose server
is down when the topology starts, or goes down while it runs, and a bolt whose server
goes down while it writes, must report an error naming the connector, its component and
the server's address, keep the topology running, and once the server is back process
every entry and write every tuple, none lost."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall import TopologyBuilder
from squall.connectors.redis import RedisStreamBolt, RedisStreamSpout
from tests.conftest import Engine, Run
from tests.connectors_redis_topologies import ListSpout, Recorder, client, fill, numbered, pending
from tests.servers import RedisServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    process = RedisServer(tmp_path, durable=True).start()
    try:
        yield process
    finally:
        process.stop()


def errors_of(run: Run, component: str) -> tuple[int, list[str]]:
    """The component's error count and the texts of its recorded errors."""
    stats = run.info().components[component]
    return stats.errors_total, [error.error for error in stats.errors]


def test_a_spout_whose_server_is_down_at_start_and_mid_run_loses_nothing(
    engine: Engine, server: RedisServer
) -> None:
    stream, group = "events", "group"
    ids = fill(server.url, stream, numbered(20))
    server.stop()
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("events", RedisStreamSpout(server.url, stream, group, batch=5))
    builder.set_bolt("record", recorder).shuffle_grouping("events")
    cannot_reach = f"RedisStreamSpout 'events' cannot reach {server.url}: "
    with engine.running(builder.create_topology(), name="down") as run:
        run.wait_until(
            lambda: any(cannot_reach in text for text in errors_of(run, "events")[1]),
            engine.timeout,
        )
        assert recorder.seen() == []
        server.start()
        run.wait_until(lambda: len(recorder.seen()) >= 20, engine.timeout)
        run.wait_until(lambda: pending(server.url, stream, group) == 0, engine.timeout)

        reported = errors_of(run, "events")[0]
        server.stop()  # mid-run: the spout's next read fails
        run.wait_until(lambda: errors_of(run, "events")[0] > reported, engine.timeout)
        server.start()
        ids += fill(server.url, stream, numbered(20, start=20))
        run.wait_until(lambda: len(recorder.seen()) >= 40, engine.timeout)
        run.wait_until(lambda: pending(server.url, stream, group) == 0, engine.timeout)
        run.wait_idle()
        assert run.info().components["events"].acked == 40
    assert sorted(values[0] for values in recorder.seen()) == sorted(ids)


def test_a_bolt_whose_server_goes_down_fails_its_tuples_then_writes_them_all(
    engine: Engine, server: RedisServer
) -> None:
    out = "out"
    rows: list[list[Any]] = [[n, f"label-{n}", None] for n in range(20)]
    spout = ListSpout(rows, check_url=server.url, check_stream=out, gated=True)
    builder = TopologyBuilder()
    builder.set_spout("rows", spout)
    bolt = RedisStreamBolt(server.url, out, batch=5, max_delay_secs=0.05)
    builder.set_bolt("sink", bolt).shuffle_grouping("rows")
    cannot_reach = f"RedisStreamBolt 'sink' cannot reach {server.url}: "
    with engine.running(builder.create_topology(), name="sink-down") as run:
        spout.release(10)
        run.wait_until(lambda: len(spout.record.get("acked")) >= 10, engine.timeout)
        server.stop()
        spout.release(10)
        run.wait_until(
            lambda: any(cannot_reach in text for text in errors_of(run, "sink")[1]),
            engine.timeout,
        )
        server.start()
        run.wait_until(
            lambda: {n for n, _ in spout.record.get("acked")} == set(range(20)), engine.timeout
        )
        if not engine.is_spark:  # on Spark a micro-batch that failed may be run again
            assert run.info().components["sink"].failed > 0
    assert all(written for _, written in spout.record.get("acked"))  # acked after the write
    if not engine.is_spark:  # the writes of the outage were failed, then replayed
        assert spout.record.get("failed")
    connection = client(server.url)
    written = [int(fields["n"]) for _, fields in connection.xrange(out)]  # type: ignore[union-attr]
    connection.close()
    assert sorted(set(written)) == list(range(20))
