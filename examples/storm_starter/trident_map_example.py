"""Storm's ``TridentMapExample`` (storm-starter), ported line by line.

A cycling ``FixedBatchSpout`` emits five sentences (field ``word``) in batches of three.
``flat_map`` splits them into words, ``map`` upper-cases each (field ``uppercased``), a
filter keeps ``THE``, ``peek`` prints it, and the words are counted into a
``MemoryMapState`` (16 tasks). The DRPC function ``words`` sums the counts of the words
of its argument: ``drpc.execute("words", "CAT THE DOG JUMPED")`` is ``[[n]]`` with ``n``
the number of ``the`` counted so far.

Run it::

    python examples/storm_starter/trident_map_example.py
    squall run examples/storm_starter/trident_map_example.py --seconds 5

``build_topology(drpc, sentences, cycle, parallelism)`` returns the topology; the tests
give it a ``LocalDRPC`` and a finite input.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from squall import Config, Fields, LocalCluster, StormTopology
from squall.drpc import LocalDRPC
from squall.trident import Count as TridentCount
from squall.trident import (
    Filter,
    FilterNull,
    FixedBatchSpout,
    MapGet,
    Sum,
    TridentTopology,
    TridentTuple,
)
from squall.trident.state import MemoryMapState

SENTENCES = [
    "the cow jumped over the moon",
    "the man went to the store and bought some candy",
    "four score and seven years ago",
    "how many apples can you eat",
    "to be or not to be the person",
]


def to_upper(tup: TridentTuple) -> list[str]:
    """The ``map`` function: the word upper-cased."""
    return [tup.get_value_by_field("word").upper()]


def split(tup: TridentTuple) -> list[list[str]]:
    """The ``flat_map`` function: one tuple per word."""
    return [[word] for word in tup.get_value(0).split(" ")]


class TheFilter(Filter):
    """Keeps ``THE``."""

    def is_keep(self, tup: TridentTuple) -> bool:
        return tup.get_value(0) == "THE"


def build_topology(
    drpc: LocalDRPC | None = None,
    sentences: Sequence[str] = SENTENCES,
    cycle: bool = True,
    parallelism: int = 16,
) -> StormTopology:
    """The counts of ``THE`` and the DRPC function ``words``.

    Args:
        drpc: where ``words`` is served (``None``: a new ``LocalDRPC``, which ``squall
            run`` leaves unqueried).
        sentences: the spout's sentences.
        cycle: emit them again and again (as Storm's example does).
        parallelism: the parallelism hints (16 in Storm's example).
    """
    spout = FixedBatchSpout(Fields("word"), 3, *[[sentence] for sentence in sentences])
    spout.set_cycle(cycle)

    topology = TridentTopology()
    word_counts = (
        topology.new_stream("spout1", spout)
        .parallelism_hint(parallelism)
        .flat_map(split)
        .map(to_upper, Fields("uppercased"))
        .filter(TheFilter())
        .peek(lambda tup: print(tup.get_value(0)))
        .group_by(Fields("uppercased"))
        .persistent_aggregate(MemoryMapState.factory(), TridentCount(), Fields("count"))
        .parallelism_hint(parallelism)
    )

    (
        topology.new_drpc_stream("words", drpc if drpc is not None else LocalDRPC())
        .flat_map(split, Fields("word"))
        .group_by(Fields("word"))
        .state_query(word_counts, Fields("word"), MapGet(), Fields("count"))
        .filter(FilterNull())
        .aggregate(Fields("count"), Sum(), Fields("sum"))
    )
    return topology.build()


#: Storm's example allows 20 transactions in flight.
CONF = Config({Config.TOPOLOGY_MAX_SPOUT_PENDING: 20})


def main() -> None:
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit_topology("wordCounter", CONF, build_topology(drpc))
        for _ in range(10):
            print(f"DRPC RESULT: {drpc.execute('words', 'CAT THE DOG JUMPED')}")
            time.sleep(1)
        cluster.kill_topology("wordCounter")


if __name__ == "__main__":
    main()
