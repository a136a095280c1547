"""Trident state: the three map states' replay semantics on every backend kept in this
process (memory, SQLite), CachedMap, the static read-only state, SQLite durability and
concurrency, JSON formats and the errors. Redis runs the same scenarios in
``test_trident_state_redis.py``."""

from __future__ import annotations

import copy
import multiprocessing
import pickle
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from squall.trident.state import (
    BackingMap,
    CachedMap,
    MapState,
    MemoryMapState,
    MemoryMapStateFactory,
    NonTransactionalMap,
    NotInCommitError,
    OpaqueMap,
    OpaqueValue,
    ReadOnlyMapState,
    ReadOnlyStateError,
    SqliteMapState,
    StateError,
    StateFactory,
    StateType,
    TransactionalMap,
    TransactionalValue,
)

ALL_TYPES = list(StateType)

# ---------------------------------------------------------------- scenario helpers
# (shared with test_trident_state_redis.py)


def make_state(factory: StateFactory, partition: int = 0, partitions: int = 1) -> MapState:
    return factory.make_state({}, None, partition, partitions)


def adder(amount: int) -> Callable[[Any], Any]:
    return lambda old: (old or 0) + amount


def apply_batch(
    state: MapState, txid: int, counts: dict[tuple[Any, ...], int], commit: bool = True
) -> list[Any]:
    """One batch: add ``counts`` to the keys within a commit of ``txid``."""
    state.begin_commit(txid)
    new_values = state.multi_update(list(counts), [adder(n) for n in counts.values()])
    if commit:
        state.commit(txid)
    return new_values


def values_of(state: MapState, *keys: tuple[Any, ...]) -> list[Any]:
    return state.multi_get(list(keys))


def check_sequence(factory: StateFactory) -> None:
    """Exact values after a sequence of commits, whatever the state type."""
    state = make_state(factory)
    assert apply_batch(state, 1, {("cow",): 2, ("dog",): 1}) == [2, 1]
    assert apply_batch(state, 2, {("cow",): 3}) == [5]
    assert apply_batch(state, 3, {("dog",): 4, ("man",): 1, (): 10}) == [5, 1, 10]
    assert values_of(state, ("cow",), ("dog",), ("man",), (), ("cat",)) == [5, 5, 1, 10, None]
    # Another state object of the same factory (another partition, or a restart) agrees.
    assert values_of(make_state(factory, 1, 2), ("cow",), ("dog",), ()) == [5, 5, 10]


def check_transactional_replay(factory: StateFactory) -> None:
    """Replaying a txid with the same updates changes nothing, and updaters are not
    even called for keys the batch already wrote."""
    state = make_state(factory)
    apply_batch(state, 1, {("cow",): 1, ("dog",): 1})
    apply_batch(state, 2, {("cow",): 5, ("dog",): 2})
    calls: list[Any] = []

    def counting(amount: int) -> Callable[[Any], Any]:
        def update(old: Any) -> Any:
            calls.append(old)
            return (old or 0) + amount

        return update

    # The batch was written but its commit was lost: it is replayed, identically.
    state.begin_commit(2)
    assert state.multi_update([("cow",), ("dog",)], [counting(5), counting(2)]) == [6, 3]
    state.commit(2)
    assert calls == []
    assert values_of(state, ("cow",), ("dog",)) == [6, 3]
    # The same replay through a fresh state object (a restarted task).
    fresh = make_state(factory)
    assert apply_batch(fresh, 2, {("cow",): 5, ("dog",): 2}) == [6, 3]
    assert apply_batch(fresh, 3, {("cow",): 1}) == [7]
    assert values_of(fresh, ("cow",), ("dog",)) == [7, 3]


def check_opaque_replay(factory: StateFactory) -> None:
    """Replaying a txid with DIFFERENT updates recomputes from prev, exactly once."""
    state = make_state(factory)
    apply_batch(state, 1, {("cow",): 1, ("dog",): 1})
    apply_batch(state, 2, {("cow",): 5, ("dog",): 2})  # attempt 1 of batch 2
    # The replay of batch 2 holds other tuples (an opaque spout): cow +2, dog absent.
    assert apply_batch(state, 2, {("cow",): 2}) == [3]
    assert values_of(state, ("cow",), ("dog",)) == [3, 3]
    # And once more, from another state object, again with other tuples.
    fresh = make_state(factory)
    assert apply_batch(fresh, 2, {("cow",): 7, ("dog",): 10}) == [8, 11]
    assert apply_batch(fresh, 3, {("cow",): 1}) == [9]
    assert values_of(fresh, ("cow",), ("dog",)) == [9, 11]


