"""Storm's storm-starter ``PersistentWindowingTopology``, ported line by line.

``RandomIntegerSpout`` emits random integers; ``avgbolt`` is a stateful windowed bolt
over sliding processing-time windows (10 s, every 2 s) whose windows are persisted in
the state (``with_persistence()``), with the values of at most 25000 of their tuples
in memory (``with_max_events_in_memory``); it emits the global average (over every
window so far, kept in its ``KeyValueState``) and the window's average; ``printer``
prints them. The state is checkpointed every 5 seconds.

Storm's example keeps the state in Redis; this port uses squall's ``sqlite`` provider in
a directory of the system's temporary folder (``STATE_DIR``), so that it runs anywhere;
squall's ``redis`` provider works the same (see docs/state.md).

Run it::

    squall run examples/storm_starter/persistent_windowing.py --seconds 10

or ``python examples/storm_starter/persistent_windowing.py``. ``build_topology(count,
seed, interval_ms)`` (a finite, seeded spout) is what the tests use.
"""

from __future__ import annotations

import logging
import os
import random
import tempfile
import time
from typing import Any

from squall import (
    BasicBolt,
    BasicOutputCollector,
    Config,
    Duration,
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

STATE_DIR = os.path.join(tempfile.gettempdir(), "squall-persistent-windowing")

#: The configuration ``squall run`` starts from.
conf = Config()
conf.set_debug(False)
# checkpoint the state every 5 seconds
conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 5000
# keep the state in a durable store (Storm's example uses Redis)
conf[Config.TOPOLOGY_STATE_PROVIDER] = "sqlite"
conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = {"directory": STATE_DIR}
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
        self.collector.emit([self.rand.randrange(1000), ts, self.msg_id], msg_id=self.msg_id)

    def ack(self, msg_id: Any) -> None:
        LOG.debug("Got ACK for msgId : %s", msg_id)

    def fail(self, msg_id: Any) -> None:
        LOG.debug("Got FAIL for msgId : %s", msg_id)


class Averages:
    """The global and the window's averages."""

    def __init__(self, global_: float, window: float) -> None:
        self.global_ = global_
        self.window = window

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Averages) and (self.global_, self.window) == (
            other.global_,
            other.window,
        )

    def __hash__(self) -> int:
        return hash((self.global_, self.window))

    def __repr__(self) -> str:
        return f"Averages{{global={self.global_:.2f}, window={self.window:.2f}}}"


class PrinterBolt(BasicBolt):
    """Prints the first value of every tuple (Storm's lambda bolt)."""

    def execute(self, x: Tuple, y: BasicOutputCollector) -> None:
        print(x.get_value(0))


class AvgBolt(StatefulWindowedBolt):
    """Emits the global average (over every window, kept in the state) and the
    window's average."""

    STATE_KEY = "avg"

    def prepare(
        self, topo_conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector

    def init_state(self, state: KeyValueState) -> None:
        self.state = state
        self.global_avg = state.get(self.STATE_KEY, (0, 0))
        LOG.info("initState with global avg [%s]", self.global_avg)

    def execute(self, window: Any) -> None:
        sum_ = 0
        count = 0
        # iterate over tuples in the current window
        for tuple in window.get():
            sum_ += tuple.get_value(0)
            count += 1
        LOG.debug("Count : %d", count)
        self.global_avg = (self.global_avg[0] + sum_, self.global_avg[1] + count)
        # update the value in state
        self.state.put(self.STATE_KEY, self.global_avg)
        # emit the averages downstream
        self.collector.emit([Averages(self.global_avg[0] / self.global_avg[1], sum_ / count)])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields("avg"))


def build_topology(
    count: int | None = None, seed: int | None = None, interval_ms: float = 100
) -> StormTopology:
    """The topology of Storm's ``main`` (a spout of ``count`` tuples, if given)."""
    builder = TopologyBuilder()
    # generate random numbers
    builder.set_spout("spout", RandomIntegerSpout(count, seed, interval_ms))
    # emits sliding window and global averages
    builder.set_bolt(
        "avgbolt",
        AvgBolt()
        .with_window(Duration.seconds(10), Duration.seconds(2))
        # persist the window in state
        .with_persistence()
        # max number of events to be cached in memory
        .with_max_events_in_memory(25000),
        1,
    ).shuffle_grouping("spout")
    # print the values to stdout
    builder.set_bolt("printer", PrinterBolt(), 1).shuffle_grouping("avgbolt")
    return builder.create_topology()


def main() -> None:
    """Run for fifteen seconds on a LocalCluster, printing the averages."""
    with LocalCluster() as cluster:
        cluster.submit_topology("test", conf, build_topology())
        time.sleep(15)
        cluster.kill_topology("test")


if __name__ == "__main__":
    main()
