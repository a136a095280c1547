"""Components of the Spark core-topology tests, shared with the child process of the
crash test (``python -m tests.spark_core CHECKPOINT OUT FLAG REACHED``).

Bolts here write what they see to plain files named in their constructor (one line per
tuple, appended in one ``write``), so a topology restarted from its snapshots after a
crash writes to the same files as before it.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from typing import Any

from squall import BasicBolt, Config, Fields, Spout, TopologyBuilder
from squall.model.topology import StormTopology

WORDS = ["apple", "pear", "fig", "plum", "kiwi", "lime"]


def word_list(count: int) -> list[str]:
    """``count`` words, each of ``WORDS`` in turn."""
    return [WORDS[(i * 5) % len(WORDS)] for i in range(count)]


def true_counts(words: list[str]) -> dict[str, int]:
    return dict(Counter(words))


def append_line(path: str, line: str) -> None:
    """Append ``line`` to ``path`` in one write (atomic for short lines)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, (line + "\n").encode())
    finally:
        os.close(descriptor)


def read_lines(path: str) -> list[str]:
    try:
        with open(path) as handle:
            return handle.read().splitlines()
    except FileNotFoundError:
        return []


class WordSpout(Spout):
    """Emits ``words`` in order, one per ``next_tuple``, each with its index as msg id;
    records acks and fails in ``<out>/acked`` and ``<out>/failed``."""

    outputs = ["word"]

    def __init__(self, words: list[str], out: str) -> None:
        self.words = words
        self.out = out

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.position = 0

    def next_tuple(self) -> None:
        if self.position < len(self.words):
            self.collector.emit([self.words[self.position]], self.position)
            self.position += 1

    def ack(self, msg_id: Any) -> None:
        append_line(os.path.join(self.out, "acked"), str(msg_id))

    def fail(self, msg_id: Any) -> None:
        append_line(os.path.join(self.out, "failed"), str(msg_id))


class RunningCount(BasicBolt):
    """Counts words (bolt state) and emits ``[word, count so far]``. While ``flag``
    exists, the task that reaches its ``stall_at``-th tuple of this process creates
    ``reached`` and stalls (for the test to kill the topology mid-batch); after its
    ``stall_at``-th tuple it dies as ``kill_flag`` says (see :func:`kill_if_flagged`)."""

    outputs = ["word", "count"]

    def __init__(
        self, flag: str = "", reached: str = "", stall_at: int = 0, kill_flag: str = ""
    ) -> None:
        self.flag = flag
        self.reached = reached
        self.stall_at = stall_at
        self.kill_flag = kill_flag

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: dict[str, int] = {}
        self.seen_in_process = 0

    def execute(self, tup: Any, collector: Any) -> None:
        word = tup[0]
        self.counts[word] = self.counts.get(word, 0) + 1
        self.seen_in_process += 1
        collector.emit([word, self.counts[word]])
        if self.seen_in_process < self.stall_at:
            return
        kill_if_flagged(self.kill_flag)
        if self.flag and os.path.exists(self.flag):
            append_line(self.reached, str(os.getpid()))
            time.sleep(120)


def kill_if_flagged(flag: str) -> None:
    """If ``flag`` holds a number above 0, decrement it and kill this process (SIGKILL):
    a Spark Python worker dying in the middle of a task."""
    if not flag or not os.path.exists(flag):
        return
    with open(flag) as handle:
        left = int(handle.read() or 0)
    if left > 0:
        with open(flag, "w") as handle:
            handle.write(str(left - 1))
        os.kill(os.getpid(), signal.SIGKILL)


class LineSink(BasicBolt):
    """Writes ``word count`` lines to ``path``; dies first as ``kill_flag`` says (see
    :func:`kill_if_flagged`)."""

    def __init__(self, path: str, kill_flag: str = "") -> None:
        self.path = path
        self.kill_flag = kill_flag

    def execute(self, tup: Any, collector: Any) -> None:
        kill_if_flagged(self.kill_flag)
        append_line(self.path, f"{tup[0]} {tup[1]}")


def counting_topology(
    words: list[str],
    out: str,
    flag: str = "",
    reached: str = "",
    count_kill: str = "",
    sink_kill: str = "",
) -> StormTopology:
    """words -> RunningCount (2 tasks, by word) -> LineSink (global)."""
    builder = TopologyBuilder()
    builder.set_spout("words", WordSpout(words, out))
    counter = RunningCount(flag, reached, stall_at=7, kill_flag=count_kill)
    builder.set_bolt("count", counter, 2).fields_grouping("words", Fields("word"))
    sink = LineSink(os.path.join(out, "counts"), sink_kill)
    builder.set_bolt("sink", sink).global_grouping("count")
    return builder.create_topology()


#: Small batches, so a run has several.
CONF = {
    "topology.spark.batch.max.tuples": 5,
    "topology.spark.batch.interval.millis": 50,
    Config.TOPOLOGY_ACKER_EXECUTORS: 1,
}
CRASH_WORDS = word_list(40)


def main(checkpoint: str, out: str, flag: str, reached: str) -> None:
    """The child process of the crash test: runs the counting topology until killed."""
    from squall.spark import SparkCluster

    cluster = SparkCluster(
        master="local[2]",
        checkpoint_dir=checkpoint,
        spark_conf={"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"},
    )
    cluster.submit_topology("crash", CONF, counting_topology(CRASH_WORDS, out, flag, reached))
    time.sleep(600)


if __name__ == "__main__":
    main(*sys.argv[1:5])


__all__ = ["Fields"]
