"""storm-starter's Trident examples as ported in examples/storm_starter/
(TridentMinMaxOfDevicesTopology, TridentMinMaxOfVehiclesTopology, TridentWordCount,
TridentMapExample) run on each engine with finite, fixed inputs; the expected results
are computed here from those inputs."""

from __future__ import annotations

import json
from collections import Counter
from types import ModuleType
from typing import Any

from squall.drpc import LocalDRPC
from squall.testing import SharedRecord
from squall.trident import Filter, FixedBatchSpout, TridentTuple
from tests.conftest import Engine
from tests.starter_loading import load_starter


def load(name: str) -> ModuleType:
    """The example ``name``, imported from its file."""
    return load_starter(name)


class Recorder(Filter):
    """Stands in for ``Debug(prefix)``: records each tuple's values under ``prefix``."""

    def __init__(self, record: SharedRecord, prefix: str) -> None:
        self.record = record
        self.prefix = prefix

    def is_keep(self, tup: TridentTuple) -> bool:
        self.record.append(self.prefix, list(tup.values))
        return True


def recorders(record: SharedRecord) -> Any:
    return lambda prefix: Recorder(record, prefix)


def storm_pick(rows: list[Any], key: Any, lowest: bool) -> Any:
    """The row Storm's comparison aggregator keeps: the first, replaced by every later
    row unless the kept one is strictly better (so on ties the later row wins)."""
    kept = rows[0]
    for row in rows[1:]:
        better = key(kept) < key(row) if lowest else key(kept) > key(row)
        if not better:
            kept = row
    return kept


def batches_of(rows: list[Any], size: int) -> list[list[Any]]:
    return [rows[i : i + size] for i in range(0, len(rows), size)]


# --- TridentMinMaxOfDevicesTopology --------------------------------------------------------

#: [device-id, count]: the lowest id and the highest count tie within batches.
DEVICES = [
    [7, 40], [3, 99], [3, 12], [9, 99], [5, 1], [4, 7], [8, 60], [4, 60],
    [6, 2], [2, 5], [2, 5], [11, 0], [12, 5],
]  # fmt: skip


def test_min_max_of_devices(engine: Engine) -> None:
    example = load("trident_min_max_of_devices")
    record = SharedRecord()
    spout = FixedBatchSpout(["device-id", "count"], 5, *DEVICES)
    batches = batches_of(DEVICES, 5)

    with engine.running(example.build_devices_topology(spout, recorders(record))) as run:
        run.drain()
        run.wait_until(
            lambda: (
                len(record.get("#### device with max count")) >= len(batches)
                and len(record.get("#### device with min id")) >= len(batches)
            ),
            engine.timeout,
        )
        assert not run.errors(), run.failure()

    assert sorted(record.get("##### devices")) == sorted(DEVICES)
    assert sorted(record.get("#### device with min id")) == sorted(
        storm_pick(batch, lambda row: row[0], lowest=True) for batch in batches
    )
    assert sorted(record.get("#### device with max count")) == sorted(
        storm_pick(batch, lambda row: row[1], lowest=False) for batch in batches
    )
    # the ties resolve to the later device: [3, 12] and [9, 99] in the first batch
    assert [3, 12] in record.get("#### device with min id")
    assert [9, 99] in record.get("#### device with max count")


# --- TridentMinMaxOfVehiclesTopology (and the devices example's vehicles topology) ----------


def fleet(module: ModuleType) -> list[list[Any]]:
    """20 fixed [vehicle, driver] pairs (Storm's example draws them at random)."""
    speeds = [54, 64, 29, 78, 54, 50, 18, 6, 56, 33, 3, 73, 39, 27, 73, 90, 3, 12, 64, 8]
    return [
        [
            module.Vehicle(f"Vehicle-{i - 1}", speed, 1 + ((i * 7) % 20) / 5),
            module.Driver(f"Driver-{i - 1}", i - 1),
        ]
        for i, speed in enumerate(speeds)
    ]


