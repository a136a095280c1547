"""Worker processes on the local engine: scaling, the cost of crossing workers, Bytewax.

Three parts, each run in fresh subprocesses, alternating between their configurations;
figures are medians of ``--runs`` runs. A run's clock starts just before
``submit_topology`` (starting the worker processes and opening the tasks is counted;
the fork server they start from is warmed up before, as a program's first topology
would have) and stops when the work is done: every tuple tree acked with acking on,
the last bolt's ``executed`` count at its expected total without (read from
``get_topology_info`` every 10 ms).

* ``cpu``: a CPU-bound topology. A spout (one task per worker) emits integers, a
  ``BasicBolt`` (two tasks per worker, local-or-shuffle grouping) spends about
  ``--work-us`` microseconds of pure-Python arithmetic on each (a loop calibrated once
  at the start). Run with one worker process, two worker processes, and two worker
  threads (``topology.worker.kind: "thread"``; one interpreter, so one core). Acking
  is off unless ``--ack`` (then the spout emits with message ids and the bolt anchors).
  With processes, the worker processes' CPU time per tuple is reported too: when it
  stays the same with two processes, what keeps the scaling below 2x is the cores
  the machine gives them, not the engine.
* ``wordcount``: the topology of ``wordcount.py`` (sentence spout -> split, 2 tasks,
  shuffle -> count, 2 tasks, fields grouping), acking off and on (one acker per
  worker), with one and two worker processes. With two, a shuffled sentence and a
  grouped word each go to the other worker about half the time. The cost of a tuple
  crossing workers is estimated from CPU time: the utime + stime of every worker
  process (``/proc/<pid>/stat``, read when the work is done, before the kill), two
  processes minus one, divided by the tuples sent between workers
  (``get_topology_info(name).local.transferred_between_workers``, acker messages
  included). It is an upper bound: it also counts the time a worker spends waiting
  for its peer (the loop spins briefly before it sleeps) and a second start-up; with
  acking, also the acker messages that two workers send where one worker combines
  a tree's acks into one message.
* ``bytewax``: the same word count in Bytewax, in a virtual environment of its own
  (``bench/.venv-bytewax``, created with ``pip install`` on first use): the same
  sentences from a ``TestingSource`` (one reader, like the one spout task),
  ``redistribute`` (as the shuffle), ``flat_map`` split, ``count_final`` per word, into
  a sink that only adds up the counts (checked against the words sent). Run with
  ``python -m bytewax.run`` as one process (``-w 1``) and as two processes of one
  worker each (``-i``/``-a``), at each ``TestingSource`` batch size of
  ``--bytewax-batches`` (1, its default, and 100). Its clock starts when the first
  sentence is read and stops when the last sink partition closes; the start-up before
  (from the dataflow module's import, the processes connecting included) is reported
  apart as ``startup_secs``, where squall's figures include its start-up (about 25 ms).
  Throughput is words per second on both sides (squall's ``executions_per_sec`` also
  counts the sentences split, as ``wordcount.py`` does).

    python bench/workers.py --json                  # every part, 3 runs each
    python bench/workers.py --parts cpu --ack --json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from venvs import bytewax_python, installed_version
from wordcount import WORDS_PER_SENTENCE, SentenceSpout, SplitSentence, WordCount, make_sentences

from squall import BasicBolt, Config, Fields, LocalCluster, Spout, TopologyBuilder
from squall.model.topology import StormTopology

POLL_SECS = 0.01
CPU_CONFIGS = (("process", 1), ("process", 2), ("thread", 2))
WORDCOUNT_CONFIGS = (("noack", 1), ("noack", 2), ("ack", 1), ("ack", 2))

# The CPU-bound topology ---------------------------------------------------------------


def burn(loops: int, seed: int) -> int:
    """Pure-Python arithmetic: ``loops`` rounds of a linear congruential step."""
    x = seed
    for i in range(loops):
        x = (x * 1103515245 + i) & 0xFFFFFFFF
    return x


def time_burn(loops: int, calls: int = 2000) -> float:
    """Microseconds per ``burn(loops)`` call, the best of three batches of ``calls``."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for seed in range(calls):
            burn(loops, seed)
        best = min(best, (time.perf_counter() - started) / calls)
    return best * 1e6


