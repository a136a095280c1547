"""Event-time sliding window throughput and memory on the local engine.

The topology: an event spout -> a windowed bolt (one task) keeping per-key sums over an
event-time window of 10 s sliding every 1 s, with a lag of 1 s, emitting one tuple per
window (its end and a copy of the per-key sums). The input, generated without a random
generator so every run is identical:

* 1,000 keys, values 0-99;
* 10,000 tuples per event-second (timestamps advance 1 ms every 10 tuples), so a window
  holds about 100,000 tuples;
* 1% of the tuples are out of order: their timestamp is 1-999 ms earlier (within the
  lag, so none is late);
* a final tuple timestamped far in the future pushes the watermark past the last
  windows.

The watermark interval is 10 ms of wall-clock time (the default, 1 s, would leave the
spout far ahead of the windows and a run mostly waiting). The bolt keeps its sums
incrementally from ``get_new()`` and ``get_expired()``. A run ends when every tuple has
been processed and the last window has fired (only the final tuple is still held) and,
with acking, every tuple tree is complete. Each run checks the number of windows and the
sums of one window against a direct computation.

    python bench/windowing.py --json                  # 5 runs, acking off, medians
    python bench/windowing.py --ack --runs 1 --json   # acking on (slow: see below)
    python bench/windowing.py --ack --unanchored --runs 1 --json

Acking is off by default. With ``--ack``, the spout emits with message ids, every tuple
is acked as it leaves the windows, and the window's emit (received by a sink bolt) is
anchored to every tuple of the window, as Storm does: about 115,000 anchors per emit.
``--unanchored`` emits the sums with ``anchors=[]`` instead, to separate the two costs.

Each run is a fresh subprocess, so peak memory (max RSS) is per run; RSS is also sampled
along the run to show it stays flat once the first window is full.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from squall import (
    BasicBolt,
    Config,
    Duration,
    LocalCluster,
    Spout,
    TopologyBuilder,
    TupleWindow,
    WindowedBolt,
)

KEYS = 1000
PER_EVENT_MS = 10  # tuples per event-time millisecond: 10,000 per event-second
START_MS = 1_700_000_000_000
FAR_FUTURE_MS = START_MS + 10 * 365 * 86_400_000
WINDOW = Duration.seconds(10)
SLIDE = Duration.seconds(1)
LAG = Duration.seconds(1)
WATERMARK_INTERVAL = Duration.milliseconds(10)


def timestamp(index: int) -> int:
    """Event time of tuple ``index``: 1% are 1-999 ms earlier than their place."""
    ts = START_MS + index // PER_EVENT_MS
    if index % 100 == 37:
        ts -= 1 + (index * 7919) % 999
    return ts


def expected_windows(total: int) -> int:
    """Windows that fire: every end aligned to the slide whose window holds a tuple."""
    first = min(timestamp(i) for i in range(total))
    last = max(timestamp(i) for i in range(total))
    slide, length = SLIDE.ms, WINDOW.ms
    first_end = -(-first // slide) * slide
    last_end = ((last + length - 1) // slide) * slide  # the last end with end - length < last
    return (last_end - first_end) // slide + 1


class EventSpout(Spout):
    outputs = ["key", "value", "ts"]

    def __init__(self, total: int, tracked: bool) -> None:
        self.total = total
        self.tracked = tracked

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.keys = [f"key-{n}" for n in range(KEYS)]
        self.emitted = 0

    def next_tuple(self) -> None:
        index = self.emitted
        if index < self.total:
            self.emitted = index + 1
            values = [self.keys[(index * 7919) % KEYS], index % 100, timestamp(index)]
            self.collector.emit(values, index if self.tracked else None)
        elif index == self.total:
            self.emitted = index + 1
            self.collector.emit(["flush", 0, FAR_FUTURE_MS])


class SlidingSums(WindowedBolt):
    """Per-key sums over the window, maintained from the new and expired tuples."""

    outputs = ["window_end", "sums"]

    def __init__(self, anchored: bool = True) -> None:
        self.anchored = anchored

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.sums: dict[str, int] = {}
        self.windows = 0

    def execute(self, window: TupleWindow) -> None:
        sums = self.sums
        new = window.get_new()
        if len(new) == len(window):  # nothing carried over from the previous window
            sums.clear()
        else:
            for tup in window.get_expired():
                values = tup.values
                sums[values[0]] -= values[1]
        for tup in new:
            values = tup.values
            sums[values[0]] = sums.get(values[0], 0) + values[1]
        self.windows += 1
        result = [window.end_timestamp, {key: total for key, total in sums.items() if total}]
        if self.anchored:
            self.collector.emit(result)  # anchored to every tuple of the window
        else:
            self.collector.emit(result, anchors=[])


class WindowSink(BasicBolt):
    """Receives the windows' sums; counts them and keeps those of window ``keep``."""

    def __init__(self, keep: int) -> None:
        self.keep = keep

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.windows = 0
        self.kept: list[Any] = []

    def execute(self, tup: Any, collector: Any) -> None:
        self.windows += 1
        if self.windows == self.keep:
            self.kept = list(tup.values)


