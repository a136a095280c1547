"""Every Trident operation of the API contract, with exact results on each engine.

A test that runs a topology takes the ``engine`` fixture (see ``tests/conftest.py``):
it runs once on LocalCluster and once on SparkCluster, with the same assertions. Where
the engines differ by design, the expected values are exact per engine: Spark runs no
empty batch (a spout batch that emits nothing is no micro-batch), while the local engine
goes on with empty transactions. A Spark case that fails on a gap of the Spark engine is
a strict xfail naming the gap (see ``on_engines`` in ``tests/conftest.py``).

Outputs are observed three ways: through a DRPC stream (one request is one batch, and
its result is the batch's final tuples), through :class:`BatchRecorder` (a
``partition_aggregate`` that records each partition's tuples per batch and task, in a
``SharedRecord`` every process appends to), or in the store of a state. The last tests
cover the errors ``build()`` raises.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from squall import Config, Fields, InvalidTopologyError
from squall.drpc import DRPCExecutionError, LocalDRPC
from squall.runtime.hashing import stable_hash
from squall.testing import SharedRecord
from squall.trident import (
    Aggregator,
    BatchSpout,
    CombinerAggregator,
    Debug,
    Filter,
    FilterNull,
    FirstN,
    FixedBatchSpout,
    Function,
    MapGet,
    ReducerAggregator,
    StateUpdater,
    Stream,
    Sum,
    TridentCollector,
    TridentTopology,
    TridentTuple,
)
from squall.trident import Count as TridentCount
from squall.trident.compiler import describe
from squall.trident.operations import CallableFunction
from squall.trident.state import (
    MapState,
    MemoryMapState,
    SqliteMapState,
    StateFactory,
    StateType,
)
from tests.conftest import Engine, Run

# --- observation helpers ----------------------------------------------------------------


class BatchRecorder(Aggregator):
    """Records the tuples of each partition of each batch: ``(txid, task index, rows)``
    under ``name``. Emits nothing. Ungrouped, it also records empty batches at task
    index 0 (where an ungrouped aggregation reports an empty batch)."""

    def __init__(self, record: SharedRecord, name: str) -> None:
        self.record = record
        self.name = name
        self.task_index = -1

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.task_index = context.task_index

    def init(self, batch_id: Any, collector: TridentCollector) -> tuple[int, list[Any]]:
        return (batch_id.transaction_id, [])

    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        state[1].append(list(tup.values))

    def complete(self, state: Any, collector: TridentCollector) -> None:
        self.record.append(self.name, (state[0], self.task_index, state[1]))


def observe(stream: Stream, record: SharedRecord, name: str) -> Stream:
    """Record every tuple of ``stream`` per batch and task (see :class:`BatchRecorder`)."""
    return stream.partition_aggregate(
        stream.output_fields, BatchRecorder(record, name), Fields(f"${name}")
    )


def by_batch(record: SharedRecord, name: str) -> dict[int, list[Any]]:
    """txid -> the batch's rows over all tasks, sorted."""
    rows: dict[int, list[Any]] = defaultdict(list)
    for txid, _, batch_rows in record.get(name):
        rows[txid].extend(batch_rows)
    return {txid: sorted(values) for txid, values in rows.items()}


def by_task(record: SharedRecord, name: str) -> dict[tuple[int, int], list[Any]]:
    """(txid, task index) -> the rows that task had in that batch (partitions that had
    none are left out: every partition reports each batch, as in Storm)."""
    rows: dict[tuple[int, int], list[Any]] = defaultdict(list)
    for txid, task, batch_rows in record.get(name):
        if batch_rows:
            rows[(txid, task)].extend(batch_rows)
    return dict(rows)


def seen_txid(record: SharedRecord, name: str, txid: int) -> bool:
    """Whether ``name`` recorded batch ``txid`` or a later one. With one transaction in
    flight (the default), every earlier batch is then complete at every task."""
    return any(entry[0] >= txid for entry in record.get(name))


def run_until(
    engine: Engine,
    topology: TridentTopology,
    condition: Callable[[], bool],
    conf: dict[str, Any] | None = None,
    timeout: float | None = None,
    drain: bool = True,
) -> None:
    """Run ``topology`` until ``condition`` holds; fail if a component reported errors.

    On Spark, the spouts are first run dry (``drain``; pass False for a spout that never
    runs dry), so every batch is complete when ``condition`` is checked.
    """
    with engine.running(topology, conf) as run:
        if drain:
            run.drain()
        run.wait_until(condition, timeout or engine.timeout)
        assert not run.errors(), run.failure()


def after(engine: Engine, txid: int) -> int:
    """The txid whose batch shows that every batch up to ``txid`` is complete: on the
    local engine the next one (empty batches follow when the spouts are done; with one
    transaction in flight, earlier batches are then complete at every task); on Spark
    ``txid`` itself, as Spark runs no empty batch and ``run_until`` drains first."""
    return txid if engine.is_spark else txid + 1


def execute(run: Run, drpc: LocalDRPC, timeout: float, *calls: tuple[str, str]) -> list[str]:
    """Make the DRPC ``calls`` concurrently (each is its own request, so its own batch);
    return their results in the order of ``calls``. Fails as soon as the topology does;
    a request still waiting then ends when ``drpc`` shuts down."""
    pool = ThreadPoolExecutor(len(calls))
    try:
        futures = [pool.submit(drpc.execute, function, args) for function, args in calls]
        return [run.result(future, timeout) for future in futures]
    finally:
        pool.shutdown(wait=False)


def drpc_results(
    engine: Engine, build: Callable[[TridentTopology, LocalDRPC], Any], *calls: tuple[str, str]
) -> list[Any]:
    """Build a topology with ``build(topology, drpc)``, run it on ``engine``, make the
    DRPC ``calls`` (concurrently) and return their decoded results in their order."""
    with LocalDRPC(timeout_secs=engine.timeout) as drpc:
        topology = TridentTopology()
        build(topology, drpc)
        with engine.running(topology) as run:
            return [json.loads(result) for result in execute(run, drpc, engine.timeout, *calls)]


def words_stream(topology: TridentTopology, function: str, drpc: LocalDRPC) -> Stream:
    """A DRPC stream of the request's words (field ``word``), one tuple per word."""
    return topology.new_drpc_stream(function, drpc).flat_map(
        lambda tup: [[word] for word in tup["args"].split()], Fields("word")
    )


def numbers_stream(topology: TridentTopology, function: str, drpc: LocalDRPC) -> Stream:
    """A DRPC stream of the request's integers (field ``n``)."""
    return topology.new_drpc_stream(function, drpc).flat_map(
        lambda tup: [[int(n)] for n in tup["args"].split()], Fields("n")
    )


