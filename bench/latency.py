"""Throughput against complete latency at fixed offered rates (Storm's ThroughputVsLatency).

The topology of Storm's storm-perf ``ThroughputVsLatency``: a spout emitting sentences
at a fixed offered rate -> split (2 tasks, shuffle) -> count (2 tasks, fields grouping
on the word), XOR acking on, ``topology.max.spout.pending`` bounding the trees in
flight. Each offered rate runs for a warm-up and then a measured window; per rate the
benchmark reports the achieved throughput (trees acked per second during the window),
the complete latency of the trees emitted during the window (p50, p99, p99.9, max: from
the spout's ``emit`` to its ``ack``, recorded by the spout itself for every tree, not
taken from the engine's metrics), and the CPU used (CPU time of the benchmark's
process and all its descendants, the worker processes, the JVM and Spark's Python
workers included, over the window's wall time: 1.0 is one core).

The spout keeps the offered rate by the clock: by time ``t`` after its start it has
emitted ``rate * t`` sentences (it emits whatever is due at each ``next_tuple``), so a
slow round is caught up rather than lost. When it cannot keep up (the engine does not
call it often enough, or ``max.spout.pending`` holds it back), the row says so: ``lag``
is how far behind its schedule it was at the end of the window, and ``offered`` the
rate it actually emitted at.

Engines: ``threads`` (``LocalCluster``, one worker), ``processes`` (``LocalCluster``,
two worker processes, one acker per worker) and ``spark`` (``SparkCluster``, a
``local[2]`` session; the latency is from emit to the settling of the tree when its
micro-batch ends, so the batch interval and duration set its floor). Every local run
is a fresh interpreter; Spark's rates share one session. On the local engine the
benchmark sets ``topology.worker.gc.freeze`` (``--gc-freeze``, on by default), as a
latency-sensitive deployment would: worker processes freeze their start-up heap anyway,
and on a worker thread it takes the garbage collector's full passes (about 11 ms each
here) off the tail.

    python bench/latency.py --quick                       # < 60 s: threads and processes
    python bench/latency.py --engines threads --rates 10000,20000,30000 --secs 10
    python bench/latency.py --rates 50%,70%,100%,120% --runs 3   # of the measured saturation
    python bench/latency.py --engines spark --rates 5000,10000 --json

A rate given as ``N%`` is a percentage of the engine's saturation, measured first by a
run whose spout emits as fast as it is allowed (``max.spout.pending`` 1,000).
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
from array import array
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from wordcount import SENTENCE_POOL, SplitSentence, WordCount, make_sentences

from squall import Config, Fields, Spout, TopologyBuilder

ENGINES = ("threads", "processes", "spark")
#: How long the spout waits, after its window, for the trees emitted in it.
DRAIN_SECS = 30.0


class PacedSentenceSpout(Spout):
    """Emits sentences at ``rate`` per second by the clock (``rate`` 0: as fast as it is
    called), and records the complete latency of every tree it emits.

    It starts its clock at its first ``next_tuple`` and writes ``<path>.started`` (the
    wall time of that start). It stops emitting at the end of the measured window and,
    once every tree emitted in the window is settled (or after ``DRAIN_SECS``), writes
    ``<path>`` (JSON): the latencies' percentiles, the trees acked during the window,
    and how far it lagged behind its schedule.
    """

    outputs = ["sentence"]

    def __init__(self, rate: float, warmup_secs: float, secs: float, path: str) -> None:
        self.rate = rate
        self.warmup_secs = warmup_secs
        self.secs = secs
        self.path = path

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.sentences = make_sentences()
        self.emit_times = array("d")
        self.latencies = array("d")
        self.started = 0.0
        self.window_start = 0.0
        self.window_end = 0.0
        #: First and one-past-last message id emitted during the window.
        self.first_seq = -1
        self.end_seq = -1
        self.acked_in_window = 0
        self.settled_in_window = 0
        self.failed = 0
        self.lag_secs = 0.0
        self.max_lag_secs = 0.0
        self.done = False

    def next_tuple(self) -> None:
        now = time.perf_counter()
        if not self.started:
            self.started = now
            self.window_start = now + self.warmup_secs
            self.window_end = self.window_start + self.secs
            # Written whole, then renamed: the reader never sees it half written.
            with open(self.path + ".starting", "w") as marker:
                marker.write(repr(time.time()))
            os.replace(self.path + ".starting", self.path + ".started")
        seq = len(self.emit_times)
        if now >= self.window_end:
            if self.end_seq < 0:
                self.end_seq = seq
                self.lag_secs = self._lag(now, seq)
            self._maybe_finish(now)
            return
        if self.rate:
            lag = self._lag(now, seq)
            if lag < 0:
                return  # the next sentence is not due yet
            if lag > self.max_lag_secs and now >= self.window_start:
                self.max_lag_secs = lag
        if self.first_seq < 0 and now >= self.window_start:
            self.first_seq = seq
        self.emit_times.append(now)
        self.collector.emit([self.sentences[seq & (SENTENCE_POOL - 1)]], seq)

    def _lag(self, now: float, seq: int) -> float:
        """How far behind its schedule the spout is when it would emit sentence ``seq``
        (negative: ahead, not due yet)."""
        if not self.rate:
            return 0.0
        return (now - self.started) - seq / self.rate

    def ack(self, msg_id: Any) -> None:
        now = time.perf_counter()
        if self.window_start <= now < self.window_end:
            self.acked_in_window += 1
        if (
            self.first_seq >= 0
            and msg_id >= self.first_seq
            and (self.end_seq < 0 or msg_id < self.end_seq)
        ):
            self.latencies.append(now - self.emit_times[msg_id])
            self.settled_in_window += 1

    def fail(self, msg_id: Any) -> None:
        if (
            self.first_seq >= 0
            and msg_id >= self.first_seq
            and (self.end_seq < 0 or msg_id < self.end_seq)
        ):
            self.failed += 1
            self.settled_in_window += 1

    def _maybe_finish(self, now: float) -> None:
        if self.done:
            return
        window_trees = self.end_seq - max(self.first_seq, 0) if self.first_seq >= 0 else 0
        if self.settled_in_window < window_trees and now < self.window_end + DRAIN_SECS:
            return
        self.done = True
        result = {
            "emitted_in_window": window_trees,
            "offered": window_trees / self.secs,
            "acked_in_window": self.acked_in_window,
            "throughput": self.acked_in_window / self.secs,
            "failed": self.failed,
            "unsettled": window_trees - self.settled_in_window,
            "lag_ms": self.lag_secs * 1e3,
            "max_lag_ms": self.max_lag_secs * 1e3,
            **percentiles(self.latencies),
        }
        temporary = self.path + ".tmp"
        with open(temporary, "w") as out:
            json.dump(result, out)
        os.replace(temporary, self.path)


def percentiles(latencies: array[float]) -> dict[str, float]:
    """p50, p99, p99.9 and max of ``latencies`` (seconds) in milliseconds, exact
    (nearest rank on the sorted values)."""
    values = sorted(latencies)
    if not values:
        return {
            "p50_ms": float("nan"),
            "p99_ms": float("nan"),
            "p999_ms": float("nan"),
            "max_ms": float("nan"),
            "mean_ms": float("nan"),
        }

    def rank(q: float) -> float:
        index = min(len(values) - 1, max(0, int(q / 100.0 * len(values) + 0.5) - 1))
        return values[index] * 1e3

    return {
        "p50_ms": rank(50),
        "p99_ms": rank(99),
        "p999_ms": rank(99.9),
        "max_ms": values[-1] * 1e3,
        "mean_ms": sum(values) / len(values) * 1e3,
    }


def topology(rate: float, warmup: float, secs: float, path: str) -> Any:
    """Storm's ThroughputVsLatency word count with a paced spout."""
    builder = TopologyBuilder()
    builder.set_spout("sentences", PacedSentenceSpout(rate, warmup, secs, path), 1)
    builder.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", WordCount(), 2).fields_grouping("split", Fields("word"))
    return builder.create_topology()


