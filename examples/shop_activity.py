"""Shop activity: actions per product over sliding event-time windows, from a Redis
stream into PostgreSQL.

A shop logs every user action ``<user_id, product_id, action, ts>`` to a Redis stream
(``examples/shop_activity_feed.py`` writes a reproducible feed, out of order and with
some very late actions). The topology:

* ``actions``: a :class:`~squall.connectors.redis.RedisStreamSpout` reading the stream
  through consumer group ``shop-activity`` (at-least-once: an entry is acknowledged to
  Redis once the tuples it caused are processed). Malformed entries (a ``ts`` that is
  not a number) leave on its ``errors`` stream.
* ``checked``: passes each action on, anchored; the feed's end-of-feed markers pass
  untracked (they carry no action, only event time, see below).
* ``activity``: a sliding event-time window of 1 minute every 10 s on ``ts``, with a lag
  of 5 s, fields-grouped on ``product_id``: for each window, the number of actions per
  product, ``[window_start, window_end, product_id, actions]``. Actions older than the
  watermark when they arrive leave on the ``late`` stream.
* ``table``: upserts the counts into PostgreSQL table ``product_activity`` (primary key
  ``(window_end, product_id)``, so a window computed again after a replay overwrites
  its row instead of adding one). Each connection creates the table if it is missing.
* ``late`` and ``errors``: the late actions and the malformed entries, appended as JSON
  lines to files under the output directory (``late-*.jsonl``, ``errors-*.jsonl``).

Every window of a product's actions fires once event time has passed its end plus the
lag. The feed ends with one marker per product timestamped in the year 9999, which
moves every window task's watermark past the last windows; markers are untracked, so
they never hold the topology open.

Configuration, from the environment: ``SHOP_REDIS_URL`` (default
``redis://127.0.0.1:6379/0``), ``SHOP_STREAM`` (default ``shop:actions``),
``SHOP_POSTGRES_DSN`` (default ``postgresql://127.0.0.1:5432/postgres``) and
``SHOP_OUTPUT_DIR`` (default ``shop-output``). It needs Redis and PostgreSQL: on a
machine without them, start throwaway ones in another terminal with
``python examples/shop_activity_servers.py --redis 6379 --postgres 5432`` (until
Ctrl-C; on other ports, paste the ``export`` lines it prints). Then run it::

    python examples/shop_activity_feed.py --actions 4000
    squall run examples/shop_activity.py --until-idle --seconds 120
    squall run examples/shop_activity.py --engine spark --until-idle --seconds 180

(on Spark, feed a fresh stream first: the consumer group has read the first one).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from typing import Any

from squall import (
    Bolt,
    Duration,
    OutputCollector,
    StormTopology,
    TopologyBuilder,
    TopologyContext,
    Tuple,
    TupleWindow,
    WindowedBolt,
)
from squall.connectors.files import FileBolt
from squall.connectors.postgres import PostgresInsertBolt
from squall.connectors.redis import RedisStreamSpout

#: The ``action`` of the feed's end-of-feed markers.
END_OF_FEED = "end-of-feed"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_STREAM = "shop:actions"
WINDOW = Duration.minutes(1)
SLIDE = Duration.seconds(10)
LAG = Duration.seconds(5)
TABLE = "product_activity"
GROUP = "shop-activity"
DEFAULT_POSTGRES_DSN = "postgresql://127.0.0.1:5432/postgres"
DEFAULT_OUTPUT_DIR = "shop-output"

conf = {"topology.max.spout.pending": 5000, "topology.message.timeout.secs": 120}


class CheckedActions(Bolt):
    """Passes actions on anchored and acks them; end-of-feed markers pass untracked."""

    outputs = ["user_id", "product_id", "action", "ts"]

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector

    def execute(self, tup: Tuple) -> None:
        values = [tup["user_id"], tup["product_id"], tup["action"], tup["ts"]]
        if tup["action"] == END_OF_FEED:
            self.collector.emit(values)
        else:
            self.collector.emit(values, anchors=[tup])
        self.collector.ack(tup)


class ProductActivity(WindowedBolt):
    """Per window, the number of actions of each product in it (markers excluded)."""

    outputs = ["window_start", "window_end", "product_id", "actions"]

    def execute(self, window: TupleWindow) -> None:
        counts = Counter(tup["product_id"] for tup in window.get() if tup["action"] != END_OF_FEED)
        for product in sorted(counts):
            self.collector.emit(
                [window.start_timestamp, window.end_timestamp, product, counts[product]]
            )


class LateActions(Bolt):
    """Unpacks a late tuple into the action's fields."""

    outputs = ["user_id", "product_id", "action", "ts"]

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector

    def execute(self, tup: Tuple) -> None:
        self.collector.emit(list(tup["late_tuple"]), anchors=[tup])
        self.collector.ack(tup)