def check_non_transactional_replay(factory: StateFactory) -> None:
    """A non-transactional state applies a replayed batch again: it over-counts
    (at-least-once), which is what it promises."""
    state = make_state(factory)
    apply_batch(state, 1, {("cow",): 1})
    apply_batch(state, 2, {("cow",): 5})
    apply_batch(state, 2, {("cow",): 5})  # the replay is counted again
    assert values_of(state, ("cow",)) == [11]


def check_replay(factory: StateFactory, state_type: StateType) -> None:
    {
        StateType.TRANSACTIONAL: check_transactional_replay,
        StateType.OPAQUE: check_opaque_replay,
        StateType.NON_TRANSACTIONAL: check_non_transactional_replay,
    }[state_type](factory)


def check_json_round_trip(factory: StateFactory) -> None:
    """Values of JSON types survive; tuples come back as lists (JSON has none)."""
    state = make_state(factory)
    value = {"name": "cöw", "tags": ("a", "b"), "n": [1, 2.5, None, True], "nested": {"x": []}}
    state.begin_commit(1)
    state.multi_put([("cöw", 1, None, 2.5, True)], [value])
    state.commit(1)
    got = make_state(factory).multi_get([("cöw", 1, None, 2.5, True)])
    assert got == [
        {"name": "cöw", "tags": ["a", "b"], "n": [1, 2.5, None, True], "nested": {"x": []}}
    ]


def check_not_json(factory: StateFactory) -> None:
    """A value that is not JSON-serialisable raises a StateError and writes nothing."""
    state = make_state(factory)
    state.begin_commit(1)
    with pytest.raises(StateError, match="JSON-serialisable"):
        state.multi_update([("a",), ("b",)], [adder(1), lambda old: {1, 2}])
    assert make_state(factory).multi_get([("a",), ("b",)]) == [None, None]


