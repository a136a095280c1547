"""Word count on SparkCluster against the local engine: the core-topology path of Spark.

The topology of ``bench/wordcount.py`` (sentence spout -> split, 2 tasks, shuffle ->
count, 2 tasks, fields grouping; acking on) runs on ``SparkCluster(local[2])`` with
``topology.spark.batch.max.tuples`` set to each batch size: a micro-batch holds that
many sentences. Throughput is tuple executions (split + count ``execute`` calls, as in
``wordcount.py``) per second of wall time from the end of the first (warm-up) batch to
the end of the last, so it includes the spout's polling and Spark's scheduling; the
batch latency is the median micro-batch duration. The local engine's figure is
``wordcount.py``'s ``ack`` mode (median of its runs), measured in the same invocation.

    python bench/spark_core.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from wordcount import SentenceSpout, SplitSentence, WordCount

from squall import Config, Fields, TopologyBuilder
from squall.spark import SparkCluster
from squall.spark.runtime.session import get_session

#: Micro-batches measured per batch size (after the warm-up batch).
BATCHES = {1_000: 20, 10_000: 10, 100_000: 4}


def word_count(sentences: int) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(sentences), 1)
    builder.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", WordCount(), 2).fields_grouping("split", Fields("word"))
    return builder.create_topology()


def executions(info: Any) -> int:
    return int(info.components["split"].executed + info.components["count"].executed)


def run_spark(cluster: SparkCluster, name: str, batch_size: int, batches: int) -> dict[str, Any]:
    """One run: ``batches + 1`` micro-batches of ``batch_size`` sentences."""
    sentences = batch_size * (batches + 1)
    conf = Config().set_num_workers(1).set_num_ackers(1)
    conf["topology.spark.batch.max.tuples"] = batch_size
    conf["topology.spark.batch.interval.millis"] = 10
    cluster.submit_topology(name, conf, word_count(sentences))
    started: tuple[float, int] | None = None
    while True:
        info = cluster.get_topology_info(name)
        if info.status == "FAILED":
            raise RuntimeError(f"{name} failed: {info.extra.get('errors')}")
        if started is None and info.extra["batches"] >= 1:
            started = (time.perf_counter(), executions(info))
        if info.components["sentences"].acked >= sentences:
            break
        time.sleep(0.005)
    ended = time.perf_counter()
    assert started is not None
    done = executions(info) - started[1]
    cluster.kill_topology(name)
    return {
        "per_sec": done / (ended - started[0]),
        "median_batch_ms": info.extra["median_batch_ms"],
        "batches": info.extra["batches"],
        "failed": info.components["sentences"].failed,
    }


def local_engine(runs: int, sentences: int) -> dict[str, Any]:
    """``wordcount.py``'s acking figure (its own subprocesses, median of ``runs``)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wordcount.py")
    command = [sys.executable, script, "--modes", "ack", "--runs", str(runs)]
    command += ["--sentences", str(sentences), "--json"]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(output.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per batch size (median)")
    parser.add_argument("--sizes", default=",".join(str(size) for size in BATCHES))
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    local = local_engine(args.runs, 200_000)["ack"]
    spark = get_session("local[2]", {"spark.sql.shuffle.partitions": "2"})
    cluster = SparkCluster(spark=spark, checkpoint_dir=tempfile.mkdtemp(prefix="bench-core-"))
    report: dict[str, Any] = {"local_engine_per_sec": local, "runs": args.runs}
    try:
        run_spark(cluster, "warm-up", 1_000, 2)  # Python workers started, code loaded
        for size in sizes:
            results = [
                run_spark(cluster, f"wc-{size}-{run}", size, BATCHES.get(size, 5))
                for run in range(args.runs)
            ]
            per_sec = statistics.median(r["per_sec"] for r in results)
            report[str(size)] = {
                "per_sec": round(per_sec),
                "runs": [round(r["per_sec"]) for r in results],
                "median_batch_ms": round(statistics.median(r["median_batch_ms"] for r in results)),
                "vs_local_engine": round(per_sec / local, 2),
                "failed": sum(r["failed"] for r in results),
            }
    finally:
        cluster.shutdown()
        spark.stop()
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>22}: {value}")


if __name__ == "__main__":
    main()
