"""RollingTopWords: storm-starter's ``org.apache.storm.starter.RollingTopWords``, line by
line, with the bolts (``RollingCountBolt``, ``AbstractRankerBolt``,
``IntermediateRankingsBolt``, ``TotalRankingsBolt``) and tools (``SlotBasedCounter``,
``SlidingWindowCounter``, ``NthLastModifiedTimeTracker``, ``Rankable``,
``RankableObjectWithFields``, ``Rankings``) it uses, all in this one module.

The top 5 words of the last 9 seconds, computed in a scalable way: ``wordGenerator``
(5 ``TestWordSpout`` tasks) -> ``counter`` (4 ``RollingCountBolt(9, 3)`` tasks, fields
grouping on the word: every 3 seconds each emits ``(obj, count,
actualWindowLengthInSeconds)`` for the words of its sliding window) ->
``intermediateRanker`` (4 tasks, fields grouping on ``obj``: every 2 seconds each emits
the top 5 of its words) -> ``finalRanker`` (global grouping: every 2 seconds, the top 5
of them all). The bolts emit on tick tuples (``topology.tick.tuple.freq.secs`` in their
component configuration) and read the time through ``squall.utils.Time``, so on a
``LocalCluster(clock=ManualClock())`` the whole topology runs on simulated time.

Run it::

    squall run examples/storm_starter/rolling_top_words.py --seconds 20
    python examples/storm_starter/rolling_top_words.py

(its arguments, both optional: a topology name and ``--seconds N``, 20 by default)

``squall run`` shows the last rankings ``finalRanker`` emitted under its final metrics
(the module's ``show``); ``python`` adds a ``PrinterBolt`` that prints them all. While
the window fills up (its first 9 seconds) the counter logs once that its window is
still shorter than 9 seconds. ``create_builder``
takes another spout (the tests give a finite one, emitting on field ``"word"``) and
returns the builder; ``build_topology()`` the topology.
"""

from __future__ import annotations

import argparse
import logging
import time
from abc import ABC, abstractmethod
from collections import deque
from typing import Any, ClassVar

from squall import (
    BasicBolt,
    BasicOutputCollector,
    Bolt,
    Config,
    Fields,
    LocalCluster,
    OutputCollector,
    OutputFieldsDeclarer,
    Spout,
    StormTopology,
    TopologyBuilder,
    TopologyContext,
    Tuple,
    is_tick_tuple,
)
from squall.testing import TestWordSpout
from squall.utils import Time

LOG = logging.getLogger("rolling_top_words")

TOP_N = 5

# --- tools --------------------------------------------------------------------------------


class SlotBasedCounter:
    """Per-slot counts of the occurrences of objects."""

    def __init__(self, num_slots: int) -> None:
        if num_slots <= 0:
            raise ValueError(
                f"Number of slots must be greater than zero (you requested {num_slots})"
            )
        self.num_slots = num_slots
        self.obj_to_counts: dict[Any, list[int]] = {}

    def increment_count(self, obj: Any, slot: int) -> None:
        counts = self.obj_to_counts.get(obj)
        if counts is None:
            counts = [0] * self.num_slots
            self.obj_to_counts[obj] = counts
        counts[slot] += 1

    def get_count(self, obj: Any, slot: int) -> int:
        counts = self.obj_to_counts.get(obj)
        return 0 if counts is None else counts[slot]

    def get_counts(self) -> dict[Any, int]:
        return {obj: self._compute_total_count(obj) for obj in self.obj_to_counts}

    def _compute_total_count(self, obj: Any) -> int:
        return sum(self.obj_to_counts[obj])

    def wipe_slot(self, slot: int) -> None:
        """Reset the slot count of any tracked objects to zero for the given slot."""
        for counts in self.obj_to_counts.values():
            counts[slot] = 0

    def wipe_zeros(self) -> None:
        """Remove any object from the counter whose total count is zero."""
        for obj in [obj for obj in self.obj_to_counts if self._compute_total_count(obj) == 0]:
            del self.obj_to_counts[obj]


class SlidingWindowCounter:
    """Counts objects in a sliding window of ``window_length_in_slots`` slots; each
    ``get_counts_then_advance_window`` returns the window's counts and moves it on."""

    def __init__(self, window_length_in_slots: int) -> None:
        if window_length_in_slots < 2:
            raise ValueError(
                "Window length in slots must be at least two (you requested "
                f"{window_length_in_slots})"
            )
        self.window_length_in_slots = window_length_in_slots
        self.obj_counter = SlotBasedCounter(window_length_in_slots)
        self.head_slot = 0
        self.tail_slot = self._slot_after(self.head_slot)

    def increment_count(self, obj: Any) -> None:
        self.obj_counter.increment_count(obj, self.head_slot)

    def get_counts_then_advance_window(self) -> dict[Any, int]:
        """The current (total) counts of all tracked objects, then advance the window."""
        counts = self.obj_counter.get_counts()
        self.obj_counter.wipe_zeros()
        self.obj_counter.wipe_slot(self.tail_slot)
        self._advance_head()
        return counts

    def _advance_head(self) -> None:
        self.head_slot = self.tail_slot
        self.tail_slot = self._slot_after(self.tail_slot)

    def _slot_after(self, slot: int) -> int:
        return (slot + 1) % self.window_length_in_slots


