"""examples/windowing.py on a manual clock: window results, late readings and acks match a
brute-force computation over the same seeded readings.

The clock moves in two steps per watermark interval: first to just before the next tick
(the readings due by then are emitted and processed), then onto the tick (each windowed
bolt task computes a watermark and fires its windows). Readings are never due at a tick
instant, so the order of readings and ticks at every task, hence every watermark, late
reading and window, is fixed, and the test recomputes all of them independently.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest

from squall import LocalCluster, ManualClock, StormTopology
from tests.helpers import wait_until
from tests.test_examples import load_example

windowing = load_example("windowing")

COUNT = 400
SEED = 11
SENSORS = 8
EMIT_INTERVAL = 5.0
TICK = windowing.WATERMARK_INTERVAL.ms
LAG = windowing.LAG.ms
WINDOWED = ("sliding", "tumbling")
#: (length, sliding interval) of each windowed bolt, in ms.
SPANS = {
    "sliding": (windowing.SLIDING_LENGTH.ms, windowing.SLIDING_INTERVAL.ms),
    "tumbling": (windowing.TUMBLING_LENGTH.ms, windowing.TUMBLING_LENGTH.ms),
}


@dataclass
class TaskModel:
    """What one windowed bolt task sees: readings in order, ticks, watermarks."""

    accepted: list[tuple[Any, int]] = field(default_factory=list)  # (reading, tick after it)
    late: list[Any] = field(default_factory=list)
    watermarks: list[tuple[int, int]] = field(default_factory=list)  # (tick, watermark)
    latest: int | None = None

    def receive(self, reading: Any, next_tick: int) -> None:
        watermark = self.watermarks[-1][1] if self.watermarks else None
        if watermark is not None and reading.ts < watermark:
            self.late.append(reading)
            return
        self.accepted.append((reading, next_tick))
        self.latest = reading.ts if self.latest is None else max(self.latest, reading.ts)

    def tick(self, number: int) -> None:
        if self.latest is None:
            return
        watermark = self.latest - LAG
        if not self.watermarks or watermark > self.watermarks[-1][1]:
            self.watermarks.append((number, watermark))

    def windows(self, length: int, sliding: int) -> dict[int, list[Any]]:
        """Every window that fires: its end -> its readings.

        A window ending at ``end`` fires at the first watermark at or past ``end``, with
        the readings accepted before that tick with ``end - length < ts <= end``; it fires
        only if that is not empty.
        """
        real = [(r, t) for r, t in self.accepted if r.ts != windowing.FLUSH_TS]
        if not real or not self.watermarks:
            return {}
        result = {}
        end = -(-min(r.ts for r, _ in real) // sliding) * sliding
        last = max(r.ts for r, _ in real) + length
        while end <= last:
            fired = [tick for tick, watermark in self.watermarks if watermark >= end]
            if fired:
                readings = [r for r, t in real if t <= fired[0] and end - length < r.ts <= end]
                if readings:
                    result[end] = readings
            end += sliding
        return result


def release_schedule(count: int, sensors: int) -> list[tuple[int, list[Any]]]:
    """(tick number, tuples emitted just before that tick): readings, then the flush."""
    readings = windowing.generate_readings(count, SEED, sensors)
    names = windowing.sensor_names(sensors)
    emitted = [*readings, *(windowing.Reading(name, 0, windowing.FLUSH_TS) for name in names)]
    schedule: dict[int, list[Any]] = defaultdict(list)
    for index, reading in enumerate(emitted):
        due = (min(index, count) + 0.5) * EMIT_INTERVAL
        schedule[int(due // TICK) + 1].append(reading)
    last = max(schedule)
    return [(tick, schedule.get(tick, [])) for tick in range(1, last + 1)]


@dataclass
class Run:
    emits: dict[tuple[str, str], list[tuple[int, list[Any], list[int]]]]
    tasks: dict[str, list[int]]
    custom: dict[str, dict[str, float]]
    spout: Any
    late_counts: dict[str, int]
    #: ``info.local.pending`` at the end: spout trees not yet completed.
    pending: int


def run_example(parallelism: int) -> Run:
    """Run the example on a manual clock, two clock steps per watermark interval."""
    topology = windowing.build_topology(COUNT, SEED, SENSORS, EMIT_INTERVAL, parallelism)
    emits: dict[tuple[str, str], list[tuple[int, list[Any], list[int]]]] = defaultdict(list)
    lock = threading.Lock()

    def listen(component: str, stream: str, task: int, values: Any, targets: list[int]) -> None:
        with lock:
            emits[(component, stream)].append((task, list(values), list(targets)))

    schedule = release_schedule(COUNT, SENSORS)
    clock = ManualClock(start_ms=1_000_000.0)
    with LocalCluster(clock=clock) as cluster:
        cluster.submit_topology("windowing", {}, topology, emit_listener=listen)
        running = cluster.get_running("windowing")
        tasks = running.plan.component_tasks
        (spout_task,) = tasks["readings"]
        spout = running.runners[spout_task].component

        def executed(component: str) -> int:
            return sum(running.runners[t].stats.executed for t in tasks[component])

        released = 0
        for number, batch in schedule:
            clock.advance(TICK - EMIT_INTERVAL / 2)  # the readings due before the tick
            released += len(batch)
            expected = released + (number - 1) * parallelism
            wait_until(lambda: all(executed(c) == expected for c in WINDOWED))  # noqa: B023
            clock.advance(EMIT_INTERVAL / 2)  # the tick: watermarks, windows fire
            expected += parallelism
            wait_until(lambda: all(executed(c) == expected for c in WINDOWED))  # noqa: B023
        wait_until(lambda: spout.acked == COUNT)
        info = cluster.get_topology_info("windowing")
        (late_task,) = tasks["late"]
        late_counts = dict(running.runners[late_task].component.counts)
        cluster.kill_topology("windowing")
    with lock:
        return Run(
            dict(emits),
            {c: list(tasks[c]) for c in (*WINDOWED, "late")},
            {c: dict(info.components[c].custom) for c in WINDOWED},
            spout,
            late_counts,
            info.local.pending if info.local is not None else -1,
        )


def model_tasks(run: Run) -> dict[str, dict[int, TaskModel]]:
    """Replay the release schedule into one model per windowed bolt task, routing each
    reading to the tasks the spout's emits went to."""
    targets = [set(t) for _, _, t in run.emits[("readings", "default")]]
    models: dict[str, dict[int, TaskModel]] = {
        c: {task: TaskModel() for task in run.tasks[c]} for c in WINDOWED
    }
    position = 0
    for number, batch in release_schedule(COUNT, SENSORS):
        for reading in batch:
            for component in WINDOWED:
                (task,) = targets[position] & set(run.tasks[component])
                models[component][task].receive(reading, number)
            position += 1
        for component in WINDOWED:
            for model in models[component].values():
                model.tick(number)
    return models


