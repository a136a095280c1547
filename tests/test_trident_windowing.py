"""Trident windowing (squall.trident.windowing): what each window holds and emits.

Windows fire as Storm's do: a count window at every ``sliding``-th tuple across batches,
with the last ``length`` tuples; a duration window on the task's clock (a ManualClock
here), every sliding interval, with the tuples of the last ``length`` of time (never an
empty window). A window's result is emitted in the batch that finishes when it fires
(count windows) or the first one after (duration windows), with the function fields
only. The expected windows are computed in the tests from these rules.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from squall import Config, Duration, Fields, InvalidTopologyError, LocalCluster, ManualClock
from squall.runtime.hashing import stable_hash
from squall.testing import SharedRecord
from squall.trident import (
    Aggregator,
    BatchSpout,
    CombinerAggregator,
    FixedBatchSpout,
    ReducerAggregator,
    Stream,
    Sum,
    TridentCollector,
    TridentTopology,
    TridentTuple,
)
from squall.trident.compiler import describe
from squall.trident.windowing import (
    CountAsAggregator,
    Entry,
    InMemoryWindowsStore,
    InMemoryWindowsStoreFactory,
    SlidingCountWindow,
    SlidingDurationWindow,
    StateProviderWindowsStoreFactory,
    TumblingCountWindow,
    TumblingDurationWindow,
    WindowType,
)
from squall.windowing import Count
from tests.conftest import Engine, on_engines, unique_name
from tests.servers import RedisServer

# --- helpers ----------------------------------------------------------------------------


class Contents(Aggregator):
    """A window's result: the list of its ``n`` values, in arrival order."""

    def init(self, batch_id: Any, collector: TridentCollector) -> list[Any]:
        return []

    def aggregate(self, state: list[Any], tup: TridentTuple, collector: TridentCollector) -> None:
        state.append(tup[0])

    def complete(self, state: list[Any], collector: TridentCollector) -> None:
        collector.emit([state])


class Recorder(Aggregator):
    """After a window: records ``(txid, rows)`` of every batch that has rows."""

    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def init(self, batch_id: Any, collector: TridentCollector) -> tuple[int, list[Any]]:
        return (batch_id.transaction_id, [])

    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        state[1].append(list(tup.values))

    def complete(self, state: Any, collector: TridentCollector) -> None:
        if state[1]:
            self.record.append("batches", (state[0], state[1]))


def record_batches(stream: Stream, record: SharedRecord) -> None:
    """Record the stream's rows per batch (in the window's segment)."""
    stream.partition_aggregate(stream.output_fields, Recorder(record), Fields("$recorded"))


def numbers(count: int, batch_size: int) -> FixedBatchSpout:
    """The numbers 0..count-1 in batches of ``batch_size``, once."""
    spout = FixedBatchSpout(Fields("n"), batch_size, *[[i] for i in range(count)])
    spout.set_cycle(False)
    return spout


def expected_count_windows(
    count: int, batch_size: int, length: int, sliding: int
) -> list[tuple[int, list[list[Any]]]]:
    """Storm's count windows over 0..count-1 arriving in batches: at every
    ``sliding``-th tuple, the last ``length`` tuples, emitted in that tuple's batch."""
    by_txid: dict[int, list[list[Any]]] = {}
    for seen in range(sliding, count + 1, sliding):
        txid = (seen - 1) // batch_size + 1
        by_txid.setdefault(txid, []).append([list(range(max(0, seen - length), seen))])
    return sorted(by_txid.items())


class FedSpout(BatchSpout):
    """Emits in each new batch what the test queued in ``record`` (the same on a
    replay); records the txid of each batch with tuples once it committed."""

    def __init__(self, record: SharedRecord) -> None:
        self.record = record
        self.batches: dict[int, list[Any]] = {}

    def get_output_fields(self) -> Fields:
        return Fields("n")

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        if batch_id not in self.batches:
            items = []
            while self.record.queued():
                items.append(self.record.take())
            self.batches[batch_id] = items
        for item in self.batches[batch_id]:
            collector.emit([item])

    def ack(self, batch_id: int) -> None:
        if self.batches.pop(batch_id, None):
            self.record.append("acked", batch_id)


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.002)


def feed(record: SharedRecord, *items: Any) -> None:
    """Queue ``items`` for the spout; return once their batch committed."""
    acked = len(record.get("acked"))
    for item in items:
        record.put(item)
    wait_for(lambda: len(record.get("acked")) > acked)