class NthLastModifiedTimeTracker:
    """Tracks the time since the ``num_times_to_track``-th last modification, on the
    topology's clock (``Time``)."""

    MILLIS_IN_SEC = 1000

    def __init__(self, num_times_to_track: int) -> None:
        if num_times_to_track < 1:
            raise ValueError(
                f"numTimesToTrack must be greater than zero (you requested {num_times_to_track})"
            )
        self.capacity = num_times_to_track
        now_cached = self._now()
        self.last_modified_times_millis = deque([now_cached] * num_times_to_track)

    def _now(self) -> int:
        return Time.current_time_millis()

    def seconds_since_oldest_modification(self) -> int:
        modified_time_millis = self.last_modified_times_millis.popleft()
        return (self._now() - modified_time_millis) // self.MILLIS_IN_SEC

    def mark_as_modified(self) -> None:
        if len(self.last_modified_times_millis) >= self.capacity:
            self.last_modified_times_millis.popleft()
        self.last_modified_times_millis.append(self._now())


class Rankable(ABC):
    """An object with a count, compared by count."""

    @abstractmethod
    def get_object(self) -> Any: ...

    @abstractmethod
    def get_count(self) -> int: ...

    @abstractmethod
    def copy(self) -> Rankable: ...

    def compare_to(self, other: Rankable) -> int:
        delta = self.get_count() - other.get_count()
        return 1 if delta > 0 else -1 if delta < 0 else 0

    def __lt__(self, other: Rankable) -> bool:
        return self.compare_to(other) < 0


class RankableObjectWithFields(Rankable):
    """An object, its count and any additional data fields."""

    TO_STRING_SEPARATOR = "|"

    def __init__(self, obj: Any, count: int, *other_fields: Any) -> None:
        if obj is None:
            raise ValueError("The object must not be null")
        if count < 0:
            raise ValueError("The count must be >= 0")
        self.obj = obj
        self.count = count
        self.fields = tuple(other_fields)

    @staticmethod
    def from_tuple(tup: Tuple) -> RankableObjectWithFields:
        """The object in the tuple's field 0, its count in field 1, other fields after."""
        other_fields = tup.get_values()
        obj = other_fields.pop(0)
        count = other_fields.pop(0)
        return RankableObjectWithFields(obj, count, *other_fields)

    def get_object(self) -> Any:
        return self.obj

    def get_count(self) -> int:
        return self.count

    def get_fields(self) -> list[Any]:
        return list(self.fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RankableObjectWithFields):
            return False
        return bool(self.obj == other.obj and self.count == other.count)

    def __hash__(self) -> int:
        return hash((self.count, self.obj))

    def __repr__(self) -> str:
        parts = [self.obj, self.count, *self.fields]
        return "[" + self.TO_STRING_SEPARATOR.join(str(part) for part in parts) + "]"

    def copy(self) -> Rankable:
        return RankableObjectWithFields(self.get_object(), self.get_count(), *self.fields)


class Rankings:
    """The top ``top_n`` rankables by count, highest first."""

    DEFAULT_COUNT = 10

    def __init__(self, top_n: int = DEFAULT_COUNT) -> None:
        if top_n < 1:
            raise ValueError("topN must be >= 1")
        self._max_size = top_n
        self.ranked_items: list[Rankable] = []

    def max_size(self) -> int:
        return self._max_size

    def size(self) -> int:
        return len(self.ranked_items)

    def get_rankings(self) -> list[Rankable]:
        """A (somewhat) defensive copy of the ranked items."""
        return [rankable.copy() for rankable in self.ranked_items]

    def update_with(self, other: Rankings | Rankable) -> None:
        if isinstance(other, Rankings):
            for rankable in other.get_rankings():
                self.update_with(rankable)
            return
        self._add_or_replace(other)
        self._rerank()
        self._shrink_rankings_if_needed()

    def _add_or_replace(self, rankable: Rankable) -> None:
        rank = self._find_rank_of(rankable)
        if rank is not None:
            self.ranked_items[rank] = rankable
        else:
            self.ranked_items.append(rankable)

    def _find_rank_of(self, rankable: Rankable) -> int | None:
        tag = rankable.get_object()
        for rank, current in enumerate(self.ranked_items):
            if current.get_object() == tag:
                return rank
        return None

    def _rerank(self) -> None:
        self.ranked_items.sort()
        self.ranked_items.reverse()

    def _shrink_rankings_if_needed(self) -> None:
        if len(self.ranked_items) > self._max_size:
            del self.ranked_items[self._max_size]

    def prune_zero_counts(self) -> None:
        """Removes ranking entries that have a count of zero."""
        self.ranked_items = [r for r in self.ranked_items if r.get_count() != 0]

    def __repr__(self) -> str:
        return repr(self.ranked_items)

    def copy(self) -> Rankings:
        """A (defensive) copy of itself."""
        copied = Rankings(self._max_size)
        copied.update_with(self)
        return copied


