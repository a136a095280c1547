"""Components and topologies of the Redis Streams connector tests, shared with the child
processes of the crash tests (which run this module).

    python -m tests.connectors_redis_topologies core URL STREAM GROUP OUT FLAG
    python -m tests.connectors_redis_topologies trident ENGINE URL STREAMS DIR DB FLAG KIND

``core``: a LocalCluster runs :func:`core_crash_topology` until its ``Killer`` bolt
SIGKILLs the process. ``trident``: LocalCluster (``ENGINE`` local; the coordination
store in ``DIR``) or SparkCluster (``spark``; its checkpoints in ``DIR``) runs
:func:`trident_crash_topology` until its state SIGKILLs the process.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from typing import Any

import redis

from squall import Bolt, Config, Fields, Spout, TopologyBuilder
from squall.connectors.redis import RedisStreamBolt, RedisStreamSpout, RedisStreamTridentSpout
from squall.model.topology import StormTopology
from squall.runtime.collectors import OutputCollector, SpoutOutputCollector
from squall.runtime.context import TopologyContext
from squall.testing import SharedRecord
from squall.trident import Count, TridentTopology
from squall.trident.state import SqliteMapState, StateType
from tests.spark_spouts import KillingFactory

WORDS = ["apple", "pear", "fig", "plum", "kiwi"]


def client(url: str) -> redis.Redis:
    """A client whose replies are strings."""
    return redis.Redis.from_url(url, decode_responses=True)


def fill(url: str, stream: str, entries: list[dict[str, str]]) -> list[str]:
    """Append ``entries`` to ``stream``; their ids, in order."""
    connection = client(url)
    try:
        pipeline = connection.pipeline(transaction=False)
        for entry in entries:
            pipeline.xadd(stream, entry)  # type: ignore[arg-type]
        return [str(entry_id) for entry_id in pipeline.execute()]
    finally:
        connection.close()


def numbered(count: int, start: int = 0) -> list[dict[str, str]]:
    """Entries ``{"n": "<i>", "word": <a word>}`` for i in start..start+count-1."""
    return [{"n": str(i), "word": WORDS[i % len(WORDS)]} for i in range(start, start + count)]


def pending(url: str, stream: str, group: str) -> int:
    """Entries read by ``group`` and not acknowledged."""
    connection = client(url)
    try:
        return int(connection.xpending(stream, group)["pending"])  # type: ignore[index]
    finally:
        connection.close()


class Recorder(Bolt):
    """Records each input as ``[stream, values]`` under ``"seen"`` and acks it; fails,
    the first time it sees them, the entries whose ``n`` is in ``fail_once``."""

    def __init__(self, fail_once: frozenset[int] = frozenset()) -> None:
        self.record = SharedRecord()
        self.fail_once = fail_once

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector
        self.failed: set[str] = set()

    def execute(self, tup: Any) -> None:
        values = list(tup.values)
        self.record.append("seen", [tup.source_stream, values])
        if self.fail_once and tup.source_stream == "default":
            data = values[1] if isinstance(values[1], dict) else {}
            if int(data.get("n", -1)) in self.fail_once and values[0] not in self.failed:
                self.failed.add(values[0])
                self.record.append("failed", values[0])
                self.collector.fail(tup)
                return
        self.collector.ack(tup)

    def seen(self, stream: str = "default") -> list[list[Any]]:
        """The values received on ``stream``, in order."""
        return [values for source, values in self.record.get("seen") if source == stream]


class ListSpout(Spout):
    """Emits ``[n, label, payload]`` for the rows given (msg id ``n``), as many as the
    test has released (``release(k)``; all at once if ``gated`` is False); replays
    failed ones. Each ack is recorded as ``[n, written]``: whether an entry with field
    ``n`` was in ``check_stream`` at ``check_url`` at that moment."""

    outputs = ["n", "label", "payload"]

    def __init__(
        self,
        rows: list[list[Any]],
        check_url: str | None = None,
        check_stream: str | None = None,
        gated: bool = False,
    ) -> None:
        self.rows = rows
        self.check_url = check_url
        self.check_stream = check_stream
        self.gated = gated
        self.record = SharedRecord()

    def release(self, count: int) -> None:
        """Let ``count`` more rows out (a gated spout)."""
        self.record.append("released", count)

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self.collector = collector
        self.next_row = 0
        self.replay: list[int] = []

    def next_tuple(self) -> None:
        if self.replay:
            index = self.replay.pop(0)
        else:
            allowed = sum(self.record.get("released")) if self.gated else len(self.rows)
            if self.next_row >= min(allowed, len(self.rows)):
                return
            index = self.next_row
            self.next_row += 1
        self.collector.emit(self.rows[index], msg_id=index)

    def ack(self, msg_id: Any) -> None:
        written = None
        if self.check_url is not None and self.check_stream is not None:
            connection = client(self.check_url)
            try:
                entries = connection.xrange(self.check_stream)
            finally:
                connection.close()
            written = any(fields.get("n") == str(self.rows[msg_id][0]) for _, fields in entries)
        self.record.append("acked", [msg_id, written])

    def fail(self, msg_id: Any) -> None:
        self.record.append("failed", msg_id)
        self.replay.append(msg_id)


class Killer(Bolt):
    """Passes each tuple on (anchored) and acks it; SIGKILLs its own process at its
    ``after``-th tuple while file ``flag`` exists."""

    outputs = ["id", "data"]

    def __init__(self, flag: str, after: int) -> None:
        self.flag = flag
        self.after = after

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector
        self.count = 0

    def execute(self, tup: Any) -> None:
        self.count += 1
        if self.count >= self.after and os.path.exists(self.flag):
            os.kill(os.getpid(), signal.SIGKILL)
        self.collector.emit(list(tup.values), anchors=[tup])
        self.collector.ack(tup)


def core_crash_topology(url: str, stream: str, group: str, out: str, flag: str) -> StormTopology:
    """Spout -> Killer -> a RedisStreamBolt writing ``{"id", "data"}`` to ``out``."""
    builder = TopologyBuilder()
    builder.set_spout("events", RedisStreamSpout(url, stream, group, batch=10))
    builder.set_bolt("killer", Killer(flag, after=40)).shuffle_grouping("events")
    builder.set_bolt(
        "out", RedisStreamBolt(url, out, batch=5, max_delay_secs=0.02)
    ).shuffle_grouping("killer")
    return builder.create_topology()


#: The configuration of the core crash test's topology: few entries in flight.
CORE_CONF = {Config.TOPOLOGY_MAX_SPOUT_PENDING: 20}


def trident_entries(stream_index: int, count: int) -> list[dict[str, str]]:
    """The words of stream ``stream_index`` of the Trident tests."""
    return [{"word": WORDS[(stream_index * 7 + i * 3) % len(WORDS)]} for i in range(count)]


def true_counts(streams: int, per_stream: int) -> dict[str, int]:
    """The words of :func:`trident_entries` over every stream, counted."""
    return dict(
        Counter(entry["word"] for s in range(streams) for entry in trident_entries(s, per_stream))
    )


def trident_crash_topology(
    url: str, streams: list[str], database: str, flag: str, kind: str
) -> TridentTopology:
    """Word counts of ``streams`` into SQLite; the state's partition 1 kills the process
    in transaction 2 while ``flag`` exists."""
    state_type = StateType[kind]
    spout = RedisStreamTridentSpout(
        url, streams, opaque=state_type is StateType.OPAQUE, batch=4, fields=("word",)
    )
    factory = KillingFactory(database, state_type, kill_partition=1, flag=flag, kill_txid=2)
    topology = TridentTopology()
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

    if arguments[0] == "core":
        url, stream, group, out, flag = arguments[1:6]
        with LocalCluster() as cluster:
            cluster.submit_topology(
                "crash", CORE_CONF, core_crash_topology(url, stream, group, out, flag)
            )
            time.sleep(60)
        raise SystemExit("the killer bolt did not kill the process")
    engine, url, streams, directory, database, flag, kind = arguments[1:8]
    topology = trident_crash_topology(url, streams.split(","), database, flag, kind).build()
    if engine in ("local", "process"):
        conf = {
            Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR: directory,
            Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 1,
            Config.TOPOLOGY_WORKERS: 2 if engine == "process" else 1,
            Config.TOPOLOGY_WORKER_KIND: engine if engine == "process" else "thread",
        }
        with LocalCluster() as cluster:
            cluster.submit_topology("crash", conf, topology)
            time.sleep(60)
    else:
        from squall.spark import SparkCluster

        cluster = SparkCluster(
            master="local[2]",
            checkpoint_dir=directory,
            spark_conf={
                "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
            },
        )
        cluster.submit_topology("crash", {"topology.spark.batch.interval.millis": 50}, topology)
        time.sleep(120)
    raise SystemExit("the state did not kill the process")


if __name__ == "__main__":
    import sys

    _main(sys.argv[1:])
