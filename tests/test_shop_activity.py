"""The shop-activity example end to end: its documented commands, run as written against
real Redis and PostgreSQL servers, fill the table with exactly the counts a direct
computation over the feed gives.

Which actions are late depends on when each window task's watermark moved, so the test
takes the late actions from the example's late file and checks that the table holds
the windows of every other well-formed action, that only very late actions were late,
and that no action was lost: every well-formed action is counted or late, every
malformed entry is in the errors file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import unique_name
from tests.kafka_broker import KafkaBroker
from tests.servers import PostgresServer, RedisServer
from tests.test_example_commands import ROOT, docstring_commands
from tests.test_examples import EXAMPLES, load_example

#: Commands of a run: generous, a Spark run starts a JVM and runs many micro-batches.
TIMEOUT_SECS = 240.0
ACTIONS = 4000


@pytest.fixture
def example_modules(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return load_example("shop_activity"), load_example("shop_activity_feed")


def _run(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    words = command.split()
    program = {"squall": [str(Path(sys.executable).parent / "squall")], "python": [sys.executable]}
    completed = subprocess.run(
        [*program[words[0]], *words[1:]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECS,
        check=False,
    )
    assert completed.returncode == 0, f"{command}\n{completed.stdout}\n{completed.stderr}"
    return completed


def _commands(example: str, engine: str) -> tuple[str, str]:
    """The feed command and the ``squall run`` command for ``engine`` that the
    example's docstring gives."""
    commands = docstring_commands(EXAMPLES / example)
    feed_command = next(c for c in commands if "shop_activity_feed.py" in c)
    run_command = next(
        c
        for c in commands
        if c.startswith("squall run") and ("--engine spark" in c) == (engine == "spark")
    )
    return feed_command, run_command


def _json_lines(directory: Path, prefix: str) -> list[dict[str, Any]]:
    records = []
    for path in sorted(directory.glob(f"{prefix}*")):
        if path.name.startswith("."):
            continue
        records += [json.loads(line) for line in path.read_text().splitlines() if line]
    return records


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_the_documented_commands_fill_the_table_with_exact_window_counts(
    engine: str,
    example_modules: tuple[Any, Any],
    redis_server: RedisServer,
    postgres_server: PostgresServer,
    tmp_path: Path,
) -> None:
    shop, feed = example_modules
    feed_command, run_command = _commands("shop_activity.py", engine)
    assert f"--actions {ACTIONS}" in feed_command
    dsn = postgres_server.create_database(unique_name("shop").replace("-", "_"))
    output = tmp_path / "output"
    env = {
        **os.environ,
        "SHOP_REDIS_URL": redis_server.url,
        "SHOP_STREAM": unique_name("shop:actions"),
        "SHOP_POSTGRES_DSN": dsn,
        "SHOP_OUTPUT_DIR": str(output),
    }
    _run(feed_command, env)
    _run(run_command, env)

    _check_windows(shop, feed, dsn, output)
    errors = _json_lines(output, "errors")
    assert sorted(r["id"] for r in errors) == sorted(set(r["id"] for r in errors))
    assert len(errors) == len(_malformed(feed))


@pytest.mark.timeout(TIMEOUT_SECS + 60)  # a Spark run on a busy machine takes minutes
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_the_kafka_example_fills_the_table_and_the_results_topic_with_exact_counts(
    engine: str,
    example_modules: tuple[Any, Any],
    kafka_broker: KafkaBroker,
    postgres_server: PostgresServer,
    tmp_path: Path,
) -> None:
    shop, feed = example_modules
    feed_command, run_command = _commands("shop_activity_kafka.py", engine)
    assert f"--actions {ACTIONS}" in feed_command and "--kafka" in feed_command
    dsn = postgres_server.create_database(unique_name("shop").replace("-", "_"))
    output = tmp_path / "output"
    topic, results = unique_name("shop-actions"), unique_name("shop-windows")
    kafka_broker.create_topic(results)
    env = {
        **os.environ,
        "SHOP_KAFKA_BOOTSTRAP": kafka_broker.bootstrap,
        "SHOP_TOPIC": topic,
        "SHOP_RESULTS_TOPIC": results,
        "SHOP_POSTGRES_DSN": dsn,
        "SHOP_OUTPUT_DIR": str(output),
    }
    _run(feed_command, env)
    _run(run_command, env)

    _check_windows(shop, feed, dsn, output)
    with psycopg.connect(dsn) as connection:
        rows = connection.execute(
            "SELECT window_start, window_end, product_id, actions FROM product_activity"
        ).fetchall()
    published: dict[tuple[int, str], dict[str, Any]] = {}
    for _, _, key, value in kafka_broker.read(results, kafka_broker.records_in(results)):
        window = json.loads(value or b"null")
        assert key == window["product_id"].encode()
        published[(window["window_end"], window["product_id"])] = window  # the last one
    assert published == {
        (end, product): {
            "window_start": start,
            "window_end": end,
            "product_id": product,
            "actions": actions,
        }
        for start, end, product, actions in rows
    }
    errors = _json_lines(output, "errors")
    assert sorted({(r["partition"], r["offset"]) for r in errors}) == sorted(
        (r["partition"], r["offset"]) for r in errors
    )
    assert len(errors) == len(_malformed(feed))


def _malformed(feed: Any) -> list[Any]:
    return [e for e in feed.generate_actions(ACTIONS) if not e.ts.isdigit()]


def _check_windows(shop: Any, feed: Any, dsn: str, output: Path) -> Counter[tuple[Any, ...]]:
    """Check the table against the feed (see the module docstring); the late actions."""
    with psycopg.connect(dsn) as connection:
        rows = connection.execute(
            "SELECT window_start, window_end, product_id, actions FROM product_activity"
        ).fetchall()
    table = {(end, product): actions for _, end, product, actions in rows}
    assert all(end - start == shop.WINDOW.ms for start, end, _, _ in rows)

    entries = list(feed.generate_actions(ACTIONS))
    actions = [e for e in entries if e.ts.isdigit() and e.action != shop.END_OF_FEED]
    assert len(_malformed(feed)) == 4
    late = _json_lines(output, "late")
    late_keys = Counter((r["user_id"], r["product_id"], r["action"], r["ts"]) for r in late)
    every_key = Counter((a.user_id, a.product_id, a.action, int(a.ts)) for a in actions)
    assert not late_keys - every_key  # only actions of the feed, each late at most once
    arrival = {
        (a.user_id, a.product_id, a.action, int(a.ts)): i
        for i, a in enumerate(entries)
        if a.ts.isdigit()
    }
    for key in late_keys:  # only very late actions: at least 90 s behind their slot
        assert shop_slot(feed, arrival[key]) - key[3] >= 90_000
    counted = every_key - late_keys
    assert table == shop.expected_counts(
        (product, ts) for (_, product, _, ts), n in counted.items() for _ in range(n)
    )
    return late_keys


def shop_slot(feed: Any, index: int) -> int:
    """The event time at which entry ``index`` of the feed was due."""
    return int(feed.START_MS + index * 250)
