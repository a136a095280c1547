"""Storm's ``TridentWordCount`` (storm-starter), ported line by line.

A cycling ``FixedBatchSpout`` emits five sentences in batches of three. The stream
(``parallelism_hint(16)`` on the spout's stream: a ``FixedBatchSpout`` runs in one task,
as in Storm) is split into words, grouped by word and counted into a ``MemoryMapState``
held by 16 tasks. The DRPC function ``words`` splits its argument into words, looks each
up in the counts, drops unknown words and returns ``[word, count]`` for the others:
``drpc.execute("words", "cat the dog jumped")``.

Run it::

    python examples/storm_starter/trident_word_count.py
    squall run examples/storm_starter/trident_word_count.py --seconds 5

The counts live in the state, which the DRPC function reads: ``python`` queries it and
prints the answers, as Storm's ``main`` does. ``squall run`` runs the topology with a
``LocalDRPC`` nobody queries and shows what the state received instead: the persistent
aggregate's new values (its ``new_values_stream()``, which squall emits even where
nothing reads it), from the component its segment runs in. Storm's code names no
operation, so ``show`` gives that component's generated id,
``b2-persistent_aggregate(Count)``, and ``@word`` keeps each word's latest count. The
spout cycles, so the counts keep growing: a word of one sentence only grows by its
occurrences in that sentence each time the sentence is counted again.

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
    FilterNull,
    FixedBatchSpout,
    Function,
    MapGet,
    TridentCollector,
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


class Split(Function):
    """One tuple per word of the sentence."""

    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        sentence = tup.get_value(0)
        for word in sentence.split(" "):
            collector.emit([word])


def build_topology(
    drpc: LocalDRPC | None = None,
    sentences: Sequence[str] = SENTENCES,
    cycle: bool = True,
    parallelism: int = 16,
) -> StormTopology:
    """The word count and its DRPC function ``words``.

    Args:
        drpc: where ``words`` is served (``None``: a new ``LocalDRPC``, which ``squall
            run`` leaves unqueried).
        sentences: the spout's sentences.
        cycle: emit them again and again (as Storm's example does).
        parallelism: the parallelism hints (16 in Storm's example).
    """
    spout = FixedBatchSpout(Fields("sentence"), 3, *[[sentence] for sentence in sentences])
    spout.set_cycle(cycle)

    topology = TridentTopology()
    word_counts = (
        topology.new_stream("spout1", spout)
        .parallelism_hint(parallelism)
        .each(Fields("sentence"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(MemoryMapState.factory(), TridentCount(), Fields("count"))
        .parallelism_hint(parallelism)
    )

    (
        topology.new_drpc_stream("words", drpc if drpc is not None else LocalDRPC())
        .each(Fields("args"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .state_query(word_counts, Fields("word"), MapGet(), Fields("count"))
        .each(Fields("count"), FilterNull())
        .project(Fields("word", "count"))
    )
    return topology.build()


#: What ``squall run`` shows: the latest count of each of the last words the state
#: received (the new values of the persistent aggregate's segment, ``b2-...``).
show = "b2-persistent_aggregate(Count)@word"

#: Storm's example allows 20 transactions in flight.
CONF = Config({Config.TOPOLOGY_MAX_SPOUT_PENDING: 20})


def main() -> None:
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit_topology("wordCounter", CONF, build_topology(drpc))
        for _ in range(10):
            print(f"DRPC RESULT: {drpc.execute('words', 'cat the dog jumped')}")
            time.sleep(1)
        cluster.kill_topology("wordCounter")


if __name__ == "__main__":
    main()