def windows_of(record: SharedRecord) -> list[Any]:
    return [row for _, rows in record.get("batches") for row in rows]


FAST = {Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 0}


# --- count windows ----------------------------------------------------------------------


def test_sliding_count_window_fires_every_2_tuples_with_the_last_4(engine: Engine) -> None:
    record = SharedRecord()
    topology = TridentTopology()
    windows = topology.new_stream("numbers", numbers(10, 3)).window(
        SlidingCountWindow.of(4, 2),
        InMemoryWindowsStoreFactory(),
        Fields("n"),
        Contents(),
        Fields("values"),
    )
    record_batches(windows, record)
    expected = expected_count_windows(10, 3, 4, 2)
    assert [len(row[0]) for _, rows in expected for row in rows] == [2, 4, 4, 4, 4]
    with engine.running(topology) as run:
        run.drain()
        run.wait_until(lambda: len(record.get("batches")) >= len(expected), engine.timeout)
        assert sorted(record.get("batches")) == expected
        assert not run.errors(), run.failure()


@pytest.mark.parametrize("engine", on_engines(spark=[]), indirect=True)
def test_tumbling_count_window_counts_tuples_across_batches(engine: Engine) -> None:
    record = SharedRecord()
    topology = TridentTopology()
    windows = topology.new_stream("numbers", numbers(11, 4)).tumbling_window(
        3, InMemoryWindowsStoreFactory(), Fields("n"), Contents(), Fields("values")
    )
    record_batches(windows, record)
    expected = expected_count_windows(11, 4, 3, 3)
    assert expected == [(1, [[[0, 1, 2]]]), (2, [[[3, 4, 5]]]), (3, [[[6, 7, 8]]])]
    with engine.running(topology) as run:
        run.wait_until(lambda: len(record.get("batches")) >= 3, engine.timeout)
        # Later (empty) batches fire nothing: 9 and 10 wait for a third tuple.
        after = len(record.get("batches"))
        assert sorted(record.get("batches")) == expected and after == 3
        assert not run.errors(), run.failure()


@pytest.mark.parametrize("engine", on_engines(spark=[]), indirect=True)
def test_sliding_window_method_and_a_window_of_one_batch_firing_twice(engine: Engine) -> None:
    """sliding_window(n, s, ...) is SlidingCountWindow.of(n, s); a batch completing two
    windows emits both, in order."""
    record = SharedRecord()
    topology = TridentTopology()
    windows = topology.new_stream("numbers", numbers(7, 7)).sliding_window(
        Count(3), Count(2), InMemoryWindowsStoreFactory(), Fields("n"), Contents(), Fields("w")
    )
    record_batches(windows, record)
    with engine.running(topology) as run:
        run.wait_until(lambda: len(record.get("batches")) >= 1, engine.timeout)
        assert record.get("batches") == [(1, [[[0, 1]], [[1, 2, 3]], [[3, 4, 5]]])]


class Distinct(Aggregator):
    """Emits each distinct value of a window with its count (several rows)."""

    def init(self, batch_id: Any, collector: TridentCollector) -> dict[Any, int]:
        return {}

    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        state[tup[0]] = state.get(tup[0], 0) + 1

    def complete(self, state: Any, collector: TridentCollector) -> None:
        for value, count in sorted(state.items()):
            collector.emit([value, count])


class Longest(ReducerAggregator):
    def init(self) -> str:
        return ""

    def reduce(self, curr: str, tup: TridentTuple) -> str:
        return tup[0] if len(tup[0]) > len(curr) else curr


class Product(CombinerAggregator):
    def init(self, tup: TridentTuple) -> int:
        return int(tup[0])

    def combine(self, value1: int, value2: int) -> int:
        return value1 * value2

    def zero(self) -> int:
        return 1


