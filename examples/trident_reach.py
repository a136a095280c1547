"""Reach: Storm's Trident DRPC example over two static states.

The reach of a URL is the number of distinct people who saw it in their feed: the
followers of everyone who tweeted it. Two read-only states stand for external
databases: :data:`TWEETERS_DB` maps a URL to the people who tweeted it and
:data:`FOLLOWERS_DB` maps a person to their followers. Both are
``TridentTopology.new_static_state`` states over ``MemoryMapState.static_factory``.

``drpc.execute("reach", url)`` runs one batch through a DRPC stream:

1. ``state_query`` with ``MapGet`` looks the URL up in the tweeters state; ``ExpandList``
   turns the list into one tuple per tweeter;
2. ``shuffle`` spreads the tweeters over the tasks of the next step, which looks up each
   tweeter's followers (batched: one lookup per partition) and expands them;
3. ``group_by("follower")`` with the ``One`` combiner aggregator leaves one tuple per
   distinct follower (combined partially before the repartition, as every
   ``CombinerAggregator`` is);
4. ``aggregate`` with ``Sum`` adds the ones up: the reach, returned as ``[[reach]]``.

Run it::

    python examples/trident_reach.py
"""

from __future__ import annotations

from typing import Any

from squall import Config, Fields, LocalCluster, StormTopology
from squall.drpc import LocalDRPC
from squall.trident import (
    CombinerAggregator,
    Function,
    MapGet,
    Sum,
    TridentCollector,
    TridentTopology,
    TridentTuple,
)
from squall.trident.state import MemoryMapState

TWEETERS_DB: dict[str, list[str]] = {
    "foo.com/blog/1": ["sally", "bob", "tim", "george", "nathan"],
    "engineering.twitter.com/blog/5": ["adam", "david", "sally", "nathan"],
    "tech.backtype.com/blog/123": ["tim", "mike", "john"],
}

FOLLOWERS_DB: dict[str, list[str]] = {
    "sally": ["bob", "tim", "alice", "adam", "jim", "chris", "jai"],
    "bob": ["sally", "nathan", "jim", "mary", "david", "vivian"],
    "tim": ["alex"],
    "nathan": ["sally", "bob", "adam", "harry", "chris", "vivian", "emily", "jordan"],
    "adam": ["david", "carissa"],
    "mike": ["john", "bob"],
    "john": ["alice", "nathan", "jim", "mike", "bob"],
}

CONF = Config({Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 1})


class ExpandList(Function):
    """Emits one tuple per item of the list in the first input field (none for None)."""

    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        for item in tup[0] or ():
            collector.emit([item])


class One(CombinerAggregator):
    """1 for any number of tuples: grouped, it marks each distinct group once."""

    def init(self, tup: TridentTuple) -> int:
        return 1

    def combine(self, value1: Any, value2: Any) -> int:
        return 1

    def zero(self) -> int:
        return 1


def build_topology(
    drpc: LocalDRPC | None = None,
    tweeters: dict[str, list[str]] | None = None,
    followers: dict[str, list[str]] | None = None,
) -> StormTopology:
    """The reach topology, serving DRPC function ``"reach"``.

    Args:
        drpc: where the function is served (a new ``LocalDRPC`` if None).
        tweeters: URL -> tweeters (:data:`TWEETERS_DB` by default).
        followers: person -> followers (:data:`FOLLOWERS_DB` by default).
    """
    topology = TridentTopology()
    url_to_tweeters = topology.new_static_state(
        MemoryMapState.static_factory(TWEETERS_DB if tweeters is None else tweeters)
    )
    tweeters_to_followers = topology.new_static_state(
        MemoryMapState.static_factory(FOLLOWERS_DB if followers is None else followers)
    )
    (
        topology.new_drpc_stream("reach", drpc if drpc is not None else LocalDRPC())
        .state_query(url_to_tweeters, Fields("args"), MapGet(), Fields("tweeters"))
        .each(Fields("tweeters"), ExpandList(), Fields("tweeter"))
        .shuffle()
        .state_query(tweeters_to_followers, Fields("tweeter"), MapGet(), Fields("followers"))
        .each(Fields("followers"), ExpandList(), Fields("follower"))
        .parallelism_hint(4)
        .group_by(Fields("follower"))
        .aggregate(One(), Fields("one"))
        .parallelism_hint(3)
        .aggregate(Fields("one"), Sum(), Fields("reach"))
    )
    return topology.build()


def main() -> None:
    with LocalDRPC(timeout_secs=10.0) as drpc, LocalCluster() as cluster:
        cluster.submit_topology("reach", CONF, build_topology(drpc))
        for url in [*TWEETERS_DB, "unknown.org"]:
            print(f"reach of {url}: {drpc.execute('reach', url)}")
        cluster.kill_topology("reach")


if __name__ == "__main__":
    main()
