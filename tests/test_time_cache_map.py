"""``squall.utils``: RotatingMap, TimeCacheMap and Time, and the topology's clock as
components read it (``context.current_time_millis()``, ``Time``) on each engine."""

from __future__ import annotations

import copy
import pickle
import time
from typing import Any

import pytest

from squall import BasicBolt, LocalCluster, ManualClock, TopologyBuilder
from squall.model.clock import SYSTEM_CLOCK, current_clock, set_current_clock
from squall.testing import CapturingBolt, FeederSpout
from squall.utils import RotatingMap, Time, TimeCacheMap
from tests.conftest import Engine, on_engines
from tests.helpers import wait_until

# --- RotatingMap -------------------------------------------------------------------------


def test_rotating_map_expires_entries_after_num_buckets_rotations_since_last_put() -> None:
    expired: list[tuple[str, int]] = []
    rotating: RotatingMap[str, int] = RotatingMap(3, lambda k, v: expired.append((k, v)))
    rotating.put("a", 1)
    rotating.put("b", 2)
    assert rotating.rotate() == {}
    rotating.put("b", 3)  # back into the newest bucket
    assert rotating.rotate() == {}
    assert (rotating.size(), rotating.get("a"), rotating.contains_key("b")) == (2, 1, True)
    assert rotating.rotate() == {"a": 1}
    assert expired == [("a", 1)]
    assert (rotating.get("a"), rotating.contains_key("a"), rotating.size()) == (None, False, 1)
    assert rotating.remove("b") == 3
    assert rotating.remove("b") is None
    assert rotating.rotate() == {} and expired == [("a", 1)]


def test_rotating_map_takes_a_callback_object_with_expire_and_checks_buckets() -> None:
    class Callback:
        def __init__(self) -> None:
            self.expired: list[tuple[Any, Any]] = []

        def expire(self, key: Any, value: Any) -> None:
            self.expired.append((key, value))

    callback = Callback()
    rotating: RotatingMap[str, str] = RotatingMap(2, callback)
    rotating.put("k", "v")
    rotating.rotate()
    rotating.rotate()
    assert callback.expired == [("k", "v")]
    with pytest.raises(ValueError, match="RotatingMap: num_buckets must be an integer >= 2, got 1"):
        RotatingMap(1)
    with pytest.raises(TypeError, match="expire\\(key, value\\) method, got int"):
        RotatingMap(2, 5)  # type: ignore[arg-type]


# --- TimeCacheMap on a clock ---------------------------------------------------------------


def test_time_cache_map_expires_between_expiration_and_its_half_again() -> None:
    clock = ManualClock()
    expired: list[tuple[str, int]] = []
    cache: TimeCacheMap[str, int] = TimeCacheMap(
        2, callback=lambda k, v: expired.append((k, v)), clock=clock
    )
    cache.put("early", 1)  # t=0: rotations at 1000, 2000, 3000 ms
    clock.advance(999)
    cache.put("late", 2)  # same bucket as "early"
    clock.advance(1)  # t=1000: the first rotation
    cache.put("next", 3)  # the newest bucket
    clock.advance(1999)  # t=2999
    assert (cache.size(), expired) == (3, [])
    clock.advance(1)  # t=3000: "early" (3 s old) and "late" (2.001 s old) expire
    assert cache.contains_key("early") is False
    assert expired == [("early", 1), ("late", 2)]
    assert (cache.get("next"), cache.size()) == (3, 1)
    clock.advance(999)
    assert cache.get("next") == 3
    clock.advance(1)  # t=4000: "next", put at 1000, 3 s old
    assert (cache.size(), expired[-1]) == (0, ("next", 3))


def test_time_cache_map_catches_up_after_a_long_gap_and_stops_on_cleanup() -> None:
    clock = ManualClock()
    expired: list[str] = []
    cache: TimeCacheMap[str, int] = TimeCacheMap(1, 2, lambda k, v: expired.append(k), clock=clock)
    cache.put("a", 1)
    clock.advance(3_600_000)  # an hour: 3600 rotations due, the map empties once
    cache.put("b", 2)
    assert expired == ["a"]
    clock.advance(999)
    assert cache.get("b") == 2  # the rotations kept their schedule (one every second)
    cache.cleanup()
    clock.advance(10_000)
    assert (cache.get("b"), expired) == (2, ["a"])
    assert cache.remove("b") == 2 and len(cache) == 0


