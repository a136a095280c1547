"""A stateful word count against the same topology with a plain bolt, on the local
engine.

The topology of ``wordcount.py``: sentence spout -> split (2 tasks, shuffle) -> count
(2 tasks, fields grouping on the word), one worker, XOR acking on, 300,000 sentences of
10 words (3.3 million tuple executions per run). Modes:

* ``plain``: the count is a plain bolt counting in a dict (acking each word).
* ``memory``: the count is a ``StatefulBolt`` counting in its ``KeyValueState``, memory
  provider, a checkpoint every second (``topology.state.checkpoint.interval.ms`` 1000):
  every bolt is wrapped by the checkpoint mechanism and every word's ack waits for the
  commit of its state.
* ``sqlite``: the same with the SQLite provider (a file in a temporary directory).

A run ends when every word is counted and every sentence acked; ``<mode>`` is the
rate until then (a stateful run ends with the checkpoint after its last word, up to
one interval later), ``<mode>_executed`` the rate until the last word is counted. Each
run is a fresh subprocess; figures are tuple executions per second, medians of
``--runs`` runs, with the ratios to ``plain`` (target: ``memory`` >= 0.7x).

    python bench/stateful.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from wordcount import WORDS_PER_SENTENCE, SentenceSpout, SplitSentence

from squall import Bolt, Config, Fields, LocalCluster, StatefulBolt, TopologyBuilder
from squall.state import KeyValueState

MODES = ("plain", "memory", "sqlite")


class PlainCount(Bolt):
    """Counts words in a dict and acks each."""

    outputs = ["word", "count"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.counts: dict[str, int] = {}

    def execute(self, tup: Any) -> None:
        word = tup.values[0]
        self.counts[word] = self.counts.get(word, 0) + 1
        self.collector.ack(tup)


class StatefulCount(StatefulBolt):
    """Counts words in its state and acks each (the ack waits for the commit)."""

    outputs = ["word", "count"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def init_state(self, state: KeyValueState) -> None:
        self.counts = state

    def execute(self, tup: Any) -> None:
        word = tup.values[0]
        counts = self.counts
        counts.put(word, counts.get(word, 0) + 1)
        self.collector.ack(tup)


def run(mode: str, sentences: int) -> dict[str, Any]:
    """One run of ``mode``; tuple executions per second."""
    directory = tempfile.mkdtemp(prefix="squall-bench-state-")
    try:
        builder = TopologyBuilder()
        builder.set_spout("sentences", SentenceSpout(sentences), 1)
        builder.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
        count = PlainCount() if mode == "plain" else StatefulCount()
        builder.set_bolt("count", count, 2).fields_grouping("split", Fields("word"))
        conf = Config().set_num_workers(1).set_num_ackers(1)
        conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 1000
        if mode == "sqlite":
            conf[Config.TOPOLOGY_STATE_PROVIDER] = "sqlite"
            conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = {"directory": directory}
        words = sentences * WORDS_PER_SENTENCE
        with LocalCluster() as cluster:
            started = time.perf_counter()
            cluster.submit_topology("stateful", conf, builder.create_topology())
            running = cluster.get_running("stateful")
            counters = [running.runners[t] for t in running.plan.component_tasks["count"]]
            spout = running.runners[running.plan.component_tasks["sentences"][0]]
            while sum(r.stats.executed for r in counters) < words:
                time.sleep(0.005)
            executed = time.perf_counter() - started
            while spout.stats.acked < sentences:
                time.sleep(0.005)
            elapsed = time.perf_counter() - started
            cluster.kill_topology("stateful")
        return {
            "per_sec": (sentences + words) / elapsed,
            "executed_per_sec": (sentences + words) / executed,
            "seconds": elapsed,
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def in_subprocess(mode: str, sentences: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", mode, "--sentences", str(sentences)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(output.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        print(json.dumps(run(arguments.child, arguments.sentences)))
        return
    modes = arguments.modes.split(",")
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for _ in range(arguments.runs):  # alternating, so the machine's drift hits every mode
        for mode in modes:
            runs[mode].append(in_subprocess(mode, arguments.sentences))
    report: dict[str, Any] = {"sentences": arguments.sentences, "runs": arguments.runs}
    for mode in modes:
        report[mode] = round(statistics.median(run["per_sec"] for run in runs[mode]))
        report[f"{mode}_executed"] = round(
            statistics.median(run["executed_per_sec"] for run in runs[mode])
        )
        report[f"{mode}_runs"] = [round(run["per_sec"]) for run in runs[mode]]
    if "plain" in report:
        for mode in modes:
            if mode != "plain":
                report[f"{mode}_vs_plain"] = round(report[mode] / report["plain"], 3)
                report[f"{mode}_executed_vs_plain"] = round(
                    report[f"{mode}_executed"] / report["plain_executed"], 3
                )
    if arguments.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>18}: {value}")


if __name__ == "__main__":
    main()
