"""TaskStats.snapshot: a copy with every counter, on the compiled core and the pure one."""

from __future__ import annotations

import pickle

from squall.runtime.metrics import _CONTAINERS, _COUNTERS, RouteCounts, TaskStats

SCALARS = _COUNTERS
FROM_THE_CONSTRUCTOR = ("component_id", "task_id", "throttle_secs", "max_errors_per_window")
COPIED_CONTAINERS = _CONTAINERS


def test_the_names_copied_are_every_attribute_of_the_class() -> None:
    """A snapshot and a pickle carry every attribute: the constructor's, the counters
    and the containers (the pure form lists them in ``__slots__``, the compiled one in
    ``__mypyc_attrs__``)."""
    names = getattr(TaskStats, "__slots__", None) or TaskStats.__mypyc_attrs__
    assert set(names) == {*SCALARS, *FROM_THE_CONSTRUCTOR, *COPIED_CONTAINERS}


def test_a_snapshot_has_every_counter_and_copies_of_the_containers() -> None:
    stats = TaskStats("split", 7, throttle_secs=3.0, max_errors_per_window=2)
    for number, name in enumerate(SCALARS, start=1):
        setattr(stats, name, number * 1.5 if "secs" in name or name.endswith("ms") else number)
    stats.complete_latency.record(2.0)
    stats.execute_latency.record(3.0)
    stats.process_latency.record(4.0)
    stats.record_error(ValueError("boom"))
    stats._capacity_samples.append((1.0, 0.5))

    class Route:
        emitted, transferred = 10, 20

    stats.routes["default"] = Route()
    copy = pickle.loads(pickle.dumps(stats.snapshot()))
    for name in (*SCALARS, *FROM_THE_CONSTRUCTOR):
        assert getattr(copy, name) == getattr(stats, name), name
    assert copy.complete_latency.count == 1 and copy.execute_latency.count == 1
    assert copy.process_latency.count == 1
    assert [error.error for error in copy.errors] == [error.error for error in stats.errors]
    assert list(copy._capacity_samples) == [(1.0, 0.5)]
    assert copy.routes == {"default": RouteCounts(10, 20)}
    stats.complete_latency.record(5.0)
    assert copy.complete_latency.count == 1  # a copy, not the task's own
