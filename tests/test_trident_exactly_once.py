"""Exactly-once Trident state under injected failures, restarts and pipelining.

Failures are injected by operations that raise on the first attempt of chosen
transactions: in a branch parallel to the state update (the batch fails before any
state is written) and on a state's stream of new values (the batch fails after some
state partitions committed it). Transactional and opaque state must end with the true
counts on every backend; non-transactional state may over-count but never loses.

The tests run on LocalCluster and on SparkCluster (the ``engine`` fixture, see
``tests/conftest.py``) with the same assertions; a Spark case costs 10 to 20 s, so Spark
runs a selection of the cases (each backend, state type and spout kind in one test or
another), and a comment names the Spark case covering a test that runs on LocalCluster
only. The engines differ in
where a run ends: the local engine goes on with empty batches after the data (tests
wait a few transactions past it), while Spark runs no micro-batch for an empty batch of
a batch spout (a run ends with the last batch of data). A Spark case that fails on a
gap of the Spark engine is a strict xfail naming the gap.
"""

from __future__ import annotations

import random
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from squall import Config, Fields
from squall.testing import SharedRecord
from squall.trident import (
    Aggregator,
    FixedBatchSpout,
    Function,
    OpaquePartitionedTridentSpout,
    PartitionedTridentSpout,
    Stream,
    TridentCollector,
    TridentTopology,
    TridentTuple,
)
from squall.trident import Count as TridentCount
from squall.trident.state import (
    MapState,
    MemoryMapState,
    RedisMapState,
    SqliteMapState,
    SqliteMapStateFactory,
    StateFactory,
    StateLocality,
    StateType,
)
from tests.conftest import (
    ENGINE_SETTINGS,
    SPARK_RETRIES,
    Engine,
    EngineSettings,
    on_engines,
)
from tests.helpers import wait_until

_prefixes = count()
EXACT_TYPES = [StateType.TRANSACTIONAL, StateType.OPAQUE]
BACKENDS = ["memory", "sqlite", "redis"]


# --- engines -----------------------------------------------------------------------------


@pytest.fixture
def engine_settings() -> dict[str, EngineSettings]:
    """20 s for a result locally; on Spark, one more run of a failed micro-batch (an
    injected failure fails one attempt of a transaction)."""
    return {
        "local": ENGINE_SETTINGS["local"].tuned(timeout=20.0),
        "spark": ENGINE_SETTINGS["spark"].tuned({SPARK_RETRIES: 1}),
    }


def run_until(
    engine: Engine,
    topology: TridentTopology,
    condition: Callable[[], bool],
    conf: dict[str, Any] | None = None,
    checkpoint: str = "checkpoint",
) -> dict[str, Any]:
    """Run until ``condition``; kill the topology; return each component's error texts.
    Spark (on a new cluster on checkpoint directory ``checkpoint``: a run on the same one
    resumes the last): the spouts are run dry first, then ``condition`` must hold; a
    failed query fails the test at once."""
    settings = {
        Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 1,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 3,
        **(conf or {}),
    }
    with engine.running(topology, settings, name="exactly-once", checkpoint=checkpoint) as run:
        if engine.is_spark:
            idle = run.cluster.wait_idle(run.name)
            info = run.info()
            assert idle, f"the topology failed: {errors_of(info)}"
            wait_until(condition, timeout=5.0)
        else:
            try:
                wait_until(condition, timeout=engine.timeout)
            finally:
                info = run.info()
    return errors_of(info)


def errors_of(info: Any) -> dict[str, Any]:
    """Component id -> the texts of the errors it reported (components with none left
    out). On Spark, the errors of a failed micro-batch are its spout's."""
    return {
        cid: [error.error for error in stats.errors]
        for cid, stats in info.components.items()
        if stats.errors_total
    }


def case_id(value: Any) -> Any:
    """Test ids: a state type by its name (other values: pytest's default)."""
    return value.name if isinstance(value, StateType) else None


ALL_EXACT = [(backend, state_type) for backend in BACKENDS for state_type in EXACT_TYPES]
#: A test run on LocalCluster only (the reason is in a comment above it).
LOCAL_ONLY = pytest.mark.parametrize("engine", ["local"], indirect=True)


