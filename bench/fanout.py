"""Backpressure of the local engine: a fan-out bolt feeding a slow bolt.

The topology: an endless spout (untracked) -> fan (emits 200 tuples per input) -> slow (a
little CPU work per tuple, emits nothing), three workers, acking off, the default queue
capacity (``topology.executor.receive.buffer.size``, 32,768). Without bounded queues
between bolts, fan outruns slow and slow's queue grows without limit; with them it stays
within the capacity plus one ``execute``'s emits (200).

Each run is a fresh subprocess that runs until slow has executed ``--executions``
tuples, sampling every queue's length every half millisecond; it reports the longest
queue seen (slow's), the peak RSS of the process and slow's throughput.

    python bench/fanout.py --json                   # 3 runs, medians
    python bench/fanout.py --workers 1 --runs 1     # one worker
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

from squall import BasicBolt, Config, LocalCluster, Spout, TopologyBuilder

FAN_OUT = 200


class EndlessSpout(Spout):
    outputs = ["n"]

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        self.n += 1
        self.collector.emit([self.n])


class FanOut(BasicBolt):
    outputs = ["n", "k"]

    def execute(self, tup: Any, collector: Any) -> None:
        n = tup.values[0]
        emit = collector.emit
        for k in range(FAN_OUT):
            emit([n, k])


class Slow(BasicBolt):
    def execute(self, tup: Any, collector: Any) -> None:
        total = 0
        for i in range(100):
            total += i


def peak_rss_mb() -> float:
    """This process's peak RSS (``VmHWM``; ``ru_maxrss`` would also count the parent's
    memory from before ``exec``)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmHWM in /proc/self/status")


def one_run(workers: int, executions: int) -> dict[str, Any]:
    builder = TopologyBuilder()
    builder.set_spout("numbers", EndlessSpout())
    builder.set_bolt("fan", FanOut()).shuffle_grouping("numbers")
    builder.set_bolt("slow", Slow()).shuffle_grouping("fan")
    conf = {Config.TOPOLOGY_WORKERS: workers, Config.TOPOLOGY_ACKER_EXECUTORS: 0}
    with LocalCluster() as cluster:
        started = time.perf_counter()
        cluster.submit_topology("fanout", conf, builder.create_topology())
        running = cluster.get_running("fanout")
        (slow_task,) = running.plan.component_tasks["slow"]
        slow = running.runners[slow_task].stats
        inboxes = running.inboxes
        longest = 0
        while slow.executed < executions:
            queued = max(len(inbox) for inbox in inboxes)
            if queued > longest:
                longest = queued
            time.sleep(0.0005)
        elapsed = time.perf_counter() - started
        executed = slow.executed
        cluster.kill_topology("fanout", wait_secs=0)
    return {
        "longest_queue": longest,
        "peak_rss_mb": peak_rss_mb(),
        "slow_per_sec": round(executed / elapsed),
    }


def in_subprocess(workers: int, executions: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", "--workers", str(workers)]
    command += ["--executions", str(executions)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(output.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--executions", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_run(args.workers, args.executions)))
        return
    runs = [in_subprocess(args.workers, args.executions) for _ in range(args.runs)]
    report: dict[str, Any] = {"workers": args.workers, "executions": args.executions}
    for key in ("longest_queue", "peak_rss_mb", "slow_per_sec"):
        report[key] = statistics.median(run[key] for run in runs)
        report[f"{key}_runs"] = [run[key] for run in runs]
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>20}: {value}")


if __name__ == "__main__":
    main()