# ---------------------------------------------------------------- backends in this process


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., StateFactory]:
    """A function making a fresh factory of a state type on one backend."""
    if request.param == "memory":
        return lambda state_type, **options: MemoryMapState.factory(state_type, **options)
    counter = iter(range(1000))
    return lambda state_type, **options: SqliteMapState.factory(
        tmp_path / "state.db", state_type, table=f"t{next(counter)}", **options
    )


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("cache_size", [0, 1000])
def test_sequence_of_commits_gives_exact_values(
    backend: Callable[..., StateFactory], state_type: StateType, cache_size: int
) -> None:
    check_sequence(backend(state_type, cache_size=cache_size))


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("cache_size", [0, 1000])
def test_replay_semantics(
    backend: Callable[..., StateFactory], state_type: StateType, cache_size: int
) -> None:
    check_replay(backend(state_type, cache_size=cache_size), state_type)


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
def test_failed_attempt_then_replay(
    backend: Callable[..., StateFactory], state_type: StateType
) -> None:
    """An attempt that wrote but never committed is begun again with the same txid."""
    state = make_state(backend(state_type))
    apply_batch(state, 1, {("cow",): 1})
    apply_batch(state, 2, {("cow",): 5}, commit=False)  # fails before its commit
    apply_batch(state, 2, {("cow",): 5})
    expected = 11 if state_type is StateType.NON_TRANSACTIONAL else 6
    assert values_of(state, ("cow",)) == [expected]


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
def test_updates_within_one_commit_accumulate(
    backend: Callable[..., StateFactory], state_type: StateType
) -> None:
    """Several multi_update calls of one commit, and a key repeated within a call, all
    apply (they are this batch's own writes, not a replay)."""
    state = make_state(backend(state_type))
    apply_batch(state, 1, {("cow",): 1})
    state.begin_commit(2)
    assert state.multi_update([("cow",), ("cow",)], [adder(1), adder(10)]) == [2, 12]
    assert state.multi_update([("cow",)], [adder(100)]) == [112]
    assert state.multi_get([("cow",)]) == [112]
    state.commit(2)
    assert values_of(state, ("cow",)) == [112]


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
def test_writes_outside_a_commit_raise(
    backend: Callable[..., StateFactory], state_type: StateType
) -> None:
    state = make_state(backend(state_type))
    with pytest.raises(NotInCommitError, match=r"multi_update outside a commit.*begin_commit"):
        state.multi_update([("cow",)], [adder(1)])
    with pytest.raises(NotInCommitError, match="multi_put outside a commit"):
        state.multi_put([("cow",)], [1])
    apply_batch(state, 1, {("cow",): 1})
    with pytest.raises(NotInCommitError):  # the commit is over
        state.multi_update([("cow",)], [adder(1)])
    with pytest.raises(StateError, match=r"commit\(2\) without begin_commit\(2\)"):
        state.commit(2)
    state.begin_commit(2)
    with pytest.raises(StateError, match=r"commit\(3\) does not match the open begin_commit\(2\)"):
        state.commit(3)
    assert values_of(state, ("cow",)) == [1]


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
def test_multi_put(backend: Callable[..., StateFactory], state_type: StateType) -> None:
    factory = backend(state_type)
    state = make_state(factory)
    state.begin_commit(1)
    state.multi_put([("a",), ("b",), ("a",)], [1, 2, 3])  # the last value of a key wins
    state.commit(1)
    assert values_of(state, ("a",), ("b",)) == [3, 2]
    apply_batch(state, 2, {("a",): 10})
    assert values_of(state, ("a",)) == [13]
    if isinstance(factory, MemoryMapStateFactory):
        raw = MemoryMapState.contents(factory, raw=True)
        expected = {
            StateType.NON_TRANSACTIONAL: {("a",): 13, ("b",): 2},
            StateType.TRANSACTIONAL: {
                ("a",): TransactionalValue(2, 13),
                ("b",): TransactionalValue(1, 2),
            },
            StateType.OPAQUE: {("a",): OpaqueValue(2, 13, 3), ("b",): OpaqueValue(1, 2, None)},
        }[state_type]
        assert raw == expected


def test_transactional_replay_keeps_the_first_attempt(
    backend: Callable[..., StateFactory],
) -> None:
    """The transactional contract is that a replayed batch is identical; if it is not,
    the replay is still skipped (use an opaque state for such spouts)."""
    state = make_state(backend(StateType.TRANSACTIONAL))
    apply_batch(state, 1, {("cow",): 1})
    apply_batch(state, 2, {("cow",): 5})
    apply_batch(state, 2, {("cow",): 2})
    assert values_of(state, ("cow",)) == [6]


def test_opaque_stored_values_and_reads_during_a_replay(
    backend: Callable[..., StateFactory],
) -> None:
    factory = backend(StateType.OPAQUE)
    state = make_state(factory)
    apply_batch(state, 1, {("cow",): 1})
    apply_batch(state, 2, {("cow",): 5})
    state.begin_commit(2)
    # During the replay of batch 2 the value before batch 2 is what counts.
    assert state.multi_get([("cow",)]) == [1]
    state.multi_update([("cow",)], [adder(2)])
    assert state.multi_get([("cow",)]) == [3]
    state.commit(2)
    assert state.multi_get([("cow",)]) == [3]
    if isinstance(factory, MemoryMapStateFactory):
        assert MemoryMapState.contents(factory, raw=True) == {("cow",): OpaqueValue(2, 3, 1)}