# --- bolts --------------------------------------------------------------------------------


class RollingCountBolt(Bolt):
    """Rolling counts of incoming objects: every ``emit_frequency_in_seconds`` (a tick
    tuple) it emits ``(obj, count, actualWindowLengthInSeconds)`` for each object of the
    last ``window_length_in_seconds``."""

    NUM_WINDOW_CHUNKS = 5
    DEFAULT_SLIDING_WINDOW_IN_SECONDS = NUM_WINDOW_CHUNKS * 60
    DEFAULT_EMIT_FREQUENCY_IN_SECONDS = DEFAULT_SLIDING_WINDOW_IN_SECONDS // NUM_WINDOW_CHUNKS
    WINDOW_LENGTH_WARNING_TEMPLATE = (
        "Actual window length is %d seconds when it should be %d seconds"
        " (you can safely ignore this warning during the startup phase)"
    )

    def __init__(
        self,
        window_length_in_seconds: int = DEFAULT_SLIDING_WINDOW_IN_SECONDS,
        emit_frequency_in_seconds: int = DEFAULT_EMIT_FREQUENCY_IN_SECONDS,
    ) -> None:
        self.window_length_in_seconds = window_length_in_seconds
        self.emit_frequency_in_seconds = emit_frequency_in_seconds
        self.counter = SlidingWindowCounter(
            self._derive_num_window_chunks_from(window_length_in_seconds, emit_frequency_in_seconds)
        )

    @staticmethod
    def _derive_num_window_chunks_from(
        window_length_in_seconds: int, window_update_frequency_in_seconds: int
    ) -> int:
        return window_length_in_seconds // window_update_frequency_in_seconds

    #: The (topology, component) pairs whose startup warning this process logged: the
    #: warning is logged once per component and run, not by every task at every tick
    #: (squall's choice; Storm's bolt logs it each time). ``dict.setdefault`` is atomic,
    #: so the tasks' threads need no lock (which could not be pickled with the bolt).
    _warned: ClassVar[dict[tuple[str, str], object]] = {}

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector
        self.warning_key = (context.storm_id, context.get_this_component_id())
        self.last_modified_tracker = NthLastModifiedTimeTracker(
            self._derive_num_window_chunks_from(
                self.window_length_in_seconds, self.emit_frequency_in_seconds
            )
        )

    def execute(self, tup: Tuple) -> None:
        if is_tick_tuple(tup):
            LOG.debug("Received tick tuple, triggering emit of current window counts")
            self._emit_current_window_counts()
        else:
            self._count_obj_and_ack(tup)

    def _emit_current_window_counts(self) -> None:
        counts = self.counter.get_counts_then_advance_window()
        actual_window_length_in_seconds = (
            self.last_modified_tracker.seconds_since_oldest_modification()
        )
        self.last_modified_tracker.mark_as_modified()
        if (
            actual_window_length_in_seconds != self.window_length_in_seconds
            and self._first_warning()
        ):
            LOG.warning(
                self.WINDOW_LENGTH_WARNING_TEMPLATE,
                actual_window_length_in_seconds,
                self.window_length_in_seconds,
            )
        self._emit(counts, actual_window_length_in_seconds)

    def _first_warning(self) -> bool:
        """Whether no task of this component has logged the startup warning in this run
        (in this process) yet; from now on, one has."""
        token = object()
        return self._warned.setdefault(self.warning_key, token) is token

    def _emit(self, counts: dict[Any, int], actual_window_length_in_seconds: int) -> None:
        for obj, count in counts.items():
            self.collector.emit([obj, count, actual_window_length_in_seconds])

    def _count_obj_and_ack(self, tup: Tuple) -> None:
        obj = tup.get_value(0)
        self.counter.increment_count(obj)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields("obj", "count", "actualWindowLengthInSeconds"))

    def get_component_configuration(self) -> dict[str, Any]:
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: self.emit_frequency_in_seconds}


