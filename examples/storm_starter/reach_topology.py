"""ReachTopology: storm-starter's ``ReachTopology``, reach computed by linear DRPC.

The reach of a URL is the number of distinct people exposed to it: the followers of
everyone who tweeted it. Two in-memory maps stand for the databases: ``TWEETERS_DB``
(URL -> who tweeted it) and ``FOLLOWERS_DB`` (person -> followers). Four steps, all in
parallel, as in Storm:

1. ``GetTweeters`` (4 tasks) emits ``(id, tweeter)`` for each tweeter of the URL;
2. ``GetFollowers`` (12 tasks, shuffle grouping) emits ``(id, follower)`` for each of
   their followers;
3. ``PartialUniquer`` (6 tasks, fields grouping on ``id`` and ``follower``), a batch
   bolt, collects the distinct followers its task got for the request and, once the
   task has all of them, emits ``(id, partial-count)``;
4. ``CountAggregator`` (3 tasks, fields grouping on ``id``), a batch bolt, adds the
   partial counts up and emits ``(id, reach)``: what the client gets, as a string.

Run it in one process (a ``LocalCluster`` and a ``LocalDRPC``)::

    python examples/storm_starter/reach_topology.py

or against a DRPC server, as Storm's ``main`` does (``drpc.servers`` is set below)::

    squall drpc &
    squall run examples/storm_starter/reach_topology.py --seconds 60 &
    curl http://127.0.0.1:3772/drpc/reach/foo.com%2Fblog%2F1    # 16

``build_topology(drpc)`` serves a ``LocalDRPC``, ``build_topology()`` the configured DRPC
servers.
"""

from __future__ import annotations

from typing import Any

from squall import (
    BasicBolt,
    BasicOutputCollector,
    Config,
    Fields,
    LocalCluster,
    OutputFieldsDeclarer,
    StormTopology,
    TopologyContext,
    Tuple,
)
from squall.drpc import LinearDRPCTopologyBuilder, LocalDRPC
from squall.transactional import BatchBolt, BatchOutputCollector

#: The configuration ``squall run`` submits with: the DRPC server of ``squall drpc``.
conf = {"drpc.servers": ["127.0.0.1"]}

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


class GetTweeters(BasicBolt):
    """``(id, url)`` -> ``(id, tweeter)`` for each tweeter of the URL."""

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        id = tup.get_value(0)
        url = tup.get_string(1)
        tweeters = TWEETERS_DB.get(url)
        if tweeters is not None:
            for tweeter in tweeters:
                collector.emit([id, tweeter])

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields("id", "tweeter"))


class GetFollowers(BasicBolt):
    """``(id, tweeter)`` -> ``(id, follower)`` for each follower of the tweeter."""

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        id = tup.get_value(0)
        tweeter = tup.get_string(1)
        followers = FOLLOWERS_DB.get(tweeter)
        if followers is not None:
            for follower in followers:
                collector.emit([id, follower])

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields("id", "follower"))


class PartialUniquer(BatchBolt):
    """The distinct followers of one request on this task: ``(id, partial-count)``."""

    def prepare(
        self,
        conf: dict[str, Any],
        context: TopologyContext,
        collector: BatchOutputCollector,
        id: Any,
    ) -> None:
        self.collector = collector
        self.id = id
        self.followers: set[str] = set()

    def execute(self, tup: Tuple) -> None:
        self.followers.add(tup.get_string(1))

    def finish_batch(self) -> None:
        self.collector.emit([self.id, len(self.followers)])

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields("id", "partial-count"))


class CountAggregator(BatchBolt):
    """The sum of one request's partial counts: ``(id, reach)``."""

    def prepare(
        self,
        conf: dict[str, Any],
        context: TopologyContext,
        collector: BatchOutputCollector,
        id: Any,
    ) -> None:
        self.collector = collector
        self.id = id
        self.count = 0

    def execute(self, tup: Tuple) -> None:
        self.count += tup.get_value(1)

    def finish_batch(self) -> None:
        self.collector.emit([self.id, self.count])

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(Fields("id", "reach"))


def construct() -> LinearDRPCTopologyBuilder:
    """The builder of Storm's example."""
    builder = LinearDRPCTopologyBuilder("reach")
    builder.add_bolt(GetTweeters(), 4)
    builder.add_bolt(GetFollowers(), 12).shuffle_grouping()
    builder.add_bolt(PartialUniquer(), 6).fields_grouping(Fields("id", "follower"))
    builder.add_bolt(CountAggregator(), 3).fields_grouping(Fields("id"))
    return builder


def build_topology(drpc: LocalDRPC | None = None) -> StormTopology:
    """The topology serving ``reach``: from ``drpc``, or from the configured DRPC
    servers when it is None."""
    builder = construct()
    return builder.create_local_topology(drpc) if drpc else builder.create_remote_topology()


def main() -> None:
    config = Config()
    config.set_num_workers(6)
    with LocalDRPC(timeout_secs=30.0) as drpc, LocalCluster() as cluster:
        cluster.submit_topology("reach-drpc", config, build_topology(drpc))
        for url in ["foo.com/blog/1", "engineering.twitter.com/blog/5", "notaurl.com"]:
            print(f"Reach of {url}: {drpc.execute('reach', url)}")
        cluster.kill_topology("reach-drpc")


if __name__ == "__main__":
    main()
