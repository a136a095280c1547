"""FastWordCountTopology: storm-starter's
``org.apache.storm.starter.FastWordCountTopology``, line by line.

Four ``FastRandomSentenceSpout`` tasks emit random sentences as fast as they can, each
with the sentence as its message id (a failed one is emitted again); ``split`` (4 tasks)
breaks them into ``[word, 1]`` and ``count`` (4 tasks, fields grouping on ``word``)
keeps a running count per word. As in Storm, the configuration registers a
``LoggingMetricsConsumer``, which logs every task's built-in metrics (``__ack-count``,
``__emit-count``...) once a minute to the logger ``squall.metrics``, and asks for one
worker. While it runs, ``print_metrics`` prints the spout's figures every 30 seconds
(Storm reads them from Nimbus; here from ``get_topology_info``).

Run it::

    squall run examples/storm_starter/fast_word_count_topology.py --seconds 5
    python examples/storm_starter/fast_word_count_topology.py --seconds 10

(without ``--seconds`` it runs five minutes, as Storm's does; a first argument names
the topology)

``build_topology(max_sentences=..., seed=...)`` stops each spout task after
``max_sentences`` sentences, chosen with ``random.Random(seed + task index)`` (used by
the tests).
"""

from __future__ import annotations

import argparse
import logging
import random
import time
from typing import Any

from squall import (
    BasicBolt,
    BasicOutputCollector,
    Config,
    Fields,
    LocalCluster,
    LoggingMetricsConsumer,
    OutputFieldsDeclarer,
    Spout,
    SpoutOutputCollector,
    StormTopology,
    TopologyBuilder,
    TopologyContext,
    Tuple,
)

CHOICES = [
    "marry had a little lamb whos fleese was white as snow",
    "and every where that marry went the lamb was sure to go",
    "one two three four five six seven eight nine ten",
    "this is a test of the emergency broadcast system this is only a test",
    "peter piper picked a peck of pickeled peppers",
]


class FastRandomSentenceSpout(Spout):
    """Emits a random sentence per ``next_tuple``, the sentence as its message id;
    emits a failed sentence again.

    Args:
        max_sentences: new sentences per task (``None``: no end).
        seed: task ``i`` chooses with ``random.Random(seed + i)`` (``None``: unseeded).
    """

    def __init__(self, max_sentences: int | None = None, seed: int | None = None) -> None:
        self.max_sentences = max_sentences
        self.seed = seed

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self.collector = collector
        seed = None if self.seed is None else self.seed + context.get_this_task_index()
        self.rand = random.Random(seed)
        self.emitted = 0

    def next_tuple(self) -> None:
        if self.max_sentences is not None and self.emitted >= self.max_sentences:
            return
        self.emitted += 1
        sentence = CHOICES[self.rand.randrange(len(CHOICES))]
        self.collector.emit([sentence], msg_id=sentence)

    def ack(self, msg_id: Any) -> None:
        """As in Storm: a completed sentence needs nothing more."""

    def fail(self, msg_id: Any) -> None:
        self.collector.emit([msg_id], msg_id=msg_id)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields("sentence"))


class SplitSentence(BasicBolt):
    """Emits ``[word, 1]`` for each word of the sentence."""

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        sentence = tup.get_string(0)
        for word in sentence.split():
            collector.emit([word, 1])

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields("word", "count"))


class WordCount(BasicBolt):
    """Emits ``[word, count]``: the word's running count in this task."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        word = tup.get_string(0)
        count = self.counts.get(word, 0) + 1
        self.counts[word] = count
        collector.emit([word, count])

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields("word", "count"))


#: What ``squall run`` shows under its final metrics (as ``--show`` would):
#: the latest count of each of the last words ``count`` counted.
show = ["count@word"]


def build_topology(max_sentences: int | None = None, seed: int | None = None) -> StormTopology:
    """spout (4) -> split (4, shuffle) -> count (4, fields ``word``)."""
    builder = TopologyBuilder()
    builder.set_spout("spout", FastRandomSentenceSpout(max_sentences, seed), 4)
    builder.set_bolt("split", SplitSentence(), 4).shuffle_grouping("spout")
    builder.set_bolt("count", WordCount(), 4).fields_grouping("split", Fields("word"))
    return builder.create_topology()


conf = Config()
conf.register_metrics_consumer(LoggingMetricsConsumer)
conf.set_num_workers(1)


def print_metrics(cluster: Any, name: str) -> str:
    """Print (and return) the spout's figures: uptime, acked, mean complete latency,
    acked per second and failed."""
    info = cluster.get_topology_info(name)
    spout = info.components["spout"]
    uptime = info.uptime_secs
    line = (
        f"uptime: {int(uptime)} acked: {spout.acked} avgLatency: {spout.complete_latency_ms} "
        f"acked/sec: {spout.acked / uptime if uptime else 0.0} failed: {spout.failed}"
    )
    print(line)
    return line


def main() -> None:
    """Run the topology on a LocalCluster, printing its figures every 30 seconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("topology_name", nargs="?", default="wc-test")
    parser.add_argument("--seconds", type=float, default=300.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    with LocalCluster() as cluster:
        cluster.submit_topology(args.topology_name, conf, build_topology())
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            time.sleep(min(30.0, max(0.0, deadline - time.monotonic())))
            print_metrics(cluster, args.topology_name)
        cluster.kill_topology(args.topology_name)


if __name__ == "__main__":
    main()