def chunks(rows: list[Any], size: int) -> dict[int, list[Any]]:
    """What FixedBatchSpout makes of ``rows``: txid -> the batch's rows (from txid 1)."""
    return {i // size + 1: rows[i : i + size] for i in range(0, len(rows), size)}


# --- operations used by several tests ----------------------------------------------------


class Split(Function):
    """Emits ``[word, len(word)]`` for each word of the first input value; records the
    fields it was given."""

    def __init__(self, record: SharedRecord | None = None) -> None:
        self.record = record

    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        if self.record is not None:
            self.record.append("split-input", tup.fields.to_list())
        for word in tup[0].split():
            collector.emit([word, len(word)])


class Even(Filter):
    """Keeps even numbers; records the fields it was given."""

    def __init__(self, record: SharedRecord | None = None) -> None:
        self.record = record

    def is_keep(self, tup: TridentTuple) -> bool:
        if self.record is not None:
            self.record.append("even-input", tup.fields.to_list())
        return tup[0] % 2 == 0


class Collect(ReducerAggregator):
    """Collects the first input value of every tuple into a sorted list."""

    def init(self) -> list[Any]:
        return []

    def reduce(self, curr: list[Any], tup: TridentTuple) -> list[Any]:
        return sorted([*curr, tup[0]])


class MaxCombiner(CombinerAggregator):
    """The largest first input value (None for nothing)."""

    def init(self, tup: TridentTuple) -> Any:
        return tup[0]

    def combine(self, value1: Any, value2: Any) -> Any:
        if value1 is None:
            return value2
        if value2 is None:
            return value1
        return max(value1, value2)

    def zero(self) -> Any:
        return None


class CountAndSum(Aggregator):
    """An Aggregator with two output fields: the number of tuples and their sum; it also
    emits the batch's txid first, to show ``init`` receives the batch id."""

    def init(self, batch_id: Any, collector: TridentCollector) -> dict[str, Any]:
        return {"txid": batch_id.transaction_id, "count": 0, "sum": 0}

    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        state["count"] += 1
        state["sum"] += tup[0]

    def complete(self, state: Any, collector: TridentCollector) -> None:
        collector.emit([state["count"], state["sum"], state["txid"] > 0])


# --- each: functions, callables, filters -------------------------------------------------


def test_each_with_a_function_appends_its_fields_to_the_input_tuple(engine: Engine) -> None:
    record = SharedRecord()

    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        topology.new_drpc_stream("split", drpc).each(
            Fields("args"), Split(record), Fields("word", "length")
        )

    (result,) = drpc_results(engine, build, ("split", "the cow jumped"))

    assert result == [
        ["the cow jumped", "the", 3],
        ["the cow jumped", "cow", 3],
        ["the cow jumped", "jumped", 6],
    ]
    assert record.get("split-input") == [["args"]]  # projected to the input fields


def test_each_function_sees_only_its_input_fields_in_their_order(engine: Engine) -> None:
    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        (
            words_stream(topology, "f", drpc)
            .each(Fields("word"), lambda tup: len(tup["word"]), Fields("length"))
            .each(
                Fields("length", "word"),
                lambda tup: f"{tup.fields.to_list()}:{tup[0]}:{tup[1]}",
                Fields("seen"),
            )
            .project(Fields("seen"))
        )

    (result,) = drpc_results(engine, build, ("f", "ab c"))

    assert result == [["['length', 'word']:2:ab"], ["['length', 'word']:1:c"]]


def test_plain_callables_follow_the_documented_return_rules(engine: Engine) -> None:
    """operations.CallableFunction: None, lists of lists, one row of the output's
    width, one value per item with one output field, generators, single values."""
    one_field: dict[str, Callable[[TridentTuple], Any]] = {
        "none": lambda tup: None,
        "single": lambda tup: tup[0].upper(),
        "string": lambda tup: tup[0],  # a string is one value, not characters
        "dict": lambda tup: {"n": len(tup[0])},
        "row": lambda tup: [tup[0] + "!"],  # as many values as output fields
        "values": lambda tup: tup[0].split(),  # one output per value
        "tuple-values": lambda tup: tuple(tup[0].split()),
        "rows": lambda tup: [[word] for word in tup[0].split()],
        "generator": lambda tup: (word[::-1] for word in tup[0].split()),
        "empty": lambda tup: [],
    }
    two_fields: dict[str, Callable[[TridentTuple], Any]] = {
        "none2": lambda tup: None,
        "row2": lambda tup: (tup[0], len(tup[0])),
        "rows2": lambda tup: [[word, len(word)] for word in tup[0].split()],
        "tuples2": lambda tup: [(word, i) for i, word in enumerate(tup[0].split())],
        "generator2": lambda tup: ([word, word.upper()] for word in tup[0].split()),
    }

    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        # One DRPC stream per output width. A request lists callables by name; each is
        # called on a tuple whose first value is "ab cde", and what it returns is what
        # the stream's callable returns. Its outputs are tagged with its name.
        for function, callables, outputs in [
            ("one", one_field, Fields("out")),
            ("two", two_fields, Fields("a", "b")),
        ]:
            (
                topology.new_drpc_stream(function, drpc)
                .flat_map(
                    lambda tup: [[name, "ab cde"] for name in tup["args"].split()],
                    Fields("fn", "text"),
                )
                .each(Fields("text", "fn"), lambda tup, c=callables: c[tup["fn"]](tup), outputs)
                .project(Fields("fn", *outputs.to_list()))
            )

    names = [*one_field, *two_fields]
    one, two = drpc_results(
        engine, build, ("one", " ".join(one_field)), ("two", " ".join(two_fields))
    )
    results: dict[str, list[Any]] = {name: [] for name in names}
    for fn, *values in one + two:
        results[fn].append(values)

    assert results == {
        "none": [],
        "single": [["AB CDE"]],
        "string": [["ab cde"]],
        "dict": [[{"n": 6}]],
        "row": [["ab cde!"]],
        "values": [["ab"], ["cde"]],
        "tuple-values": [["ab"], ["cde"]],
        "rows": [["ab"], ["cde"]],
        "generator": [["ba"], ["edc"]],
        "empty": [],
        "none2": [],
        "row2": [["ab cde", 6]],
        "rows2": [["ab", 2], ["cde", 3]],
        "tuples2": [["ab", 0], ["cde", 1]],
        "generator2": [["ab", "AB"], ["cde", "CDE"]],
    }


def test_a_callable_returning_an_empty_list_emits_nothing_for_several_fields() -> None:
    """An empty list is a list of no rows, whatever the number of output fields (as
    it is with one output field): no output, no error."""
    collector_out: list[list[Any]] = []
    function = CallableFunction(lambda tup: [[w, len(w)] for w in tup[0].split()], 2)
    function.execute(TridentTuple([""], Fields("args")), TridentCollector(collector_out))
    assert collector_out == []


def test_plain_callable_errors_name_the_function_and_the_width() -> None:
    out: list[list[Any]] = []

    def three(tup: TridentTuple) -> list[int]:
        return [1, 2, 3]

    def single(tup: TridentTuple) -> int:
        return 7

    tup = TridentTuple(["x"], Fields("args"))
    with pytest.raises(ValueError, match=r"'three' returned 3 value\(s\) for 2 output field"):
        CallableFunction(three, 2).execute(tup, TridentCollector(out))
    with pytest.raises(ValueError, match="'single' returned a single value 7 for 2 output"):
        CallableFunction(single, 2).execute(tup, TridentCollector(out))
    assert out == []


def test_filters_each_with_filter_and_filter_method(engine: Engine) -> None:
    record = SharedRecord()

    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        numbers_stream(topology, "each-filter", drpc).each(Fields("n"), Even(record))
        numbers_stream(topology, "filter", drpc).filter(Even())
        numbers_stream(topology, "filter-fields", drpc).each(
            Fields("n"), lambda tup: tup[0] * 10, Fields("m")
        ).filter(Fields("m"), lambda tup: tup["m"] > 30)
        numbers_stream(topology, "each-callable", drpc).each(
            Fields("n"), lambda tup: tup[0] % 3 == 0
        )

    results = drpc_results(
        engine,
        build,
        ("each-filter", "1 2 3 4 5 6"),
        ("filter", "7 8 9 10"),
        ("filter-fields", "1 2 3 4 5"),
        ("each-callable", "1 2 3 4 5 6 7 8 9"),
    )

    assert results == [
        [[2], [4], [6]],
        [[8], [10]],
        [[4, 40], [5, 50]],
        [[3], [6], [9]],
    ]
    assert set(map(tuple, record.get("even-input"))) == {("n",)}


def test_map_flat_map_peek_and_project(engine: Engine) -> None:
    record = SharedRecord()

    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        numbers_stream(topology, "map-same", drpc).map(lambda tup: tup["n"] * 2)
        numbers_stream(topology, "map-new", drpc).map(
            lambda tup: [tup["n"], tup["n"] ** 2], Fields("n", "square")
        ).project(Fields("square"))
        numbers_stream(topology, "flat-map", drpc).flat_map(
            lambda tup: [[tup["n"], i] for i in range(tup["n"])], Fields("n", "i")
        )
        numbers_stream(topology, "flat-map-scalars", drpc).flat_map(lambda tup: range(tup["n"]))
        numbers_stream(topology, "peek", drpc).peek(
            lambda tup: record.append("peeked", (tup.fields.to_list(), list(tup.values)))
        ).each(Fields("n"), lambda tup: -tup[0], Fields("negative"))
        (
            numbers_stream(topology, "project", drpc)
            .each(Fields("n"), lambda tup: [tup[0] + 1, tup[0] + 2], Fields("a", "b"))
            .project(Fields("b", "n"))
        )

    results = drpc_results(
        engine,
        build,
        ("map-same", "1 2 3"),
        ("map-new", "3 4"),
        ("flat-map", "0 1 3"),
        ("flat-map-scalars", "2 1"),
        ("peek", "5 6"),
        ("project", "10"),
    )

    assert results == [
        [[2], [4], [6]],
        [[9], [16]],
        [[1, 0], [3, 0], [3, 1], [3, 2]],
        [[0], [1], [0]],
        [[5, -5], [6, -6]],
        [[12, 10]],
    ]
    assert record.get("peeked") == [(["n"], [5]), (["n"], [6])]


def test_output_fields_of_each_map_and_project() -> None:
    topology = TridentTopology()
    stream = topology.new_stream("s", FixedBatchSpout(Fields("a", "b"), 1, [1, 2]))
    assert stream.output_fields == Fields("a", "b")
    assert stream.each(Fields("a"), Split(), Fields("c", "d")).output_fields == Fields(
        "a", "b", "c", "d"
    )
    assert stream.each(Fields("a"), FilterNull()).output_fields == Fields("a", "b")
    assert stream.map(lambda tup: tup).output_fields == Fields("a", "b")
    assert stream.map(lambda tup: 1, Fields("x")).get_output_fields() == Fields("x")
    assert stream.flat_map(lambda tup: [], Fields("y", "z")).output_fields == Fields("y", "z")
    assert stream.project(Fields("b")).output_fields == Fields("b")
    grouped = stream.group_by(Fields("a"))
    assert grouped.get_group_fields() == Fields("a")
    assert grouped.to_stream() is stream
    assert grouped.aggregate(TridentCount(), Fields("c")).output_fields == Fields("a", "c")
    assert stream.aggregate(TridentCount(), Fields("c")).output_fields == Fields("c")


# --- repartitioning ----------------------------------------------------------------------

ROWS = [[i % 3, i] for i in range(10)]  # fields k, v
BATCHES = chunks(ROWS, 4)  # txid 1: v 0-3, txid 2: v 4-7, txid 3: v 8-9


def repartitioned(engine: Engine, operation: str) -> dict[tuple[int, int], list[Any]]:
    """Run ROWS through ``operation`` onto 3 tasks; (txid, task) -> rows, txids 1-3."""
    record = SharedRecord()
    topology = TridentTopology()
    stream = topology.new_stream("rows", FixedBatchSpout(Fields("k", "v"), 4, *ROWS))
    if operation == "partition_by":
        moved = stream.partition_by(Fields("k"))
    else:
        moved = getattr(stream, operation)()
    observe(moved.parallelism_hint(3), record, "rows")
    run_until(engine, topology, lambda: seen_txid(record, "rows", after(engine, 3)))
    return {key: rows for key, rows in by_task(record, "rows").items() if key[0] <= 3}


def test_partition_by_puts_equal_keys_in_one_partition(engine: Engine) -> None:
    placed = repartitioned(engine, "partition_by")

    for txid, rows in BATCHES.items():
        assert sorted(r for (t, _), rs in placed.items() if t == txid for r in rs) == sorted(rows)
    owners: dict[int, set[int]] = defaultdict(set)
    for (_, task), rows in placed.items():
        for key, _ in rows:
            owners[key].add(task)
    assert all(len(tasks) == 1 for tasks in owners.values()), owners  # same task always
    for (txid, task), rows in placed.items():  # each partition is its tuples in batch order
        assert rows == [r for r in BATCHES[txid] if task in owners[r[0]]]


def test_shuffle_spreads_each_tuple_to_exactly_one_partition(engine: Engine) -> None:
    placed = repartitioned(engine, "shuffle")

    for txid, rows in BATCHES.items():
        assert sorted(r for (t, _), rs in placed.items() if t == txid for r in rs) == sorted(rows)
    assert len({task for (_, task), rows in placed.items() if rows}) > 1


def test_broadcast_sends_every_tuple_to_every_partition(engine: Engine) -> None:
    placed = repartitioned(engine, "broadcast")

    assert placed == {(txid, task): rows for txid, rows in BATCHES.items() for task in range(3)}


@pytest.mark.parametrize("operation", ["global_", "batch_global"])
def test_global_and_batch_global_send_the_batch_to_one_partition(
    engine: Engine, operation: str
) -> None:
    placed = repartitioned(engine, operation)

    assert placed == {(txid, 0): rows for txid, rows in BATCHES.items()}


# Storm's contract (Trident API overview, "Repartitioning operations"), over DRPC (a
# request is a batch) from one or several partitions: ``broadcast`` replicates every
# tuple to every partition; ``global_`` sends every tuple to one partition, the same for
# every batch; ``batch_global`` sends all tuples of a batch to one partition (batches
# may go to different ones).


class PartitionIndex(Function):
    """Appends the index of its partition and the number of partitions, both read from
    its context when prepared (Storm's ``getPartitionIndex`` and ``numPartitions``)."""

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.partition = context.get_this_task_index()
        self.partitions = len(context.get_component_tasks(context.component_id))

    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        collector.emit([self.partition, self.partitions])


#: DRPC requests (one batch each) of the tests below: the numbers of each.
REQUESTS = {"a": [1, 2, 3, 4], "b": [5, 6, 7], "c": [8, 9]}


def placements(
    engine: Engine, moved: Callable[[Stream], Stream], upstream: int
) -> dict[str, list[tuple[int, int, int]]]:
    """Each request's numbers from ``upstream`` partitions (shuffled there: every batch
    of two or more numbers spans them) through ``moved`` onto 3 partitions: request ->
    sorted ``(n, upstream partition, partition)`` of every tuple the last partitions
    saw. Every tuple tells the number of partitions it passed: checked here."""

    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        before = numbers_stream(topology, "place", drpc).shuffle()
        before = before.each(Fields("n"), PartitionIndex(), Fields("from", "froms"))
        after = moved(before.parallelism_hint(upstream))
        after = after.each(Fields("n"), PartitionIndex(), Fields("at", "ats"))
        after.parallelism_hint(3).project(Fields("n", "from", "froms", "at", "ats"))

    calls = [("place", " ".join(map(str, numbers))) for numbers in REQUESTS.values()]
    results = drpc_results(engine, build, *calls)
    placed = {}
    for request, rows in zip(REQUESTS, results, strict=True):
        assert {(froms, ats) for _, _, froms, _, ats in rows} == {(upstream, 3)}
        placed[request] = sorted((n, source, at) for n, source, _, at, _ in rows)
    return placed


def test_broadcast_gives_every_partition_every_tuple_of_each_batch(engine: Engine) -> None:
    placed = placements(engine, Stream.broadcast, upstream=1)

    assert placed == {
        request: sorted((n, 0, at) for n in numbers for at in range(3))
        for request, numbers in REQUESTS.items()
    }


def test_an_aggregate_after_broadcast_counts_each_tuple_once_per_partition(
    engine: Engine,
) -> None:
    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        numbers_stream(topology, "count", drpc).broadcast().each(
            Fields("n"), PartitionIndex(), Fields("at", "ats")
        ).parallelism_hint(3).aggregate(TridentCount(), Fields("count"))
        numbers_stream(topology, "sum", drpc).broadcast().each(
            Fields("n"), PartitionIndex(), Fields("at", "ats")
        ).parallelism_hint(3).aggregate(Fields("n"), Sum(), Fields("sum"))

    count, total = drpc_results(engine, build, ("count", "4 5 6 7"), ("sum", "1 2 3"))

    assert count == [[3 * 4]]
    assert total == [[3 * (1 + 2 + 3)]]


def test_global_sends_every_batch_to_one_and_the_same_partition(engine: Engine) -> None:
    placed = placements(engine, Stream.global_, upstream=2)

    partitions = {at for rows in placed.values() for _, _, at in rows}
    assert len(partitions) == 1, placed  # one partition, the same for every batch
    for request, numbers in REQUESTS.items():
        assert [n for n, _, _ in placed[request]] == numbers  # each tuple once
        assert {source for _, source, _ in placed[request]} == {0, 1}  # from both


def test_batch_global_sends_all_tuples_of_a_batch_to_one_partition(engine: Engine) -> None:
    placed = placements(engine, Stream.batch_global, upstream=2)

    for request, numbers in REQUESTS.items():
        rows = placed[request]
        assert [n for n, _, _ in rows] == numbers  # each tuple once
        assert len({at for _, _, at in rows}) == 1, rows  # all in one partition
        assert {source for _, source, _ in rows} == {0, 1}  # gathered from both


# --- aggregation -------------------------------------------------------------------------

WORDS: list[list[Any]] = [
    ["a", 5], ["b", 1], ["a", 2], ["c", 7], ["b", 4],
    ["a", 9], ["c", 3], ["c", 8], ["a", 1], ["b", 6],
    ["d", 2],
]  # fmt: skip
WORD_BATCHES = chunks(WORDS, 5)  # txids 1, 2 with five tuples, txid 3 with one


def expected_per_group(
    combine: Callable[[list[int]], list[Any]],
) -> dict[int, list[list[Any]]]:
    """txid -> sorted [word, *combine(numbers of the word in the batch)]."""
    result: dict[int, list[list[Any]]] = {}
    for txid, rows in WORD_BATCHES.items():
        groups: dict[str, list[int]] = defaultdict(list)
        for word, n in rows:
            groups[word].append(n)
        result[txid] = sorted([word, *combine(numbers)] for word, numbers in groups.items())
    return result


def test_grouped_aggregate_gives_one_result_per_group_and_batch(engine: Engine) -> None:
    record = SharedRecord()
    topology = TridentTopology()
    stream = topology.new_stream("words", FixedBatchSpout(Fields("word", "n"), 5, *WORDS))
    grouped = stream.group_by(Fields("word"))
    observe(grouped.aggregate(TridentCount(), Fields("count")).parallelism_hint(2), record, "c")
    observe(grouped.aggregate(Fields("n"), Sum(), Fields("sum")).parallelism_hint(3), record, "s")
    observe(grouped.aggregate(Fields("n"), Collect(), Fields("all")), record, "r")
    observe(grouped.aggregate(Fields("n"), FirstN(2, "n"), Fields("top")), record, "f")
    observe(
        grouped.aggregate(Fields("n"), CountAndSum(), Fields("count", "sum", "has_txid")),
        record,
        "g",
    )
    observe(grouped.aggregate(Fields("n"), MaxCombiner(), Fields("max")), record, "m")

    run_until(
        engine,
        topology,
        lambda: all(
            seen_txid(record, name, after(engine, 3)) for name in ["c", "s", "r", "f", "g", "m"]
        ),
    )

    def upto3(name: str) -> dict[int, list[Any]]:
        return {txid: rows for txid, rows in by_batch(record, name).items() if txid <= 3}

    assert upto3("c") == expected_per_group(lambda ns: [len(ns)])
    assert upto3("s") == expected_per_group(lambda ns: [sum(ns)])
    assert upto3("r") == expected_per_group(lambda ns: [sorted(ns)])
    assert upto3("m") == expected_per_group(lambda ns: [max(ns)])
    assert upto3("g") == expected_per_group(lambda ns: [len(ns), sum(ns), True])
    top2: dict[int, list[Any]] = {}
    for txid, rows in WORD_BATCHES.items():
        groups: dict[str, list[int]] = defaultdict(list)
        for word, n in rows:
            groups[word].append(n)
        top2[txid] = sorted(
            [word, n] for word, ns in groups.items() for n in sorted(ns, reverse=True)[:2]
        )
    assert upto3("f") == top2
    # Each group's result comes from one task (the group's partition).
    for name in ["c", "s"]:
        owners: dict[str, set[int]] = defaultdict(set)
        for _, task, rows in record.get(name):
            for row in rows:
                owners[row[0]].add(task)
        assert all(len(tasks) == 1 for tasks in owners.values())


def test_grouped_aggregate_results_over_drpc(engine: Engine) -> None:
    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        words_stream(topology, "count", drpc).group_by(Fields("word")).aggregate(
            TridentCount(), Fields("count")
        ).parallelism_hint(3)
        (
            words_stream(topology, "firstn", drpc)
            .each(Fields("word"), lambda tup: len(tup[0]), Fields("length"))
            .aggregate(Fields("word", "length"), FirstN(2, "length"), Fields("w", "len"))
        )
        (
            words_stream(topology, "firstn-ascending", drpc)
            .each(Fields("word"), lambda tup: len(tup[0]), Fields("length"))
            .aggregate(
                Fields("word", "length"), FirstN(1, "length", reverse=False), Fields("w", "len")
            )
        )
        words_stream(topology, "first", drpc).aggregate(Fields("word"), FirstN(2), Fields("first"))

    count, firstn, ascending, first = drpc_results(
        engine,
        build,
        ("count", "a b a c a b"),
        ("firstn", "xx y zzzz www"),
        ("firstn-ascending", "xx y zzzz www"),
        ("first", "p q r s"),
    )

    assert sorted(count) == [["a", 3], ["b", 2], ["c", 1]]
    assert firstn == [["zzzz", 4], ["www", 3]]
    assert ascending == [["y", 1]]
    assert first == [["p"], ["q"]]


def test_grouped_stream_each_and_filter_keep_the_grouping(engine: Engine) -> None:
    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        grouped = words_stream(topology, "grouped", drpc).group_by(Fields("word"))
        (
            grouped.each(Fields("word"), lambda tup: len(tup[0]), Fields("length"))
            .filter(Fields("length"), lambda tup: tup[0] > 1)
            .aggregate(Fields("length"), Sum(), Fields("total"))
        )

    (result,) = drpc_results(engine, build, ("grouped", "ab c ab xyz c"))

    assert sorted(result) == [["ab", 4], ["xyz", 3]]


def test_concurrent_drpc_requests_each_get_their_own_batch(engine: Engine) -> None:
    """With several transactions in flight (max spout pending 4), concurrent requests
    are separate batches: each result counts its own words only."""
    queries = {i: " ".join(f"w{j}" for j in range(i) for _ in range(j + 1)) for i in range(8)}
    with LocalDRPC(timeout_secs=engine.timeout) as drpc:
        topology = TridentTopology()
        words_stream(topology, "count", drpc).group_by(Fields("word")).aggregate(
            TridentCount(), Fields("count")
        ).parallelism_hint(2)
        with engine.running(topology, {Config.TOPOLOGY_MAX_SPOUT_PENDING: 4}) as run:
            answers = execute(run, drpc, engine.timeout, *[("count", q) for q in queries.values()])
    results = dict(zip(queries, map(json.loads, answers), strict=True))

    assert {i: sorted(result) for i, result in results.items()} == {
        i: sorted([f"w{j}", j + 1] for j in range(i)) for i in queries
    }


def test_ungrouped_aggregate_gives_one_result_per_batch_even_when_empty(engine: Engine) -> None:
    """Batches 1-3 carry the words; the local engine goes on with empty batches (the
    spout emits nothing), Spark does not (no micro-batch without input). A stream
    filtered to nothing gives empty batches on both engines."""
    record = SharedRecord()
    topology = TridentTopology()
    stream = topology.new_stream("words", FixedBatchSpout(Fields("word", "n"), 5, *WORDS))
    observe(stream.aggregate(TridentCount(), Fields("count")), record, "count")
    observe(
        stream.filter(Fields("n"), lambda tup: tup[0] > 100).aggregate(TridentCount(), Fields("c")),
        record,
        "filtered",
    )
    observe(stream.aggregate(Fields("n"), Sum(), Fields("sum")).parallelism_hint(2), record, "sum")
    observe(stream.aggregate(Fields("n"), Collect(), Fields("all")), record, "reduced")
    observe(
        stream.aggregate(Fields("n"), CountAndSum(), Fields("count", "sum", "has_txid")),
        record,
        "aggregated",
    )
    names = ["count", "filtered", "sum", "reduced", "aggregated"]
    last = 3 if engine.is_spark else 6  # local: three empty batches after the words

    run_until(
        engine,
        topology,
        lambda: all(seen_txid(record, name, after(engine, last)) for name in names),
    )

    for name, expected in [
        ("count", lambda ns: [len(ns)]),
        ("filtered", lambda ns: [0]),
        ("sum", lambda ns: [sum(ns)]),
        ("reduced", lambda ns: [sorted(ns)]),
        ("aggregated", lambda ns: [len(ns), sum(ns), True]),
    ]:
        results = {txid: rows for txid, rows in by_batch(record, name).items() if txid <= last}
        numbers = {txid: [n for _, n in WORD_BATCHES.get(txid, [])] for txid in range(1, last + 1)}
        assert results == {txid: [expected(ns)] for txid, ns in numbers.items()}, name
    # Exactly one result per batch: one task (index 0) reports it.
    assert {task for _, task, rows in record.get("sum") if rows} == {0}


def test_partition_aggregate_runs_per_partition_without_repartitioning(engine: Engine) -> None:
    record = SharedRecord()
    topology = TridentTopology()
    stream = topology.new_stream("rows", FixedBatchSpout(Fields("k", "v"), 4, *ROWS))
    by_key = stream.partition_by(Fields("k")).parallelism_hint(2)
    observe(by_key.partition_aggregate(TridentCount(), Fields("count")), record, "count")
    observe(by_key.partition_aggregate(Fields("v"), Sum(), Fields("sum")), record, "sum")
    observe(
        by_key.group_by(Fields("k")).partition_aggregate(Fields("v"), Collect(), Fields("values")),
        record,
        "grouped",
    )
    observe(by_key, record, "partitions")

    run_until(
        engine,
        topology,
        lambda: all(seen_txid(record, n, after(engine, 3)) for n in ["count", "sum"]),
    )

    partitions = {key: rows for key, rows in by_task(record, "partitions").items() if key[0] <= 3}
    counts = by_task(record, "count")
    sums = by_task(record, "sum")
    grouped = by_task(record, "grouped")
    for (txid, task), rows in partitions.items():
        if not rows:
            continue
        assert counts[(txid, task)] == [[len(rows)]]
        assert sums[(txid, task)] == [[sum(v for _, v in rows)]]
        values: dict[int, list[int]] = defaultdict(list)
        for k, v in rows:
            values[k].append(v)
        assert sorted(grouped[(txid, task)]) == sorted([k, vs] for k, vs in values.items())
    assert {txid for txid, _ in partitions} == {1, 2, 3}


# --- state ------------------------------------------------------------------------------


def test_persistent_aggregate_grouped_and_ungrouped_with_combiner_and_reducer(
    engine: Engine,
) -> None:
    factories = {
        name: MemoryMapState.factory(state_type)
        for name, state_type in [
            ("grouped-count", StateType.OPAQUE),
            ("grouped-sum", StateType.TRANSACTIONAL),
            ("grouped-reduce", StateType.NON_TRANSACTIONAL),
            ("global-count", StateType.OPAQUE),
            ("global-sum", StateType.TRANSACTIONAL),
            ("global-reduce", StateType.OPAQUE),
            ("global-max", StateType.OPAQUE),
        ]
    }
    topology = TridentTopology()
    stream = topology.new_stream("words", FixedBatchSpout(Fields("word", "n"), 3, *WORDS))
    grouped = stream.group_by(Fields("word"))
    grouped.persistent_aggregate(
        factories["grouped-count"], TridentCount(), Fields("count")
    ).parallelism_hint(3)
    grouped.persistent_aggregate(factories["grouped-sum"], Fields("n"), Sum(), Fields("sum"))
    grouped.persistent_aggregate(
        factories["grouped-reduce"], Fields("n"), Collect(), Fields("all")
    ).parallelism_hint(2)
    stream.persistent_aggregate(factories["global-count"], TridentCount(), Fields("count"))
    stream.persistent_aggregate(factories["global-sum"], Fields("n"), Sum(), Fields("sum"))
    stream.persistent_aggregate(factories["global-reduce"], Fields("n"), Collect(), Fields("a"))
    stream.persistent_aggregate(factories["global-max"], Fields("n"), MaxCombiner(), Fields("m"))

    numbers: dict[str, list[int]] = defaultdict(list)
    for word, n in WORDS:
        numbers[word].append(n)
    everything = [n for _, n in WORDS]
    expected = {
        "grouped-count": {(w,): len(ns) for w, ns in numbers.items()},
        "grouped-sum": {(w,): sum(ns) for w, ns in numbers.items()},
        "grouped-reduce": {(w,): sorted(ns) for w, ns in numbers.items()},
        "global-count": {(): len(WORDS)},
        "global-sum": {(): sum(everything)},
        "global-reduce": {(): sorted(everything)},
        "global-max": {(): max(everything)},
    }

    def contents() -> dict[str, Any]:
        return {name: MemoryMapState.contents(f) for name, f in factories.items()}

    run_until(engine, topology, lambda: contents() == expected)


def test_persistent_aggregate_new_values_stream_emits_each_batch_updates(engine: Engine) -> None:
    record = SharedRecord()
    topology = TridentTopology()
    stream = topology.new_stream("words", FixedBatchSpout(Fields("word", "n"), 5, *WORDS))
    counts = stream.group_by(Fields("word")).persistent_aggregate(
        MemoryMapState.factory(), TridentCount(), Fields("count")
    )
    total = stream.persistent_aggregate(
        MemoryMapState.factory(), Fields("n"), Sum(), Fields("total")
    )
    assert counts.new_values_stream().output_fields == Fields("word", "count")
    observe(counts.new_values_stream(), record, "counts")
    observe(total.new_values_stream(), record, "total")

    run_until(
        engine,
        topology,
        lambda: all(seen_txid(record, name, after(engine, 3)) for name in ["counts", "total"]),
    )

    running_counts: Counter[str] = Counter()
    expected: dict[int, list[Any]] = {}
    for txid, rows in WORD_BATCHES.items():
        running_counts.update(word for word, _ in rows)
        expected[txid] = sorted([w, running_counts[w]] for w in {w for w, _ in rows})
    assert {t: rows for t, rows in by_batch(record, "counts").items() if t <= 3} == expected
    totals = by_batch(record, "total")
    cumulative = [
        sum(n for t in range(1, txid + 1) for _, n in WORD_BATCHES[t]) for txid in (1, 2, 3)
    ]
    assert [totals[txid] for txid in (1, 2, 3)] == [[[total]] for total in cumulative]


class TotalPerKey(StateUpdater):
    """Adds each tuple's ``n`` to its key's total; emits ``[key, new total]``."""

    def update_state(
        self, state: Any, tuples: list[TridentTuple], collector: TridentCollector
    ) -> None:
        sums: dict[tuple[Any, ...], int] = defaultdict(int)
        for tup in tuples:
            sums[(tup["word"],)] += tup["n"]
        keys = sorted(sums)
        totals = state.multi_update(
            keys, [lambda old, add=sums[key]: (old or 0) + add for key in keys]
        )
        for key, total in zip(keys, totals, strict=True):
            collector.emit([key[0], total])


def test_partition_persist_applies_a_state_updater_per_partition_and_batch(engine: Engine) -> None:
    record = SharedRecord()
    factory = MemoryMapState.factory(StateType.TRANSACTIONAL)
    topology = TridentTopology()
    stream = topology.new_stream("words", FixedBatchSpout(Fields("word", "n"), 5, *WORDS))
    state = (
        stream.partition_by(Fields("word"))
        .partition_persist(factory, Fields("word", "n"), TotalPerKey(), Fields("word", "total"))
        .parallelism_hint(2)
    )
    observe(state.new_values_stream(), record, "updates")

    totals: Counter[str] = Counter()
    for word, n in WORDS:
        totals[word] += n
    run_until(
        engine,
        topology,
        lambda: (
            MemoryMapState.contents(factory) == {(w,): t for w, t in totals.items()}
            and seen_txid(record, "updates", after(engine, 3))
        ),
    )

    running: Counter[str] = Counter()
    expected: dict[int, list[Any]] = {}
    for txid, rows in WORD_BATCHES.items():
        for word, n in rows:
            running[word] += n
        expected[txid] = sorted([w, running[w]] for w in {w for w, _ in rows})
    assert {t: rows for t, rows in by_batch(record, "updates").items() if t <= 3} == expected


class CountingMapState(MapState):
    """Wraps a map state, recording every ``multi_get`` as (component, task index, keys)."""

    def __init__(self, inner: MapState, record: SharedRecord, component: str, task: int) -> None:
        self.inner = inner
        self.record = record
        self.where = (component, task)

    def begin_commit(self, txid: int) -> None:
        self.inner.begin_commit(txid)

    def commit(self, txid: int) -> None:
        self.inner.commit(txid)

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any]:
        self.record.append("multi_get", (*self.where, list(keys)))
        return self.inner.multi_get(keys)

    def multi_update(self, keys: list[tuple[Any, ...]], updaters: list[Any]) -> list[Any]:
        return self.inner.multi_update(keys, updaters)

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        self.inner.multi_put(keys, values)


