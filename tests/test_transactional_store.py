"""The coordination store (memory and SQLite), txid keys, attempts and their statuses."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall import Config, LocalCluster
from squall.runtime.coordination import STORE_FILE, open_store, txid_key
from squall.transactional import (
    AttemptStatus,
    CoordinationStore,
    MemoryCoordinationStore,
    SqliteCoordinationStore,
    TransactionAttempt,
)
from squall.transactional.coordinator import TransactionStatus


@dataclasses.dataclass(frozen=True)
class Meta:
    offset: int
    count: int


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CoordinationStore]:
    made: CoordinationStore = (
        MemoryCoordinationStore()
        if request.param == "memory"
        else SqliteCoordinationStore(str(tmp_path / "state"))
    )
    yield made
    made.close()


# --- get / put / delete / keys --------------------------------------------------------


def test_get_of_a_missing_key_is_the_default(store: CoordinationStore) -> None:
    assert store.get("ns", "missing") is None
    assert store.get("ns", "missing", 7) == 7
    assert store.keys("ns") == []


def test_put_then_get_round_trips_values(store: CoordinationStore) -> None:
    values: dict[str, Any] = {
        "int": 5,
        "tuple": (Meta(0, 10),),
        "dict": {"a": [1, 2, 3], "b": None},
        "attempt": TransactionAttempt(3, 2**62),
        "zero": 0,
        "empty": (),
    }
    for key, value in values.items():
        store.put("ns", key, value)
    for key, value in values.items():
        assert store.get("ns", key) == value
    assert store.get("ns", "zero", 9) == 0  # a stored falsy value is not the default


def test_values_are_copies(store: CoordinationStore) -> None:
    value = {"offsets": [1, 2]}
    store.put("ns", "k", value)
    value["offsets"].append(3)  # a later change to the value does not leak in
    got = store.get("ns", "k")
    assert got == {"offsets": [1, 2]}
    got["offsets"].append(4)  # nor a change to what get returned
    assert store.get("ns", "k") == {"offsets": [1, 2]}


def test_put_overwrites(store: CoordinationStore) -> None:
    store.put("ns", "k", 1)
    store.put("ns", "k", 2)
    assert store.get("ns", "k") == 2
    assert store.keys("ns") == ["k"]


def test_delete_removes_a_key_and_ignores_a_missing_one(store: CoordinationStore) -> None:
    store.put("ns", "a", 1)
    store.put("ns", "b", 2)
    store.delete("ns", "a")
    store.delete("ns", "a")
    store.delete("ns", "never")
    store.delete("other", "b")
    assert store.get("ns", "a") is None
    assert store.keys("ns") == ["b"]


def test_keys_are_sorted_and_per_namespace(store: CoordinationStore) -> None:
    for key in ["c", "a", "b"]:
        store.put("one", key, key)
    store.put("two", "z", 0)
    store.put("one/partition/0", "x", 0)
    assert store.keys("one") == ["a", "b", "c"]
    assert store.keys("two") == ["z"]
    assert store.keys("one/partition/0") == ["x"]
    assert store.get("two", "a") is None
    assert store.keys("three") == []


def test_txid_keys_sort_like_the_txids(store: CoordinationStore) -> None:
    txids = [1, 2, 9, 10, 11, 99, 100, 101, 1000, 123_456_789, 2**40, 10**19]
    shuffled = txids[:]
    random.Random(3).shuffle(shuffled)
    for txid in shuffled:
        store.put("ns", txid_key(txid), txid)
    assert [store.get("ns", key) for key in store.keys("ns")] == txids
    assert sorted(txid_key(t) for t in shuffled) == [txid_key(t) for t in txids]
    assert txid_key(7) == "00000000000000000007"
    assert all(len(txid_key(t)) == 20 for t in txids)
    assert all(txid_key(a) < txid_key(b) for a, b in itertools.pairwise(txids))


def test_concurrent_threads_each_see_every_write(store: CoordinationStore) -> None:
    threads, per_thread = 8, 150
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def work(index: int) -> None:
        try:
            start.wait()
            for n in range(per_thread):
                store.put("shared", f"{index:02d}-{n:04d}", (index, n))
                assert store.get("shared", f"{index:02d}-{n:04d}") == (index, n)
                if n % 3 == 0:
                    store.delete("shared", f"{index:02d}-{n:04d}")
                store.put(f"own-{index}", txid_key(n), n)
            assert len(store.keys(f"own-{index}")) == per_thread
        except BaseException as exc:  # reported to the test thread
            errors.append(exc)
        finally:
            store.close()  # closes this thread's connection (SQLite); a no-op in memory

    workers = [threading.Thread(target=work, args=(i,), name=f"store-{i}") for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert errors == []
    expected = sorted(
        f"{i:02d}-{n:04d}" for i in range(threads) for n in range(per_thread) if n % 3
    )
    assert store.keys("shared") == expected
    for index in range(threads):
        assert [store.get(f"own-{index}", k) for k in store.keys(f"own-{index}")] == list(
            range(per_thread)
        )


# --- SQLite durability ----------------------------------------------------------------


def test_sqlite_store_survives_reopening(tmp_path: Path) -> None:
    directory = tmp_path / "nested" / "state"
    first = SqliteCoordinationStore(str(directory))
    first.put("global-count/coordinator", "last_committed", 41)
    first.put("global-count/coordinator", txid_key(42), (Meta(5, 10),))
    first.put("global-count/coordinator", "gone", 1)
    first.delete("global-count/coordinator", "gone")
    first.close()
    assert (directory / STORE_FILE).is_file()

    second = SqliteCoordinationStore(str(directory))
    try:
        assert second.get("global-count/coordinator", "last_committed") == 41
        assert second.get("global-count/coordinator", txid_key(42)) == (Meta(5, 10),)
        assert second.keys("global-count/coordinator") == [txid_key(42), "last_committed"]
    finally:
        second.close()


def test_two_sqlite_stores_on_one_directory_share_their_data(tmp_path: Path) -> None:
    one, two = SqliteCoordinationStore(str(tmp_path)), SqliteCoordinationStore(str(tmp_path))
    try:
        one.put("ns", "k", "from one")
        assert two.get("ns", "k") == "from one"
        two.put("ns", "k", "from two")
        assert one.get("ns", "k") == "from two"
    finally:
        one.close()
        two.close()


def test_sqlite_store_can_be_used_again_after_close(tmp_path: Path) -> None:
    store = SqliteCoordinationStore(str(tmp_path))
    store.put("ns", "k", 1)
    store.close()
    store.close()  # twice is harmless
    assert store.get("ns", "k") == 1  # a new connection is opened on demand
    store.close()


def test_memory_stores_are_independent() -> None:
    one, two = MemoryCoordinationStore(), MemoryCoordinationStore()
    one.put("ns", "k", 1)
    assert two.get("ns", "k") is None


# --- open_store -----------------------------------------------------------------------


class _Context:
    def __init__(self, store: CoordinationStore | None) -> None:
        self.coordination_store = store


def test_open_store_prefers_the_state_dir(tmp_path: Path) -> None:
    memory = MemoryCoordinationStore()
    opened = open_store({Config.TOPOLOGY_TRANSACTIONAL_STATE_DIR: str(tmp_path)}, _Context(memory))
    try:
        assert isinstance(opened, SqliteCoordinationStore)
        assert Path(opened.path) == tmp_path / STORE_FILE
    finally:
        opened.close()
    assert open_store({}, _Context(memory)) is memory
    with pytest.raises(RuntimeError, match=r"topology\.transactional\.state\.dir"):
        open_store({}, _Context(None))


def test_each_local_cluster_has_its_own_memory_store() -> None:
    with LocalCluster() as one, LocalCluster() as two:
        assert isinstance(one.coordination_store, MemoryCoordinationStore)
        assert one.coordination_store is not two.coordination_store


# --- attempts and statuses ------------------------------------------------------------


def test_transaction_attempt_is_a_value() -> None:
    attempt = TransactionAttempt(3, 12345)
    assert attempt.txid == attempt.transaction_id == 3
    assert attempt.attempt_id == 12345
    assert attempt == TransactionAttempt(3, 12345)
    assert attempt != TransactionAttempt(3, 54321)
    assert len({attempt, TransactionAttempt(3, 12345), TransactionAttempt(4, 12345)}) == 2
    assert TransactionAttempt(2, 99) < TransactionAttempt(3, 1)
    assert copy.deepcopy(attempt) == attempt
    with pytest.raises(dataclasses.FrozenInstanceError):
        attempt.transaction_id = 4  # type: ignore[misc]
    assert repr(attempt) == "TransactionAttempt(txid=3, attempt=0x3039)"


ALLOWED = {
    (AttemptStatus.PROCESSING, AttemptStatus.PROCESSED),
    (AttemptStatus.PROCESSED, AttemptStatus.COMMITTING),
}


@pytest.mark.parametrize("source", list(AttemptStatus), ids=lambda s: s.name)
@pytest.mark.parametrize("target", list(AttemptStatus), ids=lambda s: s.name)
def test_attempt_status_transitions(source: AttemptStatus, target: AttemptStatus) -> None:
    allowed = (source, target) in ALLOWED
    assert source.can_become(target) is allowed
    status = TransactionStatus(TransactionAttempt(1, 1), source)
    if allowed:
        status.become(target)
        assert status.status is target
    else:
        with pytest.raises(RuntimeError, match="transaction"):
            status.become(target)
        assert status.status is source


def test_a_transaction_goes_through_its_phases_in_order() -> None:
    status = TransactionStatus(TransactionAttempt(7, 1), AttemptStatus.PROCESSING)
    status.become(AttemptStatus.PROCESSED)
    status.become(AttemptStatus.COMMITTING)
    assert status.status is AttemptStatus.COMMITTING
    with pytest.raises(RuntimeError):
        status.become(AttemptStatus.PROCESSING)  # a failed transaction gets a new attempt