class AbstractRankerBolt(BasicBolt, ABC):
    """Ranks objects by their count; emits its rankings on each tick tuple (every
    ``emit_frequency_in_seconds``)."""

    DEFAULT_EMIT_FREQUENCY_IN_SECONDS = 2
    DEFAULT_COUNT = 10

    def __init__(
        self,
        top_n: int = DEFAULT_COUNT,
        emit_frequency_in_seconds: int = DEFAULT_EMIT_FREQUENCY_IN_SECONDS,
    ) -> None:
        if top_n < 1:
            raise ValueError(f"topN must be >= 1 (you requested {top_n})")
        if emit_frequency_in_seconds < 1:
            raise ValueError(
                "The emit frequency must be >= 1 seconds (you requested "
                f"{emit_frequency_in_seconds} seconds)"
            )
        self.count = top_n
        self.emit_frequency_in_seconds = emit_frequency_in_seconds
        self.rankings = Rankings(self.count)

    def get_rankings(self) -> Rankings:
        return self.rankings

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        """A template method: a tick emits the rankings, other tuples update them."""
        if is_tick_tuple(tup):
            self.get_logger().debug("Received tick tuple, triggering emit of current rankings")
            self._emit_rankings(collector)
        else:
            self.update_rankings_with_tuple(tup)

    @abstractmethod
    def update_rankings_with_tuple(self, tup: Tuple) -> None: ...

    def _emit_rankings(self, collector: BasicOutputCollector) -> None:
        collector.emit([self.rankings.copy()])
        self.get_logger().debug("Rankings: %s", self.rankings)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields("rankings"))

    def get_component_configuration(self) -> dict[str, Any]:
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: self.emit_frequency_in_seconds}

    @abstractmethod
    def get_logger(self) -> logging.Logger: ...


class IntermediateRankingsBolt(AbstractRankerBolt):
    """Ranks incoming ``(object, object_count, additional fields...)`` tuples."""

    LOG = logging.getLogger("rolling_top_words.IntermediateRankingsBolt")

    def update_rankings_with_tuple(self, tup: Tuple) -> None:
        rankable = RankableObjectWithFields.from_tuple(tup)
        self.get_rankings().update_with(rankable)

    def get_logger(self) -> logging.Logger:
        return self.LOG


class TotalRankingsBolt(AbstractRankerBolt):
    """Merges incoming ``Rankings`` into one (subscribe it with a global grouping)."""

    LOG = logging.getLogger("rolling_top_words.TotalRankingsBolt")

    def update_rankings_with_tuple(self, tup: Tuple) -> None:
        rankings_to_be_merged: Rankings = tup.get_value(0)
        self.get_rankings().update_with(rankings_to_be_merged)
        self.get_rankings().prune_zero_counts()

    def get_logger(self) -> logging.Logger:
        return self.LOG


class PrinterBolt(BasicBolt):
    """Prints every tuple (storm-starter's ``PrinterBolt``)."""

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        print(tup)


# --- the topology -------------------------------------------------------------------------


def create_builder(spout: Spout | None = None) -> TopologyBuilder:
    """The topology's builder (Storm's ``run``); ``spout`` replaces the
    ``TestWordSpout`` (its first field is the word)."""
    builder = TopologyBuilder()
    spout_id = "wordGenerator"
    counter_id = "counter"
    intermediate_ranker_id = "intermediateRanker"
    builder.set_spout(spout_id, spout or TestWordSpout(), 5)
    builder.set_bolt(counter_id, RollingCountBolt(9, 3), 4).fields_grouping(
        spout_id, Fields("word")
    )
    builder.set_bolt(intermediate_ranker_id, IntermediateRankingsBolt(TOP_N), 4).fields_grouping(
        counter_id, Fields("obj")
    )
    total_ranker_id = "finalRanker"
    builder.set_bolt(total_ranker_id, TotalRankingsBolt(TOP_N)).global_grouping(
        intermediate_ranker_id
    )
    return builder


def build_topology(spout: Spout | None = None) -> StormTopology:
    """The topology (see :func:`create_builder`)."""
    return create_builder(spout).create_topology()


conf = Config()

#: What ``squall run`` shows under its final metrics: the last rankings ``finalRanker``
#: emitted (every 2 seconds), as ``--show finalRanker`` would.
show = ["finalRanker"]


def main() -> None:
    """Run the topology on a LocalCluster for a while, printing the final rankings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("topology_name", nargs="?", default="slidingWindowCounts")
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    builder = create_builder()
    builder.set_bolt("printer", PrinterBolt()).shuffle_grouping("finalRanker")
    LOG.info("Topology name: %s", args.topology_name)
    with LocalCluster() as cluster:
        cluster.submit_topology(args.topology_name, conf, builder.create_topology())
        time.sleep(args.seconds)
        cluster.kill_topology(args.topology_name)


if __name__ == "__main__":
    main()