#: Run by each new connection of the ``table`` bolt before it writes, so the table is
#: made even when PostgreSQL comes up after the topology.
CREATE_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} ("
    "window_end BIGINT NOT NULL, product_id TEXT NOT NULL, "
    "window_start BIGINT NOT NULL, actions INTEGER NOT NULL, "
    "PRIMARY KEY (window_end, product_id))"
)


def expected_counts(
    actions: Iterable[tuple[str, int]],
) -> dict[tuple[int, str], int]:
    """What the table holds after the windows over ``actions`` (product, event time)
    fired: ``(window_end, product_id) -> actions`` for every window with actions."""
    width, slide = WINDOW.ms, SLIDE.ms
    counts: Counter[tuple[int, str]] = Counter()
    for product, ts in actions:
        end = -(-ts // slide) * slide  # the first window end at or after ts
        while end - width < ts:
            counts[(end, product)] += 1
            end += slide
    return dict(counts)


def add_activity(builder: TopologyBuilder, source: str, dsn: str, output: str) -> None:
    """Add what follows the spout ``source`` (its default stream: the actions; its
    ``errors`` stream: malformed input): ``checked``, ``activity``, ``table``, and the
    ``late_actions``, ``late`` and ``errors`` files."""
    builder.set_bolt("checked", CheckedActions(), 2).shuffle_grouping(source)
    window = (
        ProductActivity()
        .with_window(WINDOW, SLIDE)
        .with_timestamp_field("ts")
        .with_lag(LAG)
        .with_late_tuple_stream("late")
    )
    builder.set_bolt("activity", window, 2).fields_grouping("checked", ["product_id"])
    table = PostgresInsertBolt(
        dsn,
        TABLE,
        ["window_start", "window_end", "product_id", "actions"],
        on_conflict="update",
        conflict_columns=["window_end", "product_id"],
        init_sql=CREATE_TABLE,
    )
    builder.set_bolt("table", table, 2).shuffle_grouping("activity")
    builder.set_bolt("late_actions", LateActions()).shuffle_grouping("activity", "late")
    builder.set_bolt("late", FileBolt(output, prefix="late")).shuffle_grouping("late_actions")
    builder.set_bolt("errors", FileBolt(output, prefix="errors")).shuffle_grouping(source, "errors")


def build_topology() -> StormTopology:
    """actions -> checked -> activity (fields on product_id) -> table; late and errors
    streams to files."""
    redis_url = os.environ.get("SHOP_REDIS_URL", DEFAULT_REDIS_URL)
    stream = os.environ.get("SHOP_STREAM", DEFAULT_STREAM)
    dsn = os.environ.get("SHOP_POSTGRES_DSN", DEFAULT_POSTGRES_DSN)
    output = os.path.abspath(os.environ.get("SHOP_OUTPUT_DIR", DEFAULT_OUTPUT_DIR))
    builder = TopologyBuilder()
    builder.set_spout(
        "actions",
        RedisStreamSpout(
            redis_url,
            stream,
            GROUP,
            fields=("user_id", "product_id", "action", "ts"),
            decode={"ts": int},
        ),
    )
    add_activity(builder, "actions", dsn, output)
    return builder.create_topology()
