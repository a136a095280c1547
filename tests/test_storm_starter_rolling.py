"""storm-starter's RollingTopWords (``examples/storm_starter/rolling_top_words.py``):
its tools alone, then the topology on a ManualClock (exact rankings at each tick) and on
every engine."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from squall import Fields, LocalCluster, ManualClock, Tuple
from squall.model.tuple import StreamInfo
from squall.testing import CapturingBolt, FixedTupleSpout
from tests.conftest import Engine, on_engines
from tests.helpers import settle, wait_until
from tests.starter_loading import load_starter

starter = load_starter("rolling_top_words")

#: Counts with no ties, so the top 5 is exact: 7 x storm, 6 x spark... 1 x java.
COUNTS = {"storm": 7, "spark": 6, "flink": 5, "kafka": 4, "redis": 3, "squall": 2, "java": 1}
#: The words interleaved (storm, spark, ..., java, storm, spark, ...).
WORDS = [word for round_ in range(7) for word, count in COUNTS.items() if count > round_]
TOP_5 = [(word, count) for word, count in Counter(WORDS).most_common(5)]


def ranked(rankings: Any) -> list[tuple[str, int]]:
    """A Rankings' items as (object, count), highest first."""
    return [(r.get_object(), r.get_count()) for r in rankings.get_rankings()]


# --- the tools ----------------------------------------------------------------------------


def test_sliding_window_counter_loads_up_then_forgets_as_storms_javadoc_says() -> None:
    counter = starter.SlidingWindowCounter(5)
    seen = []
    for observed in [1, 1, 1, 1, 0, 0, 0, 0]:  # the javadoc's example, one slot a minute
        for _ in range(observed):
            counter.increment_count("X")
        seen.append(counter.get_counts_then_advance_window().get("X", 0))
    assert seen == [1, 2, 3, 4, 4, 3, 2, 1]
    with pytest.raises(ValueError, match="at least two \\(you requested 1\\)"):
        starter.SlidingWindowCounter(1)


def test_rankings_keep_the_top_n_by_count_and_replace_by_object() -> None:
    rankings = starter.Rankings(3)
    for obj, count in [("a", 1), ("b", 5), ("c", 3), ("d", 4), ("a", 9), ("b", 0)]:
        rankings.update_with(starter.RankableObjectWithFields(obj, count))
    # "c" fell out when "a" came back with 9 (only 3 are kept), "b" stays with 0.
    assert ranked(rankings) == [("a", 9), ("d", 4), ("b", 0)]
    merged = starter.Rankings(3)
    merged.update_with(starter.RankableObjectWithFields("c", 0))
    merged.update_with(rankings)
    assert ranked(merged) == [("a", 9), ("d", 4), ("b", 0)]  # ties: the newest first
    merged.prune_zero_counts()
    assert ranked(merged) == [("a", 9), ("d", 4)]
    assert ranked(rankings.copy()) == ranked(rankings) and rankings.copy() is not rankings


def test_rankable_from_a_tuple_takes_object_count_and_the_other_fields() -> None:
    info = StreamInfo("counter", "default", Fields("obj", "count", "actualWindowLengthInSeconds"))
    rankable = starter.RankableObjectWithFields.from_tuple(Tuple(["w", 4, 9], info, 1))
    assert (rankable.get_object(), rankable.get_count(), rankable.get_fields()) == ("w", 4, [9])
    assert repr(rankable) == "[w|4|9]"


# --- the topology on simulated time --------------------------------------------------------


def test_rolling_top_words_ranks_on_the_manual_clock_of_local_cluster() -> None:
    """All words counted at t=0. The counter ticks every 3 s (window 9 s: 3 slots), the
    rankers every 2 s. At 3 s the counters emit the counts and at 4 s the intermediate
    rankers rank them, so the final ranker's rankings are the top 5 by its tick at 6 s
    (at 4 s it may tick before the intermediate rankings of 4 s arrive) and stay so
    while the counts are in the window: at 12 s they leave it (zero counts emitted), the
    intermediate rankers pass them on by 14 s and the final ranker prunes them, so from
    16 s its rankings are empty."""
    spout = FixedTupleSpout([[word] for word in WORDS], "word")
    sink = CapturingBolt()
    builder = starter.create_builder(spout)
    builder.set_bolt("sink", sink).shuffle_grouping("finalRanker")
    clock = ManualClock()
    latest: dict[int, list[tuple[str, int]]] = {}
    windows: dict[int, set[int]] = {}
    with LocalCluster(clock=clock) as cluster:
        cluster.submit_topology("rolling", {}, builder.create_topology())
        wait_until(lambda: len(spout.acked) == len(WORDS), timeout=10)
        for second in range(1, 19):
            clock.advance(1000)
            settle(cluster, "rolling")
            cluster.wait_idle("rolling", 10)
            emitted = sink.values()
            if emitted:
                latest[second] = ranked(emitted[-1][0])
                windows[second] = {r.get_fields()[0] for r in emitted[-1][0].get_rankings()}
    assert [latest.get(second) for second in (6, 8, 10)] == [TOP_5, TOP_5, TOP_5]
    assert [latest.get(second) for second in (16, 17, 18)] == [[], [], []]
    # The first final rankings come at 2 s (empty); one every 2 s after that.
    assert len(sink.values()) == 9
    # actualWindowLengthInSeconds: 3, 6 then 9 s as the window fills.
    assert windows[10] <= {6, 9} and windows[6] <= {3, 6}


@pytest.mark.parametrize("engine", on_engines(), indirect=True)
def test_rolling_top_words_ranks_the_top_five_on_every_engine(engine: Engine) -> None:
    """On the system clock the ticks come every 3 s and 2 s of real time (on Spark at
    the start of a micro-batch): whatever the timing, the final rankings reach the
    exact top 5 while the words are in the window."""
    spout = FixedTupleSpout([[word] for word in WORDS], "word")
    sink = CapturingBolt()
    builder = starter.create_builder(spout)
    builder.set_bolt("sink", sink).shuffle_grouping("finalRanker")

    def reached() -> bool:
        return any(ranked(values[0]) == TOP_5 for values in sink.values())

    with engine.running(builder.create_topology(), name="rolling") as run:
        run.wait_until(reached, max(engine.timeout, 60))
        assert run.errors() == {}
