"""Storm's ``TridentMinMaxOfDevicesTopology`` (storm-starter), ported line by line.

Two topologies show Trident's ``min``/``max`` operations:

* ``build_devices_topology()``: a ``RandomNumberGeneratorSpout`` emits batches of
  ``[device-id, count]`` random numbers; ``min_by("device-id")`` keeps, per batch, the
  device with the lowest id and ``max_by("count")`` the one with the highest count.
* ``build_vehicles_topology()``: a cycling ``FixedBatchSpout`` of 20 random
  ``[vehicle, driver]`` pairs in batches of 10; ``min``/``max`` with a
  ``SpeedComparator`` keep the slowest and fastest vehicle of each batch (and their
  drivers), ``max`` with an ``EfficiencyComparator`` the most efficient one.

Each result goes through a ``Debug`` filter, which prints it. (min and max run per
partition of a batch: here every stream runs in one task, so one result per batch.)

Run it::

    python examples/storm_starter/trident_min_max_of_devices.py
    squall run examples/storm_starter/trident_min_max_of_devices.py --seconds 5

The builders take a ``spout`` (or ``vehicles``) and a ``debug`` factory, so a test can
give a finite input and record what the ``Debug`` filters would print.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from squall import Config, Fields, LocalCluster, StormTopology
from squall.trident import (
    BatchSpout,
    Debug,
    Filter,
    FixedBatchSpout,
    TridentTopology,
    TridentTuple,
)

DebugFactory = Callable[[str], Filter]


class RandomNumberGeneratorSpout(BatchSpout):
    """storm-starter's spout: each batch holds ``batch_size`` tuples of random integers
    in ``[0, max_number]``, one per field; a replayed batch is emitted again as it was."""

    def __init__(self, fields: Fields, batch_size: int, max_number: int) -> None:
        self.fields = fields
        self.batch_size = batch_size
        self.max_number = max_number
        self.batches: dict[int, list[list[int]]] = {}

    def get_output_fields(self) -> Fields:
        return self.fields

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        values = self.batches.get(batch_id)
        if values is None:
            values = [
                [random.randint(0, self.max_number) for _ in range(len(self.fields))]
                for _ in range(self.batch_size)
            ]
            self.batches[batch_id] = values
        for value in values:
            collector.emit(value)

    def ack(self, batch_id: int) -> None:
        self.batches.pop(batch_id, None)


def build_devices_topology(
    spout: BatchSpout | None = None, debug: DebugFactory = Debug
) -> StormTopology:
    """Device ids and counts (whole numbers); per batch, the device with the lowest id
    and the one with the highest count.

    Args:
        spout: the ``[device-id, count]`` spout (a ``RandomNumberGeneratorSpout`` of
            batches of 10 numbers up to 1000 by default).
        debug: makes the filter each result goes through (``Debug`` prints it).
    """
    device_id = "device-id"
    count = "count"
    all_fields = Fields(device_id, count)

    if spout is None:
        spout = RandomNumberGeneratorSpout(all_fields, 10, 1000)

    topology = TridentTopology()
    devices_stream = topology.new_stream("devicegen-spout", spout).each(
        all_fields, debug("##### devices")
    )

    devices_stream.min_by(device_id).each(all_fields, debug("#### device with min id"))

    devices_stream.max_by(count).each(all_fields, debug("#### device with max count"))

    return topology.build()


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
    """Orders tuples by their vehicle's efficiency."""

    def compare(self, tuple1: TridentTuple, tuple2: TridentTuple) -> int:
        vehicle1 = tuple1.get_value_by_field(Vehicle.FIELD_NAME)
        vehicle2 = tuple2.get_value_by_field(Vehicle.FIELD_NAME)
        return (vehicle1.efficiency > vehicle2.efficiency) - (
            vehicle1.efficiency < vehicle2.efficiency
        )


def build_vehicles_topology(
    vehicles: Sequence[Sequence[Any]] | None = None,
    cycle: bool = True,
    debug: DebugFactory = Debug,
) -> StormTopology:
    """Vehicles and drivers; per batch, the slowest and fastest vehicle and their
    drivers, and the most efficient vehicle.

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

    vehicles_stream.max(EfficiencyComparator()).each(vehicle_field, debug("#### efficient vehicle"))

    return topology.build()


#: Storm's example sets 20 transactions in flight; a short pause between batches keeps
#: the output readable.
CONF = Config(
    {Config.TOPOLOGY_MAX_SPOUT_PENDING: 20, Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 500}
)

#: What ``squall run`` runs.
build_topology = build_devices_topology


def main() -> None:
    with LocalCluster() as cluster:
        cluster.submit_topology("devices-topology", CONF, build_devices_topology())
        time.sleep(3)
        cluster.kill_topology("devices-topology")


if __name__ == "__main__":
    main()
