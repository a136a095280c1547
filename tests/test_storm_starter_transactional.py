"""storm-starter's TransactionalGlobalCount and TransactionalWords, ported as Storm writes
them (MemoryTransactionalSpout, a BasicBolt among batch bolts), run to completion with
exact results computed here from the data, on LocalCluster and SparkCluster."""

from __future__ import annotations

from collections import Counter
from types import ModuleType
from typing import Any

import pytest

from squall.testing import complete_topology
from tests.conftest import Engine, on_engine
from tests.starter_loading import load_starter

CONF = {"topology.max.spout.pending": 3, "topology.trident.batch.emit.interval.millis": 0}


def load(name: str) -> ModuleType:
    """The example ``name``, imported from its file."""
    return load_starter(name)


def batches(data: dict[int, list[list[Any]]], take: int) -> list[list[str]]:
    """The words of each transaction, in txid order: transaction t takes the items
    [(t - 1) * take, t * take) of every partition."""
    longest = max(len(queue) for queue in data.values())
    return [
        [values[0] for queue in data.values() for values in queue[start : start + take]]
        for start in range(0, longest, take)
    ]


def simulate_words(
    data: dict[int, list[list[Any]]], take: int, bucket_size: int
) -> tuple[list[tuple[int, str, int, int | None]], Counter[tuple[int, int, int]], dict[int, int]]:
    """What TransactionalWords emits and stores, transaction by transaction: the
    ``count`` emits (txid, word, count, prev count), the ``bucketize`` emits (txid,
    bucket, delta) and the final bucket counts."""
    counts: dict[str, int] = {}
    count_emits = []
    deltas: Counter[tuple[int, int, int]] = Counter()
    buckets: dict[int, int] = {}
    for txid, words in enumerate(batches(data, take), start=1):
        for word, n in Counter(words).items():
            prev = counts.get(word)
            counts[word] = (prev or 0) + n
            count_emits.append((txid, word, counts[word], prev))
            current = counts[word] // bucket_size
            moves = [(current, 1)]
            if prev is not None and prev // bucket_size != current:
                moves.append((prev // bucket_size, -1))
            elif prev is not None:
                moves = []
            for bucket, delta in moves:
                deltas[(txid, bucket, delta)] += 1
                buckets[bucket] = buckets.get(bucket, 0) + delta
    return count_emits, deltas, buckets


#: Words whose counts cross bucket bounds: 3 partitions of 25, take 4.
MOVING = {p: [[f"w{(p + i) % 3 if i % 5 else 3}"] for i in range(25)] for p in range(3)}


def test_global_count_emits_the_running_count_of_each_transaction() -> None:
    example = load("transactional_global_count")
    example.DATABASE.clear()
    result = complete_topology(example.build_topology(), conf=CONF)
    sizes = [len(words) for words in batches(example.DATA, 3)]
    assert sizes == [9, 7, 3]
    by_txid: dict[int, int] = {}
    for attempt, count in result.read_tuples("partial-count"):
        by_txid[attempt.transaction_id] = by_txid.get(attempt.transaction_id, 0) + count
    assert by_txid == {1: 9, 2: 7, 3: 3}
    # Five partial-count tasks each finish every batch.
    assert len(result.read_tuples("partial-count")) == 5 * 3
    sums = sorted((a.transaction_id, total) for a, total in result.read_tuples("sum"))
    assert sums == [(1, 9), (2, 16), (3, 19)]
    assert example.DATABASE["GLOBAL-COUNT"].count == 19
    assert example.DATABASE["GLOBAL-COUNT"].txid == 3


@pytest.mark.parametrize(
    ("engine", "data", "take"),
    [on_engine("local", None, 3), on_engine("local", MOVING, 4), on_engine("spark", MOVING, 4)],
    indirect=["engine"],
)
def test_words_counts_bucket_deltas_and_buckets(engine: Engine, data: Any, take: int) -> None:
    example = load("transactional_words")
    example.COUNT_DATABASE.clear()
    example.BUCKET_DATABASE.clear()
    data = example.DATA if data is None else data
    count_emits, deltas, buckets = simulate_words(data, take, example.BUCKET_SIZE)
    result = complete_topology(
        example.build_topology(data, take),
        conf=engine.conf(CONF),
        cluster=engine.new_cluster(),
        timeout_secs=engine.timeout,
    )
    emitted = [(a.transaction_id, w, c, p) for a, w, c, p in result.read_tuples("count")]
    assert sorted(emitted, key=repr) == sorted(count_emits, key=repr)
    assert Counter((a.transaction_id, b, d) for a, b, d in result.read_tuples("bucketize")) == (
        deltas
    )
    words = Counter(values[0] for queue in data.values() for values in queue)
    assert {k: v.count for k, v in example.COUNT_DATABASE.items()} == dict(words)
    if not engine.is_spark:
        # ``buckets`` is no committer: on Spark it runs on executors, each Python worker
        # with its own BUCKET_DATABASE (as each worker of a Storm cluster would have).
        assert {k: v.count for k, v in example.BUCKET_DATABASE.items()} == buckets
    if data is MOVING:
        assert any(delta == -1 for _, _, delta in deltas)  # words moved between buckets


def test_the_storm_data_in_buckets() -> None:
    _, _, buckets = simulate_words(load("transactional_words").DATA, 3, 10)
    assert buckets == {0: 5}


#: The examples keep their databases in module globals, written by the committers: in
#: the test's process on LocalCluster (threads) and on Spark (committers run on the
#: driver), as in Storm's local mode.
@pytest.mark.parametrize("engine", [on_engine("local"), on_engine("spark")], indirect=True)
def test_both_examples_commit_exact_counts_on_both_engines(engine: Engine) -> None:
    count = load("transactional_global_count")
    words = load("transactional_words")
    count.DATABASE.clear()
    words.COUNT_DATABASE.clear()
    with engine.running(count.build_topology(), CONF, name="global-count") as run:
        run.wait_until(lambda: "GLOBAL-COUNT" in count.DATABASE, engine.timeout)
        run.wait_until(lambda: count.DATABASE["GLOBAL-COUNT"].count == 19, engine.timeout)
        run.wait_idle()
        assert count.DATABASE["GLOBAL-COUNT"].txid == 3
    expected = dict(Counter(values[0] for queue in words.DATA.values() for values in queue))
    with engine.running(words.build_topology(), CONF, name="words") as run:
        run.wait_until(
            lambda: {k: v.count for k, v in words.COUNT_DATABASE.items()} == expected,
            engine.timeout,
        )
        run.wait_idle()
        assert {k: v.txid for k, v in words.COUNT_DATABASE.items()} == {
            "cat": 2,
            "dog": 3,
            "chicken": 1,
            "apple": 2,
            "banana": 2,
        }