# CPU of a process tree ------------------------------------------------------------------


def tree_cpu_secs(root: int) -> float:
    """utime + stime of ``root`` and every live descendant, in seconds (``/proc``).

    It reads only the tree's own files (each process's ``stat`` and its threads'
    ``children``), a few system calls: on the threads engine it runs in the process it
    measures, and a scan of every process's files there would hold the engine's worker
    off the interpreter lock long enough to show in the latencies it measures."""
    ticks = os.sysconf("SC_CLK_TCK")
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # ended meanwhile
        total += (int(fields[11]) + int(fields[12])) / ticks
        for thread in threads:
            try:
                with open(f"/proc/{pid}/task/{thread}/children") as children:
                    stack.extend(int(child) for child in children.read().split())
            except OSError:
                continue
    return total


def measure(cluster: Any, name: str, conf: Config, params: dict[str, Any]) -> dict[str, Any]:
    """Submit the topology at one rate, sample the CPU over its window, and return the
    spout's figures with ``cpu`` added."""
    warmup, secs = params["warmup"], params["secs"]
    path = os.path.join(tempfile.mkdtemp(prefix="bench-latency-"), "result.json")
    cluster.submit_topology(name, conf, topology(params["rate"], warmup, secs, path))
    deadline = time.time() + 120 + warmup + secs + DRAIN_SECS
    while not os.path.exists(path + ".started"):
        if time.time() > deadline:
            raise RuntimeError(f"{name}: the spout never started")
        time.sleep(0.01)
    with open(path + ".started") as marker:
        started = float(marker.read())
    time.sleep(max(0.0, started + warmup - time.time()))
    cpu_before, wall_before = tree_cpu_secs(os.getpid()), time.time()
    time.sleep(max(0.0, started + warmup + secs - time.time()))
    cpu = (tree_cpu_secs(os.getpid()) - cpu_before) / (time.time() - wall_before)
    while not os.path.exists(path):
        if time.time() > deadline:
            raise RuntimeError(f"{name}: the spout never reported")
        time.sleep(0.02)
    with open(path) as result_file:
        result: dict[str, Any] = json.load(result_file)
    cluster.kill_topology(name, wait_secs=0)
    result["cpu"] = cpu
    result["rate"] = params["rate"]
    return result


