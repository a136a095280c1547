"""Shop activity on Kafka: actions per product over sliding event-time windows, from a
Kafka topic into PostgreSQL and into another Kafka topic.

The same pipeline as ``examples/shop_activity.py``, with Kafka at both ends. The shop
logs every user action to topic ``shop-actions`` as a JSON object ``{"user_id",
"product_id", "action", "ts"}`` keyed by product (``examples/shop_activity_feed.py
--kafka`` writes a reproducible feed, out of order and with some very late actions).
The topology:

* ``actions``: a :class:`~squall.connectors.kafka.KafkaSpout` reading the topic's
  partitions as consumer group ``shop-activity`` (at-least-once: the group's offsets
  are committed past a record once the tuples it caused are processed). Its translator
  turns a record into ``[user_id, product_id, action, ts]``; a record whose value is not
  JSON or whose ``ts`` is not a number leaves on the spout's ``errors`` stream.
* ``checked``, ``activity``, ``table``, ``late`` and ``errors``: as in
  ``shop_activity.py``: a sliding window of 1 minute every 10 s on ``ts`` with a lag of
  5 s counts the actions per product; the counts are upserted into PostgreSQL table
  ``product_activity``; late actions and malformed records are appended as JSON lines to
  files under the output directory.
* ``published``: writes every window's count to topic ``shop-activity-windows`` with a
  :class:`~squall.connectors.kafka.KafkaBolt`, keyed by product, the value the JSON
  object ``{"window_start", "window_end", "product_id", "actions"}``. A window counted
  again after a replay is written again, with the same count: a reader keeps the last
  record per ``(window_end, product_id)``.

Configuration, from the environment: ``SHOP_KAFKA_BOOTSTRAP`` (default
``127.0.0.1:9092``), ``SHOP_TOPIC`` (default ``shop-actions``), ``SHOP_RESULTS_TOPIC``
(default ``shop-activity-windows``), ``SHOP_POSTGRES_DSN`` (default
``postgresql://127.0.0.1:5432/postgres``) and ``SHOP_OUTPUT_DIR`` (default
``shop-output``). It needs a Kafka broker and PostgreSQL: on a machine without them,
start throwaway ones in another terminal with
``python examples/shop_activity_servers.py --kafka 9092 --postgres 5432`` (a Tansu
broker from the dev extra and a fresh PostgreSQL cluster, until Ctrl-C; on other ports,
paste the ``export`` lines it prints). Then run it::

    python examples/shop_activity_feed.py --kafka --actions 4000
    squall run examples/shop_activity_kafka.py --until-idle --seconds 120
    squall run examples/shop_activity_kafka.py --engine spark --until-idle --seconds 180

(on Spark, feed a fresh topic first: the consumer group has committed the first one).
"""

from __future__ import annotations

import os
from typing import Any

from shop_activity import DEFAULT_OUTPUT_DIR, DEFAULT_POSTGRES_DSN, GROUP, add_activity

from squall import StormTopology, TopologyBuilder
from squall.connectors.kafka import KafkaBolt, KafkaRecord, KafkaSpout

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_TOPIC = "shop-actions"
DEFAULT_RESULTS_TOPIC = "shop-activity-windows"
ACTION_FIELDS = ("user_id", "product_id", "action", "ts")

conf = {"topology.max.spout.pending": 5000, "topology.message.timeout.secs": 120}


def action_values(record: KafkaRecord) -> list[Any]:
    """A record's action as ``[user_id, product_id, action, ts]``.

    Raises:
        ValueError: the value is not an action with a numeric ``ts`` (the spout emits the
            record on its ``errors`` stream).
    """
    action = record.value
    if not isinstance(action, dict):
        raise ValueError(f"the value is not a JSON object: {action!r}")
    ts = action.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, int):
        raise ValueError(f"ts is not a number: {ts!r}")
    return [action["user_id"], action["product_id"], action["action"], ts]


def build_topology() -> StormTopology:
    """actions -> checked -> activity (fields on product_id) -> table and published;
    late and errors streams to files."""
    bootstrap = os.environ.get("SHOP_KAFKA_BOOTSTRAP", DEFAULT_BOOTSTRAP)
    topic = os.environ.get("SHOP_TOPIC", DEFAULT_TOPIC)
    results = os.environ.get("SHOP_RESULTS_TOPIC", DEFAULT_RESULTS_TOPIC)
    dsn = os.environ.get("SHOP_POSTGRES_DSN", DEFAULT_POSTGRES_DSN)
    output = os.path.abspath(os.environ.get("SHOP_OUTPUT_DIR", DEFAULT_OUTPUT_DIR))
    builder = TopologyBuilder()
    builder.set_spout(
        "actions",
        KafkaSpout(
            bootstrap,
            topic,
            GROUP,
            fields=ACTION_FIELDS,
            value_format="json",
            translator=action_values,
            commit_period_ms=1000,
        ),
    )
    add_activity(builder, "actions", dsn, output)
    published = KafkaBolt(
        bootstrap, results, key_field="product_id", value_field=None, value_format="json"
    )
    builder.set_bolt("published", published).shuffle_grouping("activity")
    return builder.create_topology()
