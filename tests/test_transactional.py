"""Transactional topologies on LocalCluster: exactly-once batches, committers in order.

Most tests run ``examples/transactional_global_count.py`` (a partitioned spout over
in-memory partitions, a batch bolt counting each batch, a committer adding the counts
to a global count stored with its txid) with extra components that record what happens
or fail on purpose. Every component copy shares its :class:`SharedRecord`, so the tests
see the order of events across tasks.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from squall import (
    Bolt,
    Config,
    FailedException,
    InvalidTopologyError,
    LocalCluster,
    ManualClock,
    Spout,
    StormTopology,
    TopologyContext,
    Tuple,
)
from squall.testing import SharedRecord
from squall.transactional import (
    BatchBolt,
    BatchOutputCollector,
    SqliteCoordinationStore,
    TransactionalSpout,
    TransactionalTopologyBuilder,
    TransactionAttempt,
)
from tests.helpers import settle, wait_until

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "transactional_global_count.py"


def _load_example() -> ModuleType:
    name = "example_transactional_global_count"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


gc = _load_example()

WORDS, BATCH, PARTITIONS = 600, 10, 3
TXIDS = WORDS // (BATCH * PARTITIONS)  # 20 transactions hold every word


def base_conf(pending: int = 1, **extra: Any) -> dict[str, Any]:
    """No pause between transactions (tests are fast), ``pending`` batches in flight."""
    conf = Config()
    conf[Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS] = 0
    conf.set_max_spout_pending(pending)
    conf.update(extra)
    return conf


# --- shared helpers -------------------------------------------------------------------


class FirstAttempts:
    """The first attempt seen of each transaction, shared by every copy of its owner."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._first: dict[int, TransactionAttempt] = {}

    def __deepcopy__(self, memo: dict[int, Any]) -> FirstAttempts:
        return self

    def is_first(self, attempt: TransactionAttempt) -> bool:
        """Whether ``attempt`` is the first attempt of its transaction seen here."""
        with self._lock:
            return self._first.setdefault(attempt.transaction_id, attempt) == attempt


EmitRecord = tuple[int, tuple[Any, ...], tuple[int, ...]]
"""One emitted tuple: (emitting task, values after the attempt, target tasks)."""


class Emits:
    """An emit listener recording the spout emitters' tuples per attempt."""

    def __init__(self, component: str = "spout") -> None:
        self.component = component
        self._lock = threading.Lock()
        self.by_attempt: dict[TransactionAttempt, list[EmitRecord]] = defaultdict(list)

    def __call__(
        self, component: str, stream: str, task: int, values: Any, targets: list[int]
    ) -> None:
        if component != self.component or stream != "default":
            return
        attempt = values[0]
        assert isinstance(attempt, TransactionAttempt)
        with self._lock:
            self.by_attempt[attempt].append((task, tuple(values[1:]), tuple(targets)))

    def snapshot(self) -> dict[TransactionAttempt, list[EmitRecord]]:
        with self._lock:
            return {attempt: list(emits) for attempt, emits in self.by_attempt.items()}

    def attempts(self) -> dict[int, list[TransactionAttempt]]:
        """Per txid, its attempts (in no particular order)."""
        result: dict[int, list[TransactionAttempt]] = defaultdict(list)
        for attempt in self.snapshot():
            result[attempt.transaction_id].append(attempt)
        return result

    def batch(self, attempt: TransactionAttempt) -> list[tuple[int, tuple[Any, ...]]]:
        """What ``attempt``'s batch held: (emitter task, values), sorted."""
        return sorted((task, values) for task, values, _ in self.snapshot().get(attempt, []))

    def assert_replays_identical(self) -> int:
        """Every attempt of a transaction emitted exactly the same tuples; returns the
        number of transactions that were replayed."""
        replayed = 0
        for attempts in self.attempts().values():
            batches = [self.batch(attempt) for attempt in attempts]
            assert all(batch == batches[0] for batch in batches), attempts
            replayed += len(attempts) > 1
        return replayed


class RecordingCommitter(gc.UpdateGlobalCount):
    """The example's committer, recording each ``finish_batch`` in ``record``:
    ``("commit", txid, attempt, wrote)``, ``wrote`` telling whether it changed the row.

    It raises on the first ``finish_batch`` of the txids in ``fail_before`` (before
    writing) and ``fail_after`` (after writing: a commit whose acknowledgement is lost),
    and on every ``finish_batch`` of txids ``>= fail_from``.
    """

    def __init__(
        self,
        database: Any,
        record: SharedRecord,
        fail_before: frozenset[int] = frozenset(),
        fail_after: frozenset[int] = frozenset(),
        fail_from: int | None = None,
    ) -> None:
        super().__init__(database)
        self.record = record
        self.fail_before = fail_before
        self.fail_after = fail_after
        self.fail_from = fail_from
        self.finishes = FirstAttempts()

    def finish_batch(self) -> None:
        txid = self.attempt.transaction_id
        first = self.finishes.is_first(self.attempt)
        if (first and txid in self.fail_before) or (
            self.fail_from is not None and txid >= self.fail_from
        ):
            self.record.append("commit-failed", (txid, self.attempt))
            raise RuntimeError(f"commit of txid {txid} fails before writing")
        before = self.database.get(gc.GLOBAL_COUNT)
        super().finish_batch()
        wrote = self.database.get(gc.GLOBAL_COUNT) is not before
        self.record.append("events", ("commit", txid))
        self.record.append("commits", (txid, self.attempt, wrote))
        if first and txid in self.fail_after:
            self.record.append("commit-failed", (txid, self.attempt))
            raise RuntimeError(f"commit of txid {txid} fails after writing")