def window_sums(total: int, end: int) -> dict[str, int]:
    """The per-key sums of the window ending at ``end``, computed directly."""
    keys = [f"key-{n}" for n in range(KEYS)]
    sums: dict[str, int] = {}
    for index in range(total):
        if end - WINDOW.ms < timestamp(index) <= end:
            key = keys[(index * 7919) % KEYS]
            sums[key] = sums.get(key, 0) + index % 100
    return {key: value for key, value in sums.items() if value}


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def run_once(total: int, ack: bool, anchored: bool = True) -> dict[str, Any]:
    windows_expected = expected_windows(total)
    builder = TopologyBuilder()
    builder.set_spout("events", EventSpout(total, ack), 1)
    bolt = (
        SlidingSums(anchored)
        .with_window(WINDOW, SLIDE)
        .with_timestamp_field("ts")
        .with_lag(LAG)
        .with_watermark_interval(WATERMARK_INTERVAL)
    )
    builder.set_bolt("window", bolt, 1).shuffle_grouping("events")
    builder.set_bolt("sink", WindowSink(windows_expected // 2), 1).shuffle_grouping("window")
    conf = Config().set_num_workers(1).set_num_ackers(1 if ack else 0)
    rss_before = rss_mb()
    samples = []
    with LocalCluster() as cluster:
        started = time.perf_counter()
        cluster.submit_topology("windowing", conf, builder.create_topology())
        running = cluster.get_running("windowing")
        (task,) = running.plan.component_tasks["window"]
        executor = running.runners[task].component
        spout_runner = running.runners[running.plan.component_tasks["events"][0]]
        spout = spout_runner.component
        (sink_task,) = running.plan.component_tasks["sink"]
        sink = running.runners[sink_task].component
        next_sample = started
        while True:
            held = len(executor.manager)
            tracker = executor.watermarks
            flushed = tracker is not None and max(tracker.latest.values(), default=0) == (
                FAR_FUTURE_MS
            )
            if (
                flushed
                and held == 1
                and sink.windows >= windows_expected
                and (not ack or spout_runner.stats.acked >= total)
            ):
                break
            now = time.perf_counter()
            if now >= next_sample:
                samples.append(
                    {
                        "seconds": round(now - started, 2),
                        "emitted": spout.emitted,
                        "held": held,
                        "rss_mb": round(rss_mb(), 1),
                    }
                )
                next_sample = now + 0.25
            time.sleep(0.002)
        elapsed = time.perf_counter() - started
        info = cluster.get_topology_info("windowing")
        cluster.kill_topology("windowing", wait_secs=0)
    custom = info.components["window"].custom
    end, sums = sink.kept
    return {
        "sums_correct": sums == window_sums(total, end),
        "tuples": total,
        "seconds": elapsed,
        "per_sec": total / elapsed,
        "windows": sink.windows,
        "windows_expected": windows_expected,
        "late": custom["late_tuples"],
        "acked": info.components["events"].acked,
        "rss_before_mb": round(rss_before, 1),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6,
        "rss_samples": samples,
    }


def in_subprocess(total: int, ack: bool, anchored: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", "--tuples", str(total)]
    if ack:
        command.append("--ack")
    if not anchored:
        command.append("--unanchored")
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(output.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tuples", type=int, default=500_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ack", action="store_true", help="acking on (anchors every window)")
    parser.add_argument(
        "--unanchored", action="store_true", help="emit the sums with anchors=[] (with --ack)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_once(args.tuples, args.ack, not args.unanchored)))
        return
    runs = [in_subprocess(args.tuples, args.ack, not args.unanchored) for _ in range(args.runs)]
    median = statistics.median(r["per_sec"] for r in runs)
    last = runs[-1]
    report: dict[str, Any] = {
        "mode": ("ack" if args.ack else "noack") + ("_unanchored" if args.unanchored else ""),
        "tuples": args.tuples,
        "runs": args.runs,
        "tuples_per_sec": round(median),
        "runs_per_sec": [round(r["per_sec"]) for r in runs],
        "seconds": round(statistics.median(r["seconds"] for r in runs), 2),
        "windows": last["windows"],
        "windows_expected": last["windows_expected"],
        "late": last["late"],
        "acked": last["acked"],
        "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs), 1),
        "rss_before_mb": last["rss_before_mb"],
        "rss_samples": [(s["seconds"], s["held"], s["rss_mb"]) for s in last["rss_samples"]],
    }
    if any(r["windows"] != r["windows_expected"] or not r["sums_correct"] for r in runs):
        raise SystemExit(f"a run fired the wrong windows or sums: {runs}")
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>18}: {value}")


if __name__ == "__main__":
    main()
