"""RedisStreamTridentSpout against a real redis-server: the emitters' id ranges (a
transactional replay emits exactly the same entries, an opaque batch continues after
the previous one), malformed entries set aside, exact counts into transactional and
opaque state on both engines, and exact counts across a SIGKILL of the process in the
middle of a transaction and a restart, on both engines."""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from squall import Config, Fields, InvalidTopologyError
from squall.connectors.redis import (
    IdRange,
    OpaqueRedisStreamTridentSpout,
    RedisStreamTridentSpout,
    TransactionalRedisStreamTridentSpout,
)
from squall.connectors.redis.trident import OpaqueRangeEmitter, TransactionalRangeEmitter
from squall.spark import SparkCluster
from squall.trident import (
    Count,
    OpaquePartitionedTridentSpout,
    PartitionedTridentSpout,
    TridentTopology,
)
from squall.trident.state import SqliteMapState, StateType
from tests.conftest import Engine, unique_name
from tests.connectors_redis_topologies import (
    client,
    fill,
    trident_counts,
    trident_crash_topology,
    trident_entries,
    true_counts,
)
from tests.helpers import wait_until
from tests.servers import RedisServer

ROOT = Path(__file__).resolve().parent.parent


class Rows:
    """A Trident emitter's collector: the values emitted, the errors reported."""

    def __init__(self) -> None:
        self.rows: list[list[Any]] = []
        self.errors: list[BaseException] = []

    def emit(self, values: list[Any]) -> None:
        self.rows.append(list(values))

    def report_error(self, error: BaseException) -> None:
        self.errors.append(error)


class Context:
    component_id = "words"


def test_opaque_chooses_the_spout_kind_and_survives_copies() -> None:
    opaque = RedisStreamTridentSpout("redis://h/0", ["a", "b"])
    transactional = RedisStreamTridentSpout("redis://h/0", "a", False)
    assert isinstance(opaque, OpaqueRedisStreamTridentSpout)
    assert isinstance(opaque, OpaquePartitionedTridentSpout)
    assert isinstance(opaque, RedisStreamTridentSpout)
    assert isinstance(transactional, TransactionalRedisStreamTridentSpout)
    assert isinstance(transactional, PartitionedTridentSpout)
    assert transactional.streams == ["a"]
    for copied in (copy.deepcopy(opaque), pickle.loads(pickle.dumps(opaque))):
        assert type(copied) is OpaqueRedisStreamTridentSpout
        assert copied.streams == ["a", "b"]
    assert opaque.get_coordinator({}, None).number_of_partitions() == 2
    assert opaque.get_output_fields() == Fields("id", "data")


def test_a_transactional_replay_emits_exactly_the_recorded_range(
    redis_server: RedisServer,
) -> None:
    first, second = unique_name("words"), unique_name("words")
    ids = fill(redis_server.url, first, [{"word": f"w{i}"} for i in range(5)])
    other = fill(redis_server.url, second, [{"word": "x"}])
    spout = RedisStreamTridentSpout(redis_server.url, [first, second], opaque=False, batch=3)
    emitter = spout.get_emitter({}, Context())
    assert isinstance(emitter, TransactionalRangeEmitter)

    batch = Rows()
    meta = emitter.emit_partition_batch_new(None, batch, 0, None)
    assert meta == IdRange(ids[0], ids[2], 3)
    assert batch.rows == [[ids[i], {"word": f"w{i}"}] for i in range(3)]
    fill(redis_server.url, first, [{"word": "late"}])  # added after the batch was decided
    replay = Rows()
    emitter.emit_partition_batch(None, replay, 0, meta)
    assert replay.rows == batch.rows

    following = Rows()
    after = emitter.emit_partition_batch_new(None, following, 0, meta)
    assert after.count == 3 and after.first == ids[3]
    assert [row[1]["word"] for row in following.rows] == ["w3", "w4", "late"]
    empty = Rows()
    assert emitter.emit_partition_batch_new(None, empty, 0, after) == IdRange(None, after.last, 0)
    assert empty.rows == []
    emitter.emit_partition_batch(None, empty, 0, IdRange(None, after.last, 0))
    assert empty.rows == []

    partition = Rows()
    assert emitter.emit_partition_batch_new(None, partition, 1, None) == IdRange(
        other[0], other[0], 1
    )
    assert partition.rows == [[other[0], {"word": "x"}]]
    emitter.close()