def test_min_max_of_vehicles(engine: Engine) -> None:
    example = load("trident_min_max_of_vehicles")
    record = SharedRecord()
    vehicles = fleet(example)
    batches = batches_of(vehicles, 10)
    topology = example.build_vehicles_topology(vehicles, cycle=False, debug=recorders(record))
    outputs = [
        "#### slowest vehicle",
        "##### slowest driver",
        "#### fastest vehicle",
        "##### fastest driver",
        "#### least efficient vehicle",
        "#### most efficient vehicle",
    ]

    with engine.running(topology) as run:
        run.drain()
        run.wait_until(
            lambda: all(len(record.get(name)) >= len(batches) for name in outputs),
            engine.timeout,
        )
        assert not run.errors(), run.failure()

    def speed(row: list[Any]) -> int:
        return int(row[0].max_speed)

    def efficiency(row: list[Any]) -> float:
        return float(row[0].efficiency)

    slowest = [storm_pick(batch, speed, lowest=True) for batch in batches]
    fastest = [storm_pick(batch, speed, lowest=False) for batch in batches]
    least = [storm_pick(batch, efficiency, lowest=True) for batch in batches]
    most = [storm_pick(batch, efficiency, lowest=False) for batch in batches]
    got = {name: sorted(record.get(name), key=repr) for name in outputs}
    assert got == {
        "#### slowest vehicle": sorted(([row[0]] for row in slowest), key=repr),
        "##### slowest driver": sorted(([row[1]] for row in slowest), key=repr),
        "#### fastest vehicle": sorted(([row[0]] for row in fastest), key=repr),
        "##### fastest driver": sorted(([row[1]] for row in fastest), key=repr),
        "#### least efficient vehicle": sorted(([row[0]] for row in least), key=repr),
        "#### most efficient vehicle": sorted(([row[0]] for row in most), key=repr),
    }
    # the second batch's lowest speed 3 ties (Vehicle-9, Vehicle-15): the later wins
    assert slowest[1][0].name == "Vehicle-15"


# --- TridentWordCount and TridentMapExample --------------------------------------------------


def query(drpc: LocalDRPC, args: str) -> Any:
    return json.loads(drpc.execute("words", args))


def test_word_count(engine: Engine) -> None:
    example = load("trident_word_count")
    counts = Counter(word for sentence in example.SENTENCES for word in sentence.split())
    every = " ".join(sorted(counts))

    with LocalDRPC(timeout_secs=engine.timeout) as drpc:
        topology = example.build_topology(drpc, cycle=False)
        with engine.running(topology, example.CONF) as run:
            run.drain()
            run.wait_until(
                lambda: sum(n for _, n in query(drpc, every)) == sum(counts.values()),
                engine.timeout,
            )
            answers = {args: query(drpc, args) for args in ["cat the dog jumped", every, "x"]}
            assert not run.errors(), run.failure()

    assert sorted(answers["cat the dog jumped"]) == [["jumped", 1], ["the", counts["the"]]]
    assert sorted(answers[every]) == sorted([word, n] for word, n in counts.items())
    assert answers["x"] == []
    ir = topology.batch_ir
    assert ir.source("spout1").tasks == 1  # parallelism_hint(16) on a FixedBatchSpout
    assert ir.segment("b2-persistent_aggregate(Count)").tasks == 16


def test_map_example(engine: Engine) -> None:
    example = load("trident_map_example")
    the = sum(sentence.split().count("the") for sentence in example.SENTENCES)

    with LocalDRPC(timeout_secs=engine.timeout) as drpc:
        topology = example.build_topology(drpc, cycle=False)
        with engine.running(topology, example.CONF) as run:
            run.drain()
            run.wait_until(lambda: query(drpc, "CAT THE DOG JUMPED") == [[the]], engine.timeout)
            answers = {args: query(drpc, args) for args in ["THE THE", "the", "COW"]}
            assert not run.errors(), run.failure()

    assert the == 5
    # only THE is counted (the filter), and lower-case words are not the state's keys
    assert answers == {"THE THE": [[2 * the]], "the": [[0]], "COW": [[0]]}