def calibrate(work_us: float) -> tuple[int, float]:
    """The loop count for ``work_us`` microseconds per call, and the time it measured."""
    loops = max(1, round(work_us * 1000 / time_burn(1000, 200)))
    return loops, time_burn(loops)


class IntegerSpout(Spout):
    """Emits the integers below ``total``; with message ids when ``tracked``."""

    outputs = ["n"]

    def __init__(self, total: int, tracked: bool) -> None:
        self.total = total
        self.tracked = tracked

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.emitted = 0

    def next_tuple(self) -> None:
        emitted = self.emitted
        if emitted < self.total:
            self.emitted = emitted + 1
            if self.tracked:
                self.collector.emit([emitted], emitted)
            else:
                self.collector.emit([emitted])


class Burn(BasicBolt):
    """Spends ``loops`` rounds of ``burn`` on each tuple; emits nothing."""

    outputs = ["n"]

    def __init__(self, loops: int) -> None:
        self.loops = loops

    def execute(self, tup: Any, collector: Any) -> None:
        burn(self.loops, tup.values[0])


def cpu_topology(workers: int, tuples: int, loops: int, acking: bool) -> StormTopology:
    """Spout (one task per worker) -> burn (two tasks per worker, local or shuffle)."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", IntegerSpout(tuples // workers, acking), workers)
    builder.set_bolt("burn", Burn(loops), 2 * workers).local_or_shuffle_grouping("numbers")
    return builder.create_topology()


def wordcount_topology(sentences: int) -> StormTopology:
    """``wordcount.py``'s topology: spout -> split (2, shuffle) -> count (2, fields)."""
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(sentences), 1)
    builder.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", WordCount(), 2).fields_grouping("split", Fields("word"))
    return builder.create_topology()


# Running a topology --------------------------------------------------------------------


def process_cpu_secs(pid: int) -> float:
    """utime + stime of a process, in seconds (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def warm_fork_server(cluster: LocalCluster) -> None:
    """Start the worker processes' fork server with a topology that does nothing."""
    builder = TopologyBuilder()
    builder.set_spout("idle", IntegerSpout(0, False), 1)
    conf = Config().set_num_workers(1).set_worker_kind("process").set_num_ackers(0)
    cluster.submit_topology("warm-up", conf, builder.create_topology())
    cluster.kill_topology("warm-up", wait_secs=0)


def run_until(
    topology: StormTopology, conf: Config, spout: str, bolt: str, expected: int, trees: int
) -> dict[str, Any]:
    """Submit, wait until ``bolt`` executed ``expected`` tuples and ``spout`` acked
    ``trees`` trees (0 without acking); return the elapsed time and final figures."""
    with LocalCluster() as cluster:
        if conf[Config.TOPOLOGY_WORKER_KIND] == "process":
            warm_fork_server(cluster)
        started = time.perf_counter()
        cluster.submit_topology("bench", conf, topology)
        while True:
            info = cluster.get_topology_info("bench")
            executed = info.components[bolt].executed
            acked = info.components[spout].acked
            if executed >= expected and acked >= trees:
                break
            time.sleep(POLL_SECS)
        elapsed = time.perf_counter() - started
        assert info.local is not None
        processes = info.local.worker_processes
        worker_cpu = sum(process_cpu_secs(p.pid) for p in processes if p.pid is not None)
        return {
            "seconds": elapsed,
            "components": {c: s.executed for c, s in info.components.items()},
            "acked": acked,
            "failed": info.components[spout].failed,
            "worker_cpu_secs": worker_cpu if processes else None,
            "crossed": info.local.transferred_between_workers,
        }


def base_conf(kind: str, workers: int, acking: bool) -> Config:
    """``workers`` workers of ``kind``; one acker per worker (the default) or none."""
    conf = Config().set_num_workers(workers).set_worker_kind(kind)
    return conf if acking else conf.set_num_ackers(0)