class CountingFactory(StateFactory):
    """Makes :class:`CountingMapState` around the states of ``inner``."""

    def __init__(self, inner: StateFactory, record: SharedRecord) -> None:
        self.inner = inner
        self.record = record

    def make_state(
        self, conf: dict[str, Any], context: Any, partition_index: int, num_partitions: int
    ) -> MapState:
        state = self.inner.make_state(conf, context, partition_index, num_partitions)
        return CountingMapState(state, self.record, context.component_id, context.task_index)


def test_state_query_with_map_get_makes_one_multi_get_per_partition_and_batch(
    engine: Engine, tmp_path: Path
) -> None:
    # A state every process reads: on Spark the persist runs on the driver and the
    # queries on executors (a MemoryMapState is of one process; only a plain
    # MemoryMapState factory, not one wrapped as here, is kept on the driver).
    record = SharedRecord()
    inner = SqliteMapState.factory(tmp_path / "counts.db", cache_size=0)
    sentences = [["a b a"], ["c a b"], ["d"]]
    with LocalDRPC(timeout_secs=engine.timeout) as drpc:
        topology = TridentTopology()
        counts = (
            topology.new_stream("s", FixedBatchSpout(Fields("sentence"), 2, *sentences))
            .flat_map(lambda tup: [[w] for w in tup[0].split()], Fields("word"))
            .group_by(Fields("word"))
            .persistent_aggregate(CountingFactory(inner, record), TridentCount(), Fields("c"))
            .parallelism_hint(2)
        )
        (
            words_stream(topology, "counts", drpc)
            .group_by(Fields("word"))
            .state_query(counts, Fields("word"), MapGet(), Fields("count"))
            .parallelism_hint(3)
            .project(Fields("word", "count"))
        )
        (
            words_stream(topology, "ungrouped", drpc)
            .state_query(counts, Fields("word"), MapGet(), Fields("count"))
            .project(Fields("word", "count"))
        )
        with engine.running(topology) as run:
            run.wait_until(lambda: len(SqliteMapState.contents(inner)) == 4, engine.timeout)
            assert record.get("multi_get") == []  # persisting reads nothing through multi_get
            (answer,) = execute(run, drpc, engine.timeout, ("counts", "a b c d e a"))
            grouped = json.loads(answer)
            grouped_calls = record.get("multi_get")
            record.clear()
            (answer,) = execute(run, drpc, engine.timeout, ("ungrouped", "b a zz b"))
            ungrouped = json.loads(answer)
            ungrouped_calls = record.get("multi_get")

    assert sorted(grouped, key=str) == [
        ["a", 3], ["a", 3], ["b", 2], ["c", 1], ["d", 1], ["e", None],
    ]  # fmt: skip
    # One multi_get per task that got tuples, with all of that task's keys, and every
    # key (partitioned by word) in one call only.
    tasks = [(component, task) for component, task, _ in grouped_calls]
    assert len(tasks) == len(set(tasks)) and len({c for c, _ in tasks}) == 1
    assert sorted(k for _, _, keys in grouped_calls for k in keys) == sorted(
        (w,) for w in "a b c d e a".split()
    )
    calls_of: dict[tuple[Any, ...], set[int]] = defaultdict(set)
    for index, (_, _, keys) in enumerate(grouped_calls):
        for key in keys:
            calls_of[key].add(index)
    assert all(len(calls) == 1 for calls in calls_of.values())
    assert sorted(ungrouped, key=str) == [["a", 3], ["b", 2], ["b", 2], ["zz", None]]
    assert len(ungrouped_calls) == 1
    assert sorted(ungrouped_calls[0][2]) == [("a",), ("b",), ("b",), ("zz",)]


