"""Storm's Trident ``min``/``max``/``min_by``/``max_by`` and chained aggregation
(``chained_agg() ... chain_end()``), with exact results computed here from the inputs.

min/max run per partition of each batch (Storm's ``partitionAggregate`` of a
``ComparisonAggregator``): a tuple whose value is None is skipped, on a tie the later
tuple wins, and a partition without a value emits nothing. A chain runs its aggregators
over the same tuples and emits their outputs side by side.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any

import pytest

from squall import Fields, InvalidTopologyError
from squall.drpc import LocalDRPC
from squall.testing import SharedRecord
from squall.trident import (
    Aggregator,
    CombinerAggregator,
    FirstN,
    FixedBatchSpout,
    Function,
    Stream,
    Sum,
    TridentCollector,
    TridentTopology,
    TridentTuple,
)
from squall.trident import Count as TridentCount
from squall.trident.compiler import describe
from tests.conftest import Engine, on_engines
from tests.test_trident_ops import (
    after,
    by_batch,
    by_task,
    chunks,
    drpc_results,
    observe,
    run_until,
    seen_txid,
)

#: [device, count, label]: ties (3; 1 and 9), None values, a batch of Nones only (txid 3).
ROWS: list[list[Any]] = [
    ["d1", 3, "x"], ["d2", 9, "y"], ["d3", None, "z"], ["d4", 3, "w"],
    ["d5", 9, "v"], ["d6", 1, "u"], ["d7", 9, "t"], ["d8", 1, "s"],
    ["d9", None, "r"], ["d10", None, "q"],
]  # fmt: skip
BATCH = 4
BATCHES = chunks(ROWS, BATCH)  # txid 1, 2: four rows; txid 3: two rows, both None


def storm_pick(rows: list[list[Any]], key: Any, lowest: bool) -> list[list[Any]]:
    """What Storm's comparison aggregator keeps of ``rows``: skip None values; a tuple
    replaces the kept one unless the kept one is strictly better (ties: the later)."""
    kept: list[Any] | None = None
    for row in rows:
        value = key(row)
        if value is None:
            continue
        if kept is None:
            kept = row
            continue
        old = key(kept)
        better = old < value if lowest else old > value
        if not better:
            kept = row
    return [kept] if kept is not None else []


def by_count(row: list[Any]) -> Any:
    return row[1]


def by_label(row: list[Any]) -> Any:
    return row[2]


def compare_labels(a: TridentTuple, b: TridentTuple) -> int:
    """A cmp function over whole tuples (a Java ``Comparator<TridentTuple>`` ported)."""
    return (a["label"] > b["label"]) - (a["label"] < b["label"])


class CountComparator:
    """A comparator class, as a Java ``Comparator`` is ported: ``compare(a, b)``."""

    def compare(self, a: int, b: int) -> int:
        return a - b


def minmax_topology(record: SharedRecord) -> TridentTopology:
    topology = TridentTopology()
    devices = topology.new_stream(
        "devices", FixedBatchSpout(Fields("device", "count", "label"), BATCH, *ROWS)
    )
    observe(devices.min_by("count"), record, "min_by")
    observe(devices.max_by("count"), record, "max_by")
    observe(devices.min_by("count", CountComparator()), record, "min_by_cmp")
    observe(devices.max_by("count", key=lambda n: -n), record, "max_by_key")
    observe(devices.min(compare_labels), record, "min")
    observe(devices.max(key=lambda tup: tup["label"]), record, "max")
    return topology


def test_min_max_keep_one_tuple_per_batch_as_storm_compares(engine: Engine) -> None:
    record = SharedRecord()
    topology = minmax_topology(record)
    names = ["min_by", "max_by", "min_by_cmp", "max_by_key", "min", "max"]

    last = max(BATCHES)
    run_until(
        engine,
        topology,
        lambda: all(seen_txid(record, name, after(engine, last)) for name in names),
    )

    expected = {
        "min_by": {t: storm_pick(rows, by_count, True) for t, rows in BATCHES.items()},
        "max_by": {t: storm_pick(rows, by_count, False) for t, rows in BATCHES.items()},
        "min": {t: storm_pick(rows, by_label, True) for t, rows in BATCHES.items()},
        "max": {t: storm_pick(rows, by_label, False) for t, rows in BATCHES.items()},
    }
    expected["min_by_cmp"] = expected["min_by"]
    # ordered by -count, the highest is the lowest count (ties: the later)
    expected["max_by_key"] = expected["min_by"]
    for name in names:
        batches = {t: rows for t, rows in by_batch(record, name).items() if t <= last}
        want = {t: rows for t, rows in expected[name].items()}
        assert batches == want, name
    # The ties and Nones the data holds: d4 (the later 3) is txid 1's minimum, d8 (the
    # later 1) and d7 (the later 9) txid 2's; txid 3 has only Nones: no tuple.
    assert expected["min_by"] == {1: [ROWS[3]], 2: [ROWS[7]], 3: []}
    assert expected["max_by"] == {1: [ROWS[1]], 2: [ROWS[6]], 3: []}


@pytest.mark.parametrize("engine", on_engines(spark=[]), indirect=True)
def test_min_by_runs_in_each_partition_of_the_batch(engine: Engine) -> None:
    record = SharedRecord()
    topology = TridentTopology()
    spread = (
        topology.new_stream(
            "devices", FixedBatchSpout(Fields("device", "count", "label"), BATCH, *ROWS)
        )
        .partition_by(Fields("device"))
        .parallelism_hint(3)
    )
    observe(spread, record, "in")
    observe(spread.min_by("count"), record, "min")

    run_until(engine, topology, lambda: seen_txid(record, "min", max(BATCHES) + 1))

    inputs = by_task(record, "in")
    got = by_task(record, "min")
    expected = {key: storm_pick(rows, by_count, True) for key, rows in inputs.items()}
    assert got == {key: rows for key, rows in expected.items() if rows}
    # several partitions answered a batch: one minimum each, not one per batch
    assert any(len([k for k in got if k[0] == txid]) > 1 for txid in BATCHES)


def test_min_max_segments_are_named_after_the_method() -> None:
    topology = TridentTopology()
    stream = topology.new_stream("s", FixedBatchSpout(Fields("a", "b"), 2, [1, 2]))
    stream.min_by("a").max(CountComparator()).min(key=len)
    labels = [segment["component"] for segment in describe(topology)]
    assert labels == ["s", "b1-min_by(a)+max(CountComparator)+1"]
    assert stream.max_by("b").output_fields == Fields("a", "b")


def error_of(make: Any) -> str:
    topology = TridentTopology()
    stream = topology.new_stream("s", FixedBatchSpout(Fields("a", "b"), 2, [1, 2]))
    with pytest.raises(InvalidTopologyError) as raised:
        make(stream)
    return str(raised.value)


def test_min_max_errors_name_the_operation_and_the_problem() -> None:
    assert error_of(lambda s: s.min_by("nope")) == (
        "Trident min_by: unknown field(s) ['nope']; the stream has ['a', 'b']"
    )
    assert "Trident max_by: the field must be a field name (str)" in error_of(
        lambda s: s.max_by(Fields("a"))
    )
    assert error_of(lambda s: s.min()).startswith(
        "Trident min: give a comparator (cmp(a, b) -> int) or key=;"
    )
    assert error_of(lambda s: s.max()).startswith("Trident max: give a comparator")
    message = error_of(lambda s: s.min_by("a", lambda value: value))
    assert message.startswith("Trident min_by('a'): the comparator '<lambda>' does not take two")
    assert "pass a function of one value as key=..." in message
    assert error_of(lambda s: s.max(compare_labels, key=len)) == (
        "Trident max: give a comparator or key=, not both"
    )
    assert "the comparator must be a function cmp(a, b) -> int" in error_of(lambda s: s.min(42))
    assert error_of(lambda s: s.max(CountComparator)) == (
        "Trident max: the comparator is the class CountComparator; give an instance "
        "(CountComparator())"
    )
    assert "key must be a function of one value, got int" in error_of(
        lambda s: s.max_by("a", key=3)
    )


def test_a_cmp_to_key_function_orders_min_by() -> None:
    # functools.cmp_to_key of a comparator is a key function: given as key=
    topology = TridentTopology()
    stream = topology.new_stream("s", FixedBatchSpout(Fields("a"), 2, [1]))
    stream.min_by("a", key=functools.cmp_to_key(lambda x, y: y - x))
    assert [s["operations"] for s in describe(topology)][1] == ["partition_aggregate"]


# --- chained aggregation -----------------------------------------------------------------


class Stats(Aggregator):
    """Emits [count, total] of the first input field, and a second row [-count, -total]
    when ``twice``: several output tuples multiply a chain's results."""

    def __init__(self, twice: bool = False) -> None:
        self.twice = twice

    def init(self, batch_id: Any, collector: TridentCollector) -> list[int]:
        return [0, 0]

    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        state[0] += 1
        state[1] += tup[0]

    def complete(self, state: Any, collector: TridentCollector) -> None:
        collector.emit(list(state))
        if self.twice:
            collector.emit([-state[0], -state[1]])