# --- backends ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A throwaway redis-server on a free loopback port (skipped when not installed)."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    from tests.test_trident_state_redis import start_redis_server

    process, url = start_redis_server()
    yield url
    process.terminate()
    process.wait(timeout=10)


class Backend:
    """Makes factories of one backend and reads back what they store."""

    def __init__(self, name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.name = name
        self.tmp_path = tmp_path
        self.url = request.getfixturevalue("redis_url") if name == "redis" else None

    def factory(self, state_type: StateType, table: str = "counts") -> StateFactory:
        if self.name == "memory":
            return MemoryMapState.factory(state_type)
        if self.name == "sqlite":
            return SqliteMapState.factory(self.tmp_path / "state.db", state_type, table=table)
        assert self.url is not None
        return RedisMapState.factory(self.url, state_type, key_prefix=f"eo{next(_prefixes)}:")

    def contents(self, factory: Any) -> dict[tuple[Any, ...], Any]:
        if self.name == "memory":
            return MemoryMapState.contents(factory)
        if self.name == "sqlite":
            return SqliteMapState.contents(factory)
        return RedisMapState.contents(factory)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return Backend(request.param, tmp_path, request)


# --- failure injection and observation ---------------------------------------------------


class FailFirstAttempt(Aggregator):
    """Records every attempt it sees as ``(txid, attempt id)`` under ``label`` and raises
    at the end of the first attempt of each transaction in ``txids``."""

    def __init__(self, record: SharedRecord, label: str, txids: set[int]) -> None:
        self.record = record
        self.label = label
        self.txids = set(txids)

    def init(self, batch_id: Any, collector: TridentCollector) -> Any:
        self.record.append(self.label, (batch_id.transaction_id, batch_id.attempt_id))
        return batch_id

    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        """Nothing to fold: the batch id is all it needs."""

    def complete(self, state: Any, collector: TridentCollector) -> None:
        txid = state.transaction_id
        if txid not in self.txids:
            return
        attempts = [a for t, a in self.record.get(self.label) if t == txid]
        if attempts[0] == state.attempt_id:
            raise RuntimeError(f"injected failure of the first attempt of batch {txid}")


class FailOnFirstSight(Function):
    """Raises the first time it sees a tuple whose ``i`` is in ``indexes``."""

    def __init__(self, record: SharedRecord, indexes: set[int]) -> None:
        self.record = record
        self.indexes = set(indexes)

    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        index = tup["i"]
        if index in self.indexes:
            self.record.append("seen", index)
            if self.record.get("seen").count(index) == 1:
                raise RuntimeError(f"injected failure on tuple {index}")
        collector.emit([index])


def attempts(record: SharedRecord, label: str) -> Counter[int]:
    """txid -> number of distinct attempts seen under ``label``."""
    return Counter(txid for txid, _ in set(record.get(label)))


class RecordingState(MapState):
    """Wraps a map state; records ``(partition, "begin"|"commit", txid)``."""

    def __init__(self, inner: MapState, record: SharedRecord, partition: tuple[str, int]) -> None:
        self.inner = inner
        self.record = record
        self.partition = partition

    def begin_commit(self, txid: int) -> None:
        self.record.append("commits", (self.partition, "begin", txid))
        self.inner.begin_commit(txid)

    def commit(self, txid: int) -> None:
        self.inner.commit(txid)
        self.record.append("commits", (self.partition, "commit", txid))

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any]:
        return self.inner.multi_get(keys)

    def multi_update(self, keys: list[tuple[Any, ...]], updaters: list[Any]) -> list[Any]:
        return self.inner.multi_update(keys, updaters)

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        self.inner.multi_put(keys, values)

    def close(self) -> None:
        self.inner.close()


class RecordingFactory(StateFactory):
    """Makes :class:`RecordingState` around the states of ``inner``, whose locality it
    has (the Spark engine keeps a memory state's tasks on the driver). Use
    :func:`recording`, which keeps a SQLite factory a SQLite factory."""

    def __init__(self, inner: StateFactory, record: SharedRecord) -> None:
        self.inner = inner
        self.record = record

    @property
    def locality(self) -> StateLocality:
        return self.inner.locality

    def make_state(
        self, conf: dict[str, Any], context: Any, partition_index: int, num_partitions: int
    ) -> MapState:
        state = self.inner.make_state(conf, context, partition_index, num_partitions)
        return RecordingState(state, self.record, (context.component_id, partition_index))


