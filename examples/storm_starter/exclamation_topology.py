"""ExclamationTopology: storm-starter's ``org.apache.storm.starter.ExclamationTopology``,
line by line.

Ten ``TestWordSpout`` tasks emit random words (``"nathan"``, ``"mike"``...);
``exclaim1`` (3 tasks) appends ``"!!!"`` and ``exclaim2`` (2 tasks) appends another, so
``"nathan"`` comes out as ``"nathan!!!!!!"``. ``ExclamationBolt`` anchors its emit to
the input and acks it, as Storm's ``BaseRichBolt`` does. As in Storm, the configuration
turns debug on (every emit is logged) and asks for 3 workers.

Run it::

    squall run examples/storm_starter/exclamation_topology.py --seconds 5
    python examples/storm_starter/exclamation_topology.py

(its arguments, both optional: a topology name and ``--seconds N``, 10 by default)

``create_builder(seed=..., max_words=...)`` returns the builder, with reproducible
spouts that stop after ``max_words`` words per task (the tests add a bolt to it);
``build_topology()`` the topology.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from squall import (
    Bolt,
    Config,
    Fields,
    LocalCluster,
    OutputCollector,
    OutputFieldsDeclarer,
    StormTopology,
    TopologyBuilder,
    TopologyContext,
    Tuple,
)
from squall.testing import TestWordSpout


class ExclamationBolt(Bolt):
    """Appends ``"!!!"`` to the word, anchoring the new tuple to the input, then acks."""

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        self.collector = collector

    def execute(self, tup: Tuple) -> None:
        self.collector.emit([tup.get_string(0) + "!!!"], anchors=tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields("word"))


def create_builder(seed: int | None = None, max_words: int | None = None) -> TopologyBuilder:
    """The topology's builder (Storm's ``run``): word (10) -> exclaim1 (3) -> exclaim2 (2)."""
    builder = TopologyBuilder()
    builder.set_spout("word", TestWordSpout(seed=seed, max_words=max_words), 10)
    builder.set_bolt("exclaim1", ExclamationBolt(), 3).shuffle_grouping("word")
    builder.set_bolt("exclaim2", ExclamationBolt(), 2).shuffle_grouping("exclaim1")
    return builder


#: What ``squall run`` shows under its final metrics (as ``--show`` would):
#: the last words ``exclaim2`` emitted, with both exclamations.
show = ["exclaim2"]


def build_topology(seed: int | None = None, max_words: int | None = None) -> StormTopology:
    """The topology (see :func:`create_builder`)."""
    return create_builder(seed, max_words).create_topology()


conf = Config()
conf.set_debug(True)
conf.set_num_workers(3)


def main() -> None:
    """Run the topology on a LocalCluster for a while (Storm's local mode)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("topology_name", nargs="?", default="test")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with LocalCluster() as cluster:
        cluster.submit_topology(args.topology_name, conf, build_topology())
        time.sleep(args.seconds)
        cluster.kill_topology(args.topology_name)


if __name__ == "__main__":
    main()