def child_cpu(params: dict[str, Any]) -> dict[str, Any]:
    """One run of the CPU-bound topology (in a subprocess of its own)."""
    workers, tuples, acking = params["workers"], params["tuples"], params["acking"]
    conf = base_conf(params["kind"], workers, acking)
    topology = cpu_topology(workers, tuples, params["loops"], acking)
    result = run_until(topology, conf, "numbers", "burn", tuples, tuples if acking else 0)
    result["per_sec"] = tuples / result["seconds"]
    return result


def child_wordcount(params: dict[str, Any]) -> dict[str, Any]:
    """One run of the word count in worker processes (in a subprocess of its own)."""
    sentences, acking = params["sentences"], params["acking"]
    words = sentences * WORDS_PER_SENTENCE
    conf = base_conf("process", params["workers"], acking)
    trees = sentences if acking else 0
    result = run_until(wordcount_topology(sentences), conf, "sentences", "count", words, trees)
    result["words_per_sec"] = words / result["seconds"]
    result["executions_per_sec"] = (words + sentences) / result["seconds"]
    return result


def in_subprocess(part: str, params: dict[str, Any]) -> dict[str, Any]:
    """Run ``child_<part>(params)`` in a fresh interpreter; its result."""
    command = [sys.executable, __file__, "--child", part, "--params", json.dumps(params)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(output.strip().splitlines()[-1]))


def median(runs: list[dict[str, Any]], key: str) -> float:
    """The median of ``key`` over ``runs``."""
    return float(statistics.median(run[key] for run in runs))


# The parts -----------------------------------------------------------------------------


def measure_cpu(runs: int, tuples: int, work_us: float, acking: bool) -> dict[str, Any]:
    """Tuples/s of the CPU-bound topology: one process, two processes, two threads."""
    loops, measured_us = calibrate(work_us)
    results: dict[str, list[dict[str, Any]]] = {f"{k}_{w}": [] for k, w in CPU_CONFIGS}
    for _ in range(runs):
        for kind, workers in CPU_CONFIGS:
            params = {"kind": kind, "workers": workers, "tuples": tuples}
            params |= {"loops": loops, "acking": acking}
            results[f"{kind}_{workers}"].append(in_subprocess("cpu", params))
    report: dict[str, Any] = {"tuples": tuples, "acking": acking, "loops": loops}
    report["work_us"] = round(measured_us, 2)
    for name, done in results.items():
        report[name] = {
            "per_sec": round(median(done, "per_sec")),
            "runs": [round(r["per_sec"]) for r in done],
        }
        if name.startswith("process"):
            cpu_us = median(done, "worker_cpu_secs") * 1e6 / tuples
            report[name]["worker_cpu_us_per_tuple"] = round(cpu_us, 2)
    one = report["process_1"]["per_sec"]
    report["scaling"] = round(report["process_2"]["per_sec"] / one, 2)
    report["thread_2_vs_process_1"] = round(report["thread_2"]["per_sec"] / one, 2)
    return report