def test_an_opaque_batch_continues_after_the_previous_one(redis_server: RedisServer) -> None:
    stream = unique_name("words")
    ids = fill(redis_server.url, stream, [{"word": f"w{i}"} for i in range(4)])
    spout = RedisStreamTridentSpout(
        redis_server.url, stream, batch=3, fields=("word", "id"), start=ids[0]
    )
    emitter = spout.get_emitter({}, Context())
    assert isinstance(emitter, OpaqueRangeEmitter)
    batch = Rows()
    meta = emitter.emit_partition_batch(None, batch, 0, None)
    assert batch.rows == [["w1", ids[1]], ["w2", ids[2]], ["w3", ids[3]]]  # after start
    assert meta == IdRange(ids[1], ids[3], 3)
    more = fill(redis_server.url, stream, [{"word": "w4"}])
    retry = Rows()  # an opaque replay of the next transaction reads on from ``meta``
    assert emitter.emit_partition_batch(None, retry, 0, meta) == IdRange(more[0], more[0], 1)
    assert retry.rows == [["w4", more[0]]]
    emitter.close()


def test_start_at_the_end_skips_the_entries_already_there(redis_server: RedisServer) -> None:
    stream = unique_name("words")
    ids = fill(redis_server.url, stream, [{"word": "old"}])
    spout = RedisStreamTridentSpout(redis_server.url, stream, opaque=False, start="$")
    emitter = spout.get_emitter({}, Context())
    nothing = Rows()
    meta = emitter.emit_partition_batch_new(None, nothing, 0, None)
    assert (meta, nothing.rows) == (IdRange(None, ids[0], 0), [])
    new = fill(redis_server.url, stream, [{"word": "new"}])
    batch = Rows()
    assert emitter.emit_partition_batch_new(None, batch, 0, meta) == IdRange(new[0], new[0], 1)
    assert batch.rows == [[new[0], {"word": "new"}]]
    emitter.close()


def test_malformed_entries_are_left_out_reported_and_kept_in_the_dead_letter_hash(
    redis_server: RedisServer,
) -> None:
    stream, dead = unique_name("words"), unique_name("dead")
    ids = fill(
        redis_server.url,
        stream,
        [{"word": "a", "n": "1"}, {"word": "b"}, {"word": "c", "n": "x"}, {"word": "d", "n": "4"}],
    )
    spout = RedisStreamTridentSpout(
        redis_server.url,
        stream,
        opaque=False,
        fields=("word", "n"),
        decode={"n": int},
        dead_letter=dead,
    )
    emitter = spout.get_emitter({}, Context())
    batch = Rows()
    meta = emitter.emit_partition_batch_new(None, batch, 0, None)
    assert meta == IdRange(ids[0], ids[3], 4)  # the malformed entries count in the range
    assert batch.rows == [["a", 1], ["d", 4]]
    label = "TransactionalRedisStreamTridentSpout 'words'"
    assert [str(error) for error in batch.errors] == [
        f"{label}: stream {stream!r} entry {ids[1]} left out: the entry has no field 'n'",
        f"{label}: stream {stream!r} entry {ids[2]} left out: field 'n': int('x') raised "
        "ValueError: invalid literal for int() with base 10: 'x'",
    ]
    replay = Rows()
    emitter.emit_partition_batch(None, replay, 0, meta)
    assert replay.rows == batch.rows
    connection = client(redis_server.url)
    recorded = {k: json.loads(v) for k, v in connection.hgetall(dead).items()}  # type: ignore[union-attr]
    connection.close()
    assert recorded == {
        f"{stream}/{ids[1]}": {
            "stream": stream,
            "id": ids[1],
            "entry": {"word": "b"},
            "error": "the entry has no field 'n'",
        },
        f"{stream}/{ids[2]}": {
            "stream": stream,
            "id": ids[2],
            "entry": {"word": "c", "n": "x"},
            "error": "field 'n': int('x') raised ValueError: invalid literal for int() with "
            "base 10: 'x'",
        },
    }
    emitter.close()


def test_an_unreachable_server_fails_the_batch_naming_the_spout(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)  # never started
    spout = RedisStreamTridentSpout(f"redis://:pw@127.0.0.1:{server.port}/0", "s", opaque=False)
    emitter = spout.get_emitter({}, Context())
    with pytest.raises(ConnectionError) as raised:
        emitter.emit_partition_batch_new(None, Rows(), 0, None)
    assert str(raised.value).startswith(
        "TransactionalRedisStreamTridentSpout 'words' cannot reach "
        f"redis://:***@127.0.0.1:{server.port}/0 (stream 's'): "
    )
    assert str(raised.value).endswith("; the batch is replayed")


def count_words(spout: RedisStreamTridentSpout, factory: Any) -> TridentTopology:
    topology = TridentTopology()
    topology.new_stream("words", spout).parallelism_hint(2).group_by(
        Fields("word")
    ).persistent_aggregate(factory, Count(), Fields("count")).parallelism_hint(2)
    return topology