def test_opaque_batches_out_of_order_raise(backend: Callable[..., StateFactory]) -> None:
    state = make_state(backend(StateType.OPAQUE))
    apply_batch(state, 5, {("cow",): 1})
    with pytest.raises(StateError, match=r"batch 4 is behind the state.*batch 5.*txid order"):
        apply_batch(state, 4, {("cow",): 1})


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
def test_updaters_may_mutate_their_argument(
    backend: Callable[..., StateFactory], state_type: StateType
) -> None:
    """A reducer that appends to the old list in place corrupts neither prev nor the
    cache, and what the caller got back stays the caller's."""

    def append(item: str) -> Callable[[Any], Any]:
        def update(old: Any) -> Any:
            values = old if old is not None else []
            values.append(item)
            return values

        return update

    state = make_state(backend(state_type, cache_size=10))
    state.begin_commit(1)
    returned = state.multi_update([("k",)], [append("a")])
    state.commit(1)
    returned[0].append("caller's own")
    state.begin_commit(2)
    state.multi_update([("k",)], [append("b")])
    state.commit(2)
    state.begin_commit(2)  # replayed with another item (meaningful for opaque)
    state.multi_update([("k",)], [append("c")])
    state.commit(2)
    expected = {
        StateType.OPAQUE: ["a", "c"],
        StateType.TRANSACTIONAL: ["a", "b"],
        StateType.NON_TRANSACTIONAL: ["a", "b", "c"],
    }[state_type]
    assert state.multi_get([("k",)]) == [expected]


def test_map_states_of_each_type(backend: Callable[..., StateFactory]) -> None:
    expected = {
        StateType.NON_TRANSACTIONAL: NonTransactionalMap,
        StateType.TRANSACTIONAL: TransactionalMap,
        StateType.OPAQUE: OpaqueMap,
    }
    for state_type, map_class in expected.items():
        state = make_state(backend(state_type, cache_size=5))
        assert type(state) is map_class
        assert isinstance(state.backing, CachedMap) and state.backing.size == 5
        assert not isinstance(make_state(backend(state_type, cache_size=0)).backing, CachedMap)


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
def test_factories_are_picklable(
    backend: Callable[..., StateFactory], state_type: StateType
) -> None:
    factory = backend(state_type)
    apply_batch(make_state(factory), 1, {("cow",): 4})
    for copied in (pickle.loads(pickle.dumps(factory)), copy.deepcopy(factory)):
        assert copied == factory
        assert values_of(make_state(copied), ("cow",)) == [4]


def test_keys_may_be_lists_but_not_scalars(backend: Callable[..., StateFactory]) -> None:
    state = make_state(backend(StateType.OPAQUE))
    apply_batch(state, 1, {("cow",): 1})
    assert state.multi_get([["cow"]]) == [1]  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"tuple of group-by values"):
        state.multi_get(["cow"])  # type: ignore[list-item]


def test_factory_arguments_are_checked(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="state_type must be a StateType"):
        MemoryMapState.factory("opaque")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cache_size must be an int >= 0"):
        MemoryMapState.factory(cache_size=-1)
    with pytest.raises(ValueError, match="SQL identifier"):
        SqliteMapState.factory(tmp_path / "x.db", table="drop table; --")
    with pytest.raises(ValueError, match="path of a database file"):
        SqliteMapState.factory(":memory:")
    with pytest.raises(ValueError, match="synchronous must be one of"):
        SqliteMapState.factory(tmp_path / "x.db", synchronous="SOMETIMES")


# ---------------------------------------------------------------- memory backend


def test_memory_store_is_shared_by_the_factory_and_its_copies() -> None:
    factory = MemoryMapState.factory(StateType.TRANSACTIONAL)
    other = MemoryMapState.factory(StateType.TRANSACTIONAL)
    assert factory.store_id != other.store_id
    apply_batch(make_state(factory, 0, 2), 1, {("cow",): 1})
    apply_batch(make_state(factory, 1, 2), 1, {("dog",): 2})
    apply_batch(make_state(pickle.loads(pickle.dumps(factory))), 2, {("cat",): 3})
    apply_batch(make_state(copy.deepcopy(factory)), 3, {("cow",): 1})
    assert MemoryMapState.contents(factory) == {("cow",): 2, ("dog",): 2, ("cat",): 3}
    assert MemoryMapState.contents(factory, raw=True)[("cow",)] == TransactionalValue(3, 2)
    assert MemoryMapState.contents(other) == {}
    MemoryMapState.clear(factory)
    assert MemoryMapState.contents(factory) == {}


