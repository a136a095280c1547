"""FileSpout throughput against a bare loop reading the same files.

Both read 10 files of 50,000 lines (``event-<n> user-<u>``, about 20 bytes each) and
count the lines per user in a dict:

* ``spout``: ``FileSpout`` (``lines`` format) -> a counting bolt (one task each) on
  LocalCluster, one worker, XOR acking on; a run ends when the bolt has counted every
  line and the spout has every line acked. Each run reads a fresh copy of the files
  (the spout keeps its progress in the directory), so it reads everything again.
* ``memory``: the same topology with an in-memory spout emitting the same lines with
  the same kind of message id (``(file, line)``), keeping them pending until acked: the
  engine's ceiling for a reliable spout feeding one bolt, files aside.
* ``bare``: a plain loop opening each file in text mode and counting its lines.

Each figure is lines per second, the median of ``runs`` runs (alternating), with the
ratios of the spout to the in-memory spout and to the bare loop (reported; no target).

    python bench/connector_files.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from squall import BasicBolt, Config, LocalCluster, Spout, TopologyBuilder
from squall.connectors.files import FileSpout

FILES = 10
LINES = 50_000
USERS = 1000


def make_files(directory: str, files: int, lines: int) -> None:
    """``files`` files of ``lines`` lines each in ``directory``."""
    for number in range(files):
        with open(os.path.join(directory, f"events-{number:02d}.log"), "w") as handle:
            handle.writelines(
                f"event-{number * lines + i} user-{i % USERS}\n" for i in range(lines)
            )


class CountUsers(BasicBolt):
    """Counts lines per user (the line's second word)."""

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, tup: Any, collector: Any) -> None:
        user = tup.values[0].split(" ", 1)[1]
        self.counts[user] = self.counts.get(user, 0) + 1


class MemoryLines(Spout):
    """Emits the lines of ``files`` x ``lines`` from memory, 16 per ``next_tuple``, each
    with a ``(file, line)`` message id kept pending until acked."""

    def __init__(self, files: int, lines: int) -> None:
        self.files = files
        self.lines = lines

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["line"])

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.file = 0
        self.line = 0
        self.pending: dict[tuple[str, int], str] = {}

    def next_tuple(self) -> None:
        emit = self.collector.emit
        for _ in range(16):
            if self.line == self.lines:
                if self.file + 1 == self.files:
                    return
                self.file += 1
                self.line = 0
            self.line += 1
            number = self.file * self.lines + self.line - 1
            text = f"event-{number} user-{(self.line - 1) % USERS}"
            msg_id = (f"events-{self.file:02d}.log", self.line)
            self.pending[msg_id] = text
            emit([text], msg_id)

    def ack(self, msg_id: Any) -> None:
        del self.pending[msg_id]


def run_topology(spout: Spout, total: int) -> float:
    """Lines/s of ``spout`` -> ``CountUsers`` until every line is counted and acked."""
    builder = TopologyBuilder()
    builder.set_spout("lines", spout, 1)
    builder.set_bolt("count", CountUsers(), 1).shuffle_grouping("lines")
    conf = Config().set_num_workers(1).set_num_ackers(1)
    with LocalCluster() as cluster:
        started = time.perf_counter()
        cluster.submit_topology("lines", conf, builder.create_topology())
        running = cluster.get_running("lines")
        count = running.runners[running.plan.component_tasks["count"][0]]
        source = running.runners[running.plan.component_tasks["lines"][0]]
        while count.stats.executed < total or source.stats.acked < total:
            time.sleep(0.005)
        elapsed = time.perf_counter() - started
        cluster.kill_topology("lines")
    return total / elapsed


def run_spout(template: str, total: int) -> float:
    """Lines/s of one ``FileSpout`` run over a fresh copy of ``template``."""
    directory = tempfile.mkdtemp(prefix="squall-bench-files-")
    try:
        for name in os.listdir(template):
            shutil.copyfile(os.path.join(template, name), os.path.join(directory, name))
        return run_topology(FileSpout(directory, "*.log"), total)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def run_bare(template: str, total: int) -> float:
    """Lines/s of a plain loop reading and counting the files."""
    counts: dict[str, int] = {}
    seen = 0
    started = time.perf_counter()
    for name in sorted(os.listdir(template)):
        with open(os.path.join(template, name), encoding="utf-8") as handle:
            for line in handle:
                user = line.rstrip("\n").split(" ", 1)[1]
                counts[user] = counts.get(user, 0) + 1
                seen += 1
    elapsed = time.perf_counter() - started
    assert seen == total
    return total / elapsed


def measure(runs: int = 3, files: int = FILES, lines: int = LINES) -> dict[str, Any]:
    """Median lines/s of the spout topology, the in-memory spout and the bare loop,
    and the ratios."""
    template = tempfile.mkdtemp(prefix="squall-bench-files-template-")
    total = files * lines
    try:
        make_files(template, files, lines)
        spout: list[float] = []
        memory: list[float] = []
        bare: list[float] = []
        for _ in range(runs):
            bare.append(run_bare(template, total))
            memory.append(run_topology(MemoryLines(files, lines), total))
            spout.append(run_spout(template, total))
    finally:
        shutil.rmtree(template, ignore_errors=True)
    spout_median, bare_median = statistics.median(spout), statistics.median(bare)
    memory_median = statistics.median(memory)
    return {
        "files": files,
        "lines": total,
        "runs": runs,
        "spout_per_sec": round(spout_median),
        "memory_per_sec": round(memory_median),
        "bare_per_sec": round(bare_median),
        "ratio_to_memory": round(spout_median / memory_median, 3),
        "ratio_to_bare": round(spout_median / bare_median, 3),
        "spout_runs": [round(value) for value in spout],
        "memory_runs": [round(value) for value in memory],
        "bare_runs": [round(value) for value in bare],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=FILES)
    parser.add_argument("--lines", type=int, default=LINES, help="lines per file")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    arguments = parser.parse_args()
    report = measure(arguments.runs, arguments.files, arguments.lines)
    if arguments.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>16}: {value}")


if __name__ == "__main__":
    main()
