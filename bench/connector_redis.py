"""RedisStreamSpout throughput against a bare redis-py consumer loop.

Both read the same pre-filled stream (200,000 entries of two fields) through a consumer
group of their own (a fresh group per run, created at the stream's start), count the
entries per ``user`` field in a dict, and acknowledge every entry (``XACK``):

* ``spout``: ``RedisStreamSpout`` -> a counting bolt (one task each) on LocalCluster,
  one worker, XOR acking on; a run ends when the bolt has counted every entry and the
  group has no pending entry left.
* ``bare``: a plain loop of ``XREADGROUP ... COUNT batch`` then one ``XACK`` of the
  batch's ids, until the stream is read.

Each figure is entries per second, the median of ``runs`` runs (alternating); the
target is ``spout`` >= 0.5x ``bare``. The script starts its own ``redis-server``
(Debian's package) on a free loopback port, in a temporary directory.

    python bench/connector_redis.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import redis

from squall import BasicBolt, Config, LocalCluster, TopologyBuilder
from squall.connectors.redis import RedisStreamSpout

STREAM = "bench:events"
ENTRIES = 200_000
BATCH = 500
USERS = 1000


class Server:
    """A throwaway ``redis-server`` on a free loopback port (no persistence)."""

    def __init__(self) -> None:
        if shutil.which("redis-server") is None:
            raise SystemExit("redis-server is not installed (apt-get install redis-server)")
        self.directory = tempfile.mkdtemp(prefix="squall-bench-redis-")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.process = subprocess.Popen(
            [
                "redis-server",
                *("--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.directory),
                *("--save", "", "--appendonly", "no"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


def fill(client: redis.Redis, entries: int) -> None:
    """Append ``entries`` entries ``{user, action}`` to :data:`STREAM`."""
    client.delete(STREAM)
    pipeline = client.pipeline(transaction=False)
    for index in range(entries):
        pipeline.xadd(STREAM, {"user": f"user-{index % USERS}", "action": "view"})
        if index % 5000 == 4999:
            pipeline.execute()
    pipeline.execute()


class CountUsers(BasicBolt):
    """Counts the entries per ``user`` (the input's ``data`` dict)."""

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, tup: Any, collector: Any) -> None:
        user = tup.values[1]["user"]
        self.counts[user] = self.counts.get(user, 0) + 1


def pending(client: redis.Redis, group: str) -> int:
    return int(client.xpending(STREAM, group)["pending"])  # type: ignore[index]


def run_spout(client: redis.Redis, url: str, group: str, entries: int, batch: int) -> float:
    """Entries per second of the spout topology over the whole stream."""
    client.xgroup_create(STREAM, group, id="0")
    builder = TopologyBuilder()
    builder.set_spout("events", RedisStreamSpout(url, STREAM, group, batch=batch))
    builder.set_bolt("count", CountUsers()).shuffle_grouping("events")
    conf = Config().set_num_workers(1).set_num_ackers(1)
    with LocalCluster() as cluster:
        started = time.perf_counter()
        cluster.submit_topology("redis-bench", conf, builder.create_topology())
        running = cluster.get_running("redis-bench")
        counter = running.runners[running.plan.component_tasks["count"][0]]
        while counter.stats.executed < entries or pending(client, group):
            time.sleep(0.005)
        elapsed = time.perf_counter() - started
        counted = sum(counter.component.counts.values())  # type: ignore[attr-defined]
        cluster.kill_topology("redis-bench")
    assert counted == entries, (counted, entries)
    return entries / elapsed


def run_bare(client: redis.Redis, group: str, entries: int, batch: int) -> float:
    """Entries per second of a plain XREADGROUP/XACK loop over the whole stream."""
    client.xgroup_create(STREAM, group, id="0")
    counts: dict[str, int] = {}
    started = time.perf_counter()
    while True:
        reply: Any = client.xreadgroup(group, "bare", {STREAM: ">"}, count=batch)
        if not reply:
            break
        read = reply[0][1]
        for _, fields in read:
            user = fields["user"]
            counts[user] = counts.get(user, 0) + 1
        client.xack(STREAM, group, *[entry_id for entry_id, _ in read])
    elapsed = time.perf_counter() - started
    assert sum(counts.values()) == entries and not pending(client, group)
    return entries / elapsed


def measure(runs: int = 3, entries: int = ENTRIES, batch: int = BATCH) -> dict[str, Any]:
    """Median entries/s of the spout topology and of the bare loop, and their ratio."""
    server = Server()
    try:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        fill(client, entries)
        spout: list[float] = []
        bare: list[float] = []
        for run in range(runs):
            bare.append(run_bare(client, f"bare-{run}", entries, batch))
            spout.append(run_spout(client, server.url, f"spout-{run}", entries, batch))
        client.close()
    finally:
        server.stop()
    spout_median, bare_median = statistics.median(spout), statistics.median(bare)
    return {
        "entries": entries,
        "batch": batch,
        "runs": runs,
        "spout_per_sec": round(spout_median),
        "bare_per_sec": round(bare_median),
        "ratio": round(spout_median / bare_median, 2),
        "target_ratio": 0.5,
        "spout_runs": [round(value) for value in spout],
        "bare_runs": [round(value) for value in bare],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--entries", type=int, default=ENTRIES)
    parser.add_argument("--batch", type=int, default=BATCH, help="entries per read")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    arguments = parser.parse_args()
    report = measure(arguments.runs, arguments.entries, arguments.batch)
    if arguments.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>16}: {value}")


if __name__ == "__main__":
    main()