class Nothing(Aggregator):
    """Emits nothing."""

    def init(self, batch_id: Any, collector: TridentCollector) -> None:
        return None

    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        pass

    def complete(self, state: Any, collector: TridentCollector) -> None:
        pass


class Biggest(CombinerAggregator):
    """The largest first input value (0 for nothing)."""

    def init(self, tup: TridentTuple) -> Any:
        return tup[0]

    def combine(self, value1: Any, value2: Any) -> Any:
        return max(value1, value2)

    def zero(self) -> Any:
        return 0


class Label(Function):
    """Appends "even"/"odd"."""

    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        collector.emit(["even" if tup[0] % 2 == 0 else "odd"])


def numbers(topology: TridentTopology, name: str, drpc: LocalDRPC) -> Stream:
    """A DRPC stream of the request's integers (field ``n``), spread over 2 partitions,
    each labelled even or odd (field ``kind``)."""
    return (
        topology.new_drpc_stream(name, drpc)
        .flat_map(lambda tup: [[int(n)] for n in tup["args"].split()], Fields("n"))
        .shuffle()
        .each(Fields("n"), Label(), Fields("kind"))
        .parallelism_hint(2)
    )


REQUEST = [5, 2, 8, 3, 3, 10, 7]


def test_chained_aggregation_over_batches_and_groups(engine: Engine) -> None:
    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        # combiners only: combined in each partition, then across them
        numbers(topology, "combiners", drpc).chained_agg().aggregate(
            TridentCount(), Fields("count")
        ).aggregate(Fields("n"), Sum(), Fields("sum")).aggregate(
            Fields("n"), Biggest(), Fields("max")
        ).chain_end()
        # grouped, with an Aggregator and a ReducerAggregator: moved to the groups first
        numbers(topology, "grouped", drpc).group_by(Fields("kind")).chained_agg().aggregate(
            Fields("n"), Stats(), Fields("count", "total")
        ).aggregate(Fields("n"), FirstN(1, "n"), Fields("top")).aggregate(
            TridentCount(), Fields("tuples")
        ).chain_end()

    args = " ".join(map(str, REQUEST))
    combined, grouped = drpc_results(engine, build, ("combiners", args), ("grouped", args))

    assert combined == [[len(REQUEST), sum(REQUEST), max(REQUEST)]]
    kinds: dict[str, list[int]] = defaultdict(list)
    for n in REQUEST:
        kinds["even" if n % 2 == 0 else "odd"].append(n)
    assert sorted(grouped) == sorted(
        [kind, len(ns), sum(ns), max(ns), len(ns)] for kind, ns in kinds.items()
    )


