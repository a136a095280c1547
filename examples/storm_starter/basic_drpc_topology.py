"""BasicDRPCTopology: storm-starter's ``BasicDRPCTopology``, a linear DRPC topology.

The DRPC function ``exclamation`` appends ``"!"`` to its argument: one step,
``ExclaimBolt`` (3 tasks), receives ``(id, input)`` and emits ``(id, input + "!")``.
``LinearDRPCTopologyBuilder`` wires the rest as Storm does (a ``DRPCSpout``, the
request's preparation, the join of the result with its return info, ``ReturnResults``).

Run it in one process (a ``LocalCluster`` and a ``LocalDRPC``)::

    python examples/storm_starter/basic_drpc_topology.py hello storm

or against a DRPC server, as Storm's ``main`` does (``drpc.servers`` is set below)::

    squall drpc &
    squall run examples/storm_starter/basic_drpc_topology.py --seconds 60 &
    curl http://127.0.0.1:3772/drpc/exclamation/hello    # hello!

``build_topology(drpc)`` serves a ``LocalDRPC`` (the tests), ``build_topology()`` the
configured DRPC servers.
"""

from __future__ import annotations

import sys

from squall import (
    BasicBolt,
    BasicOutputCollector,
    Config,
    Fields,
    LocalCluster,
    OutputFieldsDeclarer,
    StormTopology,
    Tuple,
)
from squall.drpc import LinearDRPCTopologyBuilder, LocalDRPC

#: The configuration ``squall run`` submits with: the DRPC server of ``squall drpc``.
conf = {"drpc.servers": ["127.0.0.1"]}


class ExclaimBolt(BasicBolt):
    """Appends ``"!"`` to the request's argument."""

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        input = tup.get_string(1)
        collector.emit([tup.get_value(0), input + "!"])

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields("id", "result"))


def construct(function: str = "exclamation") -> LinearDRPCTopologyBuilder:
    """The builder of Storm's example."""
    builder = LinearDRPCTopologyBuilder(function)
    builder.add_bolt(ExclaimBolt(), 3)
    return builder


def build_topology(drpc: LocalDRPC | None = None, function: str = "exclamation") -> StormTopology:
    """The topology serving ``function``: from ``drpc``, or from the configured DRPC
    servers when it is None."""
    builder = construct(function)
    return builder.create_local_topology(drpc) if drpc else builder.create_remote_topology()


def main(words: list[str]) -> None:
    config = Config()
    config.set_num_workers(3)
    with LocalDRPC(timeout_secs=30.0) as drpc, LocalCluster() as cluster:
        cluster.submit_topology("DRPCExample", config, build_topology(drpc))
        for word in words or ["hello", "storm"]:
            print(f'Result for "{word}": {drpc.execute("exclamation", word)}')
        cluster.kill_topology("DRPCExample")


if __name__ == "__main__":
    main(sys.argv[1:])
