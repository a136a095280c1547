"""Unit tests of the KafkaSpout's offset tracking (the commit point over gaps, the
uncommitted count), its retry back-off and schedule, its partition assignment and
where a partition starts (first-poll strategies, commit metadata)."""

from __future__ import annotations

import json
import pickle

import pytest

from squall import InvalidTopologyError
from squall.connectors.kafka import RetryBackoff
from squall.connectors.kafka.assignment import task_partitions
from squall.connectors.kafka.offsets import PartitionOffsets
from squall.connectors.kafka.positions import (
    BEGINNING,
    END,
    commit_metadata,
    committed_by,
    start_of,
)
from squall.connectors.kafka.retry import RetrySchedule
from squall.connectors.options import OptionChecker


def test_the_commit_point_is_the_oldest_record_not_done() -> None:
    offsets = PartitionOffsets(committed=10, next_offset=10)
    assert offsets.to_commit() is None  # nothing handled: nothing new to commit
    for offset in (10, 11, 12, 13):
        offsets.emitted(offset)
    assert offsets.commit_point() == 10
    offsets.done(11)
    offsets.done(13)
    assert offsets.commit_point() == 10  # 10 is not done: 11 and 13 wait
    offsets.done(10)
    assert offsets.to_commit() == 12
    offsets.done(12)
    assert offsets.to_commit() == 14  # all done: the offset after the last one
    assert offsets.uncommitted() == 4
    offsets.was_committed(14)
    assert (offsets.committed, offsets.uncommitted(), offsets.to_commit()) == (14, 0, None)


def test_gaps_in_offsets_never_block_a_commit() -> None:
    """A compacted topic: offsets 3, 7, 8 and 20 exist, the others do not."""
    offsets = PartitionOffsets()
    assert offsets.commit_point() is None  # the start is not known yet
    for offset in (3, 7, 8, 20):
        offsets.emitted(offset)
    offsets.done(3)
    assert offsets.to_commit() == 7
    offsets.done(8)
    offsets.done(20)
    assert offsets.to_commit() == 7
    offsets.done(7)
    assert offsets.to_commit() == 21
    assert offsets.emitted_offset == 20


def test_skipped_records_are_done_at_once_and_uncommitted_counts_every_record() -> None:
    offsets = PartitionOffsets(committed=0, next_offset=0)
    offsets.emitted(0)
    offsets.handled(1, done=True)  # the translator skipped it
    offsets.emitted(2)
    assert (offsets.uncommitted(), offsets.pending()) == (3, 2)
    offsets.done(2)
    assert (offsets.commit_point(), offsets.to_commit()) == (0, None)  # 0 is committed
    offsets.done(0)
    assert offsets.to_commit() == 3
    assert offsets.uncommitted() == 3  # done, not committed yet
    offsets.was_committed(3)
    assert offsets.uncommitted() == 0
    restored = pickle.loads(pickle.dumps(offsets))
    assert (restored.committed, restored.next_offset, restored.uncommitted()) == (3, 3, 0)


def test_retry_backoff_is_storms_exponential_back_off() -> None:
    backoff = RetryBackoff(initial_ms=5, period_ms=10, max_retries=None, max_ms=100)
    assert [backoff.delay_ms(n) for n in range(1, 7)] == [5, 20, 40, 80, 100, 100]
    assert not backoff.exhausted(1000)
    limited = RetryBackoff(max_retries=2)
    assert [limited.exhausted(n) for n in (1, 2, 3)] == [False, False, True]
    assert RetryBackoff(max_retries=0).exhausted(1)


def test_the_retry_schedule_releases_records_when_due_and_forgets_exhausted_ones() -> None:
    schedule = RetrySchedule(RetryBackoff(initial_ms=0, period_ms=100, max_retries=2))
    a, b = ("t", 0, 1), ("t", 0, 2)
    assert schedule.failed(a, now=10.0)
    assert schedule.failed(b, now=10.0)
    assert schedule.pop_due(10.0) == [a, b]
    assert schedule.failed(a, now=11.0)  # second failure: 100 * 2 ** 1 ms
    assert schedule.next_due() == pytest.approx(11.2)
    assert schedule.pop_due(11.1) == []
    assert schedule.pop_due(11.2) == [a]
    assert schedule.failures(a) == 2
    assert not schedule.failed(a, now=12.0)  # a third failure: retries exhausted
    assert schedule.failures(a) == 0
    schedule.done(b)
    assert schedule.failures(b) == 0
    schedule.failed(("u", 1, 5), now=13.0)
    schedule.failed(("t", 0, 9), now=13.0)
    schedule.forget(lambda msg_id: msg_id[0] != "u")
    restored = pickle.loads(pickle.dumps(schedule))
    assert restored.pop_due(20.0) == [("t", 0, 9)]
    assert restored.failed(("t", 0, 10), now=21.0)
    assert restored.pop_due(21.0) == [("t", 0, 10)]


def test_retry_backoff_options_are_checked() -> None:
    checker = OptionChecker("events", "KafkaSpout")
    RetryBackoff().check(checker)
    with pytest.raises(InvalidTopologyError, match=r"retry.period_ms must be an int >= 0"):
        RetryBackoff(period_ms=-1).check(checker)
    with pytest.raises(InvalidTopologyError, match=r"retry.max_retries must be None or an int"):
        RetryBackoff(max_retries=1.5).check(checker)  # type: ignore[arg-type]


def test_partitions_go_round_robin_over_the_tasks_in_sorted_order() -> None:
    partitions = [("b", 0), ("a", 1), ("a", 0), ("b", 1), ("c", 0)]
    assert task_partitions(partitions, 0, 2) == [("a", 0), ("b", 0), ("c", 0)]
    assert task_partitions(partitions, 1, 2) == [("a", 1), ("b", 1)]
    assert task_partitions(partitions, 0, 1) == sorted(partitions)
    assert task_partitions([("a", 0)], 2, 3) == []
    with pytest.raises(ValueError, match=r"task index 3 is not in range\(3\)"):
        task_partitions(partitions, 3, 3)


@pytest.mark.parametrize(
    ("strategy", "committed", "by", "start"),
    [
        ("uncommitted_earliest", 7, "other", 7),
        ("uncommitted_earliest", -1001, None, BEGINNING),
        ("uncommitted_latest", 7, None, 7),
        ("uncommitted_latest", -1001, None, END),
        ("earliest", 7, "other", BEGINNING),
        ("earliest", 7, None, BEGINNING),
        ("earliest", 7, "topo", 7),
        ("latest", 7, "other", END),
        ("latest", 7, "topo", 7),
        ("latest", -1001, "topo", END),
    ],
)
def test_where_a_partition_starts_by_strategy_and_who_committed(
    strategy: str, committed: int, by: str | None, start: int | str
) -> None:
    metadata = None if by is None else commit_metadata(by, "events", 3)
    assert start_of(strategy, committed, metadata, "topo") == start


def test_commit_metadata_names_the_topology() -> None:
    metadata = commit_metadata("topo", "events", 3)
    assert json.loads(metadata) == {"component": "events", "taskId": 3, "topologyId": "topo"}
    assert committed_by(metadata, "topo")
    assert not committed_by(metadata, "other")
    assert not committed_by("not json", "topo")
    assert not committed_by('["topo"]', "topo")
    assert not committed_by("", "topo")