@dataclass(frozen=True)
class RecordingSqliteFactory(SqliteMapStateFactory):
    """A SQLite factory (the Spark engine keeps SQLite states on the driver) making
    :class:`RecordingState` around its states."""

    record: Any = field(default=None, compare=False)

    def make_state(
        self, conf: dict[str, Any], context: Any, partition_index: int, num_partitions: int
    ) -> MapState:
        state = super().make_state(conf, context, partition_index, num_partitions)
        return RecordingState(state, self.record, (context.component_id, partition_index))


def recording(factory: StateFactory, record: SharedRecord) -> StateFactory:
    """``factory``'s states wrapped in :class:`RecordingState`, placed as its own are."""
    if isinstance(factory, SqliteMapStateFactory):
        return RecordingSqliteFactory(**vars(factory), record=record)
    return RecordingFactory(factory, record)


def commit_log(record: SharedRecord) -> dict[tuple[str, int], list[tuple[str, int]]]:
    """partition -> its begin/commit events in order."""
    log: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for partition, event, txid in record.get("commits"):
        log.setdefault(partition, []).append((event, txid))
    return log


def committed(record: SharedRecord) -> int:
    """The highest txid every partition has committed (0 before any)."""
    log = commit_log(record)
    if not log:
        return 0
    return min(max((t for e, t in events if e == "commit"), default=0) for events in log.values())


def only_injected(errors: dict[str, Any]) -> bool:
    """Whether every reported error is an injected one."""
    return all("injected failure" in text for texts in errors.values() for text in texts)


# --- data --------------------------------------------------------------------------------

VOCABULARY = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date"]


