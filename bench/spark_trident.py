"""Trident word count on SparkCluster against the same word count written in PySpark.

Three streaming queries over the same sentences, in the same batch sizes, each with a
checkpoint, on ``local[2]``, each in a process and Spark session of its own (the
baselines in a plain PySpark session, as a hand-written job would run):

* ``squall``: the Trident word count (split -> group_by -> persistent_aggregate Count
  into memory state) on ``SparkCluster``;
* ``python_udf``: Structured Streaming splitting with a Python UDF (the same user logic
  in Python), ``explode``, and a stateful ``groupBy(word).count()``;
* ``builtin``: the same with Spark's built-in ``split``.

Throughput is input rows (sentences) per second of batch processing time, from each
query's own progress reports, excluding the first (warm-up) batch.

    python bench/spark_trident.py --json
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

from wordcount import SENTENCE_POOL, make_sentences

from squall import Config
from squall.model.fields import Fields
from squall.spark import SparkCluster
from squall.spark.launch.session import get_session
from squall.trident import BatchSpout, Count, Function, TridentTopology
from squall.trident.state import MemoryMapState


def sentence(index: int, pool: list[str]) -> str:
    return pool[index % SENTENCE_POOL]


class SentenceBatches(BatchSpout):
    """``batches`` batches of ``size`` sentences, then nothing."""

    def __init__(self, batches: int, size: int) -> None:
        self.batches = batches
        self.size = size

    def get_output_fields(self) -> Fields:
        return Fields("sentence")

    def open(self, conf: dict[str, Any], context: Any) -> None:
        self.pool = make_sentences()

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        if batch_id > self.batches:
            return
        start = (batch_id - 1) * self.size
        for index in range(start, start + self.size):
            collector.emit([sentence(index, self.pool)])


class Split(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup.values[0].split():
            collector.emit([word])


def register_baseline_source(spark: Any, batches: int, size: int) -> None:
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class Part(InputPartition):
        def __init__(self, index: int) -> None:
            self.index = index

    class Reader(DataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:
            return {"batch": 0}

        def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
            return {"batch": min(batches, start["batch"] + 1)}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[Any]:
            return [Part(i) for i in range(start["batch"], end["batch"])]

        def read(self, partition: Any) -> Any:
            pool = make_sentences()
            begin = partition.index * size
            for index in range(begin, begin + size):
                yield (sentence(index, pool),)

    class Sentences(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_sentences"

        def schema(self) -> str:
            return "sentence string"

        def streamReader(self, schema: Any) -> Any:
            return Reader()

    spark.dataSource.register(Sentences)


def rows_per_second(
    progress: list[Any], rows_per_batch: int | None = None
) -> tuple[float, list[float]]:
    """Input rows per second of trigger time over the batches after the first.

    ``rows_per_batch``: the sentences in each batch, when the query's input rows are not
    sentences (squall's sources send packets of many tuples each).
    """
    batches = [p for p in progress if p["numInputRows"] > 0][1:]
    if rows_per_batch is None:
        rows = sum(p["numInputRows"] for p in batches)
    else:
        rows = rows_per_batch * len(batches)
    millis = sum(p["durationMs"]["triggerExecution"] for p in batches)
    latencies = [p["durationMs"]["triggerExecution"] for p in batches]
    return (rows / (millis / 1000.0) if millis else 0.0), latencies


def run_baseline(spark: Any, kind: str, directory: str) -> dict[str, Any]:
    from pyspark.sql import functions as f
    from pyspark.sql.types import ArrayType, StringType

    frame = spark.readStream.format("bench_sentences").load()
    if kind == "python_udf":
        split = f.udf(lambda text: text.split(), ArrayType(StringType()))
        words = frame.select(f.explode(split("sentence")).alias("word"))
    else:
        words = frame.select(f.explode(f.split("sentence", " ")).alias("word"))
    query = (
        words.groupBy("word")
        .count()
        .writeStream.outputMode("update")
        .format("noop")
        .option("checkpointLocation", os.path.join(directory, kind))
        .trigger(processingTime="10 milliseconds")
        .start()
    )
    query.processAllAvailable()
    progress = [json.loads(p.json) for p in query.recentProgress]
    query.stop()
    rate, latencies = rows_per_second(progress)
    return {"rows_per_sec": rate, "batch_ms": latencies}


def run_squall(spark: Any, batches: int, size: int, directory: str) -> dict[str, Any]:
    factory = MemoryMapState.factory()
    topology = TridentTopology()
    (
        topology.new_stream("sentences", SentenceBatches(batches, size))
        .each(Fields("sentence"), Split(), Fields("word"))
        .parallelism_hint(2)
        .group_by(Fields("word"))
        .persistent_aggregate(factory, Count(), Fields("count"))
        .parallelism_hint(2)
    )
    conf = Config()
    conf["topology.spark.batch.interval.millis"] = 10
    with SparkCluster(spark=spark, checkpoint_dir=os.path.join(directory, "squall")) as cluster:
        cluster.submit_topology("wc", conf, topology.build())
        cluster.wait_idle("wc")
        query = cluster._get("wc").queries[0].query
        progress = [json.loads(p.json) for p in query.recentProgress]
        counted = sum(MemoryMapState.contents(factory).values())
    rate, latencies = rows_per_second(progress, size)
    return {"rows_per_sec": rate, "batch_ms": latencies, "words_counted": counted}


#: The jobs, in the order each run takes them (they alternate, so drifts in load hit
#: them alike).
JOBS = ("squall", "python_udf", "builtin")


def run_job(name: str, batches: int, size: int, directory: str) -> dict[str, Any]:
    """Run job ``name`` once in this process: squall in a session made by squall (as
    ``SparkCluster`` users get it), the baselines in a plain PySpark session."""
    if name == "squall":
        spark = get_session("local[2]", {"spark.sql.shuffle.partitions": "2"})
    else:
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
    from pyspark import cloudpickle as spark_cloudpickle

    spark_cloudpickle.register_pickle_by_value(sys.modules["wordcount"])
    try:
        if name == "squall":
            return run_squall(spark, batches, size, directory)
        register_baseline_source(spark, batches, size)
        return run_baseline(spark, name, directory)
    finally:
        spark.stop()


def run_in_subprocess(name: str, args: argparse.Namespace, directory: str) -> dict[str, Any]:
    """One run of job ``name`` in a fresh Python process; its result."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--job",
        name,
        "--batches",
        str(args.batches),
        "--batch-size",
        str(args.batch_size),
        "--directory",
        directory,
    ]
    # Every job's Spark Python workers run this interpreter (squall's sessions choose it
    # themselves; a plain builder session takes PYSPARK_PYTHON, else ``python3`` on PATH).
    env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    output = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3, help="runs of each job (median)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--job", choices=JOBS, help=argparse.SUPPRESS)
    parser.add_argument("--directory", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:  # one run of one job, in the process the parent started
        result = run_job(args.job, args.batches, args.batch_size, args.directory)
        print(json.dumps(result))
        return
    directory = tempfile.mkdtemp(prefix="squall-bench-spark-")
    started = time.time()
    report: dict[str, Any] = {
        "batches": args.batches,
        "batch_size": args.batch_size,
        "runs": args.runs,
    }
    for run in range(args.runs):
        for name in JOBS:
            result = run_in_subprocess(name, args, os.path.join(directory, f"{name}{run}"))
            report.setdefault(f"{name}_runs", []).append(round(result["rows_per_sec"]))
            report.setdefault(f"{name}_batch_ms", []).extend(result["batch_ms"])
            if "words_counted" in result:
                report["squall_words_counted"] = result["words_counted"]
    for name in JOBS:
        report[name] = round(statistics.median(report[f"{name}_runs"]))
        latencies = report.pop(f"{name}_batch_ms")
        report[f"{name}_median_batch_ms"] = round(statistics.median(latencies))
    report["squall_vs_python_udf"] = round(report["squall"] / report["python_udf"], 3)
    report["squall_vs_builtin"] = round(report["squall"] / report["builtin"], 3)
    report["seconds"] = round(time.time() - started, 1)
    print(json.dumps(report) if args.json else json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
