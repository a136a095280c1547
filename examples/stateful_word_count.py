"""Stateful word count: counts that survive a restart, exactly.

``lines`` reads the text files of an input directory (a ``FileSpout``: each line once,
its progress kept in the directory), ``split`` breaks lines into words and ``count`` is a
``StatefulBolt`` keeping the count of each word in its ``KeyValueState``. The state lives
in SQLite files under a state directory and is checkpointed every half second; each
line's tuples are acked only once the counts they changed are committed.

Stop the topology at any moment (even ``kill -9``) and run it again: each ``count`` task
starts from its last committed counts, the spout replays the lines whose trees were not
complete, and the lines whose counts were already committed are skipped, so every count
ends exact. Add files to the input directory and run again: the counts go on.

Configuration, from the environment: ``WORDS_INPUT_DIR`` (default ``words-input``; filled
with three sample files when missing) and ``WORDS_STATE_DIR`` (default ``words-state``).
Run it, then print the committed counts::

    squall run examples/stateful_word_count.py --until-idle --seconds 60
    python examples/stateful_word_count.py
"""

from __future__ import annotations

import os
import sys
from typing import Any

from squall import (
    BasicBolt,
    BasicOutputCollector,
    Config,
    KeyValueState,
    OutputCollector,
    StatefulBolt,
    StormTopology,
    TopologyBuilder,
    TopologyContext,
    Tuple,
)
from squall.connectors.files import FileSpout

NAME = "stateful_word_count"
DEFAULT_INPUT_DIR = "words-input"
DEFAULT_STATE_DIR = "words-state"
#: Count tasks (each keeps the words that the fields grouping sends it).
COUNTERS = 2
SAMPLES = {
    "sample-1.txt": ["the cow jumped over the moon", "the man went to the store"],
    "sample-2.txt": ["four score and seven years ago", "the cow ate the apple"],
    "sample-3.txt": ["an apple a day keeps the doctor away"],
}


def input_dir() -> str:
    return os.path.abspath(os.environ.get("WORDS_INPUT_DIR", DEFAULT_INPUT_DIR))


def state_dir() -> str:
    return os.path.abspath(os.environ.get("WORDS_STATE_DIR", DEFAULT_STATE_DIR))


def state_conf() -> dict[str, Any]:
    """Durable SQLite state, a checkpoint every half second."""
    return {
        Config.TOPOLOGY_STATE_PROVIDER: "sqlite",
        Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"directory": state_dir(), "namespace": NAME},
        Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 500,
    }


CONF = state_conf()


class SplitLine(BasicBolt):
    """A line -> one tuple per word (anchored to the line, acked as execute returns)."""

    outputs = ["word"]

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        for word in tup["line"].split():
            collector.emit([word.lower()])


class CountWords(StatefulBolt):
    """Counts each word in the task's state; emits ``[word, count]``."""

    outputs = ["word", "count"]

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector

    def init_state(self, state: KeyValueState) -> None:
        self.counts = state  # the counts as last committed (empty the first time)

    def execute(self, tup: Tuple) -> None:
        word = tup["word"]
        count = self.counts.get(word, 0) + 1
        self.counts.put(word, count)
        self.collector.emit([word, count], tup)
        self.collector.ack(tup)


def write_samples(directory: str) -> None:
    """Fill ``directory`` with the sample files if it does not exist."""
    if os.path.isdir(directory):
        return
    os.makedirs(directory)
    for name, lines in SAMPLES.items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
            handle.writelines(f"{line}\n" for line in lines)


#: What ``squall run`` shows under its final metrics (as ``--show`` would):
#: the latest count of each of the last words ``count`` counted.
show = ["count@word"]


def build_topology() -> StormTopology:
    """lines -> split -> count (fields grouping on the word)."""
    directory = input_dir()
    write_samples(directory)
    builder = TopologyBuilder()
    builder.set_spout("lines", FileSpout(directory, "*.txt"))
    builder.set_bolt("split", SplitLine(), 2).shuffle_grouping("lines")
    builder.set_bolt("count", CountWords(), COUNTERS).fields_grouping("split", ["word"])
    return builder.create_topology()


def committed_counts() -> dict[str, int]:
    """The counts every ``count`` task has committed, read from the state directory."""
    from squall.state.codec import decode
    from squall.state.executors import state_namespace
    from squall.state.providers import provider_for

    provider = provider_for(CONF, NAME)
    counts: dict[str, int] = {}
    for task_index in range(COUNTERS):
        store = provider.make_store(state_namespace("count", task_index))
        try:
            counts.update((decode(key), decode(value)) for key, value in store.items())
        finally:
            store.close()
    return counts


def main() -> None:
    counts = committed_counts()
    if not counts:
        print(f"no committed counts in {state_dir()}", file=sys.stderr)
        return
    for word, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        print(f"{count:6d}  {word}")


if __name__ == "__main__":
    main()