@pytest.mark.parametrize("engine", on_engines(spark=[]), indirect=True)
def test_chained_partition_aggregate_and_multiplied_results(engine: Engine) -> None:
    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        numbers(topology, "partitions", drpc).chained_agg().partition_aggregate(
            TridentCount(), Fields("count")
        ).partition_aggregate(Fields("n"), Sum(), Fields("sum")).chain_end().global_().each(
            Fields("count"), lambda tup: tup[0] > 0
        )
        numbers(topology, "twice", drpc).chained_agg().aggregate(
            Fields("n"), Stats(twice=True), Fields("count", "total")
        ).aggregate(Fields("n"), Stats(twice=True), Fields("count2", "total2")).chain_end()
        numbers(topology, "none", drpc).chained_agg().aggregate(
            TridentCount(), Fields("count")
        ).aggregate(Nothing(), Fields("nothing")).chain_end()
        numbers(topology, "empty", drpc).each(
            Fields("n"), lambda tup: False
        ).chained_agg().aggregate(TridentCount(), Fields("count")).aggregate(
            Fields("n"), Sum(), Fields("sum")
        ).chain_end()

    args = " ".join(map(str, REQUEST))
    partitions, twice, none, empty = drpc_results(
        engine, build, ("partitions", args), ("twice", args), ("none", args), ("empty", args)
    )

    # one [count, sum] per partition that had tuples (the request spans both)
    assert len(partitions) == 2
    assert sum(count for count, _ in partitions) == len(REQUEST)
    assert sum(total for _, total in partitions) == sum(REQUEST)
    rows = [[len(REQUEST), sum(REQUEST)], [-len(REQUEST), -sum(REQUEST)]]
    assert sorted(twice) == sorted([*a, *b] for a in rows for b in rows)
    assert none == []
    assert empty == [[0, 0]]  # an empty batch: each aggregator's empty result, once