def engine_conf(engine: str, max_pending: int, gc_freeze: bool | None = None) -> Config:
    """The configuration of ``engine``: one acker per worker, ``max_pending`` trees,
    ``topology.worker.gc.freeze`` = ``gc_freeze`` unless None (the engine's default)."""
    if engine == "threads":
        conf = Config().set_num_workers(1)
    elif engine == "processes":
        conf = Config().set_num_workers(2).set_worker_kind("process")
    else:
        conf = Config().set_num_workers(1)
        conf["topology.spark.batch.interval.millis"] = 10
    conf.set_num_ackers(conf["topology.workers"])
    conf.set_max_spout_pending(max_pending)
    if gc_freeze is not None:
        conf[Config.TOPOLOGY_WORKER_GC_FREEZE] = gc_freeze
    return conf


def child_local(params: dict[str, Any]) -> dict[str, Any]:
    """One rate on the local engine (in an interpreter of its own)."""
    from squall import LocalCluster

    conf = engine_conf(params["engine"], params["max_pending"], params.get("gc_freeze"))
    with LocalCluster() as cluster:
        return measure(cluster, "latency", conf, params)


def run_local(params: dict[str, Any]) -> dict[str, Any]:
    """:func:`child_local` in a fresh interpreter."""
    command = [sys.executable, __file__, "--child", json.dumps(params)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(
            f"the run at {params['rate']:,.0f}/s on {params['engine']} failed "
            f"(exit {done.returncode}):\n{done.stderr.strip()}"
        )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


class SparkRunner:
    """Every Spark rate on one ``local[2]`` session (started on first use)."""

    def __init__(self) -> None:
        self.cluster: Any = None
        self.spark: Any = None
        self.runs = 0

    def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.cluster is None:
            from squall.spark import SparkCluster
            from squall.spark.launch.session import get_session

            self.spark = get_session("local[2]", {"spark.sql.shuffle.partitions": "2"})
            self.cluster = SparkCluster(
                spark=self.spark, checkpoint_dir=tempfile.mkdtemp(prefix="bench-latency-")
            )
            # Python workers started, code loaded: the first micro-batches take seconds.
            self.run({**params, "rate": 1000, "warmup": 5.0, "secs": 1.0})
        return self.run(params)

    def run(self, params: dict[str, Any]) -> dict[str, Any]:
        """One rate on the session."""
        self.runs += 1
        conf = engine_conf("spark", params["spark_max_pending"])
        conf["topology.spark.batch.max.tuples"] = params["spark_max_pending"]
        return measure(self.cluster, f"latency-{self.runs}", conf, params)

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.shutdown()
            self.spark.stop()


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over runs, with each figure's range (min, max) where runs > 1."""
    row: dict[str, Any] = {"runs": len(runs)}
    for key in (
        "offered",
        "throughput",
        "p50_ms",
        "p99_ms",
        "p999_ms",
        "max_ms",
        "mean_ms",
        "cpu",
        "lag_ms",
        "max_lag_ms",
    ):
        values = [r[key] for r in runs]
        row[key] = statistics.median(values)
        if len(runs) > 1:
            row[f"{key}_range"] = [min(values), max(values)]
    row["failed"] = sum(r["failed"] for r in runs)
    row["unsettled"] = sum(r["unsettled"] for r in runs)
    row["kept_up"] = all(r["lag_ms"] < 50 + 0.01 * r.get("secs", 0) for r in runs)
    return row


def fmt_ms(value: float) -> str:
    return f"{value:,.1f}" if value >= 10 else f"{value:.2f}"


def print_table(engine: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n{engine}")
    header = (
        "rate",
        "offered/s",
        "acked/s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "CPU",
        "kept up",
        "failed",
    )
    print(" | ".join(f"{h:>10}" for h in header))
    for row in rows:
        p99 = fmt_ms(row["p99_ms"])
        if "p99_ms_range" in row:
            low, high = row["p99_ms_range"]
            p99 += f" ({fmt_ms(low)}-{fmt_ms(high)})"
        cells = (
            row["label"],
            f"{row['offered']:,.0f}",
            f"{row['throughput']:,.0f}",
            fmt_ms(row["p50_ms"]),
            p99,
            fmt_ms(row["p999_ms"]),
            fmt_ms(row["max_ms"]),
            f"{row['cpu']:.2f}",
            "yes" if row["kept_up"] else f"no ({row['lag_ms']:,.0f} ms)",
            str(row["failed"] + row["unsettled"]),
        )
        print(" | ".join(f"{c:>10}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="threads,processes,spark")
    parser.add_argument(
        "--rates",
        default="25%,50%,70%,85%,100%,120%",
        help="sentences/s, comma-separated; N%% is N%% of saturation",
    )
    parser.add_argument("--secs", type=float, default=10.0, help="measured seconds per rate")
    parser.add_argument("--warmup", type=float, default=3.0, help="warm-up seconds per rate")
    parser.add_argument("--max-pending", type=int, default=1000, help="topology.max.spout.pending")
    parser.add_argument(
        "--spark-max-pending",
        type=int,
        default=20_000,
        help="topology.max.spout.pending and topology.spark.batch.max.tuples on Spark "
        "(trees settle when their micro-batch ends, so a batch needs room for its interval)",
    )
    parser.add_argument("--runs", type=int, default=1, help="runs per rate (medians)")
    parser.add_argument(
        "--gc-freeze",
        choices=("on", "off", "default"),
        default="on",
        help="topology.worker.gc.freeze on the local engine (default: on; 'default' leaves "
        "the engine's own: on in worker processes, off for worker threads)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="threads and processes, 3 rates, 2 s each (< 60 s)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child_local(json.loads(args.child))))
        return
    if args.quick:
        args.engines, args.rates, args.secs, args.warmup = (
            "threads,processes",
            "5000,15000,25000",
            2.0,
            1.0,
        )
    report: dict[str, Any] = {
        "secs": args.secs,
        "warmup": args.warmup,
        "max_pending": args.max_pending,
        "runs": args.runs,
        "gc_freeze": args.gc_freeze,
    }
    spark = SparkRunner()
    try:
        for engine in args.engines.split(","):
            if engine not in ENGINES:
                parser.error(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
            runner = spark if engine == "spark" else run_local
            base = {
                "engine": engine,
                "warmup": args.warmup,
                "secs": args.secs,
                "max_pending": args.max_pending,
                "spark_max_pending": args.spark_max_pending,
                "gc_freeze": {"on": True, "off": False}.get(args.gc_freeze),
            }
            saturation = None
            rows = []
            for spec in args.rates.split(","):
                if spec.endswith("%"):
                    if saturation is None:
                        saturated = [
                            runner({**base, "rate": 0, "max_pending": 1000})
                            for _ in range(args.runs)
                        ]
                        saturation = statistics.median(r["throughput"] for r in saturated)
                        report[f"{engine}_saturation"] = round(saturation)
                    rate = saturation * float(spec[:-1]) / 100.0
                else:
                    rate = float(spec)
                runs = [runner({**base, "rate": rate}) for _ in range(args.runs)]
                for run in runs:
                    run["secs"] = args.secs
                row = {"label": spec, **summarize(runs)}
                rows.append(row)
            report[engine] = rows
            if not args.json:
                if saturation is not None:
                    print(f"\n{engine}: saturation {saturation:,.0f} sentences/s")
                print_table(engine, rows)
    finally:
        spark.close()
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()
