"""RedisMapState against a real ``redis-server`` started on a free loopback port for this
module (the tests needing it are skipped, saying why, only when the binary is absent),
plus the errors for a server that cannot be reached."""

from __future__ import annotations

import pickle
import shutil
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from itertools import count
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from squall.connectors.redaction import redact_url
from squall.trident.state import (
    CachedMap,
    OpaqueValue,
    RedisMapState,
    RedisMapStateFactory,
    StateConnectionError,
    StateType,
    TransactionalValue,
)
from tests.test_trident_state import (
    ALL_TYPES,
    apply_batch,
    check_json_round_trip,
    check_not_json,
    check_replay,
    check_sequence,
    make_state,
    values_of,
)

_prefixes = count()


def free_port() -> int:
    """A loopback port nothing listens on (it was free a moment ago)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_redis_server() -> tuple[subprocess.Popen[bytes], str]:
    """A throwaway redis-server (no persistence) and its URL, once it answers PING."""
    for _ in range(3):  # another program may take the port between probe and bind
        port = free_port()
        command = f"redis-server --port {port} --bind 127.0.0.1 --appendonly no --save"
        process = subprocess.Popen(
            [*command.split(), ""],  # --save "": no snapshots
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis.from_url(
            url, socket_connect_timeout=0.2, socket_timeout=0.5, retry=Retry(NoBackoff(), 0)
        )
        deadline = time.monotonic() + 10.0
        while process.poll() is None and time.monotonic() < deadline:
            try:
                client.ping()
                client.close()
                return process, url
            except redis.ConnectionError:
                time.sleep(0.02)
        client.close()
        process.kill()
        process.wait()
    raise RuntimeError("redis-server did not start")


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    process, url = start_redis_server()
    yield url
    process.terminate()
    process.wait(timeout=10)


def factory_for(url: str, state_type: StateType, **options: Any) -> RedisMapStateFactory:
    """A factory with a key prefix of its own, so tests share the server safely."""
    return RedisMapState.factory(url, state_type, key_prefix=f"test{next(_prefixes)}:", **options)


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("cache_size", [0, 1000])
def test_sequence_of_commits_gives_exact_values(
    redis_url: str, state_type: StateType, cache_size: int
) -> None:
    check_sequence(factory_for(redis_url, state_type, cache_size=cache_size))


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("cache_size", [0, 1000])
def test_replay_semantics(redis_url: str, state_type: StateType, cache_size: int) -> None:
    """Transactional: no double count; opaque: recomputed from prev with the replay's
    different updates; non-transactional: over-counts."""
    check_replay(factory_for(redis_url, state_type, cache_size=cache_size), state_type)


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
def test_json_round_trip_and_atomic_writes(redis_url: str, state_type: StateType) -> None:
    check_json_round_trip(factory_for(redis_url, state_type))
    check_not_json(factory_for(redis_url, state_type))


@pytest.mark.parametrize(
    ("state_type", "text", "stored"),
    [
        (StateType.NON_TRANSACTIONAL, b"5", 5),
        (StateType.TRANSACTIONAL, b"[2,5]", TransactionalValue(2, 5)),
        (StateType.OPAQUE, b"[2,5,2]", OpaqueValue(2, 5, 2)),
    ],
    ids=["NON_TRANSACTIONAL", "TRANSACTIONAL", "OPAQUE"],
)
def test_stores_storm_json_formats(
    redis_url: str, state_type: StateType, text: bytes, stored: Any
) -> None:
    factory = factory_for(redis_url, state_type)
    apply_batch(make_state(factory), 1, {("cow",): 2})
    apply_batch(make_state(factory), 2, {("cow",): 3, (): 5})
    client = redis.Redis.from_url(redis_url)
    assert client.get(f'{factory.key_prefix}["cow"]') == text
    assert client.exists(f"{factory.key_prefix}[]") == 1
    client.close()
    assert RedisMapState.contents(factory) == {("cow",): 5, (): 5}
    assert RedisMapState.contents(factory, raw=True)[("cow",)] == stored


def test_cache_and_prefixes(redis_url: str) -> None:
    factory = factory_for(redis_url, StateType.OPAQUE, cache_size=10)
    state = make_state(factory)
    assert isinstance(state.backing, CachedMap)  # type: ignore[attr-defined]
    apply_batch(state, 1, {("cow",): 1})
    other = factory_for(redis_url, StateType.OPAQUE)
    assert values_of(make_state(other), ("cow",)) == [None]
    assert RedisMapState.contents(other) == {}


def test_concurrent_writers_in_threads(redis_url: str) -> None:
    factory = factory_for(redis_url, StateType.TRANSACTIONAL)
    errors: list[BaseException] = []

    def task(index: int) -> None:
        try:
            state = make_state(factory, index, 4)
            for txid in range(1, 11):
                apply_batch(state, txid, {(index, n): 1 for n in range(3)})
            state.close()
        except BaseException as error:  # reported to the test thread
            errors.append(error)

    threads = [threading.Thread(target=task, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert RedisMapState.contents(factory) == {(i, n): 10 for i in range(4) for n in range(3)}


def test_factory_is_picklable_and_hides_the_password() -> None:
    factory = RedisMapState.factory("redis://user:s3cret@127.0.0.1:6379/0", cache_size=0)
    assert pickle.loads(pickle.dumps(factory)) == factory
    assert "s3cret" not in repr(factory) and "user:***@127.0.0.1" in repr(factory)
    with pytest.raises(ValueError, match="redis://, rediss:// or unix:// URL"):
        RedisMapState.factory("http://127.0.0.1:6379")


def test_unreachable_server_raises_a_clear_error_quickly() -> None:
    port = free_port()  # nothing listens there
    factory = RedisMapState.factory(f"redis://127.0.0.1:{port}", socket_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(
        StateConnectionError,
        match=rf"RedisMapState cannot reach redis://127\.0\.0\.1:{port} "
        r"\(key prefix 'trident:'\): ",
    ):
        make_state(factory)
    assert time.monotonic() - started < 3.0
    secret = RedisMapState.factory(f"redis://:s3cret@127.0.0.1:{port}", retries=0)
    with pytest.raises(ConnectionError) as raised:  # also a builtin ConnectionError
        make_state(secret)
    assert f"redis://:***@127.0.0.1:{port}" in str(raised.value)
    assert "s3cret" not in str(raised.value)


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_server_lost_while_in_use() -> None:
    process, url = start_redis_server()
    try:
        state = make_state(RedisMapState.factory(url, StateType.OPAQUE, cache_size=0, retries=0))
        apply_batch(state, 1, {("cow",): 1})
    finally:
        process.terminate()
        process.wait(timeout=10)
    with pytest.raises(StateConnectionError, match=f"RedisMapState cannot reach {url}"):
        state.multi_get([("cow",)])
    state.begin_commit(2)
    with pytest.raises(StateConnectionError):
        state.multi_update([("cow",)], [lambda old: old + 1])


def test_timeouts_default_come_from_the_options_or_the_url(redis_url: str) -> None:
    assert "connect_timeout=5, socket_timeout=10, retries=2" in repr(
        RedisMapState.factory("redis://127.0.0.1:6379/0")
    )
    given = RedisMapState.factory(redis_url, socket_timeout=2, connect_timeout=0.5)
    in_url = RedisMapState.factory(f"{redis_url}?socket_timeout=3&socket_connect_timeout=0.25")
    both = RedisMapState.factory(f"{redis_url}?socket_timeout=3", socket_timeout=3.0)
    for factory, connect, reply in [(given, 0.5, 2.0), (in_url, 0.25, 3.0), (both, 5.0, 3.0)]:
        assert f"connect_timeout={connect:g}, socket_timeout={reply:g}" in repr(factory)
        state = factory.make_backing_map({}, None, 0, 1)
        try:
            assert (state.connect_timeout, state.socket_timeout) == (connect, reply)
            client_options = state._client.connection_pool.connection_kwargs
            assert client_options["socket_connect_timeout"] == connect
            assert client_options["socket_timeout"] == reply
        finally:
            state.close()


@pytest.mark.parametrize(
    ("url", "options", "message"),
    [
        (
            "redis://h:1/0",
            {"socket_timeout": 0},
            "socket_timeout must be a number of seconds > 0, got 0",
        ),
        (
            "redis://h:1/0",
            {"connect_timeout": -1},
            "connect_timeout must be a number of seconds > 0",
        ),
        (
            "redis://h:1/0",
            {"socket_timeout": "5"},
            "socket_timeout must be a number of seconds > 0, got '5'",
        ),
        (
            "redis://h:1/0",
            {"socket_timeout": True},
            "socket_timeout must be a number of seconds > 0",
        ),
        (
            "redis://:pw@h:1/0?socket_timeout=soon",
            {},
            r"socket_timeout in the URL redis://:\*\*\*@h:1/0\?socket_timeout=soon must be a "
            "number of seconds > 0, got 'soon'",
        ),
        (
            "redis://h:1/0?socket_connect_timeout=2",
            {"connect_timeout": 1},
            r"connect_timeout is 1 s but the URL redis://h:1/0\?socket_connect_timeout=2 sets "
            "socket_connect_timeout=2: give it once",
        ),
        ("redis://h:1/0", {"retries": -1}, "retries must be an int >= 0, got -1"),
    ],
)
def test_bad_timeouts_and_retries_are_named(
    url: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=f"RedisMapState {message}"):
        RedisMapState.factory(url, **options)


def test_a_password_in_the_url_query_is_hidden_too() -> None:
    factory = RedisMapState.factory("redis://127.0.0.1:6379/0?password=s3cret&socket_timeout=2")
    assert "s3cret" not in repr(factory)
    assert "redis://127.0.0.1:6379/0?password=***&socket_timeout=2" in repr(factory)
    assert redact_url("unix:///run/redis.sock?db=1&password=s3cret") == (
        "unix:///run/redis.sock?db=1&password=***"
    )


# --- on SparkCluster: the state updated where the data is -------------------------------

SENTENCES = [
    ["the cow jumped over the moon"],
    ["the man went to the store"],
    ["four score and seven years ago"],
    ["the cow"],
    ["a cow and a man"],
    ["seven stores"],
    ["the moon and the cow"],
    ["over and over"],
]
SPARK_TXIDS = 4  # batches of two sentences
FAIL_AFTER = 2  # its first attempt fails after the state update: the micro-batch runs again
FAIL_IN_UPDATE = 3  # each partition's first update fails once written: Spark runs it again


def sentence_counts() -> dict[tuple[Any, ...], int]:
    counts = Counter(word for [sentence] in SENTENCES for word in sentence.split())
    return {(word,): n for word, n in counts.items()}


def spark_word_count(factory: Any) -> Any:
    """Words of :data:`SENTENCES` counted into ``factory``'s state over two partitions;
    the new values stream, in a stage of its own, fails transaction :data:`FAIL_AFTER`'s
    first attempt."""
    from squall import Fields
    from squall.trident import Count, FixedBatchSpout, TridentTopology
    from tests.spark_states import FailFirstAttemptOf

    topology = TridentTopology()
    state = (
        topology.new_stream("sentences", FixedBatchSpout(Fields("sentence"), 2, *SENTENCES))
        .each(Fields("sentence"), lambda tup: tup[0].split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(factory, Count(), Fields("count"))
        .parallelism_hint(2)
    )
    state.new_values_stream().shuffle().partition_aggregate(
        FailFirstAttemptOf(FAIL_AFTER), Fields("ignored")
    ).parallelism_hint(2)
    return topology.build()


def run_on_spark(spark: Any, tmp_path: Any, factory: Any) -> tuple[Any, list[Any]]:
    """Run :func:`spark_word_count` until idle: its info and its stages."""
    from squall.spark import SparkCluster

    conf = {"topology.spark.batch.interval.millis": 50, "topology.spark.batch.retries": 1}
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path / "checkpoint"))
    try:
        cluster.submit_topology("wc", conf, spark_word_count(factory))
        idle = cluster.wait_idle("wc")
        info = cluster.get_topology_info("wc")
        assert idle, info.extra["errors"]
        return info, cluster._get("wc").queries[0].plan.segments
    finally:
        cluster.shutdown()


@pytest.mark.parametrize("state_type", [StateType.TRANSACTIONAL, StateType.OPAQUE], ids=str)
def test_spark_executors_update_redis_state_exactly_once(
    spark: Any, tmp_path: Any, redis_url: str, state_type: StateType
) -> None:
    """The state update runs in the executors' Python workers, not the driver; each
    partition begins and commits every transaction, in txid order; a micro-batch run
    again after its update, and an update that failed half-way and ran again, leave
    the exact counts."""
    import os

    from squall.spark.streaming.batchpipeline import runs_on_driver
    from tests.spark_states import NotingRedisFactory, noted_commits, noted_pids

    factory = NotingRedisFactory(
        url=redis_url,
        state_type=state_type,
        key_prefix=f"spark{next(_prefixes)}:",
        fail_txid=FAIL_IN_UPDATE,
    )
    info, stages = run_on_spark(spark, tmp_path, factory)

    assert RedisMapState.contents(factory) == sentence_counts()
    assert info.extra["retries"] == 1  # transaction FAIL_AFTER, run again once
    committer = next(stage for stage in stages if stage.committer)
    assert not runs_on_driver(committer)
    pids = noted_pids(factory)
    assert pids and os.getpid() not in pids
    commits = noted_commits(factory)
    assert sorted(commits) == [0, 1]
    for txids in commits.values():
        assert txids == sorted(txids)
        assert sorted(set(txids)) == list(range(1, SPARK_TXIDS + 1))
        assert txids.count(FAIL_AFTER) == 2  # committed by both attempts, applied once


def test_spark_memory_state_stays_on_the_driver(spark: Any, tmp_path: Any) -> None:
    """``MemoryMapState`` is in-process: its update runs on the driver, whose store the
    test reads, exact after the micro-batch failed after its update."""
    from squall.spark.streaming.batchpipeline import runs_on_driver
    from squall.trident.state import MemoryMapState

    factory = MemoryMapState.factory(StateType.OPAQUE)
    info, stages = run_on_spark(spark, tmp_path, factory)

    assert MemoryMapState.contents(factory) == sentence_counts()
    assert info.extra["retries"] == 1
    assert runs_on_driver(next(stage for stage in stages if stage.committer))