@pytest.mark.parametrize("engine", on_engines(spark=[]), indirect=True)
def test_every_kind_of_aggregator_over_windows(engine: Engine) -> None:
    """An Aggregator may emit several rows per window (all function fields); a combiner
    or reducer aggregator emits one value. Input fields project the tuples."""
    record = {name: SharedRecord() for name in ("distinct", "longest", "product", "sum")}
    words = ["a", "bb", "a", "ccc", "bb", "a"]
    spout = FixedBatchSpout(Fields("word", "n"), 2, *[[w, i + 1] for i, w in enumerate(words)])
    spout.set_cycle(False)
    topology = TridentTopology()
    stream = topology.new_stream("words", spout)
    factory = InMemoryWindowsStoreFactory
    config = TumblingCountWindow.of(3)
    record_batches(
        stream.window(config, factory(), Fields("word"), Distinct(), Fields("word2", "count")),
        record["distinct"],
    )
    record_batches(
        stream.window(config, factory(), Fields("word"), Longest(), Fields("longest")),
        record["longest"],
    )
    record_batches(
        stream.window(config, factory(), Fields("n"), Product(), Fields("product")),
        record["product"],
    )
    record_batches(stream.window(config, Fields("n"), Sum(), Fields("sum")), record["sum"])
    with engine.running(topology) as run:
        run.wait_until(
            lambda: all(len(r.get("batches")) >= 2 for r in record.values()), engine.timeout
        )
        assert record["distinct"].get("batches") == [
            (2, [["a", 2], ["bb", 1]]),
            (3, [["a", 1], ["bb", 1], ["ccc", 1]]),
        ]
        assert record["longest"].get("batches") == [(2, [["bb"]]), (3, [["ccc"]])]
        assert record["product"].get("batches") == [(2, [[6]]), (3, [[120]])]
        assert record["sum"].get("batches") == [(2, [[6]]), (3, [[15]])]


@pytest.mark.parametrize("engine", on_engines(spark=[]), indirect=True)
def test_each_task_windows_its_own_tuples(engine: Engine) -> None:
    """With a parallelism hint, each task of the window's segment has windows of its
    own (partition_by sends the even numbers to one task, the odd to the other: their
    keys hash to different tasks)."""
    record = SharedRecord()
    keys = [
        "k0",
        *(f"k{i}" for i in range(1, 20) if stable_hash(f"k{i}") % 2 != stable_hash("k0") % 2),
    ]
    spout = FixedBatchSpout(Fields("n", "parity"), 4, *[[i, keys[i % 2]] for i in range(8)])
    spout.set_cycle(False)
    topology = TridentTopology()
    windows = (
        topology.new_stream("numbers", spout)
        .partition_by(Fields("parity"))
        .tumbling_window(2, InMemoryWindowsStoreFactory(), Fields("n"), Contents(), Fields("w"))
        .parallelism_hint(2)
    )
    record_batches(windows, record)
    with engine.running(topology) as run:
        run.wait_until(lambda: len(windows_of(record)) >= 4, engine.timeout)
        assert sorted(windows_of(record)) == [[[0, 2]], [[1, 3]], [[4, 6]], [[5, 7]]]


# --- duration windows (the task's clock) ------------------------------------------------


def run_fed(
    clock: ManualClock, build: Callable[[Stream], Stream]
) -> tuple[LocalCluster, SharedRecord]:
    record = SharedRecord()
    topology = TridentTopology()
    record_batches(build(topology.new_stream("fed", FedSpout(record))), record)
    cluster = LocalCluster(clock=clock)
    cluster.submit_topology("fed", FAST, topology.build())
    return cluster, record


def advance_and_settle(clock: ManualClock, record: SharedRecord, ms: int) -> None:
    """Move the clock; return once a batch finished after it (one with a tuple: the
    windows due fired before that batch's tuples joined)."""
    clock.advance(ms)
    feed(record, "tick")


def test_tumbling_duration_window_fires_each_interval_on_the_clock(clock: ManualClock) -> None:
    """Every second of the clock since the task started: a window of the tuples that
    arrived since the previous one (the "tick" tuples that settle each step too)."""
    start = clock.now_ms()
    cluster, record = run_fed(
        clock,
        lambda s: s.tumbling_window(
            Duration.seconds(1),
            InMemoryWindowsStoreFactory(),
            Fields("n"),
            Contents(),
            Fields("values"),
        ),
    )
    with cluster:
        feed(record, 1, 2)
        clock.advance(500)
        feed(record, 3)
        assert windows_of(record) == []
        advance_and_settle(clock, record, 600)  # t+1100: the window ending at t+1000
        assert windows_of(record) == [[[1, 2, 3]]]
        feed(record, 4)
        advance_and_settle(clock, record, 1000)  # t+2100
        assert windows_of(record) == [[[1, 2, 3]], [["tick", 4]]]
        advance_and_settle(clock, record, 3000)  # t+5100: windows at 3000 and 4000 empty
        assert windows_of(record) == [[[1, 2, 3]], [["tick", 4]], [["tick"]]]
        assert clock.now_ms() == start + 5100
        cluster.kill_topology("fed")


