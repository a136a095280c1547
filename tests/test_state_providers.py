"""The conformance suite of the state providers: the same scenarios, through
``BufferedKeyValueState``, on ``memory``, ``sqlite`` (a directory of the test's),
``redis`` (the session's ``redis_server``) and ``postgres`` (a database of the test's):
the reads over the pending, prepared and committed layers, the three phases, recovery
by a new state object (durable providers), values that cannot be stored, and the
isolation of namespaces and prefixes."""

from __future__ import annotations

import datetime
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall.state.base import BufferedKeyValueState
from squall.state.codec import StateSerializationError, decode, encode
from squall.state.providers import (
    PROVIDER_CONFIG_KEY,
    PROVIDER_KEY,
    StateProvider,
    provider_for,
)
from tests.conftest import unique_name
from tests.test_state_codec import ROUND_TRIPS, SUPPORTED, assert_identical

PROVIDERS = ["memory", "sqlite", "redis", "postgres"]
DURABLE = ["sqlite", "redis", "postgres"]
LABEL = "bolt 'count' task 0"


class Backend:
    """Makes providers of one kind for a test, each state it makes closed at the end."""

    def __init__(self, name: str, options: dict[str, Any]) -> None:
        self.name = name
        self.options = options
        #: The prefix of :meth:`state` unless another is given.
        self.prefix = unique_name("topology")
        self._states: list[BufferedKeyValueState] = []

    def provider(self, prefix: str | None = None) -> StateProvider:
        """A provider of this kind under ``prefix`` (default: the test's)."""
        conf = {
            PROVIDER_KEY: self.name,
            PROVIDER_CONFIG_KEY: {**self.options, "namespace": prefix or self.prefix},
        }
        return provider_for(conf, "unused-topology-name")

    def state(self, namespace: str = "count-0", prefix: str | None = None) -> Any:
        """A new state object on ``namespace`` under ``prefix``."""
        state = self.provider(prefix).make_state(namespace, LABEL)
        self._states.append(state)
        return state

    def close(self) -> None:
        for state in self._states:
            state.close()


def make_backend(request: pytest.FixtureRequest, name: str, tmp_path: Path) -> Backend:
    """The backend ``name``, on the test's directory or the session's servers."""
    if name == "sqlite":
        return Backend(name, {"directory": str(tmp_path / "state")})
    if name == "redis":
        return Backend(name, {"url": request.getfixturevalue("redis_server").url})
    if name == "postgres":
        return Backend(name, {"dsn": request.getfixturevalue("postgres_dsn")})
    return Backend(name, {})


