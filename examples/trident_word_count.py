"""Trident word count with a DRPC query: Storm's first Trident example.

A ``FixedBatchSpout`` emits sentences in batches of three. Each batch is split into
words, grouped by word and folded into a ``MemoryMapState`` with ``persistent_aggregate``
and the ``Count`` aggregator: the state holds, per word, how often it was seen, updated
exactly once per batch (the state is opaque; replayed batches are not counted twice).

A DRPC stream answers queries against that state: ``drpc.execute("words", "cow four")``
splits its argument into words, looks each one up in the counts (``state_query`` with
``MapGet``, one batched lookup per partition), drops unknown words (``FilterNull``) and
sums what is left, so the answer is the JSON text ``[[2]]``: one result tuple with one
field, ``sum``.

Run it::

    python examples/trident_word_count.py

The state's new values (``new_values_stream()``: after each batch, every word of the
batch with its new count) are named ``counts``, and the module's ``show = "counts@word"``
makes ``squall run`` print, under the final metrics, the latest count of each of the
last words counted (the spout emits the sentences once, so these are the final counts)::

    squall run examples/trident_word_count.py --seconds 5

``build_topology(drpc)`` returns the topology (the tests use it with a ``LocalDRPC``);
``squall run`` runs it with a ``LocalDRPC`` nobody queries (the ``python`` command above
prints the answers to four queries).
"""

from __future__ import annotations

import json
import time

from squall import Config, Fields, LocalCluster, StormTopology
from squall.drpc import LocalDRPC
from squall.trident import Count as TridentCount
from squall.trident import (
    FilterNull,
    FixedBatchSpout,
    Function,
    MapGet,
    Sum,
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

#: Storm's default is 500 ms between batches; a short interval keeps the example quick.
CONF = Config({Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 5})


class Split(Function):
    """Emits one tuple per word of the first input field."""

    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        for word in tup[0].split():
            collector.emit([word])


def build_topology(
    drpc: LocalDRPC | None = None, sentences: list[str] | None = None, cycle: bool = False
) -> StormTopology:
    """The word count topology and its ``"words"`` DRPC function.

    Args:
        drpc: where the DRPC function is served (a new ``LocalDRPC`` if None).
        sentences: the spout's sentences (:data:`SENTENCES` by default).
        cycle: emit the sentences again and again instead of once.
    """
    topology = TridentTopology()
    spout = FixedBatchSpout(Fields("sentence"), 3, *[[s] for s in sentences or SENTENCES])
    spout.set_cycle(cycle)
    counts = (
        topology.new_stream("spout1", spout)
        .each(Fields("sentence"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(MemoryMapState.factory(), TridentCount(), Fields("count"))
        .parallelism_hint(4)
    )
    counts.new_values_stream().name("counts")
    (
        topology.new_drpc_stream("words", drpc if drpc is not None else LocalDRPC())
        .each(Fields("args"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .state_query(counts, Fields("word"), MapGet(), Fields("count"))
        .each(Fields("count"), FilterNull())
        .aggregate(Fields("count"), Sum(), Fields("sum"))
    )
    return topology.build()


#: What ``squall run`` shows: the latest new value of each of the last words counted.
show = "counts@word"


def count_words(drpc: LocalDRPC, words: str) -> int:
    """The summed counts of ``words`` (a space-separated string), through DRPC."""
    ((total,),) = json.loads(drpc.execute("words", words))
    return int(total)


def all_counted(drpc: LocalDRPC) -> bool:
    """Whether every sentence is counted: the counts of the distinct words add up to
    the number of words in the sentences. (A query naming a word twice counts it
    twice, so asking for every word of every sentence could add up before all are in.)"""
    words = " ".join(SENTENCES).split()
    return count_words(drpc, " ".join(dict.fromkeys(words))) >= len(words)


def main() -> None:
    with LocalDRPC(timeout_secs=10.0) as drpc, LocalCluster() as cluster:
        cluster.submit_topology("trident-word-count", CONF, build_topology(drpc))
        deadline = time.monotonic() + 10.0
        while not all_counted(drpc):
            if time.monotonic() > deadline:
                raise RuntimeError("the sentences were not counted within 10 s")
            time.sleep(0.01)
        for query in ["cow four", "the", "to be", "unknown words"]:
            print(f"{query!r}: {drpc.execute('words', query)}")
        cluster.kill_topology("trident-word-count")


if __name__ == "__main__":
    main()
