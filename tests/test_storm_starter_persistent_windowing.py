"""storm-starter's PersistentWindowingTopology, ported as Storm writes it (persistent
processing-time windows, with_max_events_in_memory, a global average in the state), run
on a LocalCluster driven by a ManualClock: exact averages computed here."""

from __future__ import annotations

import random
from pathlib import Path
from types import ModuleType
from typing import Any

from squall import Config, LocalCluster
from squall.testing import ManualClock
from tests.helpers import wait_until
from tests.starter_loading import load_starter


def load(name: str) -> ModuleType:
    """The example ``name``, imported from its file."""
    return load_starter(name)


def test_every_window_of_tuples_that_came_at_once(tmp_path: Path) -> None:
    """20 tuples at the start: the windows ending 2, 4, ... 10 s later hold them all
    (10 s long: the tuples of the start's millisecond belong to the first window),
    the one at 12 s none (an empty window does not fire)."""
    example = load("persistent_windowing")
    chooser = random.Random(5)
    values = [chooser.randrange(1000) for _ in range(20)]
    mean = sum(values) / len(values)
    emitted: list[Any] = []

    def capture(component: str, stream: str, task: int, tup: Any, targets: Any) -> None:
        if component == "avgbolt" and stream == "default":
            emitted.append(tup[0])

    conf = {
        **example.conf,
        Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"directory": str(tmp_path / "state")},
    }
    clock = ManualClock()
    with LocalCluster(clock=clock) as cluster:
        topology = example.build_topology(count=20, seed=5, interval_ms=0)
        cluster.submit_topology("test", conf, topology, emit_listener=capture)

        def held() -> float:
            custom = cluster.get_topology_info("test").components["avgbolt"].custom
            return custom.get("window_tuples_held", 0)

        wait_until(lambda: held() == 20, 10)
        for tick in range(1, 7):
            clock.advance_secs(2)
            if tick <= 5:
                wait_until(lambda tick=tick: len(emitted) == tick, 10)
        wait_until(lambda: held() == 0, 10)
        cluster.kill_topology("test")
    assert emitted == [example.Averages(mean, mean)] * 5
    assert repr(emitted[0]) == f"Averages{{global={mean:.2f}, window={mean:.2f}}}"