def test_a_chain_of_combiners_combines_before_the_repartition() -> None:
    topology = TridentTopology()
    stream = topology.new_stream("s", FixedBatchSpout(Fields("a", "b"), 2, [1, 2]))
    stream.group_by(Fields("a")).chained_agg().aggregate(TridentCount(), Fields("c")).aggregate(
        Fields("b"), Sum(), Fields("s")
    ).chain_end()
    stream.chained_agg().aggregate(TridentCount(), Fields("c")).aggregate(
        Fields("b"), FirstN(1), Fields("first")
    ).chain_end()
    assert [(s["component"], s["operations"]) for s in describe(topology)] == [
        ("s", ["spout"]),
        ("b1-chained_agg(Count.Sum)", ["partition_aggregate"]),
        ("b2-chained_agg(Count.Sum)", ["partition", "partition_aggregate"]),
        ("b3-chained_agg(Count.FirstN)", ["partition", "partition_aggregate"]),
    ]
    grouped = (
        stream.group_by(Fields("b")).chained_agg().partition_aggregate(TridentCount(), Fields("c"))
    )
    assert grouped.chain_end().output_fields == Fields("b", "c")


def test_chained_agg_errors_name_the_problem() -> None:
    def chain(stream: Stream) -> Any:
        return stream.chained_agg()

    assert error_of(
        lambda s: (
            chain(s)
            .aggregate(TridentCount(), Fields("c"))
            .partition_aggregate(TridentCount(), Fields("d"))
        )
    ).startswith("Trident chained_agg: partition_aggregate after aggregate: a chain runs")
    assert error_of(
        lambda s: (
            chain(s)
            .aggregate(TridentCount(), Fields("c"))
            .aggregate(Fields("a"), Sum(), Fields("c"))
            .chain_end()
        )
    ) == (
        "Trident chained_agg: output fields must be distinct (and differ from the group "
        "fields []): ['c'] used twice in ['c', 'c']"
    )
    assert "['a'] used twice" in error_of(
        lambda s: (
            s.group_by(Fields("a")).chained_agg().aggregate(TridentCount(), Fields("a")).chain_end()
        )
    )
    assert error_of(lambda s: chain(s).chain_end()).startswith(
        "Trident chained_agg: declare at least one aggregator"
    )
    assert error_of(lambda s: chain(s).aggregate(TridentCount(), Fields("c", "d")).chain_end()) == (
        "Trident chained_agg: Count gives one value per batch or group: give it one output "
        "field, got ['c', 'd']"
    )
    assert error_of(lambda s: chain(s).aggregate(Fields("x"), Sum(), Fields("c"))) == (
        "Trident chained_agg().aggregate: unknown field(s) ['x']; the stream has ['a', 'b']"
    )
    assert "is not an aggregator" in error_of(
        lambda s: chain(s).partition_aggregate(len, Fields("c"))
    )