def test_sliding_duration_window_holds_the_last_length_of_time(clock: ManualClock) -> None:
    cluster, record = run_fed(
        clock,
        lambda s: s.sliding_window(
            Duration.seconds(2),
            Duration.seconds(1),
            InMemoryWindowsStoreFactory(),
            Fields("n"),
            Contents(),
            Fields("values"),
        ),
    )
    with cluster:
        feed(record, "a")  # t
        clock.advance(1100)
        feed(record, "b")  # t+1100, after the window of t+1000 fired: ["a"]
        advance_and_settle(clock, record, 1000)  # t+2100 (tick): the window of t+2000
        advance_and_settle(clock, record, 1000)  # t+3100 (tick): the window of t+3000
        assert windows_of(record) == [
            [["a"]],  # (t-1000, t+1000]
            [["a", "b"]],  # (t, t+2000]
            [["b", "tick"]],  # (t+1000, t+3000]
        ]
        cluster.kill_topology("fed")


def test_window_config_method_takes_duration_configs(clock: ManualClock) -> None:
    cluster, record = run_fed(
        clock,
        lambda s: s.window(
            TumblingDurationWindow.of(Duration.milliseconds(100)),
            Fields("n"),
            CountAsAggregator(),
            Fields("count"),
        ),
    )
    with cluster:
        feed(record, 1, 2, 3)
        advance_and_settle(clock, record, 150)
        advance_and_settle(clock, record, 100)
        assert windows_of(record) == [[3], [1]]
        cluster.kill_topology("fed")


# --- stores: durable windows ------------------------------------------------------------


def run_fed_topology(
    record: SharedRecord, conf: dict[str, Any], window: Callable[[Stream], Stream]
) -> LocalCluster:
    topology = TridentTopology()
    record_batches(window(topology.new_stream("fed", FedSpout(record))), record)
    cluster = LocalCluster()
    cluster.submit_topology("durable-windows", {**FAST, **conf}, topology.build())
    return cluster


def tumbling_3(factory: Any) -> Callable[[Stream], Stream]:
    return lambda s: s.tumbling_window(3, factory, Fields("n"), Contents(), Fields("values"))


@pytest.mark.parametrize("coordination", [True, False], ids=["same-txids", "new-txids"])
def test_a_durable_store_keeps_windows_over_a_restart(tmp_path: Path, coordination: bool) -> None:
    """The tuples waiting in a window are in the store: a topology submitted again (a
    new cluster, same name) resumes its windows, whether its transactions continue
    (topology.transactional.state.dir) or are numbered anew."""
    conf: dict[str, Any] = {}
    if coordination:
        conf[Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR] = str(tmp_path / "coordination")
    factory = StateProviderWindowsStoreFactory("sqlite", {"directory": str(tmp_path / "state")})
    record = SharedRecord()
    with run_fed_topology(record, conf, tumbling_3(factory)) as cluster:
        feed(record, 1, 2, 3, 4)
        assert windows_of(record) == [[[1, 2, 3]]]
        feed(record, 5)
        cluster.kill_topology("durable-windows")
    with run_fed_topology(record, conf, tumbling_3(factory)) as cluster:
        feed(record, 6)
        assert windows_of(record) == [[[1, 2, 3]], [[4, 5, 6]]]
        feed(record, 7, 8, 9)
        assert windows_of(record) == [[[1, 2, 3]], [[4, 5, 6]], [[7, 8, 9]]]
        cluster.kill_topology("durable-windows")