@pytest.mark.parametrize("parallelism", [1, 2])
def test_windows_and_late_readings_match_brute_force(parallelism: int) -> None:
    run = run_example(parallelism)
    readings = windowing.generate_readings(COUNT, SEED, SENSORS)
    emitted = [values for _, values, _ in run.emits[("readings", "default")]]
    assert emitted[:COUNT] == [[r.sensor, r.watts, r.ts] for r in readings]
    assert len(emitted) == COUNT + SENSORS
    models = model_tasks(run)

    expected: dict[str, list[list[Any]]] = {component: [] for component in WINDOWED}
    for component in WINDOWED:
        for model in models[component].values():
            for end, window in model.windows(*SPANS[component]).items():
                by_sensor: dict[str, list[int]] = defaultdict(list)
                for reading in window:
                    by_sensor[reading.sensor].append(reading.watts)
                for sensor, watts in by_sensor.items():
                    if component == "sliding":
                        expected[component].append([end, sensor, sum(watts), len(watts)])
                    else:
                        expected[component].append([end, sensor, sum(watts) / len(watts)])
    for component in WINDOWED:
        results = [values for _, values, _ in run.emits[(component, "default")]]
        assert sorted(results) == sorted(expected[component])

    # Tumbling windows partition the accepted readings: each is in exactly one window.
    tumbling = models["tumbling"].values()
    in_windows = sum(
        len(window) for model in tumbling for window in model.windows(*SPANS["tumbling"]).values()
    )
    assert in_windows + sum(len(model.late) for model in tumbling) == COUNT

    for component in WINDOWED:
        late = sorted(
            [r.sensor, r.watts, r.ts] for model in models[component].values() for r in model.late
        )
        assert late  # the seeded input has late readings ...
        assert len(late) < COUNT // 10  # ... but few of them
        assert sorted(v[0] for _, v, _ in run.emits[(component, "late")]) == late
        assert run.custom[component]["late_tuples"] == len(late)
        assert run.late_counts[component] == len(late)
        fired = sum(len(m.windows(*SPANS[component])) for m in models[component].values())
        assert run.custom[component]["windows_fired"] == fired
        # Only the flush readings are still held: every reading left its windows ...
        assert run.custom[component]["window_tuples_held"] == SENSORS
    # ... and was acked (late readings at once, the others as they left the windows).
    assert (run.spout.acked, run.spout.failed) == (COUNT, 0)
    # The held flush readings were emitted without message ids: no tree is pending.
    assert run.pending == 0


def test_the_input_is_out_of_order() -> None:
    readings = windowing.generate_readings(COUNT, SEED, SENSORS)
    assert readings == windowing.generate_readings(COUNT, SEED, SENSORS)
    backwards = sum(1 for a, b in itertools.pairwise(readings) if b.ts < a.ts)
    assert 10 <= backwards <= COUNT // 5
    assert {r.sensor for r in readings} == set(windowing.sensor_names(SENSORS))


def test_example_topology_is_deep_copyable_and_documented() -> None:
    topology = windowing.build_topology()
    assert isinstance(topology, StormTopology)
    for spec in topology:
        copy.deepcopy(spec.component)
    assert windowing.__doc__