@pytest.fixture(params=PROVIDERS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Each provider in turn."""
    made = make_backend(request, request.param, tmp_path)
    yield made
    made.close()


@pytest.fixture(params=DURABLE)
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Each durable provider in turn."""
    made = make_backend(request, request.param, tmp_path)
    yield made
    made.close()


def committed(state: BufferedKeyValueState) -> dict[Any, Any]:
    """The committed entries of ``state``'s store, decoded."""
    return {decode(key): decode(value) for key, value in state.store.items()}


def prepared(state: BufferedKeyValueState) -> tuple[int, dict[Any, Any]] | None:
    """The prepared transaction of ``state``'s store, decoded (None: a deletion)."""
    found = state.store.prepared()
    if found is None:
        return None
    txid, changes = found
    return txid, {
        decode(key): None if value is None else decode(value) for key, value in changes.items()
    }


def layered(state: BufferedKeyValueState) -> None:
    """Commit a, b, c (txid 1); prepare b=20, no c, d (txid 2); leave a=10, no b, e
    pending."""
    state.put("a", 1)
    state.put("b", 2)
    state.put("c", 3)
    state.prepare_commit(1)
    state.commit(1)
    state.put("b", 20)
    state.delete("c")
    state.put("d", 4)
    state.prepare_commit(2)
    state.put("a", 10)
    state.delete("b")
    state.put("e", 5)


def test_reads_see_the_pending_prepared_and_committed_layers(backend: Backend) -> None:
    state = backend.state()
    layered(state)
    assert [state.get(key, "none") for key in "abcde"] == [10, "none", "none", 4, 5]
    assert sorted(state) == [("a", 10), ("d", 4), ("e", 5)]
    assert len(state) == 3
    assert ["a" in state, "b" in state, "c" in state, "d" in state] == [True, False, False, True]
    assert committed(state) == {"a": 1, "b": 2, "c": 3}
    assert state.store.count() == 3
    assert state.store.get(encode("b")) == encode(2)
    assert state.store.get(encode("zz")) is None
    assert prepared(state) == (2, {"b": 20, "c": None, "d": 4})
    assert state.committed_txid() == 1


def test_commit_makes_the_prepared_changes_the_committed_state(backend: Backend) -> None:
    state = backend.state()
    layered(state)
    state.prepare_commit(2)  # the pending changes join txid 2
    assert prepared(state) == (2, {"a": 10, "b": None, "c": None, "d": 4, "e": 5})
    state.commit(2)
    assert committed(state) == {"a": 10, "d": 4, "e": 5}
    assert sorted(state) == [("a", 10), ("d", 4), ("e", 5)]
    assert prepared(state) is None
    assert state.committed_txid() == 2
    assert state.store.count() == 3


def test_preparing_one_txid_twice_joins_the_changes(backend: Backend) -> None:
    state = backend.state()
    state.put("x", 1)
    state.put("y", 2)
    state.prepare_commit(7)
    state.delete("x")
    state.put("z", 3)
    state.prepare_commit(7)
    assert prepared(state) == (7, {"x": None, "y": 2, "z": 3})
    state.commit(7)
    assert committed(state) == {"y": 2, "z": 3}
    assert state.committed_txid() == 7


def test_rollback_drops_the_prepared_and_pending_changes(backend: Backend) -> None:
    state = backend.state()
    layered(state)
    state.rollback()
    assert sorted(state) == [("a", 1), ("b", 2), ("c", 3)]
    assert prepared(state) is None
    assert state.committed_txid() == 1
    state.put("f", 6)  # the state goes on from the committed one
    state.prepare_commit(2)
    state.commit(2)
    assert committed(state) == {"a": 1, "b": 2, "c": 3, "f": 6}
    assert state.committed_txid() == 2


def test_commit_is_idempotent_and_ignores_txids_not_prepared(backend: Backend) -> None:
    state = backend.state()
    state.put("k", 1)
    state.prepare_commit(1)
    state.commit(1)
    state.commit(1)  # recovery sends a commit twice
    assert (committed(state), state.committed_txid(), prepared(state)) == ({"k": 1}, 1, None)
    state.store.commit(5)  # nothing prepared
    assert (committed(state), state.committed_txid()) == ({"k": 1}, 1)
    state.put("k", 2)
    state.prepare_commit(2)
    state.store.commit(1)  # an old txid: the prepared transaction stays
    assert (committed(state), state.committed_txid()) == ({"k": 1}, 1)
    assert prepared(state) == (2, {"k": 2})
    state.commit(2)
    assert (committed(state), state.committed_txid(), prepared(state)) == ({"k": 2}, 2, None)


def test_a_transaction_without_changes_is_prepared_and_committed(backend: Backend) -> None:
    state = backend.state()
    state.prepare_commit(3)
    assert prepared(state) == (3, {})
    state.commit(3)
    assert (committed(state), state.committed_txid(), prepared(state)) == ({}, 3, None)


def test_every_codec_type_is_stored_exactly(backend: Backend) -> None:
    state = backend.state()
    keys: list[Any] = ["text", 7, -(2**70), 2.5, b"\x00raw", ("cow", 1), frozenset({1}), None]
    for index, value in enumerate(ROUND_TRIPS):
        state.put(("value", index), value)
    for key in keys:
        state.put(key, repr(key))
    state.prepare_commit(1)
    state.commit(1)
    stored = committed(state)
    assert len(stored) == len(ROUND_TRIPS) + len(keys)
    for index, value in enumerate(ROUND_TRIPS):
        assert_identical(stored[("value", index)], value)
        assert_identical(state.get(("value", index)), value)
    for key in keys:
        assert_identical(state.get(key), repr(key))


def test_a_large_transaction_is_committed_whole(backend: Backend) -> None:
    state = backend.state()
    for number in range(25_000):
        state.put(number, number * 2)
    state.prepare_commit(1)
    state.commit(1)
    for number in range(0, 25_000, 2):
        state.delete(number)
    state.prepare_commit(2)
    state.commit(2)
    assert state.store.count() == 12_500
    assert committed(state) == {number: number * 2 for number in range(1, 25_000, 2)}


def test_a_value_that_cannot_be_stored_names_the_state_and_the_key(backend: Backend) -> None:
    state = backend.state()
    refused = f"type datetime.date is not supported (supported: {SUPPORTED})"
    with pytest.raises(StateSerializationError) as raised:
        state.put("when", datetime.date(2024, 1, 2))
    assert str(raised.value) == f"{LABEL}: the value of key 'when' cannot be stored: {refused}"
    with pytest.raises(StateSerializationError) as raised:
        state.put(["a", "list"], 1)
    assert str(raised.value) == (
        f"{LABEL}: key ['a', 'list'] cannot be stored: unhashable type: 'list'"
    )
    with pytest.raises(StateSerializationError) as raised:
        state.put(("day", datetime.date(2024, 1, 2)), 1)
    assert str(raised.value) == (
        f"{LABEL}: key ('day', datetime.date(2024, 1, 2)) cannot be stored: {refused}"
    )
    with pytest.raises(StateSerializationError) as raised:
        state.delete({"a": 1})
    assert str(raised.value) == f"{LABEL}: key {{'a': 1}} cannot be stored: unhashable type: 'dict'"
    assert (len(state), state.committed_txid()) == (0, None)
    changed_later = [1]
    state.put("list", changed_later)
    changed_later.append(datetime.date(2024, 1, 2))  # found when the state is prepared
    with pytest.raises(StateSerializationError) as raised:
        state.prepare_commit(1)
    assert str(raised.value) == f"{LABEL}: the value of key 'list' cannot be stored: {refused}"
    assert prepared(state) is None


def test_namespaces_and_prefixes_keep_apart(backend: Backend) -> None:
    other_prefix = unique_name("other")
    states = {
        "count-0": backend.state("count-0"),
        "count-1": backend.state("count-1"),
        "other count-0": backend.state("count-0", prefix=other_prefix),
        # the separator in a prefix or namespace cannot make two names one
        "a:b + c": backend.state("c", prefix=f"{backend.prefix}:b"),
        "a + b:c": backend.state("b:c", prefix=backend.prefix),
    }
    for txid, (name, state) in enumerate(states.items(), start=1):
        state.put("owner", name)
        state.put(name, txid)
        state.prepare_commit(txid)
        state.commit(txid)
    for txid, (name, state) in enumerate(states.items(), start=1):
        assert committed(state) == {"owner": name, name: txid}
        assert state.committed_txid() == txid
    reopened = backend.state("count-0", prefix=other_prefix)
    expected = {"owner": "other count-0", "other count-0": 3} if backend.name != "memory" else {}
    assert committed(reopened) == expected


def test_a_new_state_object_sees_the_committed_and_prepared_state(durable: Backend) -> None:
    first = durable.state()
    layered(first)
    first.close()  # a crash after prepare 2: the pending changes are lost
    second = durable.state()
    assert committed(second) == {"a": 1, "b": 2, "c": 3}
    assert prepared(second) == (2, {"b": 20, "c": None, "d": 4})
    assert second.committed_txid() == 1
    assert sorted(second) == [("a", 1), ("b", 20), ("d", 4)]
    second.commit(2)  # the recovery settles the prepared transaction
    third = durable.state()
    assert committed(third) == {"a": 1, "b": 20, "d": 4}
    assert (prepared(third), third.committed_txid()) == (None, 2)


def test_a_new_state_object_after_rollback_sees_no_prepared_state(durable: Backend) -> None:
    first = durable.state()
    layered(first)
    first.rollback()
    second = durable.state()
    assert (committed(second), prepared(second), second.committed_txid()) == (
        {"a": 1, "b": 2, "c": 3},
        None,
        1,
    )


def test_memory_stores_are_each_their_own() -> None:
    backend = Backend("memory", {})
    first = backend.state()
    first.put("k", 1)
    first.prepare_commit(1)
    first.commit(1)
    second = backend.state()
    assert (list(second), prepared(second), second.committed_txid()) == ([], None, None)


def test_a_state_pickles_with_its_layers(backend: Backend) -> None:
    """On Spark a bolt and its state are snapshotted by pickling: the memory store goes
    with its data, a durable one opens its backend again."""
    state = backend.state()
    layered(state)
    copy = pickle.loads(pickle.dumps(state))
    try:
        assert sorted(copy) == [("a", 10), ("d", 4), ("e", 5)]
        assert committed(copy) == {"a": 1, "b": 2, "c": 3}
        assert prepared(copy) == (2, {"b": 20, "c": None, "d": 4})
        assert (copy.label, copy.committed_txid()) == (LABEL, 1)
        copy.prepare_commit(2)
        copy.commit(2)
        assert committed(copy) == {"a": 10, "d": 4, "e": 5}
    finally:
        copy.close()