def test_a_durable_store_in_redis_keeps_windows_over_a_restart(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    conf = {Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR: str(tmp_path / "coordination")}
    options = {"url": redis_server.url, "namespace": unique_name("windows")}
    factory = StateProviderWindowsStoreFactory("redis", options)
    record = SharedRecord()
    with run_fed_topology(record, conf, tumbling_3(factory)) as cluster:
        feed(record, 1, 2, 3, 4, 5)
        cluster.kill_topology("durable-windows")
    with run_fed_topology(record, conf, tumbling_3(factory)) as cluster:
        feed(record, 6)
        assert windows_of(record) == [[[1, 2, 3]], [[4, 5, 6]]]
        cluster.kill_topology("durable-windows")


def test_an_in_memory_store_loses_windows_at_a_restart() -> None:
    record = SharedRecord()
    with run_fed_topology(record, {}, tumbling_3(InMemoryWindowsStoreFactory())) as cluster:
        feed(record, 1, 2)
        cluster.kill_topology("durable-windows")
    with run_fed_topology(record, {}, tumbling_3(InMemoryWindowsStoreFactory())) as cluster:
        feed(record, 3)
        feed(record, 4, 5)
        assert windows_of(record) == [[[3, 4, 5]]]
        cluster.kill_topology("durable-windows")


def test_the_durable_store_uses_the_topology_state_provider(tmp_path: Path) -> None:
    """Without a provider of its own, the factory uses topology.state.provider."""
    conf = {
        Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR: str(tmp_path / "coordination"),
        "topology.state.provider": "sqlite",
        "topology.state.provider.config": {"directory": str(tmp_path / "state")},
    }
    record = SharedRecord()
    with run_fed_topology(record, conf, tumbling_3(StateProviderWindowsStoreFactory())) as c:
        feed(record, 1, 2)
        c.kill_topology("durable-windows")
    assert list((tmp_path / "state").iterdir())  # the provider's file
    with run_fed_topology(record, conf, tumbling_3(StateProviderWindowsStoreFactory())) as c:
        feed(record, 3)
        assert windows_of(record) == [[[1, 2, 3]]]
        c.kill_topology("durable-windows")


class FailOnce(Aggregator):
    """Records each tuple with its txid; fails the batch with txid ``txid`` at its
    first tuple, once."""

    def __init__(self, record: SharedRecord, txid: int) -> None:
        self.record = record
        self.txid = txid
        self.failed = False

    def init(self, batch_id: Any, collector: TridentCollector) -> Any:
        return batch_id

    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        self.record.append("attempts", (state.transaction_id, list(tup.values)))
        if state.transaction_id == self.txid and not self.failed:
            self.failed = True
            raise RuntimeError("failing this attempt")

    def complete(self, state: Any, collector: TridentCollector) -> None:
        pass


def test_a_replayed_batch_emits_its_windows_again_and_adds_no_tuple_twice() -> None:
    record = SharedRecord()
    topology = TridentTopology()
    windows = topology.new_stream("numbers", numbers(8, 3)).tumbling_window(
        2, InMemoryWindowsStoreFactory(), Fields("n"), Contents(), Fields("w")
    )
    windows.partition_aggregate(Fields("w"), FailOnce(record, 2), Fields("$x"))
    conf = {**FAST, Config.TOPOLOGY_TRIDENT_BATCH_RETRY_INITIAL_MILLIS: 0}
    with LocalCluster() as cluster:
        cluster.submit_topology("replay", conf, topology.build())
        wait_for(lambda: len(record.get("attempts")) >= 5)
        cluster.kill_topology("replay")
    assert record.get("attempts") == [
        (1, [[0, 1]]),
        (2, [[2, 3]]),  # fails: batch 2 runs again, its tuples are not added again
        (2, [[2, 3]]),
        (2, [[4, 5]]),
        (3, [[6, 7]]),
    ]


# --- configurations, stores and errors ---------------------------------------------------


def test_window_configs_lengths_and_types() -> None:
    assert TumblingCountWindow.of(9).get_window_length() == 9
    assert TumblingCountWindow.of(9).get_sliding_length() == 9
    assert SlidingCountWindow.of(10, 2).get_sliding_length() == 2
    tumbling = TumblingDurationWindow.of(Duration.seconds(20))
    assert (tumbling.get_window_length(), tumbling.get_sliding_length()) == (20_000, 20_000)
    sliding = SlidingDurationWindow.of(Duration.seconds(50), Duration.seconds(10))
    assert (sliding.get_window_length(), sliding.get_sliding_length()) == (50_000, 10_000)
    assert [c.get_type() for c in (TumblingCountWindow.of(1), tumbling, sliding)] == [
        WindowType.TUMBLING_COUNT,
        WindowType.TUMBLING_DURATION,
        WindowType.SLIDING_DURATION,
    ]
    assert SlidingCountWindow.of(Count(4), Count(2)) == SlidingCountWindow.of(4, 2)


def test_in_memory_windows_store() -> None:
    store = InMemoryWindowsStore()
    for i in range(10):
        store.put(f"key{i}", f"value{i}")
    assert [store.get(f"key{i}") for i in range(10)] == [f"value{i}" for i in range(10)]
    store.remove("key1")
    assert store.get("key1") is None
    store.put_all([Entry("a", 1), Entry("b", 2)])
    assert store.get(["a", "b", "key1"]) == [1, 2, None]
    store.remove_all(["a", "key2"])
    assert sorted(store.get_all_keys()) == sorted(["b", "key0", *(f"key{i}" for i in range(3, 10))])
    with pytest.raises(ValueError, match="'x': the value cannot be None"):
        Entry("x", None)
    factory = InMemoryWindowsStoreFactory()
    assert factory.create({}) is factory.create({})  # one store per task's copy


def test_window_segment_is_named_after_the_window_and_commits() -> None:
    topology = TridentTopology()
    (
        topology.new_stream("numbers", numbers(3, 3))
        .window(TumblingCountWindow.of(2), Fields("n"), CountAsAggregator(), Fields("count"))
        .peek(print)
    )
    assert describe(topology)[1] == {
        "component": "b1-window(CountAsAggregator)+peek(print)",
        "operations": ["window", "project", "persist", "peek"],
        "parallelism": 1,
        "committer": True,
    }


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda s: TumblingCountWindow.of(0), "window count must be an int >= 1, got 0"),
        (lambda s: SlidingCountWindow.of(2, "1"), "sliding count must be an int >= 1"),
        (lambda s: TumblingDurationWindow.of(5), "window duration must be a Duration"),
        (
            lambda s: SlidingDurationWindow.of(Duration(0), Duration(0)),
            "window duration must be at least 1 ms",
        ),
        (
            lambda s: s.sliding_window(
                Duration(10), 2, InMemoryWindowsStoreFactory(), Fields("n"), Sum(), Fields("s")
            ),
            "give two counts or two Durations",
        ),
        (
            lambda s: s.window(SlidingCountWindow.of(2, 3), Fields("n"), Sum(), Fields("s")),
            "sliding length 3 must not exceed the window length 2",
        ),
        (lambda s: s.window("5", Fields("n"), Sum(), Fields("s")), "expected a WindowConfig"),
        (
            lambda s: s.tumbling_window(2, object(), Fields("n"), Sum(), Fields("s")),
            "the window store factory must be a WindowsStoreFactory",
        ),
        (
            lambda s: s.tumbling_window(2, InMemoryWindowsStoreFactory(), Fields("n"), len, "s"),
            "builtin_function_or_method is not an aggregator",
        ),
        (
            lambda s: s.tumbling_window(2, InMemoryWindowsStoreFactory(), "x", Sum(), "s"),
            "Trident window: unknown field(s) ['x']",
        ),
        (
            lambda s: s.tumbling_window(2, InMemoryWindowsStoreFactory(), "n", Sum(), []),
            "give at least one function field",
        ),
        (
            lambda s: s.tumbling_window(2, InMemoryWindowsStoreFactory(), "n", Sum(), "_task_info"),
            "'_task_info' is reserved",
        ),
    ],
)
def test_bad_windows_are_refused_naming_the_problem(build: Any, message: str) -> None:
    stream = TridentTopology().new_stream("numbers", numbers(3, 3))
    with pytest.raises(InvalidTopologyError) as raised:
        build(stream)
    assert message in str(raised.value)


def test_window_arguments_are_checked() -> None:
    stream = TridentTopology().new_stream("numbers", numbers(3, 3))
    with pytest.raises(TypeError, match="window takes"):
        stream.window(TumblingCountWindow.of(2), Fields("n"))
    with pytest.raises(ValueError, match="unknown provider 'nosuch'"):
        StateProviderWindowsStoreFactory("nosuch")


def test_an_aggregator_emitting_the_wrong_width_fails_naming_the_window() -> None:
    record = SharedRecord()
    topology = TridentTopology()
    topology.new_stream("numbers", numbers(2, 2)).tumbling_window(
        2, InMemoryWindowsStoreFactory(), Fields("n"), Distinct(), Fields("only")
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("width", FAST, topology.build())
        component = "b1-window(Distinct)"

        def errors() -> list[Any]:
            return list(cluster.get_topology_info("width").components[component].errors)

        wait_for(errors)
        assert "Trident window w1 (Distinct): aggregator Distinct emitted 2 value(s) for 1" in (
            errors()[0].error
        )
        cluster.kill_topology("width")
    assert record.get("batches") == []