class RecordingCount(gc.BatchCount):
    """The example's partial count, recording every instance, batch and finish."""

    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def prepare(
        self,
        conf: dict[str, Any],
        context: TopologyContext,
        collector: BatchOutputCollector,
        id: TransactionAttempt,
    ) -> None:
        assert not hasattr(self, "task"), "a batch bolt instance was prepared twice"
        super().prepare(conf, context, collector, id)
        self.task = context.task_id
        self.finished = False
        # Keeping the instance alive keeps its id() unique among those recorded.
        self.record.append("instances", (self, id, context.task_id))

    def execute(self, tup: Tuple) -> None:
        assert not self.finished
        super().execute(tup)
        self.record.append("events", ("execute", tup.values[0].transaction_id))

    def finish_batch(self) -> None:
        assert not self.finished
        self.finished = True
        self.record.append("events", ("finish", self.attempt.transaction_id))
        self.record.append("finishes", (self.attempt, self.task, self.count))
        super().finish_batch()


class Flaky(BatchBolt):
    """A batch bolt failing the first attempt of the txids in ``txids``: ``how`` is
    ``"raise"`` (execute raises), ``"failed"`` (execute raises FailedException) or
    ``"finish"`` (finish_batch raises)."""

    def __init__(self, txids: frozenset[int], how: str, record: SharedRecord) -> None:
        self.txids = txids
        self.how = how
        self.record = record
        self.first = FirstAttempts()

    def prepare(
        self,
        conf: dict[str, Any],
        context: TopologyContext,
        collector: BatchOutputCollector,
        id: TransactionAttempt,
    ) -> None:
        self.attempt = id
        self.failing = self.first.is_first(id) and id.transaction_id in self.txids

    def execute(self, tup: Tuple) -> None:
        if self.failing and self.how == "raise":
            self.record.append("failed", self.attempt)
            raise RuntimeError(f"execute fails txid {self.attempt.transaction_id}")
        if self.failing and self.how == "failed":
            self.record.append("failed", self.attempt)
            raise FailedException(f"txid {self.attempt.transaction_id} failed")

    def finish_batch(self) -> None:
        if self.failing and self.how == "finish":
            self.record.append("failed", self.attempt)
            raise RuntimeError(f"finish_batch fails txid {self.attempt.transaction_id}")


def build(
    record: SharedRecord,
    database: Any,
    *,
    words: int = WORDS,
    batch_size: int = BATCH,
    partitions: int = PARTITIONS,
    emitters: int = 2,
    partial_tasks: int = 3,
    committer: Any = None,
    extra: dict[str, BatchBolt] | None = None,
    spout: Any = None,
) -> StormTopology:
    """The example's topology with recording components and ``extra`` batch bolts
    subscribed to the spout (a branch parallel to the counting path)."""
    if spout is None:
        spout = gc.MemoryPartitionedSpout(
            gc.split_partitions(gc.word_sequence(words), partitions), batch_size
        )
    builder = TransactionalTopologyBuilder("global-count", "spout", spout, emitters)
    builder.set_bolt("partial-count", RecordingCount(record), partial_tasks).none_grouping("spout")
    builder.set_committer_bolt(
        "sum", committer or RecordingCommitter(database, record)
    ).global_grouping("partial-count")
    for component_id, bolt in (extra or {}).items():
        builder.set_bolt(component_id, bolt, 2).none_grouping("spout")
    return builder.build_topology()


def commits(record: SharedRecord) -> list[int]:
    """Txids whose commit wrote the global count, in commit order."""
    return [txid for txid, _, wrote in record.get("commits") if wrote]


def run_to_total(
    cluster: LocalCluster,
    conf: dict[str, Any],
    topology: StormTopology,
    database: Any,
    total: int = WORDS,
    emits: Emits | None = None,
    timeout: float = 10.0,
) -> None:
    """Run until the committed count reaches ``total`` and the topology is idle."""
    cluster.submit_topology("tx", conf, topology, emit_listener=emits)
    wait_until(lambda: gc.global_count(database) >= total, timeout=timeout)
    assert cluster.wait_idle("tx", timeout_secs=timeout)


def assert_exactly_once(record: SharedRecord, database: Any, total: int = WORDS) -> None:
    """The final count is exact; each txid wrote once, in order 1, 2, 3, ..."""
    assert gc.global_count(database) == total
    written = commits(record)
    assert written == list(range(1, len(written) + 1))
    successful = [txid for txid, _, _ in record.get("commits")]
    assert successful == sorted(successful)  # committers finish in txid order


