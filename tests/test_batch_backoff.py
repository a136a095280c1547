"""The retry back-off of failed batches: its schedule and settings, the clocks' waits,
and the Spark runners' retry loop (driven by a manual clock: no real waiting)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from squall import Config, Fields, InvalidTopologyError, LocalCluster, ManualClock
from squall.model.clock import Clock
from squall.runtime.backoff import DEFAULT_INITIAL_MS, DEFAULT_MAX_MS, RetryBackoff
from squall.spark.streaming.retries import BatchRetries
from squall.trident import Count, FixedBatchSpout, TridentTopology
from squall.trident.state import MemoryMapState

INITIAL = Config.TOPOLOGY_TRIDENT_BATCH_RETRY_INITIAL_MILLIS
MAX = Config.TOPOLOGY_TRIDENT_BATCH_RETRY_MAX_MILLIS


def test_waits_double_per_consecutive_failure_up_to_the_cap_and_reset_on_success() -> None:
    backoff = RetryBackoff.from_conf({INITIAL: 100, MAX: 1000}, "component 'c'")
    assert backoff.delay_ms == 0
    assert [backoff.failed() for _ in range(6)] == [100, 200, 400, 800, 1000, 1000]
    assert backoff.failures == 6 and backoff.delay_ms == 1000
    backoff.succeeded()
    assert backoff.failures == 0 and backoff.delay_ms == 0
    assert [backoff.failed() for _ in range(2)] == [100, 200]


def test_defaults_zero_and_a_long_run_of_failures() -> None:
    default = RetryBackoff.from_conf({}, "component 'c'")
    assert (
        (default.initial_ms, default.max_ms)
        == (DEFAULT_INITIAL_MS, DEFAULT_MAX_MS)
        == (
            100,
            10_000,
        )
    )
    off = RetryBackoff.from_conf({INITIAL: 0}, "component 'c'")
    assert [off.failed() for _ in range(3)] == [0, 0, 0]
    # An initial wait above the default cap, with no cap set, is the cap.
    assert RetryBackoff.from_conf({INITIAL: 20_000}, "c").max_ms == 20_000
    endless = RetryBackoff(1.5, 30_000.0)
    for _ in range(10_000):  # no overflow however long the outage
        endless.failed()
    assert endless.delay_ms == 30_000


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({INITIAL: -1}, f"component 'c': {INITIAL} must be a number of milliseconds >= 0, got -1"),
        ({MAX: "10"}, f"component 'c': {MAX} must be a number of milliseconds >= 0, got '10'"),
        ({INITIAL: True}, f"component 'c': {INITIAL} must be a number of milliseconds >= 0"),
        ({INITIAL: float("nan")}, f"component 'c': {INITIAL} must be a number of milliseconds"),
        ({INITIAL: 500, MAX: 100}, f"component 'c': {MAX} \\(100\\) must not be below {INITIAL}"),
    ],
)
def test_bad_settings_are_named(conf: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidTopologyError, match=message):
        RetryBackoff.from_conf(conf, "component 'c'")


def test_a_bad_setting_is_rejected_at_submit_naming_the_coordinator() -> None:
    topology = TridentTopology()
    topology.new_stream("words", FixedBatchSpout(Fields("w"), 1, ["a"])).group_by(
        Fields("w")
    ).persistent_aggregate(MemoryMapState.factory(), Count(), Fields("n"))
    with (
        LocalCluster() as cluster,
        pytest.raises(
            InvalidTopologyError,
            match=f"component 'words/coordinator': {MAX} \\(50\\) must not be below {INITIAL}",
        ),
    ):
        cluster.submit_topology("bad", {INITIAL: 100, MAX: 50}, topology.build())


def test_manual_clock_waits_advance_it_at_once() -> None:
    clock = ManualClock(start_ms=10.0)
    wake = threading.Event()
    assert clock.sleep_ms(250, wake) is False
    assert clock.now_ms() == 260
    wake.set()
    assert clock.sleep_ms(5, wake) is True


def test_system_clock_wait_ends_when_woken() -> None:
    wake = threading.Event()
    threading.Timer(0.05, wake.set).start()
    started = time.monotonic()
    assert Clock().sleep_ms(60_000, wake) is True  # would be a minute
    assert time.monotonic() - started < 30  # woken long before
    assert Clock().sleep_ms(1) is False


class Figures:
    """What ``BatchRetries`` records into (``BatchFigures``'s part)."""

    def __init__(self) -> None:
        self.retries = 0
        self.errors: list[str] = []

    def record(self, exc: BaseException) -> None:
        self.errors.append(str(exc))


class WaitLog(ManualClock):
    """A manual clock remembering each wait, and running ``during`` in it."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []
        self.during: Any = None

    def sleep_ms(self, ms: float, wake: threading.Event | None = None) -> bool:
        self.waits.append(ms)
        if self.during is not None:
            self.during()
        return super().sleep_ms(ms, wake)


def failing(times: int, calls: list[int]) -> Any:
    """An attempt that raises the first ``times`` times, then returns its number."""

    def attempt(number: int) -> int:
        calls.append(number)
        if len(calls) <= times:
            raise ConnectionError(f"attempt {number} failed")
        return number

    return attempt


def test_spark_retries_wait_on_the_schedule_across_batches_until_a_success() -> None:
    clock, figures = WaitLog(), Figures()
    retries = BatchRetries(
        {"topology.spark.batch.retries": 3, INITIAL: 100, MAX: 300}, figures, clock, "t"
    )
    calls: list[int] = []
    assert retries.run(7, failing(3, calls)) == 3
    assert calls == [0, 1, 2, 3]
    assert clock.waits == [100, 200, 300]
    assert clock.now_ms() == 600
    assert figures.retries == 3
    assert figures.errors == ["attempt 0 failed", "attempt 1 failed", "attempt 2 failed"]
    # The success reset the schedule: the next batch's first failure waits 100 ms.
    calls.clear()
    assert retries.run(8, failing(1, calls)) == 1
    assert clock.waits == [100, 200, 300, 100]


def test_spark_retries_run_out_with_the_last_error_and_the_schedule_carries_on() -> None:
    clock, figures = WaitLog(), Figures()
    retries = BatchRetries(
        {"topology.spark.batch.retries": 2, INITIAL: 100, MAX: 1000}, figures, clock, "t"
    )
    calls: list[int] = []
    with pytest.raises(ConnectionError, match="attempt 2 failed"):
        retries.run(1, failing(10, calls))
    assert calls == [0, 1, 2]
    assert clock.waits == [100, 200]
    assert figures.retries == 2 and len(figures.errors) == 3
    # No success since: the next batch (a DRPC stream goes on) waits longer still.
    calls.clear()
    assert retries.run(2, failing(1, calls)) == 1
    assert clock.waits == [100, 200, 800]


def test_spark_retries_stop_waiting_when_the_topology_is_killed() -> None:
    clock, figures = WaitLog(), Figures()
    retries = BatchRetries({"topology.spark.batch.retries": 5, INITIAL: 100}, figures, clock, "t")
    clock.during = retries.stop  # killed during the first wait
    calls: list[int] = []
    with pytest.raises(ConnectionError, match="attempt 0 failed"):
        retries.run(1, failing(10, calls))
    assert calls == [0] and clock.waits == [100]
    assert retries.stopping


@pytest.mark.parametrize("value", [-1, "3", 1.5, True])
def test_spark_retries_setting_is_checked(value: Any) -> None:
    with pytest.raises(
        InvalidTopologyError,
        match=f"topology 'wc': topology.spark.batch.retries must be an int >= 0, got {value!r}",
    ):
        BatchRetries(
            {"topology.spark.batch.retries": value}, Figures(), ManualClock(), "topology 'wc'"
        )
