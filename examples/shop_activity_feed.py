"""Feeds the shop-activity examples: user actions on a Redis stream, or on a Kafka topic.

Each entry is one action ``<user_id, product_id, action, ts>`` (``ts`` in epoch
milliseconds, event time), as a shop's front end would log it. The actions are made
by a seeded random generator, so a feed is reproducible:

* action ``i`` happened at ``START_MS + i * step_ms`` (250 ms apart);
* one in eight arrives out of order, up to 4 s behind (less than the example's 5 s
  lag, so it still counts in its windows);
* one in fifty arrives very late, 90 to 150 s behind: its windows have usually fired
  by then, so the example sends it to its late file;
* a few entries are malformed (a timestamp that is not a number), to show the
  spout's ``errors`` stream;
* at the end, one end-of-feed marker per product, timestamped far in the future,
  moves every window task's event time past the last windows so that they fire.

Run it (``SHOP_REDIS_URL``, default ``redis://127.0.0.1:6379/0``, names the server;
``SHOP_STREAM``, default ``shop:actions``, the stream)::

    python examples/shop_activity_feed.py --actions 4000

With ``--kafka`` it writes to a Kafka topic instead (``SHOP_KAFKA_BOOTSTRAP``, default
``127.0.0.1:9092``; ``SHOP_TOPIC``, default ``shop-actions``, created with 3 partitions
if missing): each action is a record keyed by its product, whose value is the JSON
object ``{"user_id", "product_id", "action", "ts"}`` (``ts`` a number, or for a
malformed action the text it has), for ``examples/shop_activity_kafka.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass

from shop_activity import DEFAULT_REDIS_URL, DEFAULT_STREAM, END_OF_FEED

#: Event time of the first action (2023-11-14T22:13:20Z, a multiple of every window).
START_MS = 1_700_000_000_000
#: Timestamp of the end-of-feed markers: 9999-12-31T23:59:59Z.
END_OF_FEED_TS = 253_402_300_799_000
ACTIONS = ("view", "cart", "purchase")
PRODUCTS = [f"product-{number:02d}" for number in range(12)]


@dataclass(frozen=True)
class Action:
    """One entry of the feed. ``ts`` is text, as on the stream: a malformed entry's is
    not a number."""

    user_id: str
    product_id: str
    action: str
    ts: str

    def fields(self) -> dict[str, str]:
        """The entry's fields, as ``XADD`` writes them."""
        return {
            "user_id": self.user_id,
            "product_id": self.product_id,
            "action": self.action,
            "ts": self.ts,
        }


def generate_actions(count: int, seed: int = 11, step_ms: int = 250) -> Iterator[Action]:
    """The feed's entries in arrival order: ``count`` actions (some malformed), then one
    end-of-feed marker per product."""
    rng = random.Random(seed)
    for index in range(count):
        user = f"user-{rng.randrange(200):03d}"
        product = rng.choice(PRODUCTS)
        action = rng.choices(ACTIONS, weights=(8, 3, 1))[0]
        ts = START_MS + index * step_ms
        roll = rng.random()
        if roll < 0.02:
            ts -= rng.randint(90_000, 150_000)
        elif roll < 0.145:
            ts -= rng.randint(1, 4_000)
        text = f"{ts // 1000} s" if index % 997 == 500 else str(ts)
        yield Action(user, product, action, text)
    for product in PRODUCTS:
        yield Action("-", product, END_OF_FEED, str(END_OF_FEED_TS))


def feed(url: str, stream: str, count: int, seed: int = 11) -> int:
    """Append the feed to ``stream`` on the Redis server at ``url``; the number of
    entries written."""
    import redis

    client = redis.Redis.from_url(url)
    written = 0
    try:
        pipeline = client.pipeline(transaction=False)
        for action in generate_actions(count, seed):
            pipeline.xadd(stream, action.fields())  # type: ignore[arg-type]
            written += 1
            if written % 1000 == 0:
                pipeline.execute()
        pipeline.execute()
    finally:
        client.close()
    return written


def action_record(action: Action) -> bytes:
    """An action as a Kafka record's value: the JSON object of its fields, ``ts`` a
    number when it is one."""
    fields: dict[str, object] = dict(action.fields())
    if action.ts.isdigit():
        fields["ts"] = int(action.ts)
    return json.dumps(fields).encode()


def feed_kafka(bootstrap: str, topic: str, count: int, seed: int = 11, partitions: int = 3) -> int:
    """Write the feed to ``topic`` (created with ``partitions`` partitions if missing) on
    the Kafka broker at ``bootstrap``, keyed by product; the number of records written."""
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=10).topics:
        try:
            for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
                future.result(timeout=30)
        except KafkaException as error:
            if "TOPIC_ALREADY_EXISTS" not in str(error):
                raise
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    failed: list[str] = []

    def delivered(error: object, message: object) -> None:
        if error is not None:
            failed.append(str(error))

    written = 0
    for action in generate_actions(count, seed):
        producer.produce(
            topic, key=action.product_id, value=action_record(action), on_delivery=delivered
        )
        written += 1
        if written % 1000 == 0:
            producer.poll(0)
    if producer.flush(60) or failed:
        raise SystemExit(f"the broker did not take every record: {failed[:3]}")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=4000, help="actions to write")
    parser.add_argument("--seed", type=int, default=11, help="seed of the generator")
    parser.add_argument("--kafka", action="store_true", help="write to a Kafka topic")
    arguments = parser.parse_args()
    if arguments.kafka:
        bootstrap = os.environ.get("SHOP_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
        topic = os.environ.get("SHOP_TOPIC", "shop-actions")
        written = feed_kafka(bootstrap, topic, arguments.actions, arguments.seed)
        print(f"wrote {written} records to {topic} on {bootstrap}")
        return
    url = os.environ.get("SHOP_REDIS_URL", DEFAULT_REDIS_URL)
    stream = os.environ.get("SHOP_STREAM", DEFAULT_STREAM)
    written = feed(url, stream, arguments.actions, arguments.seed)
    print(f"wrote {written} entries to {stream} on {url}")


if __name__ == "__main__":
    main()