def test_memory_values_are_isolated_and_must_be_picklable() -> None:
    factory = MemoryMapState.factory(StateType.NON_TRANSACTIONAL)
    state = make_state(factory)
    value = [1, 2]
    state.begin_commit(1)
    state.multi_put([("k",)], [value])
    value.append(3)
    state.multi_get([("k",)])[0].append(4)
    assert state.multi_get([("k",)]) == [[1, 2]]
    assert MemoryMapState.contents(factory) == {("k",): [1, 2]}
    with pytest.raises(StateError, match="must be picklable"):
        state.multi_put([("f",)], [lambda: None])
    state.commit(1)
    assert state.multi_get([("k", "tuple")]) == [None]


def test_memory_state_is_thread_safe() -> None:
    """Tasks on threads update one store at once (each its own keys, as Trident
    partitions do) and the global key from one of them."""
    factory = MemoryMapState.factory(StateType.OPAQUE)
    threads_count, batches = 8, 50

    def task(index: int) -> None:
        state = make_state(factory, index, threads_count)
        for txid in range(1, batches + 1):
            counts: dict[tuple[Any, ...], int] = {(f"w{index}-{n}",): 1 for n in range(5)}
            if index == 0:
                counts[()] = 1
            apply_batch(state, txid, counts)

    threads = [threading.Thread(target=task, args=(i,)) for i in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    contents = MemoryMapState.contents(factory)
    assert len(contents) == threads_count * 5 + 1
    assert set(contents.values()) == {batches}


# ---------------------------------------------------------------- static states


def test_static_state_answers_multi_get_only() -> None:
    factory = MemoryMapState.static_factory({"cow": 3, ("dog", 1): [1, 2], ("x",): None})
    factory = pickle.loads(pickle.dumps(factory))
    state = make_state(factory)
    assert isinstance(state, ReadOnlyMapState)
    assert state.multi_get([("cow",), ("dog", 1), ("cat",), ("x",)]) == [3, [1, 2], None, None]
    state.multi_get([("dog", 1)])[0].append(3)  # a copy: the data does not change
    assert state.multi_get([("dog", 1)]) == [[1, 2]]
    state.begin_commit(1)  # engines may bracket every state; nothing happens
    with pytest.raises(ReadOnlyStateError, match="cannot be updated"):
        state.multi_update([("cow",)], [adder(1)])
    with pytest.raises(ReadOnlyStateError, match="cannot be written"):
        state.multi_put([("cow",)], [1])
    state.commit(1)


def test_read_only_map_reads_a_written_state(tmp_path: Path) -> None:
    """A read-only map over another state's backing map sees its current values."""
    factory = SqliteMapState.factory(tmp_path / "s.db", StateType.OPAQUE, cache_size=0)
    apply_batch(make_state(factory), 1, {("cow",): 2})
    apply_batch(make_state(factory), 2, {("cow",): 3})
    reader = ReadOnlyMapState(factory.make_backing_map({}, None, 0, 1))
    assert reader.multi_get([("cow",), ("dog",)]) == [5, None]
    reader.close()


# ---------------------------------------------------------------- CachedMap


class CountingMap(BackingMap):
    """A dict-backed map recording the keys of every call."""

    def __init__(self) -> None:
        self.data: dict[tuple[Any, ...], Any] = {}
        self.gets: list[list[tuple[Any, ...]]] = []
        self.puts: list[list[tuple[Any, ...]]] = []
        self.fail_puts = False

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any | None]:
        self.gets.append(list(keys))
        return [copy.deepcopy(self.data.get(key)) for key in keys]

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        self.puts.append(list(keys))
        if self.fail_puts:
            raise OSError("disk full")
        self.data.update(zip(keys, copy.deepcopy(values), strict=True))


def test_cached_map_reads_through_and_caches() -> None:
    backing = CountingMap()
    backing.data = {("a",): 1, ("b",): 2}
    cached = CachedMap(backing, size=10)
    assert cached.multi_get([("a",), ("b",), ("c",), ("a",)]) == [1, 2, None, 1]
    assert backing.gets == [[("a",), ("b",), ("c",)]]  # one read, each key once
    assert cached.multi_get([("a",), ("c",)]) == [1, None]  # absent keys are cached too
    assert backing.gets == [[("a",), ("b",), ("c",)]]
    assert cached.multi_get([("a",), ("d",)]) == [1, None]
    assert backing.gets[-1] == [("d",)]  # only the missing key is read