def test_time_cache_map_pickles_and_copies_with_entries_and_schedule() -> None:
    clock = ManualClock()
    cache: TimeCacheMap[str, int] = TimeCacheMap(2, clock=clock)
    cache.put("a", 1)
    clock.advance(2_999)
    set_current_clock(clock)  # as the engine does on a task's thread
    try:
        copied = copy.deepcopy(cache)
        restored = pickle.loads(pickle.dumps(cache))
        assert (copied.get("a"), restored.get("a"), cache.get("a")) == (1, 1, 1)
        clock.advance(1)  # 3000 ms: the third rotation expires "a" in each
        assert (copied.size(), restored.size(), cache.size()) == (0, 0, 0)
    finally:
        set_current_clock(None)


def test_time_cache_map_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="expiration_secs must be a number > 0, got 0"):
        TimeCacheMap(0)
    with pytest.raises(ValueError, match="num_buckets must be an integer >= 2, got 1"):
        TimeCacheMap(5, 1)


def test_time_outside_a_task_reads_the_system_clock() -> None:
    before = time.time_ns() // 1_000_000
    now = Time.current_time_millis()
    after = time.time_ns() // 1_000_000
    assert before <= now <= after
    assert Time.current_time_secs() in (now // 1000, now // 1000 + 1)
    assert (Time.is_simulating(), current_clock()) == (False, SYSTEM_CLOCK)
    assert ManualClock(5.7).current_time_millis() == 5


# --- the topology's clock, read by components -------------------------------------------


class ClockReader(BasicBolt):
    """Emits ``(word, Time's ms, the context's ms, is simulating)`` for each tuple, and
    ``("expired:" + word, ...)`` for each word its TimeCacheMap (2 s) expires."""

    outputs = ["word", "time_ms", "context_ms", "simulating"]

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.context = context
        self.expired: list[str] = []
        self.seen: TimeCacheMap[str, int] = TimeCacheMap(
            2, callback=lambda word, _: self.expired.append(word)
        )

    def execute(self, tup: Any, collector: Any) -> None:
        self.seen.put(tup.get_string(0), 1)
        for word in [*self.expired, tup.get_string(0)]:
            collector.emit(
                [
                    word if word == tup.get_string(0) else f"expired:{word}",
                    Time.current_time_millis(),
                    self.context.current_time_millis(),
                    Time.is_simulating(),
                ]
            )
        self.expired.clear()


def clock_topology() -> tuple[Any, FeederSpout, CapturingBolt]:
    feeder = FeederSpout(["word"])
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("words", feeder)
    builder.set_bolt("reader", ClockReader()).shuffle_grouping("words")
    builder.set_bolt("sink", sink).shuffle_grouping("reader")
    return builder.create_topology(), feeder, sink


def test_components_read_the_manual_clock_of_local_cluster() -> None:
    topology, feeder, sink = clock_topology()
    clock = ManualClock(1_000)
    with LocalCluster(clock=clock) as cluster:
        cluster.submit_topology("clock", {"topology.workers": 1}, topology)
        feeder.feed(["a"])
        wait_until(lambda: len(sink.values()) == 1, timeout=10)
        clock.advance(3_000)  # t=4000: the reader's map is due to expire "a"
        feeder.feed(["b"])
        feeder.feed(["c"])
        wait_until(lambda: len(sink.values()) >= 3, timeout=10)
        cluster.wait_idle("clock", 10)
        values = sorted(sink.values())
    assert values == [
        ["a", 1_000, 1_000, True],
        ["b", 4_000, 4_000, True],
        ["c", 4_000, 4_000, True],
        ["expired:a", 4_000, 4_000, True],
    ]


@pytest.mark.parametrize("engine", on_engines(), indirect=True)
def test_components_read_the_system_clock_as_wall_time(engine: Engine) -> None:
    topology, feeder, sink = clock_topology()
    before = time.time_ns() // 1_000_000
    with engine.running(topology, name="clock") as run:
        feeder.feed(["a"])
        run.wait_until(lambda: len(sink.values()) == 1, engine.timeout)
    after = time.time_ns() // 1_000_000
    [[word, time_ms, context_ms, simulating]] = sink.values()
    assert (word, simulating) == ("a", False)
    assert before <= time_ms <= context_ms <= after
