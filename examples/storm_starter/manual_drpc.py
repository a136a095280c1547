"""ManualDRPC: storm-starter's ``ManualDRPC``, a DRPC topology wired by hand.

A ``DRPCSpout`` emits each request of the function ``exclamation`` as ``(args,
return-info)``; ``ExclamationBolt`` (3 tasks) appends ``"!!!"`` to the argument and
passes the return info on; ``ReturnResults`` (3 tasks) sends the result back to the
client: ``execute("exclamation", "aaa")`` returns ``"aaa!!!"``.

Run it in one process (a ``LocalCluster`` and a ``LocalDRPC``)::

    python examples/storm_starter/manual_drpc.py

or against a DRPC server, as Storm's ``main`` does (``drpc.servers`` is set below)::

    squall drpc &
    squall run examples/storm_starter/manual_drpc.py --seconds 60 &
    curl http://127.0.0.1:3772/drpc/exclamation/aaa    # aaa!!!

``build_topology(drpc)`` serves a ``LocalDRPC``, ``build_topology()`` the configured DRPC
servers (the tests run both).
"""

from __future__ import annotations

from squall import (
    BasicBolt,
    BasicOutputCollector,
    Fields,
    LocalCluster,
    OutputFieldsDeclarer,
    StormTopology,
    TopologyBuilder,
    Tuple,
)
from squall.drpc import DRPCSpout, LocalDRPC, ReturnResults

#: The configuration ``squall run`` submits with: the DRPC server of ``squall drpc``.
conf = {"drpc.servers": ["127.0.0.1"]}


class ExclamationBolt(BasicBolt):
    """Appends ``"!!!"`` to the argument; passes the return info on."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields("result", "return-info"))

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        arg = tup.get_string(0)
        ret_info = tup.get_value(1)
        collector.emit([arg + "!!!", ret_info])


def build_topology(drpc: LocalDRPC | None = None) -> StormTopology:
    """Storm's wiring: ``drpc`` -> ``exclaim`` -> ``return``; the spout takes its
    requests from ``drpc``, or from the configured DRPC servers when it is None."""
    builder = TopologyBuilder()
    spout = DRPCSpout("exclamation", drpc)
    builder.set_spout("drpc", spout)
    builder.set_bolt("exclaim", ExclamationBolt(), 3).shuffle_grouping("drpc")
    builder.set_bolt("return", ReturnResults(), 3).shuffle_grouping("exclaim")
    return builder.create_topology()


def main() -> None:
    with LocalDRPC(timeout_secs=30.0) as drpc, LocalCluster() as cluster:
        cluster.submit_topology("exclaim", {}, build_topology(drpc))
        print(drpc.execute("exclamation", "aaa"))
        print(drpc.execute("exclamation", "bbb"))
        cluster.kill_topology("exclaim")


if __name__ == "__main__":
    main()
