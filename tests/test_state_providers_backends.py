"""What each durable state provider leaves in its backend (the SQLite file, the Redis
keys, the PostgreSQL tables, exactly), its errors (naming the backend, passwords
hidden), and its connections (per thread for SQLite, again after a broken one)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from squall.state.base import BufferedKeyValueState
from squall.state.codec import encode
from squall.state.providers import (
    PostgresStateProvider,
    RedisStateProvider,
    SqliteStateProvider,
)
from squall.trident.state.base import StateConnectionError, StateError
from tests.conftest import unique_name
from tests.servers import RedisServer, free_port

LABEL = "bolt 'count' task 0"


@pytest.fixture
def states() -> Iterator[list[BufferedKeyValueState]]:
    """States the test makes, closed at its end."""
    made: list[BufferedKeyValueState] = []
    yield made
    for state in made:
        state.close()


def checkpoint(state: BufferedKeyValueState) -> None:
    """Commit ``a=1, b=2`` (txid 1), then prepare ``a=10`` and the deletion of ``b``
    (txid 2)."""
    state.put("a", 1)
    state.put("b", 2)
    state.prepare_commit(1)
    state.commit(1)
    state.put("a", 10)
    state.delete("b")
    state.prepare_commit(2)


# -- SQLite ---------------------------------------------------------------------------


def test_sqlite_layout(tmp_path: Path, states: list[BufferedKeyValueState]) -> None:
    provider = SqliteStateProvider(prefix="word/count", directory=str(tmp_path / "new" / "dir"))
    state = provider.make_state("count-0", LABEL)
    states.append(state)
    checkpoint(state)
    with sqlite3.connect(tmp_path / "new" / "dir" / "word%2Fcount.sqlite") as connection:
        tables = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        ).fetchall()
        entries = connection.execute("SELECT * FROM state_entries ORDER BY key").fetchall()
        prepared = connection.execute("SELECT * FROM state_prepared ORDER BY key").fetchall()
        transactions = connection.execute("SELECT * FROM state_transactions").fetchall()
        mode = connection.execute("PRAGMA journal_mode").fetchone()
    assert tables == [("state_entries",), ("state_prepared",), ("state_transactions",)]
    namespace = "word/count:count-0"
    assert entries == [(namespace, encode("a"), encode(1)), (namespace, encode("b"), encode(2))]
    assert prepared == [(namespace, encode("a"), encode(10)), (namespace, encode("b"), None)]
    assert transactions == [(namespace, 2, 1)]
    assert mode == ("wal",)


def test_sqlite_prefixes_have_files_of_their_own(
    tmp_path: Path, states: list[BufferedKeyValueState]
) -> None:
    for prefix in ("first", "second"):
        provider = SqliteStateProvider(prefix=prefix, directory=str(tmp_path))
        state = provider.make_state("count-0", LABEL)
        states.append(state)
        state.put("owner", prefix)
        state.prepare_commit(1)
        state.commit(1)
    for prefix in ("first", "second"):
        with sqlite3.connect(tmp_path / f"{prefix}.sqlite") as connection:
            rows = connection.execute("SELECT namespace, value FROM state_entries").fetchall()
        assert rows == [(f"{prefix}:count-0", encode(prefix))]


def test_sqlite_store_opens_a_connection_per_thread(
    tmp_path: Path, states: list[BufferedKeyValueState]
) -> None:
    provider = SqliteStateProvider(prefix="wc", directory=str(tmp_path))
    state = provider.make_state("count-0", LABEL)
    states.append(state)
    checkpoint(state)
    found: list[Any] = []

    def other_thread() -> None:
        state.commit(2)
        found.append(sorted(state))

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert found == [[("a", 10)]]
    assert len(state.store._connections) == 2  # type: ignore[attr-defined]
    assert state.committed_txid() == 2


def test_sqlite_directory_that_cannot_be_made_fails_naming_it(
    tmp_path: Path, states: list[BufferedKeyValueState]
) -> None:
    (tmp_path / "file").write_text("not a directory")
    provider = SqliteStateProvider(prefix="wc", directory=str(tmp_path / "file" / "states"))
    with pytest.raises(StateError) as raised:
        provider.make_state("count-0", LABEL)
    path = tmp_path / "file" / "states"
    assert str(raised.value) == (
        f"state provider 'sqlite' failed on {path / 'wc.sqlite'} (namespace 'wc:count-0'): "
        f"[Errno 20] Not a directory: '{path}'"
    )


# -- Redis ----------------------------------------------------------------------------


def test_redis_layout(redis_server: RedisServer, states: list[BufferedKeyValueState]) -> None:
    prefix = unique_name("topology")
    state = RedisStateProvider(prefix=prefix, url=redis_server.url).make_state("count-0", LABEL)
    states.append(state)
    checkpoint(state)
    client = redis.Redis.from_url(redis_server.url)
    try:
        base = f"squall:state:{{{prefix}:count-0}}"
        assert sorted(client.keys(f"squall:state:{{{prefix}:*")) == [
            f"{base}:entries".encode(),
            f"{base}:prepared".encode(),
            f"{base}:txid".encode(),
        ]
        assert client.hgetall(f"{base}:entries") == {encode("a"): encode(1), encode("b"): encode(2)}
        assert client.hgetall(f"{base}:prepared") == {
            b"": b"2",
            encode("a"): b"+" + encode(10),
            encode("b"): b"-",
        }
        assert client.get(f"{base}:txid") == b"1"
        state.commit(2)
        assert sorted(client.keys(f"squall:state:{{{prefix}:*")) == [
            f"{base}:entries".encode(),
            f"{base}:txid".encode(),
        ]
        assert client.hgetall(f"{base}:entries") == {encode("a"): encode(10)}
        assert client.get(f"{base}:txid") == b"2"
    finally:
        client.close()


def test_redis_reconnects_after_its_connection_is_cut(
    redis_server: RedisServer, states: list[BufferedKeyValueState]
) -> None:
    state = RedisStateProvider(prefix=unique_name("topology"), url=redis_server.url).make_state(
        "count-0", LABEL
    )
    states.append(state)
    checkpoint(state)
    store_client_id = state.store._client.client_id()  # type: ignore[attr-defined]
    client = redis.Redis.from_url(redis_server.url)
    try:
        assert client.client_kill_filter(_id=store_client_id) == 1
    finally:
        client.close()
    state.commit(2)  # the broken connection is retried once, on a new one
    assert (sorted(state), state.committed_txid()) == ([("a", 10)], 2)


def test_redis_that_cannot_be_reached_fails_naming_it() -> None:
    port = free_port()
    provider = RedisStateProvider(
        prefix="wc", url=f"redis://user:secret@127.0.0.1:{port}/0", connect_timeout=2
    )
    with pytest.raises(StateConnectionError) as raised:
        provider.make_state("count-0", LABEL)
    message = str(raised.value)
    assert message.startswith(
        f"state provider 'redis' cannot reach redis://user:***@127.0.0.1:{port}/0 "
        "(namespace 'wc:count-0'): "
    ), message
    assert "secret" not in message


def test_redis_errors_of_the_server_name_it(
    redis_server: RedisServer, states: list[BufferedKeyValueState]
) -> None:
    prefix = unique_name("topology")
    client = redis.Redis.from_url(redis_server.url)
    try:
        client.set(f"squall:state:{{{prefix}:count-0}}:entries", "not a hash")
    finally:
        client.close()
    state = RedisStateProvider(prefix=prefix, url=redis_server.url).make_state("count-0", LABEL)
    states.append(state)
    with pytest.raises(StateError) as raised:
        state.get("a")
    assert str(raised.value) == (
        f"state provider 'redis' failed on {redis_server.url} (namespace '{prefix}:count-0'): "
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    )


# -- PostgreSQL -----------------------------------------------------------------------


def rows(dsn: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as connection:
        return connection.execute(query).fetchall()


@pytest.mark.parametrize("table", ["squall_state", "public.my_state"])
def test_postgres_layout(
    postgres_dsn: str, table: str, states: list[BufferedKeyValueState]
) -> None:
    state = PostgresStateProvider(prefix="wc", dsn=postgres_dsn, table=table).make_state(
        "count-0", LABEL
    )
    states.append(state)
    checkpoint(state)
    name = table.split(".")[-1]
    assert rows(
        postgres_dsn,
        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
    ) == [
        (name, "namespace", "text", "NO"),
        (name, "key", "bytea", "NO"),
        (name, "value", "bytea", "NO"),
        (f"{name}_prepared", "namespace", "text", "NO"),
        (f"{name}_prepared", "key", "bytea", "NO"),
        (f"{name}_prepared", "value", "bytea", "YES"),
        (f"{name}_tx", "namespace", "text", "NO"),
        (f"{name}_tx", "prepared_txid", "bigint", "YES"),
        (f"{name}_tx", "committed_txid", "bigint", "YES"),
    ]
    assert rows(postgres_dsn, f"SELECT * FROM {table} ORDER BY key") == [
        ("wc:count-0", encode("a"), encode(1)),
        ("wc:count-0", encode("b"), encode(2)),
    ]
    assert rows(postgres_dsn, f"SELECT * FROM {table}_prepared ORDER BY key") == [
        ("wc:count-0", encode("a"), encode(10)),
        ("wc:count-0", encode("b"), None),
    ]
    assert rows(postgres_dsn, f"SELECT * FROM {table}_tx") == [("wc:count-0", 2, 1)]
    state.commit(2)
    assert rows(postgres_dsn, f"SELECT * FROM {table}") == [("wc:count-0", encode("a"), encode(10))]
    assert rows(postgres_dsn, f"SELECT count(*) FROM {table}_prepared") == [(0,)]
    assert rows(postgres_dsn, f"SELECT * FROM {table}_tx") == [("wc:count-0", None, 2)]


def test_postgres_tables_made_by_many_tasks_at_once(
    postgres_dsn: str, states: list[BufferedKeyValueState]
) -> None:
    provider = PostgresStateProvider(prefix="wc", dsn=postgres_dsn)
    tasks = 6
    start = threading.Barrier(tasks)
    failures: list[BaseException] = []

    def task(index: int) -> None:
        try:
            start.wait()
            state = provider.make_state(f"count-{index}", f"bolt 'count' task {index}")
            states.append(state)
            state.put("task", index)
            state.prepare_commit(1)
            state.commit(1)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=task, args=(index,)) for index in range(tasks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert rows(postgres_dsn, "SELECT namespace, value FROM squall_state ORDER BY namespace") == [
        (f"wc:count-{index}", encode(index)) for index in range(tasks)
    ]


def test_postgres_table_of_other_columns_is_refused(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        connection.execute("CREATE TABLE orders (id int, total numeric)")
    provider = PostgresStateProvider(prefix="wc", dsn=postgres_dsn, table="orders")
    with pytest.raises(StateError) as raised:
        provider.make_state("count-0", LABEL)
    assert str(raised.value) == (
        f"state provider 'postgres': table 'orders' of {postgres_dsn} has columns id, total; "
        "the provider needs namespace, key, value (choose another 'table')"
    )


def test_postgres_reconnects_after_the_server_drops_the_connection(
    postgres_dsn: str, states: list[BufferedKeyValueState]
) -> None:
    state = PostgresStateProvider(prefix="wc", dsn=postgres_dsn).make_state("count-0", LABEL)
    states.append(state)
    checkpoint(state)
    backend_pid = state.store._connection.info.backend_pid  # type: ignore[attr-defined]
    assert rows(postgres_dsn, f"SELECT pg_terminate_backend({backend_pid})") == [(True,)]
    with pytest.raises(StateConnectionError) as raised:
        state.commit(2)
    assert str(raised.value).startswith(
        f"state provider 'postgres' cannot reach {postgres_dsn} (namespace 'wc:count-0'): "
    )
    assert state.committed_txid() == 1  # connected again; the commit did not happen
    state.commit(2)
    assert (sorted(state), state.committed_txid()) == ([("a", 10)], 2)


def test_postgres_that_cannot_be_reached_fails_naming_it() -> None:
    port = free_port()
    dsn = f"postgresql://squall:secret@127.0.0.1:{port}/app"
    provider = PostgresStateProvider(prefix="wc", dsn=dsn, connect_timeout=2)
    with pytest.raises(StateConnectionError) as raised:
        provider.make_state("count-0", LABEL)
    message = str(raised.value)
    assert message.startswith(
        f"state provider 'postgres' cannot reach postgresql://squall:***@127.0.0.1:{port}/app "
        "(namespace 'wc:count-0'): "
    ), message
    assert "secret" not in message
