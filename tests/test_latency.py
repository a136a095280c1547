"""Latency histograms: exact percentiles of known latencies, merging across tasks and
runs, windows, and the plain-data form of the percentiles."""

from __future__ import annotations

import json
import pickle

import pytest

from squall.runtime.latency import (
    PERCENTILES,
    UNITS_PER_MS,
    LatencyHistogram,
    bucket_floor_ms,
    bucket_of,
    units_of,
)
from squall.runtime.metrics import ComponentStats, TaskStats, TopologyInfo, summarize
from squall.runtime.rolling import MetricsHistory


def histogram_of(values_ms: list[float]) -> LatencyHistogram:
    histogram = LatencyHistogram()
    for value in values_ms:
        histogram.record(value)
    return histogram


def test_percentiles_of_known_latencies_are_exact() -> None:
    # 1..100 µs: every whole microsecond below 256 µs is a bucket's lower bound.
    histogram = histogram_of([us / 1000.0 for us in range(100, 0, -1)])
    assert histogram.count == 100
    assert histogram.sum == pytest.approx(5.05)
    assert histogram.percentiles() == {50.0: 0.05, 90.0: 0.09, 99.0: 0.099, 99.9: 0.1, 99.99: 0.1}
    assert histogram.percentile(0.0) == 0.001
    assert histogram.percentile(100.0) == 0.1


def test_percentiles_of_millisecond_latencies() -> None:
    # 996 of 1 ms, 3 of 8 ms, 1 of 1024 ms: powers of two are bucket bounds.
    histogram = histogram_of([1.0] * 996 + [8.0] * 3 + [1024.0])
    assert histogram.count == 1000
    assert histogram.sum == 996.0 + 24.0 + 1024.0
    assert histogram.percentiles([50, 99, 99.7, 99.9, 100]) == {
        50: 1.0,
        99: 1.0,
        99.7: 8.0,
        99.9: 8.0,
        100: 1024.0,
    }


def test_sub_microsecond_latencies_have_their_own_buckets() -> None:
    # A unit is 1/1024 µs: 250 ns is 256 units (a bucket's lower bound), 100 ns 102
    # units (a bucket of its own below 256 units), 600 ns 614 units (bucket 612..615).
    histogram = histogram_of([0.0001] * 50 + [0.00025] * 40 + [0.0006] * 10)
    assert histogram.percentiles([0, 50, 90, 100]) == {
        0: 102 / UNITS_PER_MS,
        50: 102 / UNITS_PER_MS,
        90: 0.00025,
        100: 612 / UNITS_PER_MS,
    }
    assert 0.0 < histogram.percentile(50) < 0.0001
    assert histogram.cumulative_counts([0.0001, 0.00025, 0.001]) == [50, 90, 100]


def test_whole_microseconds_and_powers_of_two_of_milliseconds_are_bucket_bounds() -> None:
    for us in [*range(1, 256), 1000, 2000, 64_000]:
        assert bucket_floor_ms(bucket_of(us * 1024)) == us / 1000.0
    for power in range(0, 30):
        ms = float(2**power)
        assert bucket_floor_ms(bucket_of(units_of(ms))) == ms


def test_a_bucket_is_at_most_one_128th_below_its_values() -> None:
    for units in [255, 256, 257, 1000, 4999, 5000, 123_456, 7_654_321, 86_400_000_000_000]:
        floor = bucket_floor_ms(bucket_of(units)) * UNITS_PER_MS
        assert floor <= units
        assert units - floor <= units / 128
    assert [bucket_of(units) for units in range(256)] == list(range(256))
    # Up to 2**20 units (1.02 ms): 255 exact buckets from 1, then 128 per power of two.
    assert len({bucket_of(units) for units in range(1, 2**20)}) == 255 + 128 * 12


def test_an_empty_histogram_gives_zeros_and_bad_percentiles_are_refused() -> None:
    histogram = LatencyHistogram()
    assert (histogram.count, histogram.sum) == (0, 0.0)
    assert histogram.percentiles() == dict.fromkeys(PERCENTILES, 0.0)
    with pytest.raises(ValueError, match=r"latency percentile 101 is not within 0\.\.100"):
        histogram.percentile(101)


def test_negative_latencies_count_as_zero() -> None:
    histogram = histogram_of([-3.0, 0.0])
    assert (histogram.count, histogram.sum, histogram.percentile(100)) == (2, 0.0, 0.0)


def test_record_many_counts_a_batch_at_its_mean() -> None:
    histogram = LatencyHistogram()
    histogram.record_many(2.0, 5)
    histogram.record_many(1.0, 0)
    assert (histogram.count, histogram.sum, histogram.percentile(50)) == (5, 10.0, 2.0)


