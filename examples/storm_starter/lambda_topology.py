"""LambdaTopology: storm-starter's ``org.apache.storm.starter.LambdaTopology``, line by
line: a topology of functions instead of component classes.

``spout1`` is a function taking no argument (Storm's supplier): each ``next_tuple``
emits what it returns, here a random UUID, on field ``"lambda"``. ``bolt1`` is a
function of ``(tup, collector)`` declaring the fields ``"strValue"`` and
``"intValue"``: it emits the UUID's first part between a prefix and a suffix, with a
tag. ``bolt2`` is a function of the tuple alone: it prints it. The variables the
functions use (``prefix``, ``suffix``, ``tag``) travel with them to every task, as
Storm's serializable lambdas do.

Run it::

    squall run examples/storm_starter/lambda_topology.py --seconds 5
    python examples/storm_starter/lambda_topology.py

(``--seconds N`` sets how long it runs, 10 by default)

``create_builder(supplier)`` returns the builder with another supplier (the tests give
one that runs dry, returning None, and add a bolt); ``build_topology()`` the topology.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable
from typing import Any

from squall import BasicOutputCollector, Config, LocalCluster, StormTopology, TopologyBuilder, Tuple


class Prefix:
    """Storm's ``Prefix``: a string that travels with the function using it."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


def create_builder(supplier: Callable[[], Any] | None = None) -> TopologyBuilder:
    """The topology's builder (Storm's ``run``): spout1 -> bolt1 -> bolt2."""
    builder = TopologyBuilder()

    # spout1: generate random strings; bolt1: get the first part of a string;
    # bolt2: output the tuple.
    prefix = Prefix("Hello lambda:")
    suffix = ":so cool!"
    tag = 999

    def bolt1(tup: Tuple, collector: BasicOutputCollector) -> None:
        parts = tup.get_string_by_field("lambda").split("-")
        collector.emit([f"{prefix}{parts[0]}{suffix}", tag])

    builder.set_spout("spout1", supplier or (lambda: str(uuid.uuid4())))
    builder.set_bolt("bolt1", bolt1, "strValue", "intValue").shuffle_grouping("spout1")
    builder.set_bolt("bolt2", lambda tup: print(tup)).shuffle_grouping("bolt1")
    return builder


def build_topology() -> StormTopology:
    """The topology (see :func:`create_builder`)."""
    return create_builder().create_topology()


conf = Config()
conf.set_debug(True)
conf.set_num_workers(2)


def main() -> None:
    """Run the topology as ``lambda-demo`` on a LocalCluster for a while."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with LocalCluster() as cluster:
        cluster.submit_topology("lambda-demo", conf, build_topology())
        time.sleep(args.seconds)
        cluster.kill_topology("lambda-demo")


if __name__ == "__main__":
    main()
