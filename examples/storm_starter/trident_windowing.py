"""Storm-starter's ``TridentWindowingInmemoryStoreTopology``: Trident windowing with an
in-memory windows store.

A ``FixedBatchSpout`` (batches of three sentences, cycling) feeds a stream that splits
each sentence into words; ``window`` counts the words of each window with
``CountAsAggregator`` (the window store: ``InMemoryWindowsStoreFactory``) and ``peek``
logs each window's count. With Storm's ``SlidingCountWindow.of(1000, 100)`` a window
fires every 100 words with the last 1000 (the first ones with 100, 200, ... words).

Run it::

    squall run examples/storm_starter/trident_windowing.py --seconds 5
    python examples/storm_starter/trident_windowing.py

(``python`` runs it 20 seconds, as Storm's ``main`` does; an argument names the
topology)

``build_topology(window_store, window_config)`` is Storm's ``buildTopology``; its
``cycle=False`` emits the sentences once (the tests' finite input) and ``sink`` also
receives each window's values.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any

from squall import Config, Fields, LocalCluster, StormTopology
from squall.trident import (
    FixedBatchSpout,
    Function,
    TridentCollector,
    TridentTopology,
    TridentTuple,
)
from squall.trident.windowing import (
    CountAsAggregator,
    InMemoryWindowsStoreFactory,
    SlidingCountWindow,
    WindowConfig,
    WindowsStoreFactory,
)

LOG = logging.getLogger("TridentWindowingInmemoryStoreTopology")

SENTENCES = [
    "the cow jumped over the moon",
    "the man went to the store and bought some candy",
    "four score and seven years ago",
    "how many apples can you eat",
    "to be or not to be the person",
]


class Split(Function):
    """Storm-starter's ``Split``: one tuple per word of the sentence."""

    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        for word in tup[0].split(" "):
            collector.emit([word])


class LogReceived:
    """The ``peek`` consumer: logs each window's result (and hands its values to
    ``sink``, if given)."""

    def __init__(self, sink: Callable[[list[Any]], Any] | None = None) -> None:
        self.sink = sink

    def __call__(self, tup: TridentTuple) -> None:
        LOG.info("Received tuple: [%s]", tup)
        if self.sink is not None:
            self.sink(list(tup.values))


def build_topology(
    window_store: WindowsStoreFactory | None = None,
    window_config: WindowConfig | None = None,
    cycle: bool = True,
    sink: Callable[[list[Any]], Any] | None = None,
    parallelism: int = 16,
) -> StormTopology:
    """Storm's ``buildTopology(windowStore, windowConfig)``.

    Args:
        window_store: the windows store factory (an ``InMemoryWindowsStoreFactory`` if
            None, as Storm's ``main`` passes).
        window_config: the windows (``SlidingCountWindow.of(1000, 100)`` if None).
        cycle: emit the sentences again and again (Storm's ``setCycle(true)``); False
            emits them once.
        sink: also called with each window's values (``[count]``).
        parallelism: the spout stream's parallelism hint (Storm's 16).
    """
    spout = FixedBatchSpout(Fields("sentence"), 3, *[[sentence] for sentence in SENTENCES])
    spout.set_cycle(cycle)

    topology = TridentTopology()

    (
        topology.new_stream("spout1", spout)
        .parallelism_hint(parallelism)
        .each(Fields("sentence"), Split(), Fields("word"))
        .window(
            window_config or SlidingCountWindow.of(1000, 100),
            window_store or InMemoryWindowsStoreFactory(),
            Fields("word"),
            CountAsAggregator(),
            Fields("count"),
        )
        .peek(LogReceived(sink))
    )

    return topology.build()


def main(args: list[str]) -> None:
    """Storm's ``main``: submit as ``wordCounter`` (or the name given) with three
    workers, here to a ``LocalCluster`` for 20 seconds."""
    logging.basicConfig(level=logging.INFO)
    conf = Config()
    map_state = InMemoryWindowsStoreFactory()
    topo_name = args[0] if args else "wordCounter"
    conf.set_num_workers(3)
    with LocalCluster() as cluster:
        cluster.submit_topology(
            topo_name, conf, build_topology(map_state, SlidingCountWindow.of(1000, 100))
        )
        time.sleep(20)
        cluster.kill_topology(topo_name)


if __name__ == "__main__":
    main(sys.argv[1:])
