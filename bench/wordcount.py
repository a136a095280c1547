"""Word count throughput of the local engine, with and without acking, against a bare loop.

The topology: sentence spout -> split (2 tasks, shuffle) -> count (2 tasks, fields
grouping on the word), one worker. A *tuple execution* is one bolt ``execute`` call (a
sentence split or a word counted). The baseline does the same split-and-count in a plain
single-threaded Python loop.

    python bench/wordcount.py --json                 # 5 runs per mode, medians
    python bench/wordcount.py --memory --sentences 1000000 --json   # 10M+ executions,
                                                     # RSS sampled along the run

Each run is a fresh subprocess, so peak memory (max RSS) is per mode.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from squall import BasicBolt, Config, Fields, LocalCluster, Spout, TopologyBuilder

VOCABULARY = (
    "the cow jumped over moon an apple a day keeps doctor away four score and seven years "
    "ago snow white dwarfs i am at two with nature stream tuple storm spark bolt"
).split()
SENTENCE_POOL = 1024
WORDS_PER_SENTENCE = 10


def make_sentences(seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(VOCABULARY) for _ in range(WORDS_PER_SENTENCE))
        for _ in range(SENTENCE_POOL)
    ]


class SentenceSpout(Spout):
    outputs = ["sentence"]

    def __init__(self, total: int) -> None:
        self.total = total

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.sentences = make_sentences()
        self.emitted = 0

    def next_tuple(self) -> None:
        emitted = self.emitted
        if emitted < self.total:
            self.emitted = emitted + 1
            self.collector.emit([self.sentences[emitted & (SENTENCE_POOL - 1)]], emitted)


class SplitSentence(BasicBolt):
    outputs = ["word"]

    def execute(self, tup: Any, collector: Any) -> None:
        emit = collector.emit
        for word in tup.values[0].split():
            emit([word])


class WordCount(BasicBolt):
    outputs = ["word", "count"]

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, tup: Any, collector: Any) -> None:
        word = tup.values[0]
        self.counts[word] = self.counts.get(word, 0) + 1


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def run_topology(sentences: int, ackers: int, sample_memory: bool) -> dict[str, Any]:
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(sentences), 1)
    builder.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", WordCount(), 2).fields_grouping("split", Fields("word"))
    conf = Config().set_num_workers(1).set_num_ackers(ackers)
    expected_words = sentences * WORDS_PER_SENTENCE
    samples = []
    with LocalCluster() as cluster:
        started = time.perf_counter()
        cluster.submit_topology("wordcount", conf, builder.create_topology())
        running = cluster.get_running("wordcount")
        count_runners = [running.runners[t] for t in running.plan.component_tasks["count"]]
        spout_runner = running.runners[running.plan.component_tasks["sentences"][0]]
        next_sample = started
        while True:
            done = sum(r.stats.executed for r in count_runners)
            acked = spout_runner.stats.acked
            if done >= expected_words and (ackers == 0 or acked >= sentences):
                break
            now = time.perf_counter()
            if sample_memory and now >= next_sample:
                samples.append({"executions": done, "rss_mb": round(rss_mb(), 1)})
                next_sample = now + 1.0
            time.sleep(0.005)
        elapsed = time.perf_counter() - started
        info = cluster.get_topology_info("wordcount")
    executions = info.components["split"].executed + info.components["count"].executed
    result = {
        "executions": executions,
        "seconds": elapsed,
        "per_sec": executions / elapsed,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "acked": info.components["sentences"].acked,
        "failed": info.components["sentences"].failed,
    }
    if sample_memory:
        result["rss_samples"] = samples
    return result


def run_baseline(sentences: int) -> dict[str, Any]:
    pool = make_sentences()
    counts: dict[str, int] = {}
    started = time.perf_counter()
    executions = 0
    for index in range(sentences):
        executions += 1
        for word in pool[index & (SENTENCE_POOL - 1)].split():
            counts[word] = counts.get(word, 0) + 1
            executions += 1
    elapsed = time.perf_counter() - started
    return {
        "executions": executions,
        "seconds": elapsed,
        "per_sec": executions / elapsed,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def one_run(mode: str, sentences: int, sample_memory: bool) -> dict[str, Any]:
    if mode == "baseline":
        return run_baseline(sentences)
    return run_topology(sentences, 1 if mode == "ack" else 0, sample_memory)


def in_subprocess(mode: str, sentences: int, sample_memory: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", mode, "--sentences", str(sentences)]
    if sample_memory:
        command.append("--memory")
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(output.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--memory", action="store_true", help="sample RSS along the run")
    parser.add_argument("--modes", default="ack,noack,baseline")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_run(args.child, args.sentences, args.memory)))
        return
    report: dict[str, Any] = {"sentences": args.sentences, "runs": args.runs}
    for mode in args.modes.split(","):
        runs = [in_subprocess(mode, args.sentences, args.memory) for _ in range(args.runs)]
        report[mode] = round(statistics.median(r["per_sec"] for r in runs))
        report[f"{mode}_runs"] = [round(r["per_sec"]) for r in runs]
        report[f"{mode}_peak_rss_mb"] = round(max(r["peak_rss_mb"] for r in runs), 1)
        if args.memory and mode != "baseline":
            report[f"{mode}_rss_samples"] = runs[-1].get("rss_samples", [])
    if "ack" in report and "noack" in report:
        report["ack_cost"] = round(report["noack"] / report["ack"], 2)
    if "baseline" in report and "noack" in report:
        report["noack_vs_baseline"] = round(report["noack"] / report["baseline"], 3)
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>24}: {value}")


if __name__ == "__main__":
    main()