def sentences(number: int, seed: int) -> list[list[Any]]:
    """``[i, sentence]`` rows of 1 to 4 words."""
    rng = random.Random(seed)
    return [
        [i, " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 4)))]
        for i in range(number)
    ]


def word_counts(rows: list[list[Any]]) -> dict[tuple[Any, ...], int]:
    counts = Counter(word for _, sentence in rows for word in sentence.split())
    return {(word,): n for word, n in counts.items()}


def split_words(stream: Stream) -> Stream:
    return stream.each(Fields("sentence"), lambda tup: tup[0].split(), Fields("word")).project(
        Fields("word")
    )


# --- a batch spout that replays identically ---------------------------------------------

ROWS = sentences(24, seed=11)
BATCH = 4  # six batches: txids 1-6
FAIL_BEFORE = {2, 5}  # a parallel branch fails these first attempts
FAIL_AFTER = {3, 6}  # the new-values stream fails these, after state partitions commit
FAIL_EACH = {1 * BATCH + 1, 3 * BATCH}  # tuples of txids 2 and 4: an each raises
DATA_TXIDS = len(ROWS) // BATCH  # Spark runs these; the local engine goes on (empty)


def counting_topology(
    factory: StateFactory,
    record: SharedRecord,
    spout: Any,
    fail_before: set[int] = FAIL_BEFORE,
    fail_after: set[int] = FAIL_AFTER,
    fail_each: set[int] = FAIL_EACH,
) -> TridentTopology:
    """sentences -> words -> persistent Count, with the failures injected."""
    topology = TridentTopology()
    stream = topology.new_stream("sentences", spout)
    state = (
        split_words(stream)
        .group_by(Fields("word"))
        .persistent_aggregate(recording(factory, record), TridentCount(), Fields("count"))
        .parallelism_hint(3)
    )
    if fail_before:
        stream.partition_aggregate(
            FailFirstAttempt(record, "before", fail_before), Fields("ignored")
        )
    if fail_each:
        stream.each(Fields("i"), FailOnFirstSight(record, fail_each), Fields("checked"))
    if fail_after:
        state.new_values_stream().partition_aggregate(
            FailFirstAttempt(record, "after", fail_after), Fields("ignored")
        )
    return topology


def fixed_spout() -> FixedBatchSpout:
    return FixedBatchSpout(Fields("i", "sentence"), BATCH, *ROWS)


@pytest.mark.parametrize(
    ("engine", "backend", "state_type"),
    on_engines(ALL_EXACT, [("sqlite", StateType.TRANSACTIONAL)]),
    indirect=["engine", "backend"],
    ids=case_id,
)
def test_transactional_and_opaque_state_are_exact_under_replays(
    engine: Engine, backend: Backend, state_type: StateType
) -> None:
    record = SharedRecord()
    factory = backend.factory(state_type)
    expected = word_counts(ROWS)
    topology = counting_topology(factory, record, fixed_spout())
    last = engine.pick(local=DATA_TXIDS + 2, spark=DATA_TXIDS)

    errors = run_until(
        engine,
        topology,
        lambda: committed(record) >= last and backend.contents(factory) == expected,
    )

    assert backend.contents(factory) == expected
    assert only_injected(errors), errors
    assert all(attempts(record, "before")[t] >= 2 for t in FAIL_BEFORE)
    assert all(attempts(record, "after")[t] >= 2 for t in FAIL_AFTER)
    assert sorted(set(record.get("seen"))) == sorted(FAIL_EACH)
    # The after-commit failures made some partitions commit those batches twice.
    log = commit_log(record)
    twice = {t for events in log.values() for t in FAIL_AFTER if events.count(("commit", t)) > 1}
    assert twice == FAIL_AFTER


# Spark: not run, for time (its failures are those of the exact-state test's Spark case).
@LOCAL_ONLY
def test_non_transactional_state_over_counts_but_never_loses(
    engine: Engine, backend: Backend
) -> None:
    record = SharedRecord()
    factory = backend.factory(StateType.NON_TRANSACTIONAL)
    expected = word_counts(ROWS)
    topology = counting_topology(factory, record, fixed_spout())
    last = engine.pick(local=DATA_TXIDS + 2, spark=DATA_TXIDS)

    errors = run_until(engine, topology, lambda: committed(record) >= last)

    counts = backend.contents(factory)
    assert only_injected(errors), errors
    assert set(counts) == set(expected)
    assert all(counts[key] >= n for key, n in expected.items()), (counts, expected)
    # Batches failed after a partition committed them were applied twice there.
    assert sum(counts.values()) > sum(expected.values())


# Spark: not run, for time (the txid-order test's Spark case has these failures).
@LOCAL_ONLY
def test_failures_before_the_commit_leave_even_non_transactional_state_exact(
    engine: Engine,
) -> None:
    record = SharedRecord()
    factory = MemoryMapState.factory(StateType.NON_TRANSACTIONAL)
    topology = counting_topology(factory, record, fixed_spout(), fail_after=set())
    last = engine.pick(local=DATA_TXIDS + 2, spark=DATA_TXIDS)

    errors = run_until(engine, topology, lambda: committed(record) >= last)

    assert MemoryMapState.contents(factory) == word_counts(ROWS)
    assert only_injected(errors), errors


def test_state_updates_are_applied_in_txid_order_per_partition(engine: Engine) -> None:
    """With batches pipelined (max spout pending 5; Spark runs one at a time) and
    failures before the commit, every state partition begins and commits each batch
    once, in txid order."""
    record = SharedRecord()
    factory = MemoryMapState.factory(StateType.OPAQUE)
    topology = counting_topology(factory, record, fixed_spout(), fail_after=set())
    last = engine.pick(local=DATA_TXIDS + 6, spark=DATA_TXIDS)

    errors = run_until(
        engine,
        topology,
        lambda: committed(record) >= last,
        conf={Config.TOPOLOGY_MAX_SPOUT_PENDING: 5},
    )

    assert only_injected(errors), errors
    log = commit_log(record)
    assert len(log) == 3  # the persist tasks
    for partition, events in log.items():
        commits = [t for e, t in events if e == "commit"]
        assert commits == list(range(1, len(commits) + 1)), partition  # strictly increasing
        ordered = [event for t in commits for event in (("begin", t), ("commit", t))]
        assert events in (ordered, [*ordered, ("begin", len(commits) + 1)]), partition
    assert MemoryMapState.contents(factory) == word_counts(ROWS)


# Spark: not run, for time (the txid-order test's Spark case checks the commit order).
@LOCAL_ONLY
def test_commits_after_a_failed_commit_stay_in_txid_order(engine: Engine) -> None:
    """A batch failed after some partitions committed it is begun again (same txid)
    everywhere before any later batch: per partition, txids never go down."""
    record = SharedRecord()
    factory = MemoryMapState.factory(StateType.TRANSACTIONAL)
    topology = counting_topology(factory, record, fixed_spout())
    last = engine.pick(local=DATA_TXIDS + 4, spark=DATA_TXIDS)

    run_until(
        engine,
        topology,
        lambda: committed(record) >= last,
        conf={Config.TOPOLOGY_MAX_SPOUT_PENDING: 5},
    )

    for events in commit_log(record).values():
        txids = [t for _, t in events]
        assert txids == sorted(txids)
        commits = [t for e, t in events if e == "commit"]
        assert sorted(set(commits)) == list(range(1, max(commits) + 1))  # none skipped
        repeated = {t for t in commits if commits.count(t) > 1}
        assert repeated <= FAIL_AFTER  # only the batches failed after committing
        for index, (event, txid) in enumerate(events):  # a commit closes its own begin
            if event == "commit":
                assert events[index - 1] == ("begin", txid)
    assert MemoryMapState.contents(factory) == word_counts(ROWS)


# --- partitioned spouts over in-memory partitions ----------------------------------------


def items(partitions: int, per_partition: int, seed: int) -> list[list[list[Any]]]:
    """Per partition, ``[id, word]`` rows with unique ids."""
    rng = random.Random(seed)
    return [
        [[f"p{p}-{i}", rng.choice(VOCABULARY)] for i in range(per_partition)]
        for p in range(partitions)
    ]


class PartitionCount:
    """The coordinator of a partitioned spout over a fixed number of partitions."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions

    def number_of_partitions(self) -> int:
        return self.partitions

    def is_ready(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to release."""


class ListEmitter:
    """Transactional emitter: a new batch is the next ``batch_size`` rows of the
    partition (up to ``available`` rows); metadata ``(start, end)``."""

    def __init__(self, partitions: list[list[list[Any]]], batch_size: int, available: int):
        self.partitions = partitions
        self.batch_size = batch_size
        self.available = available

    def emit_partition_batch_new(
        self, attempt: Any, collector: Any, partition: int, last_meta: Any
    ) -> tuple[int, int]:
        start = last_meta[1] if last_meta else 0
        end = min(start + self.batch_size, self.available, len(self.partitions[partition]))
        meta = (start, end)
        self.emit_partition_batch(attempt, collector, partition, meta)
        return meta

    def emit_partition_batch(
        self, attempt: Any, collector: Any, partition: int, meta: tuple[int, int]
    ) -> None:
        for row in self.partitions[partition][meta[0] : meta[1]]:
            collector.emit(row)

    def close(self) -> None:
        """Nothing to release."""


class ListPartitionedSpout(PartitionedTridentSpout):
    """A transactional spout over in-memory partitions (see :class:`ListEmitter`)."""

    def __init__(
        self, partitions: list[list[list[Any]]], batch_size: int, available: int = 1 << 30
    ) -> None:
        self.partitions = partitions
        self.batch_size = batch_size
        self.available = available

    def get_output_fields(self) -> Fields:
        return Fields("id", "word")

    def get_coordinator(self, conf: dict[str, Any], context: Any) -> PartitionCount:
        return PartitionCount(len(self.partitions))

    def get_emitter(self, conf: dict[str, Any], context: Any) -> ListEmitter:
        return ListEmitter(self.partitions, self.batch_size, self.available)


class ShrinkingEmitter:
    """Opaque emitter: continues after the previous transaction's ``end``, and emits
    one row fewer on every new emission of a transaction's partition (at least one): a
    replayed batch holds different tuples. Records ``(txid, attempt id, partition,
    start, end)`` under ``"emitted"`` (where it counts the emissions, in any process)."""

    def __init__(
        self, partitions: list[list[list[Any]]], batch_size: int, record: SharedRecord
    ) -> None:
        self.partitions = partitions
        self.batch_size = batch_size
        self.record = record

    def emit_partition_batch(
        self, attempt: Any, collector: Any, partition: int, last_meta: Any
    ) -> tuple[int, int]:
        start = last_meta[1] if last_meta else 0
        key = (attempt.transaction_id, partition)
        emissions = 1 + sum((t, p) == key for t, _, p, _, _ in self.record.get("emitted"))
        size = max(1, self.batch_size + 1 - emissions)
        end = min(start + size, len(self.partitions[partition]))
        self.record.append(
            "emitted", (attempt.transaction_id, attempt.attempt_id, partition, start, end)
        )
        for row in self.partitions[partition][start:end]:
            collector.emit(row)
        return (start, end)

    def close(self) -> None:
        """Nothing to release."""


class ShrinkingOpaqueSpout(OpaquePartitionedTridentSpout):
    """An opaque spout over in-memory partitions (see :class:`ShrinkingEmitter`)."""

    def __init__(
        self, partitions: list[list[list[Any]]], batch_size: int, record: SharedRecord
    ) -> None:
        self.partitions = partitions
        self.batch_size = batch_size
        self.record = record

    def get_output_fields(self) -> Fields:
        return Fields("id", "word")

    def get_coordinator(self, conf: dict[str, Any], context: Any) -> PartitionCount:
        return PartitionCount(len(self.partitions))

    def get_emitter(self, conf: dict[str, Any], context: Any) -> ShrinkingEmitter:
        return ShrinkingEmitter(self.partitions, self.batch_size, self.record)


def item_counts(partitions: list[list[list[Any]]], available: int = 1 << 30) -> dict[Any, int]:
    return dict(Counter((word,) for rows in partitions for _, word in rows[:available]).items())


def every_id_once(partitions: list[list[list[Any]]], available: int = 1 << 30) -> dict[Any, int]:
    return {(item_id,): 1 for rows in partitions for item_id, _ in rows[:available]}


def items_topology(
    spout: Any,
    words: StateFactory,
    ids: StateFactory,
    record: SharedRecord,
    fail_before: set[int],
    fail_after: set[int],
) -> TridentTopology:
    """items -> Count per word and per id (each id must be counted exactly once)."""
    topology = TridentTopology()
    stream = topology.new_stream("items", spout).parallelism_hint(2)
    per_word = (
        stream.group_by(Fields("word"))
        .persistent_aggregate(recording(words, record), TridentCount(), Fields("count"))
        .parallelism_hint(2)
    )
    stream.group_by(Fields("id")).persistent_aggregate(
        ids, TridentCount(), Fields("count")
    ).parallelism_hint(2)
    if fail_before:
        stream.partition_aggregate(
            FailFirstAttempt(record, "before", fail_before), Fields("ignored")
        )
    if fail_after:
        per_word.new_values_stream().partition_aggregate(
            FailFirstAttempt(record, "after", fail_after), Fields("ignored")
        )
    return topology


PARTITIONS = items(3, 10, seed=5)  # 3 partitions of 10 rows, batches of 3 per partition
PARTITION_TXIDS = 4  # transactions holding every row (more if replays emit fewer)


@pytest.mark.parametrize(
    ("engine", "backend", "state_type"),
    on_engines(
        ALL_EXACT,
        [("redis", StateType.OPAQUE)],
    ),
    indirect=["engine", "backend"],
    ids=case_id,
)
def test_transactional_partitioned_spout_gives_exact_state(
    engine: Engine, backend: Backend, state_type: StateType
) -> None:
    record = SharedRecord()
    words = backend.factory(state_type, table="words")
    ids = backend.factory(state_type, table="ids")
    topology = items_topology(ListPartitionedSpout(PARTITIONS, 3), words, ids, record, {2, 3}, {4})
    last = engine.pick(local=PARTITION_TXIDS + 3, spark=PARTITION_TXIDS)

    errors = run_until(
        engine,
        topology,
        lambda: (
            committed(record) >= last
            and backend.contents(words) == item_counts(PARTITIONS)
            and backend.contents(ids) == every_id_once(PARTITIONS)
        ),
    )

    assert only_injected(errors), errors
    assert attempts(record, "before")[2] >= 2 and attempts(record, "after")[4] >= 2


@pytest.mark.parametrize(
    ("engine", "backend"),
    on_engines(
        [(backend,) for backend in BACKENDS],
        [("memory",)],
    ),
    indirect=True,
)
def test_opaque_spout_replaying_different_tuples_gives_exact_opaque_state(
    engine: Engine, backend: Backend
) -> None:
    record = SharedRecord()
    words = backend.factory(StateType.OPAQUE, table="words")
    ids = backend.factory(StateType.OPAQUE, table="ids")
    topology = items_topology(
        ShrinkingOpaqueSpout(PARTITIONS, 3, record), words, ids, record, {1, 2, 4}, set()
    )
    last = engine.pick(local=PARTITION_TXIDS + 4, spark=PARTITION_TXIDS)

    errors = run_until(
        engine,
        topology,
        lambda: (
            committed(record) >= last
            and backend.contents(words) == item_counts(PARTITIONS)
            and backend.contents(ids) == every_id_once(PARTITIONS)
        ),
    )

    assert only_injected(errors), errors
    # The replays of the failed transactions emitted other tuples than their first
    # attempts (fewer, as the source now returns smaller batches).
    ranges: dict[tuple[int, int], dict[int, tuple[int, int]]] = {}
    for txid, attempt_id, partition, start, end in record.get("emitted"):
        ranges.setdefault((txid, partition), {})[attempt_id] = (start, end)
    changed = {
        txid for (txid, _), by_attempt in ranges.items() if len(set(by_attempt.values())) > 1
    }
    assert {1, 2, 4} <= changed


# --- restarts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "state_type"),
    on_engines(
        [(state_type,) for state_type in EXACT_TYPES],
        [(StateType.TRANSACTIONAL,)],
    ),
    indirect=["engine"],
    ids=case_id,
)
def test_a_restarted_topology_continues_its_txids_and_stays_exact(
    engine: Engine, tmp_path: Path, state_type: StateType
) -> None:
    """Run 1 sees the first 4 rows of each partition, run 2 (a new cluster on the same
    coordination and state directories; Spark: on the same checkpoint directory, where
    it keeps the coordination) all of them."""
    conf = (
        {}
        if engine.is_spark
        else {Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR: str(tmp_path / "coordination")}
    )
    words = SqliteMapState.factory(tmp_path / "state.db", state_type, table="words")
    ids = SqliteMapState.factory(tmp_path / "state.db", state_type, table="ids")
    first, second = SharedRecord(), SharedRecord()
    # Rows 0-3 of each partition: 2 transactions (3 rows, then 1); the rest: 2 more.
    last = engine.pick(local=4, spark=2)

    # Run 1 has run 2's failing aggregator too, failing no transaction (txid 0 never
    # runs): a checkpoint is resumed only by a topology of the same components.
    errors = run_until(
        engine,
        items_topology(ListPartitionedSpout(PARTITIONS, 3, 4), words, ids, first, {0}, set()),
        lambda: (
            committed(first) >= last
            and SqliteMapState.contents(words) == item_counts(PARTITIONS, 4)
        ),
        conf,
    )
    assert errors == {}
    assert SqliteMapState.contents(ids) == every_id_once(PARTITIONS, 4)
    last_first = max(t for _, e, t in first.get("commits") if e == "commit")

    errors = run_until(
        engine,
        items_topology(
            ListPartitionedSpout(PARTITIONS, 3), words, ids, second, {last_first + 2}, set()
        ),
        lambda: (
            committed(second) >= last_first + engine.pick(local=6, spark=2)
            and SqliteMapState.contents(words) == item_counts(PARTITIONS)
            and SqliteMapState.contents(ids) == every_id_once(PARTITIONS)
        ),
        conf,
    )

    assert only_injected(errors), errors  # no "batch is behind the state" error
    begun = [t for _, e, t in second.get("commits") if e == "begin"]
    assert last_first <= min(begun) <= last_first + 1  # continues, at most one in doubt
    assert SqliteMapState.contents(words) == item_counts(PARTITIONS)


# Spark: not run, for time (a Spark topology on a new checkpoint starts at txid 1, as
# every Spark case here shows).
@LOCAL_ONLY
def test_without_a_state_dir_a_new_cluster_starts_txids_again(engine: Engine) -> None:
    """The coordination store lives as long as the cluster when no directory is set
    (Spark: a new cluster on a new checkpoint directory)."""
    for run in range(2):
        record = SharedRecord()
        factory = MemoryMapState.factory(StateType.TRANSACTIONAL)
        run_until(
            engine,
            counting_topology(factory, record, fixed_spout(), set(), set(), set()),
            lambda record=record: committed(record) >= 2,  # type: ignore[misc]
            checkpoint=f"checkpoint-{run}",
        )
        assert min(t for _, e, t in record.get("commits") if e == "begin") == 1