def test_state_query_on_a_static_state_and_filter_null(engine: Engine) -> None:
    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        capitals = topology.new_static_state(
            MemoryMapState.static_factory({"fr": "paris", ("it",): "rome", "xx": None})
        )
        (
            words_stream(topology, "capital", drpc)
            .state_query(capitals, Fields("word"), MapGet(), Fields("capital"))
            .each(Fields("capital"), FilterNull())
        )
        (
            words_stream(topology, "all", drpc).state_query(
                capitals, Fields("word"), MapGet(), Fields("capital")
            )
        )

    kept, everything = drpc_results(engine, build, ("capital", "fr de it xx"), ("all", "fr de"))

    assert kept == [["fr", "paris"], ["it", "rome"]]
    assert everything == [["fr", "paris"], ["de", None]]


def test_filter_null_checks_only_its_input_fields(engine: Engine) -> None:
    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        (
            words_stream(topology, "f", drpc)
            .each(
                Fields("word"),
                lambda tup: [None if "a" in tup[0] else 1, None if "b" in tup[0] else 2],
                Fields("x", "y"),
            )
            .each(Fields("x"), FilterNull())
        )
        (
            words_stream(topology, "both", drpc)
            .each(
                Fields("word"),
                lambda tup: [None if "a" in tup[0] else 1, None if "b" in tup[0] else 2],
                Fields("x", "y"),
            )
            .filter(FilterNull())
        )

    first, both = drpc_results(engine, build, ("f", "a b ab c"), ("both", "a b ab c"))

    assert first == [["b", 1, None], ["c", 1, 2]]
    assert both == [["c", 1, 2]]


