"""examples/storm_starter/join_bolt.py: storm-starter's JoinBoltExample, run with
Storm's input (ten genders, ten ages in reverse order) in its 10 s window on a manual
clock. (tests/test_storm_starter_single_join.py runs the same join on every engine.)"""

from __future__ import annotations

from types import ModuleType

from squall import Fields, LocalCluster, ManualClock
from squall.testing import CapturingBolt, FeederSpout
from tests.helpers import wait_until
from tests.starter_loading import load_starter


def load() -> ModuleType:
    """The example, imported from its file."""
    return load_starter("join_bolt")


def test_join_bolt_example_selects_qualified_ids() -> None:
    example = load()
    gender_spout, age_spout = FeederSpout(["id", "gender"]), FeederSpout(["id", "age"])
    printer = CapturingBolt()
    topology = example.build_topology(gender_spout, age_spout, printer=printer)
    assert topology.output_fields("joiner", "default") == Fields(
        "genderSpout:id", "ageSpout:id", "gender", "age"
    )
    clock = ManualClock()
    with LocalCluster(clock=clock) as cluster:
        cluster.submit_topology("join-example", {}, topology)

        def executed() -> int:
            return cluster.get_topology_info("join-example").components["joiner"].executed

        example.generate_gender_data(gender_spout)
        example.generate_age_data(age_spout)
        wait_until(lambda: executed() == 20)
        clock.advance(10_000)  # the 10 s tick: the window fires
        wait_until(lambda: len(printer.values()) == 10)
        cluster.kill_topology("join-example")
    # Id i (genders' order) is "male" when even, "female" when odd, and aged i + 20.
    assert printer.values() == [
        [i, i, "male" if i % 2 == 0 else "female", i + 20] for i in range(10)
    ]