# --- the example ----------------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 2])
def test_global_count_is_exact_and_commits_in_order(cluster: LocalCluster, workers: int) -> None:
    record, database, emits = SharedRecord(), gc.Database(), Emits()
    conf = base_conf(pending=2, **{Config.TOPOLOGY_WORKERS: workers})

    run_to_total(cluster, conf, build(record, database), database, emits=emits)

    assert_exactly_once(record, database)
    # No failure: one attempt per transaction, each committed once.
    assert [txid for txid, _, _ in record.get("commits")] == commits(record)
    attempts = emits.attempts()
    assert all(len(a) == 1 for a in attempts.values())
    # Every word was emitted exactly once; each transaction took up to BATCH words
    # of every partition, in order.
    sequence = gc.word_sequence(WORDS)
    emitted = [values[0] for emits_ in emits.snapshot().values() for _, values, _ in emits_]
    assert Counter(emitted) == Counter(sequence)
    partitions = gc.split_partitions(sequence, PARTITIONS)
    per_txid = {txid: [v[0] for _, v in emits.batch(a[0])] for txid, a in attempts.items()}
    for txid in range(1, TXIDS + 1):
        expected = [w for p in partitions for w in p[(txid - 1) * BATCH : txid * BATCH]]
        assert sorted(per_txid[txid]) == sorted(expected)
    # The global count after txid t counts exactly the words of transactions 1..t.
    info = cluster.get_topology_info("tx")
    coordinator = info.components["spout/coordinator"]
    assert coordinator.custom["last_committed_txid"] == len(commits(record))
    assert coordinator.custom["active_transactions"] == 0
    assert coordinator.failed == 0
    assert info.components["sum"].errors_total == 0


def test_example_main_prints_the_total(capsys: pytest.CaptureFixture[str]) -> None:
    gc.main(words=900)
    assert capsys.readouterr().out.strip() == "global count: 900"


def test_example_build_topology_is_deep_copyable_and_documented() -> None:
    import copy

    topology = gc.build_topology(words=100, batch_size=5, partitions=2)
    assert isinstance(topology, StormTopology)
    for spec in topology:
        copy.deepcopy(spec.component)
    assert {"spout/coordinator", "spout", "partial-count", "sum"} <= set(topology.component_ids())
    assert gc.__doc__


# --- ordering -------------------------------------------------------------------------


def test_batches_overlap_but_committers_finish_in_strict_txid_order(
    cluster: LocalCluster,
) -> None:
    record, database = SharedRecord(), gc.Database()

    run_to_total(cluster, base_conf(pending=3), build(record, database), database)

    assert_exactly_once(record, database)
    events = record.get("events")
    committed: set[int] = set()
    finished: set[int] = set()
    overlaps = 0
    most_in_flight = 0
    for kind, txid in events:
        if kind == "commit":
            assert txid == len(committed) + 1  # strictly increasing, no gap, no repeat
            assert txid in finished  # only after its batch was processed
            committed.add(txid)
        else:
            assert txid <= len(committed) + 3  # at most 3 transactions in flight
            if kind == "finish":
                finished.add(txid)
            if txid > len(committed) + 1:
                overlaps += 1  # a later batch processed before an earlier one committed
        most_in_flight = max(most_in_flight, len(finished - committed))
    assert overlaps > 0
    assert most_in_flight == 3
    assert committed >= set(range(1, TXIDS + 1))


def test_one_transaction_at_a_time_without_max_spout_pending(cluster: LocalCluster) -> None:
    record, database = SharedRecord(), gc.Database()
    conf = {Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 0}

    run_to_total(cluster, conf, build(record, database), database)

    assert_exactly_once(record, database)
    committed = 0
    for kind, txid in record.get("events"):
        if kind == "commit":
            committed = txid
        else:
            assert txid == committed + 1  # the next transaction starts after the commit


# --- failures -------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["raise", "failed", "finish"])
def test_failing_batch_bolt_replays_with_new_attempts_exactly_once(
    cluster: LocalCluster, how: str
) -> None:
    record, database, emits = SharedRecord(), gc.Database(), Emits()
    failing = frozenset(range(3, TXIDS + 1, 3))
    flaky = Flaky(failing, how, record)

    run_to_total(
        cluster,
        base_conf(pending=3),
        build(record, database, extra={"flaky": flaky}),
        database,
        emits=emits,
    )

    assert_exactly_once(record, database)
    failed = record.get("failed")
    assert {attempt.transaction_id for attempt in failed} == failing
    attempts = emits.attempts()
    for txid in failing:
        assert len(attempts[txid]) >= 2  # replayed under the same txid...
        assert len(set(attempts[txid])) == len(attempts[txid])  # ...with new attempt ids
        assert {a.transaction_id for a in attempts[txid]} == {txid}
    for attempt in failed:  # no failed attempt was committed
        assert all(a != attempt for _, a, _ in record.get("commits"))
    assert emits.assert_replays_identical() >= len(failing)
    # The committed attempt of each txid is its last one.
    committed_attempts = {txid: a for txid, a, _ in record.get("commits")}
    assert set(committed_attempts) == set(range(1, len(committed_attempts) + 1))
    info = cluster.get_topology_info("tx")
    assert info.components["spout/coordinator"].failed >= len(failing)
    errors = info.components["flaky"].errors_total
    assert errors == 0 if how == "failed" else errors > 0


