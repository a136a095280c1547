"""Exclamation: Storm's ExclamationTopology, with explicit anchoring and acking.

``word`` emits words; ``exclaim1`` appends ``"!!!"`` and ``exclaim2`` appends another
``"!!!"``, so ``"nathan"`` comes out as ``"nathan!!!!!!"``. The bolts are plain
:class:`~squall.Bolt` subclasses that do what :class:`~squall.BasicBolt` automates:
each emit is anchored to the input tuple (extending the tuple tree that started at the
spout) and the input is acked afterwards. The spout emits with a message id, so its
``ack`` runs once both exclamations of a word are done.

Run it::

    squall run examples/exclamation.py --seconds 5

``build_topology(max_words=100)`` stops each spout task after 100 words (used by the
tests).
"""

from __future__ import annotations

import random
from typing import Any

from squall import (
    Bolt,
    OutputCollector,
    Spout,
    SpoutOutputCollector,
    StormTopology,
    TopologyBuilder,
    TopologyContext,
    Tuple,
)

WORDS = ["nathan", "mike", "jackson", "golda", "bertels"]


def word_sequence(count: int, seed: int) -> list[str]:
    """The first ``count`` words a spout task seeded with ``seed`` emits."""
    chooser = random.Random(seed)
    return [chooser.choice(WORDS) for _ in range(count)]


class WordSpout(Spout):
    """Storm's TestWordSpout: random words from :data:`WORDS` (task ``i`` seeded ``seed + i``).

    Args:
        max_words: stop after this many words per task (``None``: never stop).
        seed: base seed of the word choice.
    """

    outputs = ["word"]

    def __init__(self, max_words: int | None = None, seed: int = 7) -> None:
        self.max_words = max_words
        self.seed = seed

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self.collector = collector
        self.random = random.Random(self.seed + context.task_index)
        self.emitted = 0

    def next_tuple(self) -> None:
        if self.max_words is not None and self.emitted >= self.max_words:
            return
        self.emitted += 1
        self.collector.emit([self.random.choice(WORDS)], msg_id=self.emitted)


class ExclamationBolt(Bolt):
    """Appends ``"!!!"`` to the word, anchoring the new tuple to the input, then acks."""

    outputs = ["word"]

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector

    def execute(self, tup: Tuple) -> None:
        self.collector.emit([tup.get_string(0) + "!!!"], anchors=tup)
        self.collector.ack(tup)


#: What ``squall run`` shows under its final metrics (as ``--show`` would):
#: the last words ``exclaim2`` emitted, with both exclamations.
show = ["exclaim2"]


def build_topology(max_words: int | None = None, seed: int = 7) -> StormTopology:
    """word (2 tasks) -> exclaim1 (3 tasks, shuffle) -> exclaim2 (2 tasks, shuffle)."""
    builder = TopologyBuilder()
    builder.set_spout("word", WordSpout(max_words, seed), 2).set_max_spout_pending(1000)
    builder.set_bolt("exclaim1", ExclamationBolt(), 3).shuffle_grouping("word")
    builder.set_bolt("exclaim2", ExclamationBolt(), 2).shuffle_grouping("exclaim1")
    return builder.create_topology()
