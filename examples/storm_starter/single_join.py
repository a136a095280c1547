"""storm-starter's ``SingleJoinExample``, joined with Storm's ``JoinBolt``.

Storm's ``SingleJoinExample`` joins two streams with a hand-written ``SingleJoinBolt``
and says to prefer the built-in ``JoinBolt``; this port does that, the way Storm's
``JoinBoltExample`` does. Two feeder spouts, ``gender`` (``id``, ``gender``) and ``age``
(``id``, ``age``), are fields-grouped on ``id`` into ``join``, a ``JoinBolt`` that joins
them on ``id`` in 10 s tumbling windows and selects ``gender`` and ``age``; ``printer``
prints each joined tuple. ``main`` feeds ten genders (ids 0 to 9, even ids ``male``) and
ten ages (ids 9 down to 0, age ``id + 20``), as Storm's example does, waits for the
window to fire and prints the ten joined tuples.

Run it::

    python examples/storm_starter/single_join.py

``build_topology(gender_spout, age_spout, window=..., printer=...)`` builds the topology
around the given spouts (tests pass their own window and printer); ``generate_gender_data``
and ``generate_age_data`` feed Storm's input.
"""

from __future__ import annotations

import time

from squall import (
    BasicBolt,
    BasicOutputCollector,
    Bolt,
    Config,
    Count,
    Duration,
    Fields,
    JoinBolt,
    LocalCluster,
    StormTopology,
    TopologyBuilder,
    Tuple,
)
from squall.testing import FeederSpout

#: The join window of Storm's example: 10 s, tumbling.
WINDOW = Duration.seconds(10)


class PrinterBolt(BasicBolt):
    """storm-starter's ``PrinterBolt``: prints every tuple it receives."""

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        print(tup.values)


def build_topology(
    gender_spout: FeederSpout,
    age_spout: FeederSpout,
    window: Count | Duration = WINDOW,
    printer: Bolt | BasicBolt | None = None,
) -> StormTopology:
    """``gender`` and ``age`` joined on ``id`` by ``join`` in tumbling ``window``s,
    printed by ``printer`` (default: a ``PrinterBolt``)."""
    builder = TopologyBuilder()
    builder.set_spout("gender", gender_spout)
    builder.set_spout("age", age_spout)

    # inner join of 'age' and 'gender' records on 'id' field
    joiner = (
        JoinBolt("gender", "id")
        .join("age", "id", "gender")
        .select("gender,age")
        .with_tumbling_window(window)
    )
    builder.set_bolt("join", joiner).fields_grouping("gender", Fields("id")).fields_grouping(
        "age", Fields("id")
    )
    builder.set_bolt("printer", printer or PrinterBolt()).shuffle_grouping("join")
    return builder.create_topology()


def generate_gender_data(gender_spout: FeederSpout) -> None:
    """Ids 0 to 9: even ids ``male``, odd ids ``female``."""
    for i in range(10):
        gender = "male" if i % 2 == 0 else "female"
        gender_spout.feed([i, gender])


def generate_age_data(age_spout: FeederSpout) -> None:
    """Ids 9 down to 0, aged ``id + 20``."""
    for i in range(9, -1, -1):
        age_spout.feed([i, i + 20])


def main() -> None:
    """Run the example on a ``LocalCluster`` until its window has fired."""
    gender_spout = FeederSpout(Fields("id", "gender"))
    age_spout = FeederSpout(Fields("id", "age"))
    conf = Config()
    with LocalCluster() as cluster:
        cluster.submit_topology("join-example", conf, build_topology(gender_spout, age_spout))
        generate_gender_data(gender_spout)
        generate_age_data(age_spout)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            printer = cluster.get_topology_info("join-example").components["printer"]
            if printer.executed >= 10:
                break
            time.sleep(0.1)
        cluster.kill_topology("join-example")


if __name__ == "__main__":
    main()
