"""Storm's ``TridentMinMaxOfVehiclesTopology`` (storm-starter), ported line by line.

A cycling ``FixedBatchSpout`` emits 20 random ``[vehicle, driver]`` pairs in batches of
10. Per batch: ``min``/``max`` with a ``SpeedComparator`` (over whole tuples) keep the
slowest and fastest vehicle (and their drivers); ``min_by``/``max_by`` of the
``vehicle`` field with an ``EfficiencyComparator`` (over vehicles) the least and most
efficient one. Each result goes through a ``Debug`` filter, which prints it.

Run it::

    python examples/storm_starter/trident_min_max_of_vehicles.py
    squall run examples/storm_starter/trident_min_max_of_vehicles.py --seconds 5

``build_vehicles_topology(vehicles, cycle, debug)`` takes the tuples and a ``debug``
factory, so a test can give a finite input and record what ``Debug`` would print.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from squall import Config, Fields, LocalCluster, StormTopology
from squall.trident import Debug, Filter, FixedBatchSpout, TridentTopology, TridentTuple

DebugFactory = Callable[[str], Filter]


@dataclass(frozen=True)
class Driver:
    """A vehicle's driver."""

    FIELD_NAME = "driver"
    name: str
    id: int


@dataclass(frozen=True)
class Vehicle:
    """A vehicle, its top speed and its efficiency."""

    FIELD_NAME = "vehicle"
    name: str
    max_speed: int
    efficiency: float

    @staticmethod
    def generate_vehicles(count: int) -> list[list[Any]]:
        """``count`` random ``[vehicle, driver]`` pairs."""
        vehicles = []
        for i in range(count):
            id_ = i - 1
            vehicles.append(
                [
                    Vehicle(f"Vehicle-{id_}", random.randrange(0, 100), random.uniform(1, 5)),
                    Driver(f"Driver-{id_}", id_),
                ]
            )
        return vehicles


class SpeedComparator:
    """Orders tuples by their vehicle's top speed (a Java ``Comparator<TridentTuple>``)."""

    def compare(self, tuple1: TridentTuple, tuple2: TridentTuple) -> int:
        vehicle1 = tuple1.get_value_by_field(Vehicle.FIELD_NAME)
        vehicle2 = tuple2.get_value_by_field(Vehicle.FIELD_NAME)
        return (vehicle1.max_speed > vehicle2.max_speed) - (vehicle1.max_speed < vehicle2.max_speed)


class EfficiencyComparator:
    """Orders vehicles by their efficiency (a Java ``Comparator<Vehicle>``)."""

    def compare(self, vehicle1: Vehicle, vehicle2: Vehicle) -> int:
        return (vehicle1.efficiency > vehicle2.efficiency) - (
            vehicle1.efficiency < vehicle2.efficiency
        )


def build_vehicles_topology(
    vehicles: Sequence[Sequence[Any]] | None = None,
    cycle: bool = True,
    debug: DebugFactory = Debug,
) -> StormTopology:
    """Vehicles and drivers; per batch, the slowest and fastest vehicle and their
    drivers, and the least and most efficient vehicle.

    Args:
        vehicles: the ``[vehicle, driver]`` tuples (20 random ones by default).
        cycle: emit them again and again (as Storm's example does).
        debug: makes the filter each result goes through (``Debug`` prints it).
    """
    driver_field = Fields(Driver.FIELD_NAME)
    vehicle_field = Fields(Vehicle.FIELD_NAME)
    all_fields = Fields(Vehicle.FIELD_NAME, Driver.FIELD_NAME)

    rows = vehicles if vehicles is not None else Vehicle.generate_vehicles(20)
    spout = FixedBatchSpout(all_fields, 10, *rows)
    spout.set_cycle(cycle)

    topology = TridentTopology()
    vehicles_stream = topology.new_stream("spout1", spout).each(all_fields, debug("##### vehicles"))

    slow_vehicles_stream = vehicles_stream.min(SpeedComparator()).each(
        vehicle_field, debug("#### slowest vehicle")
    )

    slow_vehicles_stream.project(driver_field).each(driver_field, debug("##### slowest driver"))

    (
        vehicles_stream.max(SpeedComparator())
        .each(vehicle_field, debug("#### fastest vehicle"))
        .project(driver_field)
        .each(driver_field, debug("##### fastest driver"))
    )

    vehicles_stream.min_by(Vehicle.FIELD_NAME, EfficiencyComparator()).each(
        vehicle_field, debug("#### least efficient vehicle")
    )

    vehicles_stream.max_by(Vehicle.FIELD_NAME, EfficiencyComparator()).each(
        vehicle_field, debug("#### most efficient vehicle")
    )

    return topology.build()


#: Storm's example sets 20 transactions in flight; a pause between batches keeps the
#: output readable.
CONF = Config(
    {
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 20,
        Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 500,
    }
)

#: What ``squall run`` runs.
build_topology = build_vehicles_topology


def main() -> None:
    with LocalCluster() as cluster:
        cluster.submit_topology("vehicles-topology", CONF, build_vehicles_topology())
        time.sleep(3)
        cluster.kill_topology("vehicles-topology")


if __name__ == "__main__":
    main()
