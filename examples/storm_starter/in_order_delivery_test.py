"""InOrderDeliveryTest: storm-starter's ``org.apache.storm.starter.InOrderDeliveryTest``,
line by line.

Eight ``InOrderSpout`` tasks each emit ``[base, count]``, ``base`` being the task's index
and ``count`` 0, 1, 2...; ``count`` (8 ``Check`` tasks, fields grouping on ``c1``)
checks that the counts of each ``base`` arrive in order, and fails the tuple (raising
``FailedException``) at the first one that does not. As in Storm, the configuration
registers a ``LoggingMetricsConsumer``, which logs every task's built-in metrics once a
minute to the logger ``squall.metrics`` (a ``__fail-count`` above 0 on ``count`` is a
tuple out of order), and asks for one worker; the spout's figures are printed every 30
seconds.

Run it::

    squall run examples/storm_starter/in_order_delivery_test.py --seconds 5
    python examples/storm_starter/in_order_delivery_test.py --seconds 10

(without ``--seconds`` it runs 1500 seconds, as Storm's does; a first argument names
the topology)

``build_topology(max_count=...)`` stops each spout task after ``max_count`` tuples
(used by the tests).
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from squall import (
    BasicBolt,
    BasicOutputCollector,
    Config,
    FailedException,
    Fields,
    LocalCluster,
    LoggingMetricsConsumer,
    OutputFieldsDeclarer,
    Spout,
    SpoutOutputCollector,
    StormTopology,
    TopologyBuilder,
    TopologyContext,
    Tuple,
)


class InOrderSpout(Spout):
    """Emits ``[base, count]`` with message id ``"ACK"``: ``base`` is the task's index,
    ``count`` counts up from 0.

    Args:
        max_count: tuples per task (``None``: no end).
    """

    def __init__(self, max_count: int | None = None) -> None:
        self.max_count = max_count

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self.collector = collector
        self.base = context.get_this_task_index()
        self.count = 0

    def next_tuple(self) -> None:
        if self.max_count is not None and self.count >= self.max_count:
            return
        self.collector.emit([self.base, self.count], msg_id="ACK")
        self.count += 1

    def ack(self, msg_id: Any) -> None:
        """As in Storm: a completed tuple needs nothing more."""

    def fail(self, msg_id: Any) -> None:
        """As in Storm: a failed tuple is not replayed (the count goes on)."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields("c1", "c2"))


class Check(BasicBolt):
    """Fails a tuple whose ``c2`` is not the one expected next for its ``c1``."""

    def __init__(self) -> None:
        self.expected: dict[int, int] = {}

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        c1 = tup.get_value(0)
        c2 = tup.get_value(1)
        exp = self.expected.get(c1, 0)
        if c2 != exp:
            print(f"{c1} {c2} != {exp}")
            raise FailedException(f"{c1} {c2} != {exp}")
        self.expected[c1] = c2 + 1

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The check emits nothing: it only fails tuples that arrive out of order."""


#: What ``squall run`` shows under its final metrics (as ``--show`` would): each spout
#: task's last ``[base, count]`` (``count``'s ``failed`` column stays 0 while the counts
#: of every base arrive in order).
show = ["spout@c1"]


def build_topology(max_count: int | None = None) -> StormTopology:
    """spout (8) -> count (8, fields ``c1``)."""
    builder = TopologyBuilder()
    builder.set_spout("spout", InOrderSpout(max_count), 8)
    builder.set_bolt("count", Check(), 8).fields_grouping("spout", Fields("c1"))
    return builder.create_topology()


conf = Config()
conf.register_metrics_consumer(LoggingMetricsConsumer)
conf.set_num_workers(1)


def print_metrics(cluster: Any, name: str) -> str:
    """Print (and return) the spout's figures: uptime, acked, mean complete latency,
    acked per second and failed."""
    info = cluster.get_topology_info(name)
    spout = info.components["spout"]
    uptime = info.uptime_secs
    line = (
        f"uptime: {int(uptime)} acked: {spout.acked} avgLatency: {spout.complete_latency_ms} "
        f"acked/sec: {spout.acked / uptime if uptime else 0.0} failed: {spout.failed}"
    )
    print(line)
    return line


def main() -> None:
    """Run the topology on a LocalCluster, printing its figures every 30 seconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("topology_name", nargs="?", default="in-order-test")
    parser.add_argument("--seconds", type=float, default=1500.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    with LocalCluster() as cluster:
        cluster.submit_topology(args.topology_name, conf, build_topology())
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            time.sleep(min(30.0, max(0.0, deadline - time.monotonic())))
            print_metrics(cluster, args.topology_name)
        cluster.kill_topology(args.topology_name)


if __name__ == "__main__":
    main()
