"""A Trident topology counting into Redis while the server is frozen or down, on
LocalCluster and on SparkCluster with the same assertions.

The server is a real ``redis-server`` of the test (skipped, saying why, when the binary
is absent) with a password, so the tests check it never shows in an error, and an
append-only file, so it can be stopped and started again on the same port with its data.
A frozen server (SIGSTOP; always continued in a ``finally``) must fail the batch with an
error naming the state and the URL within the state's socket timeout; batches failing
while the server is down must be retried on the back-off schedule (checked exactly on an
injected clock, never against wall-clock time); once the server is back the counts must
be exact.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from squall import Config, Fields, ManualClock
from squall.runtime.metrics import TopologyInfo
from squall.testing import SharedRecord
from squall.trident import BatchSpout, Count, TridentTopology
from squall.trident.state import RedisMapState, StateConnectionError, StateType
from tests.conftest import ENGINE_SETTINGS, SPARK_RETRIES, Engine, EngineSettings
from tests.helpers import settle, wait_until
from tests.test_trident_state_redis import free_port

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None,
    reason="redis-server is not installed (apt-get install redis-server)",
)

PASSWORD = "s3cret"
#: The words of each batch the test releases, in order.
CHUNKS = [
    ["apple", "pear", "apple"],
    ["fig", "apple", "kiwi"],
    ["pear", "fig", "plum"],
    ["kiwi", "apple", "date"],
]
#: Retry back-off of the tests: 100 ms after the first failure, doubling, at most 400.
BACKOFF = {
    Config.TOPOLOGY_TRIDENT_BATCH_RETRY_INITIAL_MILLIS: 100,
    Config.TOPOLOGY_TRIDENT_BATCH_RETRY_MAX_MILLIS: 400,
}


def counts_of(chunks: int) -> dict[tuple[Any, ...], int]:
    """The true counts once the first ``chunks`` batches are counted."""
    words = Counter(word for chunk in CHUNKS[:chunks] for word in chunk)
    return {(word,): count for word, count in words.items()}


class RedisProcess:
    """A password-protected redis-server on a free loopback port, its data in an
    append-only file under ``directory`` (synced on every write), so it can be stopped
    and started again on the same port with its keys."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://:{PASSWORD}@127.0.0.1:{self.port}/0"

    @property
    def redacted(self) -> str:
        """The URL as errors must show it."""
        return f"redis://:***@127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server; return once it answers PING."""
        self.process = subprocess.Popen(
            [
                "redis-server",
                *("--port", str(self.port), "--bind", "127.0.0.1"),
                *("--requirepass", PASSWORD, "--dir", str(self.directory)),
                *("--appendonly", "yes", "--appendfsync", "always", "--save", ""),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.2, socket_timeout=0.5)
        try:
            wait_until(lambda: self._answers(client), timeout=10.0, interval=0.02)
        finally:
            client.close()

    def _answers(self, client: redis.Redis) -> bool:
        assert self.process is not None and self.process.poll() is None, "redis-server exited"
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    def stop(self) -> None:
        """Shut the server down (SIGTERM: the append-only file is complete)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """The server stopped by SIGSTOP (it accepts connections, answers nothing)
        for the block; continued afterwards whatever happens."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.process.pid, signal.SIGCONT)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisProcess]:
    process = RedisProcess(tmp_path)
    process.start()
    try:
        yield process
    finally:
        if process.process is not None and process.process.poll() is None:
            os.kill(process.process.pid, signal.SIGCONT)
        process.stop()


class TaskContext:
    """What a state factory reads of a task's context."""

    component_id = "b1"


def connections(server: RedisProcess) -> int:
    """Connections the server has accepted so far (this one included)."""
    client = redis.Redis.from_url(server.url)
    try:
        return int(client.info("stats")["total_connections_received"])
    finally:
        client.close()


def test_a_frozen_server_fails_a_command_after_one_socket_timeout_naming_the_state(
    server: RedisProcess,
) -> None:
    """A reply that does not come is not waited for again: the state raises after one
    timeout (a retry would open a new connection, which the server counts once it
    runs again)."""
    factory = RedisMapState.factory(server.url, socket_timeout=0.3, cache_size=0, retries=2)
    state = factory.make_state({}, TaskContext(), 1, 3)
    state.multi_get([("cow",)])  # connected
    before = connections(server)
    try:
        with server.frozen(), pytest.raises(StateConnectionError) as raised:
            state.multi_get([("cow",)])
        assert str(raised.value) == (
            f"RedisMapState cannot reach {server.redacted} (key prefix 'trident:', component "
            "'b1' partition 1 of 3): no reply within socket_timeout=0.3 s (Timeout reading "
            "from socket)"
        )
        assert connections(server) == before + 1  # only this count's own connection
        assert state.multi_get([("cow",)]) == [None]  # answers again once it runs
    finally:
        state.close()


class GatedSpout(BatchSpout):
    """Emits the next chunk of :data:`CHUNKS` in a batch only once the test has released
    it (``release``); a replayed batch gets exactly its first tuples again."""

    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def get_output_fields(self) -> Fields:
        return Fields("word")

    def open(self, conf: dict[str, Any], context: Any) -> None:
        self.next_chunk = 0
        self.batches: dict[int, list[str]] = {}

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        words = self.batches.get(batch_id)
        if words is None:
            words = []
            if self.next_chunk < len(self.record.get("released")):
                words = CHUNKS[self.next_chunk]
                self.next_chunk += 1
                self.batches[batch_id] = words
        for word in words:
            collector.emit([word])

    def ack(self, batch_id: int) -> None:
        self.batches.pop(batch_id, None)


def release(record: SharedRecord) -> None:
    """Let the spout emit its next chunk."""
    record.append("released", True)


def word_count(factory: Any, record: SharedRecord) -> TridentTopology:
    topology = TridentTopology()
    topology.new_stream("words", GatedSpout(record)).group_by(Fields("word")).persistent_aggregate(
        factory, Count(), Fields("count")
    )
    return topology


def stored(factory: Any) -> dict[tuple[Any, ...], Any] | None:
    """The counts in Redis, or None while the server cannot be reached."""
    try:
        return RedisMapState.contents(factory)
    except StateConnectionError:
        return None


def error_texts(info: TopologyInfo) -> list[str]:
    """Every error the topology reported: each component's, and on Spark the failed
    micro-batches'."""
    texts = [e.error for stats in info.components.values() for e in stats.errors]
    return texts + (info.spark.first.errors if info.spark else [])


@pytest.fixture
def engine_settings() -> dict[str, EngineSettings]:
    """Longer waits for a result (20 s locally, 90 s on Spark); on Spark, runs of a
    failed micro-batch enough to outlast the outages."""
    return {
        "local": ENGINE_SETTINGS["local"].tuned(timeout=20.0),
        "spark": ENGINE_SETTINGS["spark"].tuned({SPARK_RETRIES: 20}, timeout=90.0),
    }


def test_a_frozen_redis_fails_the_batch_naming_the_state_then_counts_stay_exact(
    engine: Engine, server: RedisProcess
) -> None:
    record = SharedRecord()
    factory = RedisMapState.factory(
        server.url, StateType.OPAQUE, key_prefix="frozen:", socket_timeout=0.5, connect_timeout=0.5
    )
    conf = {
        Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 5,
        Config.TOPOLOGY_TRIDENT_BATCH_RETRY_INITIAL_MILLIS: 50,
        Config.TOPOLOGY_TRIDENT_BATCH_RETRY_MAX_MILLIS: 200,
    }
    named = re.compile(
        rf"RedisMapState cannot reach {re.escape(server.redacted)} \(key prefix 'frozen:', "
        r"component '(?P<component>[^']+)' partition 0 of 1\): (no reply within "
        r"socket_timeout=0\.5 s \(Timeout reading from socket\)|no connection within "
        r"connect_timeout=0\.5 s \(Timeout connecting to server\))"
    )

    with engine.running(word_count(factory, record), conf, name="outage") as run:
        release(record)
        wait_until(lambda: stored(factory) == counts_of(1), timeout=engine.timeout)
        with server.frozen():
            release(record)
            wait_until(
                lambda: any(map(named.search, error_texts(run.info()))),
                timeout=engine.timeout,
            )
        info = run.info()
        release(record)
        wait_until(lambda: stored(factory) == counts_of(3), timeout=engine.timeout)

    texts = error_texts(info)
    assert all(PASSWORD not in text for text in texts)
    assert all(named.search(text) for text in texts), texts  # no other error
    component = next(m["component"] for t in texts if (m := named.search(t)))
    assert component in info.components  # the state's own component
    if not engine.is_spark:
        assert info.components[component].errors_total >= 1  # reported by that component
    assert RedisMapState.contents(factory) == counts_of(3)


def test_batches_failing_while_redis_is_down_back_off_then_counts_are_exact(
    engine: Engine, server: RedisProcess
) -> None:
    """The first outage lasts four failed attempts (the server is back before the
    fifth), the second, after a success, two: the waits are 100, 200, 400, 400 ms, then
    again 100, 200 ms, and each failed attempt reports one error."""
    record = SharedRecord()
    factory = RedisMapState.factory(server.url, StateType.OPAQUE, key_prefix="down:")
    conf = {Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 0, **BACKOFF}
    if engine.is_spark:
        run = SparkOutages(engine, server, factory, record)
    else:
        run = LocalOutages(engine, server, factory, record)
    run.check(conf)


class SparkOutages:
    """Spark: the driver waits on the clock between attempts; the clock brings the
    server back during the wait after the last failed attempt of each outage."""

    def __init__(
        self, engine: Engine, server: RedisProcess, factory: Any, record: SharedRecord
    ) -> None:
        self.engine, self.server, self.factory, self.record = engine, server, factory, record
        self.restart_after = {4, 6}  # the waits after which the server is back

    def check(self, conf: dict[str, Any]) -> None:
        clock = WaitRecordingClock(self._waited)
        engine, server, factory = self.engine, self.server, self.factory
        topology = word_count(factory, self.record)
        with engine.running(topology, conf, name="outage", clock=clock) as run:
            release(self.record)
            wait_until(lambda: stored(factory) == counts_of(1), timeout=engine.timeout)
            server.stop()
            release(self.record)
            wait_until(lambda: stored(factory) == counts_of(2), timeout=engine.timeout)
            assert clock.waits == [100, 200, 400, 400]
            release(self.record)
            wait_until(lambda: stored(factory) == counts_of(3), timeout=engine.timeout)
            assert clock.waits == [100, 200, 400, 400]  # nothing failed
            server.stop()
            release(self.record)
            wait_until(lambda: stored(factory) == counts_of(4), timeout=engine.timeout)
            info = run.info()

        assert clock.waits == [100, 200, 400, 400, 100, 200]  # a success resets it
        assert info.spark is not None
        assert info.spark.first.retries == 6
        errors = info.spark.first.errors
        assert len(errors) == 6
        assert all(f"RedisMapState cannot reach {server.redacted} (key prefix" in e for e in errors)
        assert all(PASSWORD not in e for e in errors)
        assert RedisMapState.contents(factory) == counts_of(4)

    def _waited(self, waits: int) -> None:
        if waits in self.restart_after:
            self.server.start()


class WaitRecordingClock(ManualClock):
    """A manual clock that records each wait (ms) and calls ``on_wait(number of
    waits)`` before returning from it, at once."""

    def __init__(self, on_wait: Callable[[int], None]) -> None:
        super().__init__()
        self.on_wait = on_wait
        self.waits: list[float] = []

    def sleep_ms(self, ms: float, wake: Any = None) -> bool:
        self.waits.append(ms)
        self.on_wait(len(self.waits))
        return super().sleep_ms(ms, wake)


class LocalOutages:
    """LocalCluster on a manual clock: the coordinator starts nothing until the clock
    reaches the end of the back-off. The test moves the clock to 1 ms before that end
    and lets every worker loop run (no transaction is active: the replay has not
    started), then to the end (the next attempt runs)."""

    def __init__(
        self, engine: Engine, server: RedisProcess, factory: Any, record: SharedRecord
    ) -> None:
        self.engine, self.server, self.factory, self.record = engine, server, factory, record

    def check(self, conf: dict[str, Any]) -> None:
        clock = ManualClock()
        engine, server, factory = self.engine, self.server, self.factory
        topology = word_count(factory, self.record)
        with engine.running(topology, conf, name="outage", clock=clock) as run:
            self.run = run
            release(self.record)
            wait_until(lambda: stored(factory) == counts_of(1), timeout=engine.timeout)
            server.stop()
            release(self.record)
            self._outage(clock, [100, 200, 400, 400], errors_before=0)
            wait_until(lambda: stored(factory) == counts_of(2), timeout=engine.timeout)
            wait_until(lambda: self._coordinator()["consecutive_failures"] == 0)
            assert self._coordinator()["retry_backoff_ms"] == 0
            release(self.record)
            wait_until(lambda: stored(factory) == counts_of(3), timeout=engine.timeout)
            server.stop()
            release(self.record)
            self._outage(clock, [100, 200], errors_before=4)  # a success reset it
            wait_until(lambda: stored(factory) == counts_of(4), timeout=engine.timeout)
            info = run.info()

        errors = [e.error for stats in info.components.values() for e in stats.errors]
        assert sum(stats.errors_total for stats in info.components.values()) == 6
        assert all(f"RedisMapState cannot reach {server.redacted} (key prefix" in e for e in errors)
        assert all(PASSWORD not in e for e in errors)
        assert RedisMapState.contents(factory) == counts_of(4)

    def _coordinator(self) -> dict[str, float]:
        info = self.run.info()
        return next(s.custom for c, s in info.components.items() if c.endswith("/coordinator"))

    def _errors(self) -> int:
        info = self.run.info()
        return sum(stats.errors_total for stats in info.components.values())

    def _outage(self, clock: ManualClock, waits: list[int], errors_before: int) -> None:
        """Attempt 1 fails; for each wait, the clock moves to 1 ms before its end (no
        attempt), then to its end: the next attempt fails, or after the last wait
        (the server is back) succeeds."""
        wait_until(lambda: self._coordinator()["consecutive_failures"] == 1, timeout=10.0)
        for failures, wait in enumerate(waits, start=1):
            assert self._coordinator()["consecutive_failures"] == failures
            assert self._coordinator()["retry_backoff_ms"] == wait
            assert self._errors() == errors_before + failures
            clock.advance(wait - 1)
            settle(self.run.cluster, self.run.name)
            waiting = self._coordinator()
            assert waiting["active_transactions"] == 0  # nothing started: not yet time
            assert waiting["consecutive_failures"] == failures
            assert self._errors() == errors_before + failures
            if failures == len(waits):
                self.server.start()
                clock.advance(1)
                return
            clock.advance(1)
            wait_until(
                lambda n=failures: self._coordinator()["consecutive_failures"] == n + 1,
                timeout=10.0,
            )