def wordcount_figures(done: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of one word count configuration's runs."""
    return {
        "words_per_sec": round(median(done, "words_per_sec")),
        "executions_per_sec": round(median(done, "executions_per_sec")),
        "runs": [round(r["words_per_sec"]) for r in done],
        "worker_cpu_secs": round(median(done, "worker_cpu_secs"), 2),
        "crossed": round(median(done, "crossed")),
        "acker_executed": round(statistics.median(r["components"].get("__acker", 0) for r in done)),
    }


def transfer_us(one: dict[str, Any], two: dict[str, Any]) -> float | None:
    """CPU microseconds per tuple sent between workers: (two - one) / crossed."""
    if not two["crossed"]:
        return None
    return round((two["worker_cpu_secs"] - one["worker_cpu_secs"]) * 1e6 / two["crossed"], 2)


def measure_wordcount(runs: int, sentences: int) -> dict[str, Any]:
    """Words/s of the word count with one and two worker processes, acking off and on."""
    results: dict[str, list[dict[str, Any]]] = {f"{m}_{w}": [] for m, w in WORDCOUNT_CONFIGS}
    for _ in range(runs):
        for mode, workers in WORDCOUNT_CONFIGS:
            params = {"workers": workers, "sentences": sentences, "acking": mode == "ack"}
            results[f"{mode}_{workers}"].append(in_subprocess("wordcount", params))
    report: dict[str, Any] = {"sentences": sentences, "words": sentences * WORDS_PER_SENTENCE}
    for mode in ("noack", "ack"):
        one = wordcount_figures(results[f"{mode}_1"])
        two = wordcount_figures(results[f"{mode}_2"])
        report[mode] = {
            "process_1": one,
            "process_2": two,
            "scaling": round(two["words_per_sec"] / one["words_per_sec"], 2),
            "transfer_cpu_us_per_crossed_tuple": transfer_us(one, two),
        }
    return report


# Bytewax -------------------------------------------------------------------------------

BYTEWAX_FLOW = '''
"""The word count of bench/wordcount.py as a Bytewax dataflow (written by workers.py)."""
import json
import os
import time

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from bytewax.testing import TestingSource

IMPORTED = time.time()
with open(os.environ["WORDCOUNT_POOL"]) as pool_file:
    POOL = json.load(pool_file)
COUNT = int(os.environ["WORDCOUNT_SENTENCES"])
BATCH = int(os.environ["WORDCOUNT_BATCH"])


class Sentences:
    """The sentences of wordcount.py's spout; notes when the first is read."""

    first_read = None

    def __iter__(self):
        Sentences.first_read = time.time()
        mask = len(POOL) - 1
        for index in range(COUNT):
            yield POOL[index & mask]


class _Total(StatelessSinkPartition):
    def __init__(self):
        self.words = 0

    def write_batch(self, items):
        for _word, count in items:
            self.words += count

    def close(self):
        figures = {"imported": IMPORTED, "first_read": Sentences.first_read}
        figures |= {"ended": time.time(), "words": self.words}
        print(json.dumps(figures), flush=True)


class TotalSink(DynamicSink):
    def build(self, step_id, worker_index, worker_count):
        return _Total()


flow = Dataflow("wordcount")
lines = op.input("sentences", flow, TestingSource(Sentences(), BATCH))
lines = op.redistribute("shuffle", lines)
words = op.flat_map("split", lines, str.split)
counts = op.count_final("count", words, lambda word: word)
op.output("total", counts, TotalSink())
'''


def free_ports(count: int) -> list[int]:
    """``count`` loopback ports free at the time of the call."""
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def bytewax_run(
    python: Path, directory: Path, processes: int, env: dict[str, str]
) -> dict[str, Any]:
    """One run of the Bytewax word count as ``processes`` processes of one worker each:
    words/s from the first sentence read to the last sink closed, and the start-up
    before (from the dataflow module's import)."""
    base = [str(python), "-m", "bytewax.run", "bytewax_wordcount:flow"]
    if processes == 1:
        commands = [[*base, "-w", "1"]]
    else:
        addresses = ";".join(f"127.0.0.1:{port}" for port in free_ports(processes))
        commands = [[*base, "-i", str(i), "-a", addresses] for i in range(processes)]
    running = [
        subprocess.Popen(c, cwd=directory, env=env, stdout=subprocess.PIPE, text=True)
        for c in commands
    ]
    lines: list[dict[str, Any]] = []
    for process in running:
        output, _ = process.communicate(timeout=300)
        if process.returncode != 0:
            raise RuntimeError(f"bytewax exited with {process.returncode}")
        lines += [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    first_read = min(line["first_read"] for line in lines if line["first_read"] is not None)
    seconds = max(line["ended"] for line in lines) - first_read
    words = sum(line["words"] for line in lines)
    return {
        "seconds": seconds,
        "startup_secs": first_read - min(line["imported"] for line in lines),
        "words": words,
        "words_per_sec": words / seconds,
    }


def bytewax_batch(
    python: Path, directory: Path, env: dict[str, str], runs: int, expected: int
) -> dict[str, Any]:
    """Words/s with one and two processes at the batch size ``env`` gives."""
    results: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for _ in range(runs):
        for processes, done in results.items():
            run = bytewax_run(python, directory, processes, env)
            if run["words"] != expected:
                raise RuntimeError(f"Bytewax counted {run['words']} words, not {expected}")
            done.append(run)
    report: dict[str, Any] = {}
    for processes, done in results.items():
        report[f"process_{processes}"] = {
            "words_per_sec": round(median(done, "words_per_sec")),
            "runs": [round(r["words_per_sec"]) for r in done],
            "startup_secs": round(median(done, "startup_secs"), 2),
        }
    two, one = report["process_2"]["words_per_sec"], report["process_1"]["words_per_sec"]
    report["scaling"] = round(two / one, 2)
    return report


def measure_bytewax(runs: int, sentences: int, batches: list[int]) -> dict[str, Any]:
    """Words/s of the Bytewax word count as one and as two processes, at each size of
    ``TestingSource`` batch; ``{"error": ...}`` when Bytewax cannot be installed."""
    try:
        python = bytewax_python()
    except (OSError, RuntimeError) as exc:
        return {"error": str(exc)}
    report: dict[str, Any] = {"version": installed_version(python, "bytewax")}
    with tempfile.TemporaryDirectory(prefix="bench-bytewax-") as name:
        directory = Path(name)
        (directory / "bytewax_wordcount.py").write_text(BYTEWAX_FLOW)
        (directory / "pool.json").write_text(json.dumps(make_sentences()))
        env = dict(os.environ, PYTHONPATH=name, WORDCOUNT_POOL=str(directory / "pool.json"))
        env["WORDCOUNT_SENTENCES"] = str(sentences)
        for batch in batches:
            env["WORDCOUNT_BATCH"] = str(batch)
            expected = sentences * WORDS_PER_SENTENCE
            report[f"batch_{batch}"] = bytewax_batch(python, directory, env, runs, expected)
    return report


def versus_bytewax(wordcount: dict[str, Any], bytewax: dict[str, Any]) -> dict[str, Any]:
    """squall's words/s over Bytewax's, per batch size, acking mode and processes."""
    ratios: dict[str, Any] = {}
    for batch, theirs in bytewax.items():
        if not batch.startswith("batch_"):
            continue
        ratios[batch] = {
            f"{mode}_{n}": round(
                wordcount[mode][f"process_{n}"]["words_per_sec"]
                / theirs[f"process_{n}"]["words_per_sec"],
                2,
            )
            for mode in ("noack", "ack")
            for n in (1, 2)
        }
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="cpu,wordcount,bytewax")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tuples", type=int, default=120_000, help="CPU-bound part")
    parser.add_argument("--work-us", type=float, default=20.0, help="CPU work per tuple")
    parser.add_argument("--ack", action="store_true", help="acking on in the CPU part")
    parser.add_argument("--sentences", type=int, default=100_000, help="word count")
    parser.add_argument(
        "--bytewax-batches", default="1,100", help="TestingSource batch sizes (comma-separated)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--params", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child = child_cpu if args.child == "cpu" else child_wordcount
        print(json.dumps(child(json.loads(args.params))))
        return
    parts = args.parts.split(",")
    report: dict[str, Any] = {"runs": args.runs, "cpus": len(os.sched_getaffinity(0))}
    if "cpu" in parts:
        report["cpu"] = measure_cpu(args.runs, args.tuples, args.work_us, args.ack)
    if "wordcount" in parts:
        report["wordcount"] = measure_wordcount(args.runs, args.sentences)
    if "bytewax" in parts:
        batches = [int(b) for b in args.bytewax_batches.split(",")]
        report["bytewax"] = measure_bytewax(args.runs, args.sentences, batches)
        if "wordcount" in report and "error" not in report["bytewax"]:
            report["squall_vs_bytewax"] = versus_bytewax(report["wordcount"], report["bytewax"])
    if args.json:
        print(json.dumps(report))
    else:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
