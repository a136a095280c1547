"""examples/storm_starter/single_join.py: storm-starter's SingleJoinExample with
``JoinBolt``, run with Storm's input (ten genders, ten ages in reverse order).

Each of the ten ids has one gender and one age, so the join gives ten tuples
``[gender, age]``, in the order of the base source (``gender``: ids 0 to 9), whatever
the order in which the two spouts' tuples arrive.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from squall import Count, LocalCluster, ManualClock
from squall.testing import CapturingBolt, FeederSpout
from tests.conftest import Engine, on_engines
from tests.helpers import wait_until
from tests.starter_loading import load_starter


def load() -> ModuleType:
    """The example, imported from its file."""
    return load_starter("single_join")


#: Id i is "male" when even, "female" when odd, and aged i + 20.
EXPECTED = [["male" if i % 2 == 0 else "female", i + 20] for i in range(10)]


def spouts() -> tuple[FeederSpout, FeederSpout]:
    return FeederSpout(["id", "gender"]), FeederSpout(["id", "age"])


def test_the_example_as_storm_writes_it_joins_in_a_ten_second_window() -> None:
    """The example's 10 s tumbling window, on a manual clock: the twenty tuples arrive
    at the start, and the window that fires 10 s later joins them all."""
    example = load()
    gender_spout, age_spout = spouts()
    printer = CapturingBolt()
    topology = example.build_topology(gender_spout, age_spout, printer=printer)
    clock = ManualClock()
    with LocalCluster(clock=clock) as cluster:
        cluster.submit_topology("join-example", {}, topology)

        def executed(component: str) -> int:
            return cluster.get_topology_info("join-example").components[component].executed

        example.generate_gender_data(gender_spout)
        example.generate_age_data(age_spout)
        wait_until(lambda: executed("join") == 20)
        assert printer.values() == []
        clock.advance(10_000)  # the 10 s tick: the window fires
        wait_until(lambda: len(printer.values()) == 10)
        assert executed("join") == 21
        cluster.kill_topology("join-example")
    assert printer.values() == EXPECTED


@pytest.mark.parametrize("engine", on_engines(), indirect=True)
def test_the_example_joins_genders_and_ages_on_every_engine(engine: Engine) -> None:
    """Processing-time windows fire when the engine's ticks say (on Spark at micro-batch
    starts), so the window here is the twenty tuples: a count window."""
    example = load()
    gender_spout, age_spout = spouts()
    printer = CapturingBolt()
    topology = example.build_topology(gender_spout, age_spout, Count(20), printer)
    example.generate_gender_data(gender_spout)
    example.generate_age_data(age_spout)
    with engine.running(topology, name="join-example") as run:
        run.wait_until(lambda: len(printer.values()) == 10, engine.timeout)
    assert printer.values() == EXPECTED
