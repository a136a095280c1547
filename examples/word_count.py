"""Word count: Storm's classic first topology.

A reliable spout emits random sentences (chosen with a seeded random generator, so a run
is reproducible), ``split`` breaks each sentence into words and ``count`` keeps a running
count per word. The fields grouping on ``"word"`` sends every occurrence of a word to the
same ``count`` task, so each task's counts are exact for the words it owns.

The spout is reliable: every sentence is emitted with a message id and kept in ``pending``
until its whole tuple tree (the sentence, its words and their counts) is acked. A failed
or timed-out sentence is emitted again. At most 1000 sentences are pending at a time
(``set_max_spout_pending``), which bounds both ``pending`` and the queues.

Run it::

    squall run examples/word_count.py --seconds 5

``build_topology(max_sentences=1000)`` stops after 1000 sentences (used by the tests).
"""

from __future__ import annotations

import random
from typing import Any

from squall import (
    BasicBolt,
    BasicOutputCollector,
    Fields,
    Spout,
    SpoutOutputCollector,
    StormTopology,
    TopologyBuilder,
    TopologyContext,
    Tuple,
)

SENTENCES = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
]


def sentence_sequence(count: int, seed: int = 42) -> list[str]:
    """The first ``count`` sentences a spout task seeded with ``seed`` emits."""
    chooser = random.Random(seed)
    return [chooser.choice(SENTENCES) for _ in range(count)]


class RandomSentenceSpout(Spout):
    """Emits random sentences, each with a message id; re-emits failed ones.

    Args:
        max_sentences: stop after this many new sentences (``None``: never stop).
        seed: seed of the sentence choice; task ``i`` uses ``seed + i``.
    """

    outputs = ["sentence"]

    def __init__(self, max_sentences: int | None = None, seed: int = 42) -> None:
        self.max_sentences = max_sentences
        self.seed = seed

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self.collector = collector
        self.random = random.Random(self.seed + context.task_index)
        self.emitted = 0
        self.pending: dict[int, str] = {}
        self.to_replay: list[int] = []

    def next_tuple(self) -> None:
        if self.to_replay:
            msg_id = self.to_replay.pop()
            self.collector.emit([self.pending[msg_id]], msg_id=msg_id)
            return
        if self.max_sentences is not None and self.emitted >= self.max_sentences:
            return
        sentence = self.random.choice(SENTENCES)
        msg_id = self.emitted
        self.emitted += 1
        self.pending[msg_id] = sentence
        self.collector.emit([sentence], msg_id=msg_id)

    def ack(self, msg_id: Any) -> None:
        del self.pending[msg_id]

    def fail(self, msg_id: Any) -> None:
        self.to_replay.append(msg_id)


class SplitSentence(BasicBolt):
    """Emits one tuple per word of the sentence (anchored to it by the basic collector)."""

    outputs = ["word"]

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        for word in tup["sentence"].split():
            collector.emit([word])


class WordCount(BasicBolt):
    """Counts the words it receives and emits each word's running count."""

    outputs = ["word", "count"]

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        word = tup["word"]
        count = self.counts.get(word, 0) + 1
        self.counts[word] = count
        collector.emit([word, count])


#: What ``squall run`` shows under its final metrics (as ``--show`` would):
#: the latest count of each of the last words ``count`` counted.
show = ["count@word"]


def build_topology(max_sentences: int | None = None, seed: int = 42) -> StormTopology:
    """The word count topology: sentences -> split (shuffle) -> count (fields on word)."""
    builder = TopologyBuilder()
    spout = RandomSentenceSpout(max_sentences, seed)
    builder.set_spout("sentences", spout, 1).set_max_spout_pending(1000)
    builder.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    (
        builder.set_bolt("count", WordCount(), 2)
        .set_num_tasks(4)
        .fields_grouping("split", Fields("word"))
    )
    return builder.create_topology()
