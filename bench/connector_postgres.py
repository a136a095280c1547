"""The Trident word count of ``trident_wordcount.py`` into ``PostgresMapState``, against
the same topology into ``SqliteMapState``, on LocalCluster.

Sentences (10 words each) in batches of ``batch_size`` -> ``each`` split ->
``group_by(word)`` -> ``persistent_aggregate(Count)`` into opaque state over two
partitions, ``in_flight`` transactions at once. Each run counts into a new table (a new
database for PostgreSQL, a new file for SQLite). The PostgreSQL server is started for
the measurement (``tests/servers.py``: a fresh cluster on a free loopback port, durable
writes off as in the tests) and removed after it. Rates are tuple executions per second
(a sentence split plus each word counted), medians of ``runs`` runs, alternating.

    python bench/connector_postgres.py --json
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from trident_wordcount import SentenceBatches, Split
from wordcount import WORDS_PER_SENTENCE

from squall import Config, LocalCluster
from squall.connectors.postgres import PostgresMapState
from squall.model.fields import Fields
from squall.trident import Count, TridentTopology
from squall.trident.state import SqliteMapState, StateType
from tests.servers import PostgresServer

BATCHES = 50
BATCH_SIZE = 1000
IN_FLIGHT = 3


def run_once(factory: Any, batches: int, batch_size: int, in_flight: int) -> float:
    """Tuple executions per second of one run counting into ``factory``'s state."""
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
    coordinator = "sentences/coordinator"
    with LocalCluster() as cluster:
        started = time.perf_counter()
        cluster.submit_topology("trident-wordcount", conf, topology.build())
        while True:
            info = cluster.get_topology_info("trident-wordcount")
            if info.components[coordinator].custom.get("last_committed_txid", 0) >= batches:
                break
            time.sleep(0.01)
        elapsed = time.perf_counter() - started
        committed = int(info.components[coordinator].custom["last_committed_txid"])
        cluster.kill_topology("trident-wordcount")
    return committed * batch_size * (1 + WORDS_PER_SENTENCE) / elapsed


def measure(
    runs: int = 3,
    batches: int = BATCHES,
    batch_size: int = BATCH_SIZE,
    in_flight: int = IN_FLIGHT,
) -> dict[str, Any]:
    """Median rates (tuple executions/s) into PostgreSQL and into SQLite, and their
    ratio: ``{"postgres": ..., "sqlite": ..., "postgres_vs_sqlite": ..., ...}``."""
    server = PostgresServer()
    directory = tempfile.mkdtemp(prefix="squall-bench-")
    postgres: list[float] = []
    sqlite: list[float] = []
    try:
        server.start()
        for run in range(runs):
            dsn = server.create_database(f"bench_{run}")
            postgres_state = PostgresMapState.factory(dsn, "word_counts", StateType.OPAQUE)
            postgres.append(run_once(postgres_state, batches, batch_size, in_flight))
            path = os.path.join(directory, f"counts-{run}.db")
            sqlite_state = SqliteMapState.factory(path, StateType.OPAQUE)
            sqlite.append(run_once(sqlite_state, batches, batch_size, in_flight))
    finally:
        server.close()
        shutil.rmtree(directory, ignore_errors=True)
    postgres_rate = statistics.median(postgres)
    sqlite_rate = statistics.median(sqlite)
    return {
        "batches": batches,
        "batch_size": batch_size,
        "in_flight": in_flight,
        "runs": runs,
        "postgres": round(postgres_rate),
        "sqlite": round(sqlite_rate),
        "postgres_vs_sqlite": round(postgres_rate / sqlite_rate, 3),
        "postgres_runs": [round(rate) for rate in postgres],
        "sqlite_runs": [round(rate) for rate in sqlite],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batches", type=int, default=BATCHES)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument("--in-flight", type=int, default=IN_FLIGHT)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = measure(args.runs, args.batches, args.batch_size, args.in_flight)
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>20}: {value}")


if __name__ == "__main__":
    main()