@pytest.mark.parametrize("where", ["before", "after"])
def test_failing_commit_is_retried_and_counted_once(cluster: LocalCluster, where: str) -> None:
    record, database, emits = SharedRecord(), gc.Database(), Emits()
    failing = frozenset({2, 5, 9})
    committer = RecordingCommitter(
        database,
        record,
        fail_before=failing if where == "before" else frozenset(),
        fail_after=failing if where == "after" else frozenset(),
    )

    run_to_total(
        cluster,
        base_conf(pending=3),
        build(record, database, committer=committer),
        database,
        emits=emits,
    )

    assert_exactly_once(record, database)
    failed = record.get("commit-failed")
    assert sorted(txid for txid, _ in failed) == sorted(failing)
    finishes = [(txid, attempt) for txid, attempt, _ in record.get("commits")]
    for txid, attempt in failed:
        retries = [a for t, a in finishes if t == txid and a != attempt]
        assert len(retries) == 1  # retried once, with a new attempt id
    if where == "after":
        # The write of the failed attempt stands; the retry finds its txid and skips.
        for txid, attempt in failed:
            assert (txid, attempt, True) in record.get("commits")
            assert [w for t, _, w in record.get("commits") if t == txid] == [True, False]
    assert emits.assert_replays_identical() >= len(failing)
    assert cluster.get_topology_info("tx").components["sum"].errors_total == len(failing)


class Gate:
    """A batch bolt's way to stop in ``execute`` until the test lets it go on."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __deepcopy__(self, memo: dict[int, Any]) -> Gate:
        return self


class HoldOnce(BatchBolt):
    """Holds the worker in ``execute`` on the first attempt of ``txid``, past the
    message timeout (the test advances the manual clock meanwhile)."""

    def __init__(self, txid: int, gate: Gate) -> None:
        self.txid = txid
        self.gate = gate
        self.first = FirstAttempts()

    def prepare(
        self,
        conf: dict[str, Any],
        context: TopologyContext,
        collector: BatchOutputCollector,
        id: TransactionAttempt,
    ) -> None:
        self.hold = id.transaction_id == self.txid and self.first.is_first(id)

    def execute(self, tup: Tuple) -> None:
        if self.hold:
            self.hold = False
            self.gate.entered.set()
            assert self.gate.release.wait(10.0)


def test_timed_out_batch_is_replayed_exactly_once(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    record, database, emits, gate = SharedRecord(), gc.Database(), Emits(), Gate()
    conf = base_conf(pending=1, **{Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 3})
    topology = build(record, database, extra={"slow": HoldOnce(4, gate)})

    manual_cluster.submit_topology("tx", conf, topology, emit_listener=emits)
    try:
        assert gate.entered.wait(5.0)
        assert gc.global_count(database) < WORDS
        clock.advance_secs(4)  # past the 3 s message timeout
    finally:
        gate.release.set()
    wait_until(lambda: gc.global_count(database) >= WORDS)
    assert manual_cluster.wait_idle("tx")

    assert_exactly_once(record, database)
    coordinator = manual_cluster.get_topology_info("tx").components["spout/coordinator"]
    assert coordinator.timed_out == 1
    attempts = emits.attempts()
    assert len(attempts[4]) == 2
    assert all(len(attempts[txid]) == 1 for txid in attempts if txid != 4)
    assert emits.assert_replays_identical() == 1
    committed = {txid: attempt for txid, attempt, _ in record.get("commits")}
    first_attempt = next(a for a in emits.snapshot() if a.transaction_id == 4)  # emit order
    assert committed[4] in attempts[4] and committed[4] != first_attempt


class HoldingCommitter(RecordingCommitter):
    """Writes the commit of ``txid``'s first attempt, then holds the worker past the
    message timeout: the write is done, but the commit tree times out."""

    def __init__(self, database: Any, record: SharedRecord, txid: int, gate: Gate) -> None:
        super().__init__(database, record)
        self.txid = txid
        self.gate = gate
        self.holds = FirstAttempts()

    def finish_batch(self) -> None:
        super().finish_batch()
        if self.attempt.transaction_id == self.txid and self.holds.is_first(self.attempt):
            self.gate.entered.set()
            assert self.gate.release.wait(10.0)


def test_timed_out_commit_is_retried_and_skipped_by_the_stored_txid(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    record, database, emits, gate = SharedRecord(), gc.Database(), Emits(), Gate()
    conf = base_conf(pending=2, **{Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 3})
    committer = HoldingCommitter(database, record, 4, gate)

    manual_cluster.submit_topology(
        "tx", conf, build(record, database, committer=committer), emit_listener=emits
    )
    try:
        assert gate.entered.wait(5.0)
        clock.advance_secs(4)  # past the 3 s message timeout
    finally:
        gate.release.set()
    wait_until(lambda: gc.global_count(database) >= WORDS)
    assert manual_cluster.wait_idle("tx")

    assert_exactly_once(record, database)
    assert manual_cluster.get_topology_info("tx").components["spout/coordinator"].timed_out >= 1
    fours = [(attempt, wrote) for txid, attempt, wrote in record.get("commits") if txid == 4]
    assert [wrote for _, wrote in fours] == [True, False]  # written once, then skipped
    assert fours[0][0] != fours[1][0]
    assert len(emits.attempts()[4]) == 2
    emits.assert_replays_identical()


def test_every_failure_kind_together_still_counts_exactly_once(cluster: LocalCluster) -> None:
    record, database, emits = SharedRecord(), gc.Database(), Emits()
    committer = RecordingCommitter(
        database, record, fail_before=frozenset({4}), fail_after=frozenset({7})
    )
    extra: dict[str, BatchBolt] = {
        "raising": Flaky(frozenset({2, 11}), "raise", record),
        "failing": Flaky(frozenset({5, 13}), "failed", record),
        "finishing": Flaky(frozenset({8, 17}), "finish", record),
    }

    run_to_total(
        cluster,
        base_conf(pending=3),
        build(record, database, committer=committer, extra=extra),
        database,
        emits=emits,
    )

    assert_exactly_once(record, database)
    assert emits.assert_replays_identical() >= 8


# --- batch bolts ----------------------------------------------------------------------


def test_batch_bolt_instance_per_attempt_finishes_after_every_upstream_task(
    cluster: LocalCluster,
) -> None:
    record, database, emits = SharedRecord(), gc.Database(), Emits()
    topology = build(
        record,
        database,
        partitions=5,
        batch_size=7,
        words=700,
        emitters=3,
        partial_tasks=2,
        extra={"flaky": Flaky(frozenset({3, 6}), "raise", record)},
    )

    run_to_total(cluster, base_conf(pending=2), topology, database, total=700, emits=emits)

    instances = record.get("instances")
    partial_tasks = cluster.get_topology_info("tx").components["partial-count"].tasks
    emitter_tasks = cluster.get_topology_info("tx").components["spout"].tasks
    assert len(partial_tasks) == 2 and len(emitter_tasks) == 3
    # prepare got the batch's TransactionAttempt, on a new instance for each attempt
    # of each task.
    assert all(isinstance(attempt, TransactionAttempt) for _, attempt, _ in instances)
    assert len({id(instance) for instance, _, _ in instances}) == len(instances)
    keys = [(attempt, task) for _, attempt, task in instances]
    assert len(set(keys)) == len(keys)
    # Tuples sent by the emitters to each partial task, per attempt.
    sent: Counter[tuple[TransactionAttempt, int]] = Counter()
    senders: dict[TransactionAttempt, set[int]] = defaultdict(set)
    for attempt, batch in emits.snapshot().items():
        for task, _, targets in batch:
            senders[attempt].add(task)
            for target in targets:
                sent[(attempt, target)] += 1
    # Every task of the partial count finished every attempt that got through, once,
    # with exactly what the emitters sent it.
    finishes = record.get("finishes")
    finished_keys = [(attempt, task) for attempt, task, _ in finishes]
    assert len(set(finished_keys)) == len(finished_keys)
    for attempt, task, received in finishes:
        assert received == sent[(attempt, task)]
    committed = {attempt for _, attempt, _ in record.get("commits")}
    for attempt in committed:
        assert {task for a, task in finished_keys if a == attempt} == set(partial_tasks)
    # The batches were spread: some attempt reached both partial tasks from several
    # emitter tasks.
    assert any(len(senders[a]) == 3 for a in committed)
    assert any(sent[(a, partial_tasks[0])] and sent[(a, partial_tasks[1])] for a in committed)
    assert_exactly_once(record, database, total=700)


# --- restart --------------------------------------------------------------------------


class LimitedSpout(gc.MemoryPartitionedSpout):
    """The example's spout, ready for only ``limit`` new transactions."""

    def __init__(self, partitions: list[list[str]], batch_size: int, limit: int) -> None:
        super().__init__(partitions, batch_size)
        self.limit = limit

    def get_coordinator(self, conf: dict[str, Any], context: TopologyContext) -> Any:
        coordinator = super().get_coordinator(conf, context)
        remaining = [self.limit]

        def is_ready() -> bool:
            if remaining[0] <= 0:
                return False
            remaining[0] -= 1
            return True

        coordinator.is_ready = is_ready
        return coordinator