def test_cumulative_counts_at_bounds() -> None:
    histogram = histogram_of([0.005, 0.1, 1.0, 1.0, 8.0, 2048.0])
    assert histogram.cumulative_counts([0.005, 0.01, 1.0, 5.0, 10.0, 1000.0]) == [1, 1, 4, 4, 5, 5]
    assert histogram.count == 6


def test_merge_minus_copy_and_pickle() -> None:
    one = histogram_of([1.0, 2.0])
    two = histogram_of([2.0, 4.0, 0.05])
    merged = LatencyHistogram.merged([one, two])
    assert merged == histogram_of([1.0, 2.0, 2.0, 4.0, 0.05])
    assert (one.count, two.count) == (2, 3)  # unchanged
    earlier = merged.copy()
    merged.record(16.0)
    assert merged.minus(earlier) == histogram_of([16.0])
    assert merged.minus(merged.copy()) == LatencyHistogram()
    assert merged.minus(None) == merged
    assert pickle.loads(pickle.dumps(merged)) == merged


def test_task_runs_add_their_histograms() -> None:
    earlier, later = TaskStats("spout", 1), TaskStats("spout", 1)
    earlier.complete_latency.record(1.0)
    later.complete_latency.record(4.0)
    later.execute_latency.record(2.0)
    total = earlier.plus(later)
    assert total.complete_latency == histogram_of([1.0, 4.0])
    assert total.execute_latency == histogram_of([2.0])
    assert (earlier.complete_latency.count, later.complete_latency.count) == (1, 1)
    snapshot = later.snapshot()
    later.complete_latency.record(8.0)
    assert snapshot.complete_latency == histogram_of([4.0])


def _spout_tasks(latencies: dict[int, list[float]]) -> list[TaskStats]:
    tasks = []
    for task_id, values in latencies.items():
        task = TaskStats("spout", task_id)
        for value in values:
            task.complete_count += 1
            task.complete_ms += value
            task.complete_latency.record(value)
        tasks.append(task)
    return tasks


def test_a_component_merges_its_tasks_histograms() -> None:
    tasks = _spout_tasks({1: [1.0] * 98, 2: [2.0, 512.0]})
    stats = summarize("spout", "spout", tasks, 0.0)
    assert stats.complete_latency_percentiles == {
        50.0: 1.0,
        90.0: 1.0,
        99.0: 2.0,
        99.9: 512.0,
        99.99: 512.0,
    }
    assert stats.latency_histograms["complete"].count == 100
    assert stats.task_latency_histograms[2]["complete"] == histogram_of([2.0, 512.0])
    assert stats.execute_latency_percentiles == dict.fromkeys(PERCENTILES, 0.0)


def test_json_gives_the_percentiles_and_not_the_histograms() -> None:
    stats = summarize("spout", "spout", _spout_tasks({1: [4.0, 8.0]}), 0.0)
    data = json.loads(json.dumps(stats.to_dict()))
    assert data["complete_latency_percentiles"] == {
        "50.0": 4.0,
        "90.0": 8.0,
        "99.0": 8.0,
        "99.9": 8.0,
        "99.99": 8.0,
    }
    assert "latency_histograms" not in data and "task_latency_histograms" not in data
    info = TopologyInfo("t", "ACTIVE", 1.0, 1, {"spout": stats})
    whole = json.loads(json.dumps(info.to_dict()))
    assert whole["components"]["spout"]["complete_latency_percentiles"]["50.0"] == 4.0


def _info(latencies: list[float]) -> TopologyInfo:
    stats = summarize("spout", "spout", _spout_tasks({1: latencies}), 0.0)
    return TopologyInfo("t", "ACTIVE", 1.0, 1, {"spout": stats})


def test_a_window_has_the_percentiles_of_its_own_latencies() -> None:
    history = MetricsHistory(started=0.0, windows=[600])
    history.record(100.0, _info([64.0] * 50))
    now = _info([64.0] * 50 + [1.0] * 9 + [2.0])
    windowed: ComponentStats = history.window(800.0, now, 600).components["spout"]
    assert windowed.complete_count == 10
    assert windowed.complete_latency_percentiles[50.0] == 1.0
    assert windowed.complete_latency_percentiles[99.0] == 2.0
    assert windowed.latency_histograms["complete"] == histogram_of([1.0] * 9 + [2.0])
    assert windowed.task_latency_histograms == {}
    everything = history.window(800.0, now, None).components["spout"]
    assert everything.complete_latency_percentiles[50.0] == 64.0
