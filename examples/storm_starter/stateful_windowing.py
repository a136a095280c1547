"""Storm's storm-starter ``StatefulWindowingTopology``, ported line by line.

``RandomIntegerSpout`` emits random integers, each with a timestamp and an increasing
message id (``msgid``); ``sumbolt`` is a stateful windowed bolt over sliding count
windows of 5 tuples every 3 that adds every window's values to a running sum kept in
its ``KeyValueState`` and emits the sum; ``printer`` prints what it gets. The message id
field lets the windows resume after a restart without firing again the windows already
evaluated (``with_message_id_field``).

Run it::

    squall run examples/storm_starter/stateful_windowing.py --seconds 5

or ``python examples/storm_starter/stateful_windowing.py``. ``build_topology(count, seed)``
(a finite, seeded spout; no pause between tuples) is what the tests use.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from squall import (
    BasicBolt,
    BasicOutputCollector,
    Config,
    Count,
    Fields,
    LocalCluster,
    OutputCollector,
    Spout,
    SpoutOutputCollector,
    StatefulWindowedBolt,
    StormTopology,
    TopologyBuilder,
    TopologyContext,
    Tuple,
)
from squall.state import KeyValueState

LOG = logging.getLogger(__name__)

#: The configuration ``squall run`` starts from.
conf = Config()
conf.set_debug(False)
conf.set_num_workers(1)


class RandomIntegerSpout(Spout):
    """Emits ``[value, ts, msgid]``: a random integer below 1000, a timestamp a day in
    the past and an increasing message id (the tuple's message id too), one every
    ``interval_ms`` (Storm's sleeps 100 ms in ``nextTuple``); ``count`` tuples at most
    (None: no end), from a generator seeded with ``seed`` (None: unseeded)."""

    def __init__(
        self, count: int | None = None, seed: int | None = None, interval_ms: float = 100
    ) -> None:
        self.count = count
        self.seed = seed
        self.interval_ms = interval_ms

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("value", "ts", "msgid"))

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self.collector = collector
        self.rand = random.Random(self.seed)
        self.msg_id = 0
        self.pending: set[int] = set()
        self.last_ms = -float("inf")

    def next_tuple(self) -> None:
        if self.count is not None and self.msg_id >= self.count:
            return
        now_ms = time.monotonic() * 1000
        if now_ms - self.last_ms < self.interval_ms:
            return
        self.last_ms = now_ms
        self.msg_id += 1
        ts = int(time.time() * 1000) - 24 * 60 * 60 * 1000
        self.pending.add(self.msg_id)
        self.collector.emit([self.rand.randrange(1000), ts, self.msg_id], msg_id=self.msg_id)

    def ack(self, msg_id: Any) -> None:
        LOG.debug("Got ACK for msgId : %s", msg_id)
        self.pending.discard(msg_id)

    def fail(self, msg_id: Any) -> None:
        LOG.debug("Got FAIL for msgId : %s", msg_id)
        self.pending.discard(msg_id)

    def is_exhausted(self) -> bool:
        """A finite spout is done once it emitted ``count`` tuples, all acked or failed."""
        return self.count is not None and self.msg_id >= self.count and not self.pending


class PrinterBolt(BasicBolt):
    """Prints every tuple."""

    def execute(self, tuple: Tuple, collector: BasicOutputCollector) -> None:
        print(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        pass


class WindowSumBolt(StatefulWindowedBolt):
    """Adds the values of every window to a sum kept in the state; emits the sum."""

    def prepare(
        self, topo_conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector

    def init_state(self, state: KeyValueState) -> None:
        self.state = state
        self.sum = state.get("sum", 0)
        LOG.debug("initState with state [%s] current sum [%s]", state, self.sum)

    def execute(self, input_window: Any) -> None:
        for tuple in input_window.get():
            self.sum += tuple.get_value_by_field("value")
        self.state.put("sum", self.sum)
        self.collector.emit([self.sum])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("sum"))


def build_topology(
    count: int | None = None, seed: int | None = None, interval_ms: float = 100
) -> StormTopology:
    """The topology of Storm's ``main`` (a spout of ``count`` tuples, if given)."""
    builder = TopologyBuilder()
    builder.set_spout("spout", RandomIntegerSpout(count, seed, interval_ms))
    builder.set_bolt(
        "sumbolt",
        WindowSumBolt().with_window(Count(5), Count(3)).with_message_id_field("msgid"),
        1,
    ).shuffle_grouping("spout")
    builder.set_bolt("printer", PrinterBolt(), 1).shuffle_grouping("sumbolt")
    return builder.create_topology()


def main() -> None:
    """Run for five seconds on a LocalCluster, printing the sums."""
    with LocalCluster() as cluster:
        cluster.submit_topology("test", conf, build_topology())
        time.sleep(5)
        cluster.kill_topology("test")


if __name__ == "__main__":
    main()