def test_cached_map_writes_through() -> None:
    backing = CountingMap()
    cached = CachedMap(backing, size=10)
    cached.multi_put([("a",), ("b",)], [[1], 2])
    assert backing.data == {("a",): [1], ("b",): 2}
    assert cached.multi_get([("a",), ("b",)]) == [[1], 2]
    assert backing.gets == []  # served from the cache
    cached.multi_get([("a",)])[0].append("mutated by the caller")
    assert cached.multi_get([("a",)]) == [[1]]


def test_cached_map_evicts_the_least_recently_used() -> None:
    backing = CountingMap()
    backing.data = {(n,): n for n in range(5)}
    cached = CachedMap(backing, size=3)
    cached.multi_get([(0,), (1,), (2,)])
    cached.multi_get([(0,)])  # 0 is now the most recently used
    cached.multi_put([(3,)], [30])
    assert cached.cached_keys() == [(2,), (0,), (3,)]  # 1 was evicted
    assert len(cached) == 3
    backing.gets.clear()
    assert cached.multi_get([(1,), (0,)]) == [1, 0]
    assert backing.gets == [[(1,)]]
    assert cached.cached_keys() == [(3,), (0,), (1,)]  # hits refreshed, then reads added


def test_cached_map_forgets_keys_whose_write_failed() -> None:
    backing = CountingMap()
    backing.data = {("a",): 1}
    cached = CachedMap(backing, size=10)
    cached.multi_get([("a",)])
    backing.fail_puts = True
    with pytest.raises(OSError, match="disk full"):
        cached.multi_put([("a",)], [2])
    assert cached.cached_keys() == []
    assert cached.multi_get([("a",)]) == [1]


def test_cached_map_size_is_checked() -> None:
    with pytest.raises(ValueError, match="at least 1 key"):
        CachedMap(CountingMap(), size=0)


def test_cached_map_under_a_map_state_saves_reads() -> None:
    backing = CountingMap()
    state = TransactionalMap(CachedMap(backing, size=100))
    for txid in range(1, 4):
        apply_batch(state, txid, {("cow",): 1, ("dog",): 1})
    assert len(backing.gets) == 1 and len(backing.puts) == 3
    assert backing.data == {("cow",): TransactionalValue(3, 3), ("dog",): TransactionalValue(3, 3)}


# ---------------------------------------------------------------- SQLite backend


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
def test_sqlite_survives_reopening(tmp_path: Path, state_type: StateType) -> None:
    path = tmp_path / "durable" / "state.db"  # the directory is created
    factory = SqliteMapState.factory(path, state_type)
    state = make_state(factory)
    apply_batch(state, 1, {("cow",): 2, (): 1})
    apply_batch(state, 2, {("cow",): 3})
    state.close()
    reopened = make_state(SqliteMapState.factory(str(path), state_type))
    assert values_of(reopened, ("cow",), ()) == [5, 1]
    replayed = apply_batch(reopened, 2, {("cow",): 3})
    expected = {
        StateType.TRANSACTIONAL: [5],
        StateType.OPAQUE: [5],
        StateType.NON_TRANSACTIONAL: [8],
    }[state_type]
    assert replayed == expected


@pytest.mark.parametrize(
    ("state_type", "text", "stored"),
    [
        (StateType.NON_TRANSACTIONAL, "5", 5),
        (StateType.TRANSACTIONAL, "[2,5]", TransactionalValue(2, 5)),
        (StateType.OPAQUE, "[2,5,2]", OpaqueValue(2, 5, 2)),
    ],
    ids=["NON_TRANSACTIONAL", "TRANSACTIONAL", "OPAQUE"],
)
def test_sqlite_stores_storm_json_formats(
    tmp_path: Path, state_type: StateType, text: str, stored: Any
) -> None:
    factory = SqliteMapState.factory(tmp_path / "s.db", state_type, table="words")
    apply_batch(make_state(factory), 1, {("cow",): 2})
    apply_batch(make_state(factory), 2, {("cow",): 3})
    with sqlite3.connect(factory.path) as connection:
        rows = connection.execute("SELECT key, value FROM words").fetchall()
        (mode,) = connection.execute("PRAGMA journal_mode").fetchone()
    assert rows == [('["cow"]', text)]
    assert mode == "wal"
    assert SqliteMapState.contents(factory) == {("cow",): 5}
    assert SqliteMapState.contents(factory, raw=True) == {("cow",): stored}


