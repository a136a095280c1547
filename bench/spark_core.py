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

On a cluster, ``--master`` names it and ``--against`` the master to compare with, run
by the same invocation in a process of its own (a process has one Spark session); each
batch size then reports ``vs_against``, the ratio of the two throughputs::

    python bench/spark_core.py --master spark://127.0.0.1:7077 --against "local[2]" \
        --checkpoint /shared/bench --json
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
from squall.runtime.engine_figures import SparkFigures
from squall.runtime.metrics import TopologyInfo
from squall.spark import SparkCluster
from squall.spark.launch.session import get_session

#: Micro-batches measured per batch size (after the warm-up batch).
BATCHES = {1_000: 20, 10_000: 10, 100_000: 4}


def word_count(sentences: int) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(sentences), 1)
    builder.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", WordCount(), 2).fields_grouping("split", Fields("word"))
    return builder.create_topology()


def executions(info: TopologyInfo) -> int:
    return int(info.components["split"].executed + info.components["count"].executed)


def spark_figures(info: TopologyInfo) -> SparkFigures:
    """The Spark engine's own figures of a topology (its micro-batches)."""
    assert info.spark is not None, "not a topology of SparkCluster"
    return info.spark


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
            raise RuntimeError(f"{name} failed: {spark_figures(info).first.errors}")
        if started is None and spark_figures(info).first.batches >= 1:
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
        "median_batch_ms": spark_figures(info).first.median_batch_ms,
        "batches": spark_figures(info).first.batches,
        "failed": info.components["sentences"].failed,
    }


def local_engine(runs: int, sentences: int) -> dict[str, Any]:
    """``wordcount.py``'s acking figure (its own subprocesses, median of ``runs``)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wordcount.py")
    command = [sys.executable, script, "--modes", "ack", "--runs", str(runs)]
    command += ["--sentences", str(sentences), "--json"]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(output.strip().splitlines()[-1]))


def measure(
    master: str, checkpoint: str | None, sizes: list[int], runs: int, conf: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """Each batch size's figures on ``master`` (median of ``runs``); ``conf``: more
    Spark settings."""
    spark = get_session(master, {"spark.sql.shuffle.partitions": "2", **conf})
    # A fresh directory per invocation: topologies of an earlier one would resume.
    location = tempfile.mkdtemp(prefix="bench-core-", dir=checkpoint)
    cluster = SparkCluster(spark=spark, checkpoint_dir=location)
    report: dict[str, dict[str, Any]] = {}
    try:
        run_spark(cluster, "warm-up", 1_000, 2)  # Python workers started, code loaded
        for size in sizes:
            results = [
                run_spark(cluster, f"wc-{size}-{run}", size, BATCHES.get(size, 5))
                for run in range(runs)
            ]
            report[str(size)] = {
                "per_sec": round(statistics.median(r["per_sec"] for r in results)),
                "runs": [round(r["per_sec"]) for r in results],
                "median_batch_ms": round(statistics.median(r["median_batch_ms"] for r in results)),
                "failed": sum(r["failed"] for r in results),
            }
    finally:
        cluster.shutdown()
        spark.stop()
    return report


def measure_elsewhere(master: str, checkpoint: str | None, sizes: str, runs: int) -> Any:
    """:func:`measure` on ``master``, in a process of its own."""
    command = [sys.executable, os.path.abspath(__file__), "--master", master, "--sizes", sizes]
    command += ["--runs", str(runs), "--json", "--no-local-engine"]
    if checkpoint:
        command += ["--checkpoint", checkpoint]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per batch size (median)")
    parser.add_argument("--sizes", default=",".join(str(size) for size in BATCHES))
    parser.add_argument("--master", default="local[2]", help="the Spark master measured")
    parser.add_argument("--against", help="a master to compare with (same sizes and runs)")
    parser.add_argument(
        "--checkpoint", help="a directory for the checkpoints (on a cluster: shared)"
    )
    parser.add_argument("--no-local-engine", action="store_true", help="skip LocalCluster")
    parser.add_argument(
        "--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="(repeatable)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    report: dict[str, Any] = {"master": args.master, "runs": args.runs}
    local = None if args.no_local_engine else local_engine(args.runs, 200_000)["ack"]
    if local is not None:
        report["local_engine_per_sec"] = local
    other = (
        measure_elsewhere(args.against, args.checkpoint, args.sizes, args.runs)
        if args.against
        else None
    )
    conf = dict(setting.split("=", 1) for setting in args.spark_conf)
    for size, figures in measure(args.master, args.checkpoint, sizes, args.runs, conf).items():
        if local is not None:
            figures["vs_local_engine"] = round(figures["per_sec"] / local, 2)
        if other is not None:
            against = other[size]
            figures["against"] = {"master": args.against, **against}
            figures["vs_against"] = round(figures["per_sec"] / against["per_sec"], 2)
        report[size] = figures
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>22}: {value}")


if __name__ == "__main__":
    main()