def test_restart_on_the_same_state_dir_continues_txids(tmp_path: Path) -> None:
    database, emits1, emits2 = gc.Database(), Emits(), Emits()
    record1, record2 = SharedRecord(), SharedRecord()
    conf = base_conf(pending=2, **{Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR: str(tmp_path)})
    partitions = gc.split_partitions(gc.word_sequence(WORDS), PARTITIONS)

    # First run: 7 transactions start; 1..5 commit, 6 and 7 fail to commit until killed.
    first_committer = RecordingCommitter(database, record1, fail_from=6)
    first = build(
        record1, database, committer=first_committer, spout=LimitedSpout(partitions, BATCH, 7)
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("tx", conf, first, emit_listener=emits1)
        wait_until(lambda: len(record1.get("commit-failed")) >= 3)
        cluster.kill_topology("tx")
    assert commits(record1) == [1, 2, 3, 4, 5]
    assert set(emits1.attempts()) == set(range(1, 8))
    counted = gc.global_count(database)
    assert counted == 5 * BATCH * PARTITIONS
    store = SqliteCoordinationStore(str(tmp_path))
    try:
        assert store.get("global-count/coordinator", "last_committed") == 5
    finally:
        store.close()

    # Second run, on a new cluster and the same directory.
    second = build(record2, database)
    with LocalCluster() as cluster:
        run_to_total(cluster, conf, second, database, emits=emits2)
        cluster.kill_topology("tx")

    assert gc.global_count(database) == WORDS  # continued, nothing counted twice
    assert min(attempt.transaction_id for attempt in emits2.snapshot()) == 6
    assert min(attempt.transaction_id for _, attempt, _ in record2.get("instances")) == 6
    assert commits(record2) == list(range(6, len(commits(record2)) + 6))
    assert commits(record2)[-1] >= TXIDS
    # Transactions 6 and 7 were planned by the first run: replayed identically.
    for txid in (6, 7):
        before = {tuple(emits1.batch(a)) for a in emits1.attempts()[txid]}
        after = {tuple(emits2.batch(a)) for a in emits2.attempts()[txid]}
        assert len(before) == 1 and before == after
    emits2.assert_replays_identical()


def test_a_new_cluster_without_state_dir_starts_from_txid_one(cluster: LocalCluster) -> None:
    record, database, emits = SharedRecord(), gc.Database(), Emits()
    run_to_total(cluster, base_conf(), build(record, database, words=120), database, 120, emits)
    cluster.kill_topology("tx")
    assert min(a.transaction_id for a in emits.snapshot()) == 1
    # The same cluster remembers the transactional id's progress (in memory).
    record2, database2, emits2 = SharedRecord(), gc.Database(), Emits()
    spout = gc.MemoryPartitionedSpout(gc.split_partitions(gc.word_sequence(240), 3), BATCH)
    run_to_total(
        cluster, base_conf(), build(record2, database2, spout=spout), database2, 120, emits2
    )
    assert min(a.transaction_id for a in emits2.snapshot()) == len(commits(record)) + 1
    last = cluster.coordination_store.get("global-count/coordinator", "last_committed")
    assert last == max(commits(record2))


# --- validation -----------------------------------------------------------------------


def test_transactional_topology_without_ackers_is_rejected(cluster: LocalCluster) -> None:
    record, database = SharedRecord(), gc.Database()
    with pytest.raises(InvalidTopologyError, match="acker"):
        cluster.submit_topology("tx", {Config.TOPOLOGY_ACKER_EXECUTORS: 0}, build(record, database))
    assert cluster.topology_names() == []


class NotABatchBolt(Bolt):
    outputs = ["attempt"]

    def execute(self, tup: Tuple) -> None:
        pass


class NotATransactionalSpout(Spout):
    outputs = ["attempt"]


def test_builder_rejects_a_bolt_that_is_not_a_batch_bolt() -> None:
    builder = TransactionalTopologyBuilder("t", "spout", gc.MemoryPartitionedSpout([["a"]], 1))
    with pytest.raises(InvalidTopologyError, match=r"'plain'.*not a BatchBolt"):
        builder.set_bolt("plain", NotABatchBolt())  # type: ignore[arg-type]
    with pytest.raises(InvalidTopologyError, match="not a BatchBolt"):
        builder.set_committer_bolt("plain", NotABatchBolt())  # type: ignore[arg-type]


def test_builder_rejects_a_spout_that_is_not_transactional() -> None:
    with pytest.raises(InvalidTopologyError, match="TransactionalSpout"):
        TransactionalTopologyBuilder("t", "spout", NotATransactionalSpout())  # type: ignore[arg-type]


def test_compiled_topology_wires_coordinator_emitters_and_committers() -> None:
    builder = TransactionalTopologyBuilder("t", "spout", gc.MemoryPartitionedSpout([["a"]], 1), 3)
    builder.set_bolt("count", gc.BatchCount(), 2).none_grouping("spout")
    builder.set_bolt("sum", gc.UpdateGlobalCount(gc.Database())).global_grouping("count")
    topology = builder.build_topology()

    def inputs(component: str) -> set[tuple[str, str]]:
        return {(s.source, s.stream_id) for s in topology.get_component(component).inputs}

    assert builder.coordinator_id == "spout/coordinator"
    coordinator = topology.get_component("spout/coordinator")
    assert coordinator.is_spout and coordinator.parallelism == 1
    assert topology.get_component("spout").parallelism == 3
    assert inputs("spout") == {("spout/coordinator", "$batch")}
    assert inputs("count") == {("spout", "default"), ("spout", "$coord")}
    # A Committer subclass added with set_bolt is a committer: it gets the $commit stream.
    assert inputs("sum") == {
        ("count", "default"),
        ("count", "$coord"),
        ("spout/coordinator", "$commit"),
    }


def test_build_topology_names_an_unknown_source_component() -> None:
    builder = TransactionalTopologyBuilder("t", "spout", gc.MemoryPartitionedSpout([["a"]], 1))
    builder.set_bolt("count", gc.BatchCount()).none_grouping("spout")
    builder.set_committer_bolt("sum", gc.UpdateGlobalCount(gc.Database())).global_grouping(
        "no-such-bolt"
    )
    with pytest.raises(InvalidTopologyError, match="no-such-bolt"):
        builder.build_topology()


# --- a non-partitioned spout with its own coordinator ---------------------------------


@dataclass(frozen=True)
class Range:
    """A transaction's metadata: items ``start`` to ``end`` (excluded)."""

    start: int
    end: int


class Control:
    """Shared by the test and the spout: how many new transactions may start."""

    def __init__(self, record: SharedRecord) -> None:
        self.record = record
        self._lock = threading.Lock()
        self.budget = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> Control:
        return self

    def allow(self, transactions: int) -> None:
        with self._lock:
            self.budget += transactions

    def take(self) -> bool:
        with self._lock:
            return self.budget > 0


class RangeCoordinator:
    def __init__(self, items: int, batch_size: int, control: Control) -> None:
        self.items = items
        self.batch_size = batch_size
        self.control = control
        self.end = 0

    def initialize_transaction(self, txid: int, prev_metadata: Range | None) -> Range:
        start = prev_metadata.end if prev_metadata is not None else 0
        metadata = Range(start, min(start + self.batch_size, self.items))
        self.end = metadata.end
        with self.control._lock:
            self.control.budget -= 1
        self.control.record.append("init", (txid, prev_metadata, metadata))
        return metadata

    def is_ready(self) -> bool:
        return self.end < self.items and self.control.take()

    def close(self) -> None:
        self.control.record.append("closed", "coordinator")


class RangeEmitter:
    def __init__(
        self, items: list[str], task: int, index: int, tasks: int, record: SharedRecord
    ) -> None:
        self.items = items
        self.task = task
        self.index = index
        self.tasks = tasks
        self.record = record

    def emit_batch(
        self, attempt: TransactionAttempt, metadata: Range, collector: BatchOutputCollector
    ) -> None:
        self.record.append("events", ("emit", self.task, attempt.transaction_id))
        for position in range(metadata.start, metadata.end):
            if position % self.tasks == self.index:
                collector.emit([attempt, self.items[position]])

    def cleanup_before(self, txid: int) -> None:
        self.record.append("events", ("cleanup", self.task, txid))

    def close(self) -> None:
        self.record.append("closed", "emitter")


class RangeSpout(TransactionalSpout):
    outputs = ["attempt", "item"]

    def __init__(self, items: list[str], batch_size: int, control: Control) -> None:
        self.items = items
        self.batch_size = batch_size
        self.control = control

    def get_coordinator(self, conf: dict[str, Any], context: TopologyContext) -> RangeCoordinator:
        return RangeCoordinator(len(self.items), self.batch_size, self.control)

    def get_emitter(self, conf: dict[str, Any], context: TopologyContext) -> RangeEmitter:
        tasks = context.get_component_tasks(context.component_id)
        return RangeEmitter(
            self.items, context.task_id, context.task_index, len(tasks), self.control.record
        )


def test_transactional_spout_with_its_own_coordinator(cluster: LocalCluster) -> None:
    record, database, emits = SharedRecord(), gc.Database(), Emits()
    control = Control(record)
    items = [f"item-{i}" for i in range(100)]
    spout = RangeSpout(items, 10, control)
    extra: dict[str, BatchBolt] = {"flaky": Flaky(frozenset({2, 5}), "raise", record)}
    topology = build(record, database, spout=spout, extra=extra)

    # Not ready: no transaction starts.
    cluster.submit_topology("tx", base_conf(pending=2), topology, emit_listener=emits)
    settle(cluster, "tx", rounds=20)
    assert record.get("init") == [] and emits.snapshot() == {}

    # Ready for three transactions: they run and commit, then the topology pauses.
    control.allow(3)
    wait_until(lambda: gc.global_count(database) == 30)
    assert cluster.wait_idle("tx")
    settle(cluster, "tx", rounds=20)
    assert [txid for txid, _, _ in record.get("init")] == [1, 2, 3]
    assert max(a.transaction_id for a in emits.snapshot()) == 3

    # Ready again: the rest.
    control.allow(100)
    wait_until(lambda: gc.global_count(database) == 100)
    assert cluster.wait_idle("tx")
    cluster.kill_topology("tx")

    assert_exactly_once(record, database, total=100)
    inits = record.get("init")
    # Once per txid (replays reuse the stored metadata), given the previous metadata.
    assert [txid for txid, _, _ in inits] == list(range(1, 11))
    previous = None
    for _, prev_metadata, metadata in inits:
        assert prev_metadata == previous
        previous = metadata
    assert previous == Range(90, 100)
    assert len(emits.attempts()[2]) >= 2 and len(emits.attempts()[5]) >= 2
    emits.assert_replays_identical()
    # cleanup_before(txid) comes with a later batch, once txid has committed.
    committed: set[int] = set()
    cleanups = []
    for event in record.get("events"):
        if event[0] == "commit":
            committed.add(event[1])
        elif event[0] == "cleanup":
            _, task, txid = event
            assert txid in committed
            cleanups.append((task, txid))
    assert cleanups
    for task in {task for task, _ in cleanups}:
        values = [txid for t, txid in cleanups if t == task]
        assert values == sorted(values)
    assert max(txid for _, txid in cleanups) >= 8
    assert sorted(record.get("closed")) == ["coordinator", "emitter", "emitter"]


class BatchCountFromPartial(RecordingCommitter):
    """The recording committer, counting only the tuples of ``a-count``."""

    def execute(self, tup: Tuple) -> None:
        if tup.source_component == "a-count":
            super().execute(tup)


class HoldOnceCount(HoldOnce):
    """:class:`HoldOnce` that also emits ``[attempt, count]`` when its batch finishes."""

    outputs = ["attempt", "count"]

    def prepare(
        self,
        conf: dict[str, Any],
        context: TopologyContext,
        collector: BatchOutputCollector,
        id: TransactionAttempt,
    ) -> None:
        super().prepare(conf, context, collector, id)
        self.collector = collector
        self.attempt = id
        self.count = 0

    def execute(self, tup: Tuple) -> None:
        super().execute(tup)
        self.count += 1

    def finish_batch(self) -> None:
        self.collector.emit([self.attempt, self.count])


def test_late_tuples_of_a_superseded_attempt_do_not_disturb_its_replay(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    """Attempt A of txid 4 times out while ``b-delay`` holds it; the replay B reaches the
    committer through ``a-count`` before A's late output through ``b-delay`` does. The
    committer must keep B's batch (Storm tracks each attempt separately): B commits
    without waiting for another timeout."""
    record, database, emits, gate = SharedRecord(), gc.Database(), Emits("c-spout"), Gate()
    spout = gc.MemoryPartitionedSpout(
        gc.split_partitions(gc.word_sequence(WORDS), PARTITIONS), BATCH
    )
    builder = TransactionalTopologyBuilder("late", "c-spout", spout, 1)
    builder.set_bolt("a-count", RecordingCount(record)).none_grouping("c-spout")
    builder.set_bolt("b-delay", HoldOnceCount(4, gate)).none_grouping("c-spout")
    builder.set_committer_bolt(
        "c-spout-sum", BatchCountFromPartial(database, record)
    ).global_grouping("a-count").global_grouping("b-delay")
    conf = base_conf(
        pending=1,
        **{
            Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 3,
            Config.TOPOLOGY_WORKERS: 2,
            Config.TOPOLOGY_ACKER_EXECUTORS: 1,
        },
    )

    manual_cluster.submit_topology("tx", conf, builder.build_topology(), emit_listener=emits)
    worker = manual_cluster.get_running("tx").plan.task_worker
    tasks = manual_cluster.get_topology_info("tx").components
    held = {worker[tasks[c].tasks[0]] for c in ("b-delay", "c-spout-sum")}
    free = {worker[tasks[c].tasks[0]] for c in ("a-count", "c-spout", "c-spout/coordinator")}
    assert len(held) == len(free) == 1 and held != free  # the delay blocks the sum only
    try:
        assert gate.entered.wait(5.0)
        clock.advance_secs(4)  # attempt A times out; B is emitted and counted by a-count
        wait_until(
            lambda: len({a for a, _, _ in record.get("finishes") if a.transaction_id == 4}) == 2
        )
    finally:
        gate.release.set()
    wait_until(lambda: gc.global_count(database) >= WORDS)
    assert manual_cluster.wait_idle("tx")

    assert_exactly_once(record, database)
    coordinator = manual_cluster.get_topology_info("tx").components["c-spout/coordinator"]
    assert coordinator.timed_out == 1
    assert len(emits.attempts()[4]) == 2


class HoldingEmitterSpout(gc.MemoryPartitionedSpout):
    """The example's spout whose second emitter task holds its worker while emitting the
    first attempt of ``txid``, until the test releases it."""

    def __init__(self, partitions: list[list[str]], batch_size: int, txid: int, gate: Gate):
        super().__init__(partitions, batch_size)
        self.txid = txid
        self.gate = gate
        self.first = FirstAttempts()

    def get_emitter(self, conf: dict[str, Any], context: TopologyContext) -> Any:
        emitter = super().get_emitter(conf, context)
        if context.task_index != 1:
            return emitter
        emit_new = emitter.emit_partition_batch_new

        def emit_partition_batch_new(
            attempt: TransactionAttempt, collector: Any, partition: int, last: Any
        ) -> Any:
            if attempt.transaction_id == self.txid and self.first.is_first(attempt):
                self.gate.entered.set()
                assert self.gate.release.wait(10.0)
            return emit_new(attempt, collector, partition, last)

        emitter.emit_partition_batch_new = emit_partition_batch_new
        return emitter


class Idle(BatchBolt):
    """A batch bolt that does nothing (fills worker slots in the layout below)."""


def test_replay_completes_when_an_emitter_task_lags_behind_a_failure(
    cluster: LocalCluster,
) -> None:
    """Txid 4's first attempt A fails at ``b-flaky`` while emitter task 2 (on the other
    worker) is still emitting A. The replay B reaches ``d-partial`` from emitter task 1
    first; emitter task 2 then sends A's tuples and count, and B's. B must still complete
    and commit at once, not after a message timeout (20 s here)."""
    record, database, gate = SharedRecord(), gc.Database(), Gate()
    partitions = gc.split_partitions(gc.word_sequence(WORDS), PARTITIONS + 1)
    spout = HoldingEmitterSpout(partitions, BATCH, 4, gate)
    builder = TransactionalTopologyBuilder("lag", "spout", spout, 2)
    for filler in ("a-filler", "c-filler", "e-filler"):
        builder.set_bolt(filler, Idle()).none_grouping("spout")
    builder.set_bolt("b-flaky", Flaky(frozenset({4}), "raise", record)).none_grouping("spout")
    builder.set_bolt("d-partial", RecordingCount(record)).none_grouping("spout")
    builder.set_committer_bolt("sum", RecordingCommitter(database, record)).global_grouping(
        "d-partial"
    )
    conf = base_conf(
        pending=1,
        **{
            Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 20,
            Config.TOPOLOGY_WORKERS: 2,
            Config.TOPOLOGY_ACKER_EXECUTORS: 1,
        },
    )

    cluster.submit_topology("tx", conf, builder.build_topology())
    running = cluster.get_running("tx")
    worker = running.plan.task_worker
    tasks = running.plan.component_tasks
    lagging = worker[tasks["spout"][1]]
    assert all(
        worker[task] != lagging
        for component in ("__acker", "spout/coordinator", "b-flaky", "d-partial")
        for task in tasks[component]
    )
    assert worker[tasks["spout"][0]] != lagging
    try:
        assert gate.entered.wait(5.0)
        # A failed at b-flaky and B reached d-partial while emitter task 2 held A.
        wait_until(
            lambda: len({a for _, a, _ in record.get("instances") if a.transaction_id == 4}) == 2
        )
    finally:
        gate.release.set()
    wait_until(lambda: gc.global_count(database) >= WORDS)
    assert cluster.wait_idle("tx")

    assert_exactly_once(record, database)
    coordinator = cluster.get_topology_info("tx").components["spout/coordinator"]
    assert (coordinator.failed, coordinator.timed_out) == (1, 0)