@pytest.mark.parametrize("kind", ["TRANSACTIONAL", "OPAQUE"])
def test_counts_are_exact_in_transactional_and_opaque_state(
    engine: Engine, redis_server: RedisServer, tmp_path: Path, kind: str
) -> None:
    """Stream 0 holds a malformed entry (no ``word``): it is left out of the counts,
    reported in the emitter's errors on the local engine, only logged on Spark (where
    a Trident emitter's reported error would fail the micro-batch)."""
    streams = [unique_name("words") for _ in range(3)]
    for index, stream in enumerate(streams):
        fill(redis_server.url, stream, trident_entries(index, 10))
    [malformed] = fill(redis_server.url, streams[0], [{"other": "x"}])
    state_type = StateType[kind]
    spout = RedisStreamTridentSpout(
        redis_server.url, streams, opaque=state_type is StateType.OPAQUE, batch=4, fields=["word"]
    )
    factory = SqliteMapState.factory(str(tmp_path / "counts.db"), state_type)
    expected = true_counts(3, 10)

    def counted() -> dict[str, int]:
        return {key[0]: value for key, value in SqliteMapState.contents(factory).items()}

    with engine.running(count_words(spout, factory), name="counts") as run:
        run.drain()
        run.wait_until(lambda: counted() == expected, engine.timeout)
        errors = run.errors()
    left_out = (
        f"MalformedEntryError: {type(spout).__name__} 'words': stream {streams[0]!r} entry "
        f"{malformed} left out: the entry has no field 'word'"
    )
    if engine.is_spark:
        assert errors == {}
    else:
        assert list(errors) == ["words"]
        assert [left_out in error.error.splitlines() for error in errors["words"]] == [True]


def test_wrong_options_are_refused_at_submit_naming_the_stream(
    engine: Engine, tmp_path: Path
) -> None:
    spout = RedisStreamTridentSpout("redis://127.0.0.1:1/0", ["a", "b"], batch=0, fields=["word"])
    factory = SqliteMapState.factory(str(tmp_path / "counts.db"), StateType.OPAQUE)
    with pytest.raises(InvalidTopologyError) as raised, engine.running(count_words(spout, factory)):
        pass
    assert str(raised.value) == (
        "component 'words' (OpaqueRedisStreamTridentSpout): batch must be an int > 0, got 0"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"streams": []}, "streams must name at least one stream"),
        ({"streams": ["a", "a"]}, "streams names a stream twice: ['a', 'a']"),
        ({"url": "redis//x"}, "url must be a URL (redis://, rediss://, unix://), got 'redis//x'"),
        ({"start": "end"}, 'start must be "0", "$" or an entry id, got \'end\''),
        ({"dead_letter": ""}, "dead_letter must be a non-empty string, got ''"),
    ],
)
def test_wrong_options_name_the_option(options: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"url": "redis://127.0.0.1:1/0", "streams": ["a"]}
    arguments.update(options)
    spout = RedisStreamTridentSpout(**arguments)
    with pytest.raises(InvalidTopologyError) as raised:
        spout.validate_submission("words", {})
    assert str(raised.value) == f"component 'words' (OpaqueRedisStreamTridentSpout): {message}"


@pytest.mark.parametrize(
    ("engine_name", "kind"),
    [
        ("local", "TRANSACTIONAL"),
        ("local", "OPAQUE"),
        pytest.param("spark", "TRANSACTIONAL", marks=pytest.mark.spark),
    ],
)
def test_a_process_killed_mid_transaction_restarts_with_exact_counts(
    request: pytest.FixtureRequest,
    redis_server: RedisServer,
    tmp_path: Path,
    engine_name: str,
    kind: str,
) -> None:
    """The process running the topology is killed (SIGKILL) while transaction 2 is half
    applied: one state partition has written it, the other not. The topology started
    again on the same coordination store (local) or checkpoint (Spark) replays the
    transaction from its recorded ranges; the counts equal the true counts."""
    streams = [unique_name("words") for _ in range(3)]
    for index, stream in enumerate(streams):
        fill(redis_server.url, stream, trident_entries(index, 12))
    directory, database, flag = (str(tmp_path / n) for n in ("dir", "s.db", "kill"))
    Path(flag).touch()
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.connectors_redis_topologies",
            "trident",
            engine_name,
            redis_server.url,
            ",".join(streams),
            directory,
            database,
            flag,
            kind,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=180,
        start_new_session=True,
    )
    assert child.returncode == -9, child.stderr[-3000:]
    partial = trident_counts(database, kind)
    expected = true_counts(3, 12)
    assert partial and partial != expected  # transaction 2 was half written

    os.remove(flag)
    topology = trident_crash_topology(redis_server.url, streams, database, flag, kind).build()
    if engine_name == "local":
        from squall import LocalCluster

        conf = {
            Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR: directory,
            Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 1,
        }
        with LocalCluster() as cluster:
            cluster.submit_topology("crash", conf, topology)
            wait_until(lambda: trident_counts(database, kind) == expected, timeout=20.0)
            cluster.kill_topology("crash")
        return
    cluster = SparkCluster(spark=request.getfixturevalue("spark"), checkpoint_dir=directory)
    try:
        cluster.submit_topology("crash", {"topology.spark.batch.interval.millis": 50}, topology)
        assert cluster.wait_idle("crash")
        assert trident_counts(database, kind) == expected
    finally:
        cluster.shutdown()
