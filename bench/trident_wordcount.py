"""Trident word count throughput with ``persistent_aggregate``, against the core engine.

Sentences (10 words each) in batches of ``--batch-size`` -> ``each`` split ->
``group_by(word)`` -> ``persistent_aggregate(Count)`` into memory or SQLite opaque state,
on LocalCluster. Throughput counts tuples the same way as ``bench/wordcount.py``
(a sentence split plus each word counted), so the two compare directly; the core
word count with acking (the reliable path) runs in the same invocation as baseline.

    python bench/trident_wordcount.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from wordcount import WORDS_PER_SENTENCE, make_sentences

from squall import Config, LocalCluster
from squall.model.fields import Fields
from squall.trident import BatchSpout, Count, Function, TridentTopology
from squall.trident.state import MemoryMapState, SqliteMapState, StateType


class SentenceBatches(BatchSpout):
    """An endless stream of sentences in fixed batches; a replay repeats its batch."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size

    def get_output_fields(self) -> Fields:
        return Fields("sentence")

    def open(self, conf: dict[str, Any], context: Any) -> None:
        self.pool = make_sentences()

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        pool, size = self.pool, len(self.pool)
        start = (batch_id - 1) * self.batch_size
        emit = collector.emit
        for index in range(start, start + self.batch_size):
            emit([pool[index % size]])


class Split(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        emit = collector.emit
        for word in tup.values[0].split():
            emit([word])


def run(state: str, batches: int, batch_size: int, in_flight: int) -> dict[str, Any]:
    directory = tempfile.mkdtemp(prefix="squall-bench-")
    if state == "memory":
        factory: Any = MemoryMapState.factory(StateType.OPAQUE)
    else:
        factory = SqliteMapState.factory(os.path.join(directory, "counts.db"), StateType.OPAQUE)
    topology = TridentTopology()
    (
        topology.new_stream("sentences", SentenceBatches(batch_size))
        .each(Fields("sentence"), Split(), Fields("word"))
        .parallelism_hint(2)
        .group_by(Fields("word"))
        .persistent_aggregate(factory, Count(), Fields("count"))
        .parallelism_hint(2)
    )
    conf = Config().set_max_spout_pending(in_flight)
    conf[Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS] = 0
    with LocalCluster() as cluster:
        started = time.perf_counter()
        cluster.submit_topology("trident-wordcount", conf, topology.build())
        coordinator = "sentences/coordinator"
        while True:
            info = cluster.get_topology_info("trident-wordcount")
            if info.components[coordinator].custom.get("last_committed_txid", 0) >= batches:
                break
            time.sleep(0.01)
        elapsed = time.perf_counter() - started
        committed = int(info.components[coordinator].custom["last_committed_txid"])
    sentences = committed * batch_size
    executions = sentences * (1 + WORDS_PER_SENTENCE)
    return {
        "executions": executions,
        "seconds": elapsed,
        "per_sec": executions / elapsed,
        "sentences_per_sec": sentences / elapsed,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def in_subprocess(args: list[str]) -> dict[str, Any]:
    output = subprocess.run(
        [sys.executable, *args], check=True, capture_output=True, text=True
    ).stdout
    return dict(json.loads(output.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--in-flight", type=int, default=3, help="topology.max.spout.pending")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(args.child, args.batches, args.batch_size, args.in_flight)))
        return
    report: dict[str, Any] = {
        "batches": args.batches,
        "batch_size": args.batch_size,
        "in_flight": args.in_flight,
        "runs": args.runs,
    }
    here = os.path.dirname(os.path.abspath(__file__))
    for state in ("memory", "sqlite"):
        runs = [
            in_subprocess(
                [
                    __file__,
                    "--child",
                    state,
                    "--batches",
                    str(args.batches),
                    "--batch-size",
                    str(args.batch_size),
                    "--in-flight",
                    str(args.in_flight),
                ]
            )
            for _ in range(args.runs)
        ]
        report[state] = round(statistics.median(r["per_sec"] for r in runs))
        report[f"{state}_runs"] = [round(r["per_sec"]) for r in runs]
        report[f"{state}_peak_rss_mb"] = round(max(r["peak_rss_mb"] for r in runs), 1)
    sentences = args.batches * args.batch_size
    baseline = [
        in_subprocess(
            [os.path.join(here, "wordcount.py"), "--child", "ack", "--sentences", str(sentences)]
        )
        for _ in range(args.runs)
    ]
    report["core_ack"] = round(statistics.median(r["per_sec"] for r in baseline))
    report["memory_vs_core"] = round(report["memory"] / report["core_ack"], 3)
    report["sqlite_vs_core"] = round(report["sqlite"] / report["core_ack"], 3)
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>20}: {value}")


if __name__ == "__main__":
    main()