def test_debug_prints_each_tuple_and_keeps_it(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        words_stream(topology, "debug", drpc).each(Fields("word"), Debug()).each(
            Fields("word"), Debug("seen")
        )

    (result,) = drpc_results(engine, build, ("debug", "x y"))

    assert result == [["x"], ["y"]]
    printed = capsys.readouterr().out.splitlines()
    # Debug prints where its segment runs: on Spark, in a Python worker, whose stdout
    # PySpark sends to the executor's stderr; nothing reaches the driver's stdout.
    assert [line for line in printed if line.startswith(("DEBUG", "seen"))] == (
        [] if engine.is_spark else ["DEBUG: ['x']", "seen: ['x']", "DEBUG: ['y']", "seen: ['y']"]
    )


# --- merge and join ----------------------------------------------------------------------


def test_merge_combines_the_batches_of_several_streams(engine: Engine) -> None:
    record = SharedRecord()
    topology = TridentTopology()
    left = topology.new_stream("left", FixedBatchSpout(Fields("a", "b"), 2, [1, "x"], [2, "y"]))
    right = topology.new_stream("right", FixedBatchSpout(Fields("c", "d"), 1, [3, "z"], [4, "w"]))
    third = topology.new_stream("third", FixedBatchSpout(Fields("e"), 1, [5])).each(
        Fields("e"), lambda tup: "v", Fields("f")
    )
    merged = topology.merge(left, right, third)
    assert merged.output_fields == Fields("a", "b")
    observe(merged.each(Fields("a"), lambda tup: tup["a"] * 10, Fields("ten")), record, "m")
    observe(topology.merge([left, right]), record, "list")  # type: ignore[arg-type]

    last = 2 if engine.is_spark else 3  # local: an empty batch 3; Spark runs none
    run_until(
        engine,
        topology,
        lambda: all(seen_txid(record, name, after(engine, last)) for name in ["m", "list"]),
    )

    # Every transaction has a batch of each spout.
    merged_batches = {t: rows for t, rows in by_batch(record, "m").items() if t <= 3}
    assert merged_batches == {
        1: [[1, "x", 10], [2, "y", 20], [3, "z", 30], [5, "v", 50]],
        2: [[4, "w", 40]],
        **({} if engine.is_spark else {3: []}),
    }
    assert {t: rows for t, rows in by_batch(record, "list").items() if t <= 2} == {
        1: [[1, "x"], [2, "y"], [3, "z"]],
        2: [[4, "w"]],
    }


def test_merge_of_branches_of_one_drpc_stream(engine: Engine) -> None:
    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        words = words_stream(topology, "both", drpc)
        upper = words.map(lambda tup: tup[0].upper())
        lengths = words.map(lambda tup: len(tup[0]), Fields("length"))
        topology.merge(upper, lengths)

    (result,) = drpc_results(engine, build, ("both", "ab c"))

    assert sorted(result, key=str) == [["AB"], ["C"], [1], [2]]


def test_join_is_an_inner_join_within_each_batch(engine: Engine) -> None:
    record = SharedRecord()
    topology = TridentTopology()
    people = topology.new_stream(
        "people",
        FixedBatchSpout(
            Fields("city", "name", "age"),
            3,
            ["paris", "ann", 31], ["rome", "bob", 25], ["paris", "cid", 40],
            ["oslo", "dan", 50], ["rome", "eve", 22],
        ),
    )  # fmt: skip
    cities = topology.new_stream(
        "cities",
        FixedBatchSpout(
            Fields("country", "town"),
            3,
            ["fr", "paris"], ["it", "rome"], ["fr2", "paris"],
            ["no", "oslo"], ["xx", "nowhere"],
        ),
    )  # fmt: skip
    joined = topology.join(
        people, Fields("city"), cities, Fields("town"), Fields("city", "name", "age", "country")
    ).parallelism_hint(2)
    assert joined.output_fields == Fields("city", "name", "age", "country")
    observe(joined, record, "joined")

    last = 2 if engine.is_spark else 3  # local: an empty batch 3; Spark runs none
    run_until(engine, topology, lambda: seen_txid(record, "joined", after(engine, last)))

    assert {t: rows for t, rows in by_batch(record, "joined").items() if t <= 3} == {
        # txid 1: people ann, bob, cid; cities fr/paris, it/rome, fr2/paris
        1: sorted(
            [
                ["paris", "ann", 31, "fr"], ["paris", "ann", 31, "fr2"],
                ["paris", "cid", 40, "fr"], ["paris", "cid", 40, "fr2"],
                ["rome", "bob", 25, "it"],
            ]
        ),
        # txid 2: people dan (oslo), eve (rome); cities no/oslo, xx/nowhere
        2: [["oslo", "dan", 50, "no"]],
        **({} if engine.is_spark else {3: []}),
    }  # fmt: skip


def test_join_on_several_fields_of_two_drpc_branches(engine: Engine) -> None:
    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        pairs = topology.new_drpc_stream("join", drpc).flat_map(
            lambda tup: [w.split(":") for w in tup["args"].split()], Fields("x", "y")
        )
        left = pairs.each(Fields("x"), lambda tup: "L" + tup[0], Fields("l"))
        right = pairs.each(Fields("y"), lambda tup: "R" + tup[0], Fields("r"))
        topology.join(left, Fields("x", "y"), right, Fields("x", "y"), Fields("x", "y", "l", "r"))

    (result,) = drpc_results(engine, build, ("join", "a:1 b:2"))

    assert sorted(result) == [["a", "1", "La", "R1"], ["b", "2", "Lb", "R2"]]


# --- spouts ------------------------------------------------------------------------------


@pytest.mark.parametrize("cycle", [False, True])
def test_fixed_batch_spout_batches_with_and_without_cycle(engine: Engine, cycle: bool) -> None:
    record = SharedRecord()
    spout = FixedBatchSpout(Fields("n"), 3, [0], [1], [2], [3], [4])
    spout.set_cycle(cycle)
    topology = TridentTopology()
    observe(topology.new_stream("numbers", spout), record, "batches")

    if cycle:  # batches never end: batch 7 shows batches 1-6 complete, on either engine
        run_until(engine, topology, lambda: seen_txid(record, "batches", 7), drain=False)
    else:  # the local engine goes on with empty batches; Spark runs none
        last = 2 if engine.is_spark else 6
        run_until(engine, topology, lambda: seen_txid(record, "batches", after(engine, last)))

    batches = {t: rows for t, rows in by_batch(record, "batches").items() if t <= 6}
    if cycle:
        assert batches == {t: [[0], [1], [2]] if t % 2 else [[3], [4]] for t in range(1, 7)}
    else:
        assert batches == {
            1: [[0], [1], [2]],
            2: [[3], [4]],
            **({} if engine.is_spark else {3: [], 4: [], 5: [], 6: []}),
        }


class ListBatchSpout(BatchSpout):
    """A BatchSpout emitting ``[txid]`` once per transaction up to ``last``."""

    def __init__(self, last: int) -> None:
        self.last = last

    def get_output_fields(self) -> Fields:
        return Fields("txid")

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        if batch_id <= self.last:
            collector.emit([batch_id])


def test_a_batch_spout_gets_each_transaction_id(engine: Engine) -> None:
    factory = MemoryMapState.factory()
    topology = TridentTopology()
    topology.new_stream("ids", ListBatchSpout(5)).persistent_aggregate(
        factory, Fields("txid"), Sum(), Fields("sum")
    )

    run_until(engine, topology, lambda: MemoryMapState.contents(factory) == {(): 15})


# --- parallelism and names ---------------------------------------------------------------


def test_parallelism_hints_set_the_task_counts_of_their_segments() -> None:
    topology = TridentTopology()
    spout = FixedBatchSpout(Fields("sentence"), 3, ["a b"])
    counts = (
        topology.new_stream("sentences", spout)
        .each(Fields("sentence"), Split(), Fields("word", "length"))
        .parallelism_hint(3)
        .group_by(Fields("word"))
        .persistent_aggregate(MemoryMapState.factory(), TridentCount(), Fields("count"))
        .parallelism_hint(4)
    )
    drpc = LocalDRPC()
    (
        topology.new_drpc_stream("words", drpc)
        .flat_map(lambda tup: [[w] for w in tup[0].split()], Fields("word"))
        .parallelism_hint(2)
        .state_query(counts, Fields("word"), MapGet(), Fields("count"))
        .shuffle()
        .each(Fields("count"), FilterNull())
        .parallelism_hint(5)
        .aggregate(Fields("count"), Sum(), Fields("sum"))
    )

    built = topology.build()

    tasks = {spec.component_id: spec.parallelism for spec in built if not spec.system}
    segments = describe(topology)
    by_operations = {tuple(s["operations"]): s for s in segments}
    each_segment = by_operations[("each", "combine_partial")]
    persist_segment = by_operations[("partition", "persist")]
    assert tasks[each_segment["component"]] == 3
    assert tasks[persist_segment["component"]] == 4 and persist_segment["committer"]
    assert tasks[by_operations[("flat_map",)]["component"]] == 2
    # A query of a MemoryMapState runs with the tasks of the state's partitions.
    assert tasks[by_operations[("partition", "state_query")]["component"]] == 4
    assert tasks[by_operations[("partition", "filter", "combine_partial")]["component"]] == 5
    assert tasks["sentences"] == 1 and tasks["drpc-words"] == 1
    assert tasks["sentences/coordinator"] == 1 and tasks["drpc-words/coordinator"] == 1
    assert not any(s["committer"] for s in segments if s is not persist_segment)
    drpc.shutdown()


def test_parallelism_hint_must_be_positive() -> None:
    topology = TridentTopology()
    stream = topology.new_stream("s", FixedBatchSpout(Fields("a"), 1, [1]))
    with pytest.raises(InvalidTopologyError, match="parallelism_hint must be >= 1, got 0"):
        stream.each(Fields("a"), FilterNull()).parallelism_hint(0)


def test_names_become_component_ids() -> None:
    topology = TridentTopology()
    (
        topology.new_stream("sentences", FixedBatchSpout(Fields("sentence"), 3, ["a b"]))
        .each(Fields("sentence"), Split(), Fields("word", "length"))
        .name("split")
        .group_by(Fields("word"))
        .persistent_aggregate(MemoryMapState.factory(), TridentCount(), Fields("count"))
    )
    drpc = LocalDRPC()
    topology.new_drpc_stream("lookup", drpc).each(Fields("args"), FilterNull()).name("check")

    ids = {spec.component_id for spec in topology.build() if not spec.system}

    assert {"sentences", "sentences/coordinator", "drpc-lookup", "drpc-lookup/coordinator"} <= ids
    assert any(cid.startswith("b") and cid.endswith("-split") for cid in ids)
    assert any(cid.startswith("b") and cid.endswith("-check") for cid in ids)
    drpc.shutdown()


def test_spouts_of_a_topology_share_one_coordinator_named_by_their_ids() -> None:
    topology = TridentTopology()
    a = topology.new_stream("beta", FixedBatchSpout(Fields("x"), 1, [1]))
    b = topology.new_stream("alpha", FixedBatchSpout(Fields("x"), 1, [1]))
    topology.merge(a, b).each(Fields("x"), FilterNull())

    ids = {spec.component_id for spec in topology.build() if not spec.system}

    assert {"alpha", "beta", "alpha+beta/coordinator"} <= ids


# --- build-time errors -------------------------------------------------------------------


def spout_stream(topology: TridentTopology, stream_id: str = "s") -> Stream:
    return topology.new_stream(stream_id, FixedBatchSpout(Fields("a", "b"), 2, [1, 2]))


@pytest.mark.parametrize(
    ("where", "make"),
    [
        ("each", lambda t, s: s.each(Fields("nope"), Split(), Fields("c", "d"))),
        ("each", lambda t, s: s.each(Fields("a", "nope"), FilterNull())),
        ("each", lambda t, s: s.filter(Fields("nope"), FilterNull())),
        ("group_by", lambda t, s: s.group_by(Fields("nope"))),
        ("project", lambda t, s: s.project(Fields("b", "nope"))),
        ("partition_by", lambda t, s: s.partition_by(Fields("nope"))),
        ("aggregate", lambda t, s: s.aggregate(Fields("nope"), Sum(), Fields("c"))),
        (
            "state_query",
            lambda t, s: s.state_query(
                t.new_static_state(MemoryMapState.static_factory({})),
                Fields("nope"),
                MapGet(),
                Fields("c"),
            ),
        ),
        (
            "persistent_aggregate",
            lambda t, s: s.persistent_aggregate(
                MemoryMapState.factory(), Fields("nope"), Sum(), Fields("c")
            ),
        ),
        (
            "partition_persist",
            lambda t, s: s.partition_persist(
                MemoryMapState.factory(), Fields("nope"), TotalPerKey()
            ),
        ),
        (
            "join",
            lambda t, s: t.join(
                s, Fields("nope"), spout_stream(t, "s2"), Fields("a"), Fields("a", "b", "c")
            ),
        ),
        (
            "join",
            lambda t, s: t.join(
                s, Fields("a"), spout_stream(t, "s2"), Fields("nope"), Fields("a", "b", "c")
            ),
        ),
    ],
)
def test_unknown_fields_are_rejected_naming_the_field(
    where: str, make: Callable[[TridentTopology, Stream], Any]
) -> None:
    topology = TridentTopology()
    stream = spout_stream(topology)
    with pytest.raises(InvalidTopologyError, match=rf"Trident {where}: unknown field.*'nope'"):
        make(topology, stream)


@pytest.mark.parametrize(
    ("where", "make"),
    [
        ("each", lambda t, s: s.each(Fields("a"), Split(), Fields("c", "b"))),
        (
            "state_query",
            lambda t, s: s.state_query(
                t.new_static_state(MemoryMapState.static_factory({})),
                Fields("a"),
                MapGet(),
                Fields("a"),
            ),
        ),
    ],
)
def test_output_fields_that_duplicate_existing_ones_are_rejected(
    where: str, make: Callable[[TridentTopology, Stream], Any]
) -> None:
    topology = TridentTopology()
    stream = spout_stream(topology)
    with pytest.raises(InvalidTopologyError, match=rf"Trident {where}: output field.*already"):
        make(topology, stream)


def test_merge_needs_streams_of_the_same_width() -> None:
    topology = TridentTopology()
    two = spout_stream(topology)
    one = topology.new_stream("one", FixedBatchSpout(Fields("x"), 1, [1]))
    with pytest.raises(InvalidTopologyError, match=r"same number of fields.*'a', 'b'.*'x'"):
        topology.merge(two, one)
    with pytest.raises(InvalidTopologyError, match="at least two streams"):
        topology.merge(two)


def test_join_output_fields_must_match_the_joined_fields() -> None:
    topology = TridentTopology()
    with pytest.raises(InvalidTopologyError, match="Trident join: 2 output field"):
        topology.join(
            spout_stream(topology), Fields("a"), spout_stream(topology, "t"), Fields("a"),
            Fields("a", "b"),
        )  # fmt: skip
    with pytest.raises(InvalidTopologyError, match="same number of join fields"):
        topology.join(
            spout_stream(topology, "u"), Fields("a", "b"), spout_stream(topology, "v"),
            Fields("a"), Fields("a", "b", "c"),
        )  # fmt: skip


def test_persistent_aggregate_needs_one_output_field_and_a_value_aggregator() -> None:
    topology = TridentTopology()
    stream = spout_stream(topology)
    with pytest.raises(InvalidTopologyError, match=r"one output field, got \['c', 'd'\]"):
        stream.persistent_aggregate(MemoryMapState.factory(), TridentCount(), Fields("c", "d"))
    with pytest.raises(InvalidTopologyError, match=r"one output field, got \['c', 'd'\]"):
        stream.group_by(Fields("a")).persistent_aggregate(
            MemoryMapState.factory(), TridentCount(), Fields("c", "d")
        )
    with pytest.raises(InvalidTopologyError, match="CombinerAggregator or ReducerAggregator"):
        stream.persistent_aggregate(MemoryMapState.factory(), FirstN(1), Fields("c"))


@pytest.mark.parametrize(
    "make",
    [
        lambda s: s.aggregate(Fields("a"), Split(), Fields("c")),
        lambda s: s.aggregate(Fields("a"), lambda tup: 1, Fields("c")),
        lambda s: s.group_by(Fields("a")).aggregate(Even(), Fields("c")),
        lambda s: s.partition_aggregate(Fields("a"), Split(), Fields("c")),
        lambda s: s.persistent_aggregate(MemoryMapState.factory(), Split(), Fields("c")),
    ],
)
def test_a_non_aggregator_is_rejected(make: Callable[[Stream], Any]) -> None:
    stream = spout_stream(TridentTopology())
    with pytest.raises(InvalidTopologyError, match="is not an aggregator"):
        make(stream)


def test_each_rejects_what_is_neither_a_function_nor_callable() -> None:
    stream = spout_stream(TridentTopology())
    with pytest.raises(InvalidTopologyError, match="expected a Function or a callable, got int"):
        stream.each(Fields("a"), 42, Fields("c"))
    with pytest.raises(InvalidTopologyError, match="expected a Filter or a callable, got str"):
        stream.each(Fields("a"), "nope")


def test_a_drpc_stream_cannot_be_merged_or_joined_with_a_regular_stream() -> None:
    drpc = LocalDRPC()
    for combine in ["merge", "join"]:
        topology = TridentTopology()
        regular = topology.new_stream("s", FixedBatchSpout(Fields("args"), 1, ["x"]))
        requests = topology.new_drpc_stream("f", drpc)
        if combine == "merge":
            topology.merge(regular, requests)
        else:
            topology.join(regular, Fields("args"), requests, Fields("args"), Fields("args"))
        with pytest.raises(InvalidTopologyError, match="mixes a DRPC stream with other streams"):
            topology.build()
    drpc.shutdown()


def test_other_build_errors() -> None:
    with pytest.raises(InvalidTopologyError, match="at least one stream"):
        TridentTopology().build()
    topology = TridentTopology()
    spout_stream(topology)
    with pytest.raises(InvalidTopologyError, match="stream id 's' is used twice"):
        spout_stream(topology)
    with pytest.raises(InvalidTopologyError, match="int is not a Trident spout"):
        topology.new_stream("x", 42)
    with pytest.raises(InvalidTopologyError, match="first argument must be a TridentState"):
        spout_stream(topology, "y").state_query(42, Fields("a"), MapGet(), Fields("c"))  # type: ignore[arg-type]
    with pytest.raises(InvalidTopologyError, match="a static state has no stream"):
        topology.new_static_state(MemoryMapState.static_factory({})).new_values_stream()
    drpc = LocalDRPC()
    branching = TridentTopology()
    requests = branching.new_drpc_stream("f", drpc)
    requests.each(Fields("args"), FilterNull())
    requests.each(Fields("args"), Debug())
    with pytest.raises(InvalidTopologyError, match="'f' must end in exactly one stream"):
        branching.build()
    drpc.shutdown()


def test_partition_aggregate_reports_every_partition_even_empty_ones(engine: Engine) -> None:
    # Storm runs a partition aggregation in every partition of every batch: with three
    # partitions and words on at most two of them, one result per partition, zeros too.
    def build(topology: TridentTopology, drpc: LocalDRPC) -> None:
        (
            words_stream(topology, "count", drpc)
            .partition_by(Fields("word"))
            .parallelism_hint(3)
            .partition_aggregate(TridentCount(), Fields("n"))
        )

    def expected(words: list[str]) -> list[list[int]]:
        per_partition = Counter(stable_hash(word) % 3 for word in words)
        return sorted([per_partition.get(partition, 0)] for partition in range(3))

    requests = ["cow cow cow", "cow moon moon", "a b c d e f"]
    results = drpc_results(engine, build, *[("count", args) for args in requests])

    for args, result in zip(requests, results, strict=True):
        assert sorted(result) == expected(args.split()), args


def test_an_aggregator_emitting_the_wrong_width_is_a_clear_error(engine: Engine) -> None:
    with LocalDRPC(timeout_secs=engine.timeout) as drpc:
        topology = TridentTopology()
        numbers_stream(topology, "first", drpc).aggregate(Fields("n"), FirstN(1), Fields("a", "b"))
        with engine.running(topology) as run:
            with pytest.raises(DRPCExecutionError, match="'first' failed"):
                execute(run, drpc, engine.timeout, ("first", "1 2 3"))
            errors = [e.error for found in run.errors().values() for e in found]
    assert any(
        "Trident aggregator FirstN emitted 1 value(s) for output fields ['a', 'b']" in e
        for e in errors
    ), errors
