"""Connector throughput, each against the plain client loop doing the same work.

* ``redis``: ``RedisStreamSpout`` -> a counting bolt on LocalCluster, acking on, against
  a bare redis-py ``XREADGROUP``/``XACK`` loop over the same stream (target >= 0.5x).
* ``postgres``: the Trident word count into ``PostgresMapState`` against the same
  topology into ``SqliteMapState`` (reported).
* ``files``: ``FileSpout`` -> a counting bolt, acking on, against a bare loop reading
  the same files line by line (reported).
* ``kafka``: ``KafkaSpout`` and ``KafkaBolt`` against bare confluent-kafka consume and
  produce loops (target >= 0.6x each; see ``connector_kafka.py``).

Each part starts the servers it needs (Debian's ``redis-server``, PostgreSQL, a Tansu
broker) on free
loopback ports in temporary directories. Figures are medians of ``--runs`` runs.

    python bench/connectors.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import connector_files
import connector_kafka
import connector_postgres
import connector_redis

PARTS: dict[str, Callable[[int], dict[str, Any]]] = {
    "redis": connector_redis.measure,
    "postgres": connector_postgres.measure,
    "files": connector_files.measure,
    "kafka": connector_kafka.measure,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement")
    parser.add_argument(
        "--parts", default=",".join(PARTS), help=f"comma-separated parts ({', '.join(PARTS)})"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    arguments = parser.parse_args()
    results = {part: PARTS[part](arguments.runs) for part in arguments.parts.split(",")}
    if arguments.json:
        print(json.dumps(results))
    else:
        for part, figures in results.items():
            print(part, json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