def test_sqlite_json_round_trip_and_atomic_writes(tmp_path: Path) -> None:
    for state_type in ALL_TYPES:
        factory = SqliteMapState.factory(tmp_path / "s.db", state_type, table=state_type.name)
        check_json_round_trip(factory)
        check_not_json(
            SqliteMapState.factory(tmp_path / "s.db", state_type, table="x" + state_type.name)
        )


def test_sqlite_tables_are_separate_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    opaque = SqliteMapState.factory(path, StateType.OPAQUE, table="a")
    apply_batch(make_state(opaque), 1, {("cow",): 1})
    assert values_of(
        make_state(SqliteMapState.factory(path, StateType.OPAQUE, table="b")), ("cow",)
    ) == [None]
    # Reading a table with a state of another type fails clearly.
    wrong = make_state(SqliteMapState.factory(path, StateType.TRANSACTIONAL, table="a"))
    with pytest.raises(StateError, match=r"not a transactional value.*another type"):
        wrong.multi_get([("cow",)])


def test_sqlite_reads_and_writes_many_keys(tmp_path: Path) -> None:
    """More keys than one SELECT takes are read in chunks, in one snapshot."""
    factory = SqliteMapState.factory(tmp_path / "s.db", StateType.OPAQUE, cache_size=0)
    state = make_state(factory)
    keys = [(f"k{n}",) for n in range(1_234)]
    state.begin_commit(1)
    state.multi_update(keys, [adder(n) for n in range(len(keys))])
    state.commit(1)
    assert state.multi_get(keys) == list(range(len(keys)))


def test_sqlite_unusable_path_raises_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    factory = SqliteMapState.factory(blocker / "s.db")
    with pytest.raises(StateError, match=r"SqliteMapState cannot open .*file/s\.db"):
        make_state(factory)


def test_sqlite_concurrent_writers_in_threads(tmp_path: Path) -> None:
    """Tasks on threads write one file at once (own keys, a connection each)."""
    factory = SqliteMapState.factory(tmp_path / "s.db", StateType.TRANSACTIONAL, cache_size=0)
    threads_count, batches = 6, 15
    errors: list[BaseException] = []

    def task(index: int) -> None:
        try:
            state = make_state(factory, index, threads_count)
            for txid in range(1, batches + 1):
                apply_batch(state, txid, {(index, n): 1 for n in range(4)})
                if txid == 3:  # a replay in the middle changes nothing
                    apply_batch(state, txid, {(index, n): 1 for n in range(4)})
            state.close()
        except BaseException as error:  # reported to the test thread
            errors.append(error)

    threads = [threading.Thread(target=task, args=(i,)) for i in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    contents = SqliteMapState.contents(factory)
    assert len(contents) == threads_count * 4
    assert set(contents.values()) == {batches}


def write_batches_in_process(factory: StateFactory, index: int, batches: int) -> None:
    """Runs in a child process: one partition's batches, each replayed once."""
    state = make_state(factory, index, 2)
    for txid in range(1, batches + 1):
        counts: dict[tuple[Any, ...], int] = {(index, n): n for n in range(3)}
        apply_batch(state, txid, counts)
        apply_batch(state, txid, counts)


def test_sqlite_concurrent_writers_in_processes(tmp_path: Path) -> None:
    factory = SqliteMapState.factory(tmp_path / "s.db", StateType.OPAQUE)
    make_state(factory).close()  # the table exists before the children race
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=write_batches_in_process, args=(factory, index, 20))
        for index in range(2)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
    assert [process.exitcode for process in processes] == [0, 0]
    assert SqliteMapState.contents(factory) == {(i, n): 20 * n for i in range(2) for n in range(3)}
