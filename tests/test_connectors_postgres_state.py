"""PostgresMapState against a real PostgreSQL server (the ``postgres_server`` fixture;
a database per test): the shared state scenarios of every state type, the exact table
layout, one round trip per read and per write, the factory's checks, and the errors
for a server that cannot be reached or goes away."""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import pq

from squall.connectors.postgres import PostgresMapState, redact_dsn
from squall.trident.state import (
    CachedMap,
    OpaqueValue,
    StateConnectionError,
    StateError,
    StateLocality,
    StateType,
    TransactionalValue,
)
from tests.servers import PostgresServer, free_port
from tests.test_trident_state import (
    ALL_TYPES,
    apply_batch,
    check_json_round_trip,
    check_not_json,
    check_replay,
    check_sequence,
    make_state,
    values_of,
)

ROOT = Path(__file__).resolve().parent.parent


def rows(dsn: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as connection:
        return connection.execute(query).fetchall()


class Context:
    """What a state factory reads of a task's context."""

    component_id = "b1"


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("cache_size", [0, 1000])
def test_sequence_of_commits_gives_exact_values(
    postgres_dsn: str, state_type: StateType, cache_size: int
) -> None:
    check_sequence(PostgresMapState.factory(postgres_dsn, "state", state_type, cache_size))


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("cache_size", [0, 1000])
def test_replay_semantics(postgres_dsn: str, state_type: StateType, cache_size: int) -> None:
    """Transactional: no double count; opaque: recomputed from prev with the replay's
    different updates; non-transactional: over-counts."""
    check_replay(
        PostgresMapState.factory(postgres_dsn, "state", state_type, cache_size), state_type
    )


@pytest.mark.parametrize("state_type", ALL_TYPES, ids=lambda t: t.name)
def test_json_round_trip_and_atomic_writes(postgres_dsn: str, state_type: StateType) -> None:
    check_json_round_trip(PostgresMapState.factory(postgres_dsn, "json", state_type))
    check_not_json(PostgresMapState.factory(postgres_dsn, "not_json", state_type))


def test_nan_is_refused_before_anything_is_written(postgres_dsn: str) -> None:
    factory = PostgresMapState.factory(postgres_dsn, "nan", StateType.OPAQUE, cache_size=0)
    state = make_state(factory)
    state.begin_commit(1)
    with pytest.raises(StateError, match="not JSON-serialisable"):
        state.multi_put([("a",), ("b",)], [1, float("nan")])
    assert PostgresMapState.contents(factory) == {}


@pytest.mark.parametrize(
    ("state_type", "query", "expected"),
    [
        (
            StateType.OPAQUE,
            "SELECT key, key_values, txid, curr, prev FROM counts ORDER BY key",
            [
                ('["cow"]', ["cow"], 3, 7, 5),
                ('["dog"]', ["dog"], 2, 1, None),
                ("[]", [], 3, 10, None),
            ],
        ),
        (
            StateType.TRANSACTIONAL,
            "SELECT key, key_values, txid, value FROM counts ORDER BY key",
            [('["cow"]', ["cow"], 3, 7), ('["dog"]', ["dog"], 2, 1), ("[]", [], 3, 10)],
        ),
        (
            StateType.NON_TRANSACTIONAL,
            "SELECT key, key_values, value FROM counts ORDER BY key",
            [('["cow"]', ["cow"], 7), ('["dog"]', ["dog"], 1), ("[]", [], 10)],
        ),
    ],
    ids=["OPAQUE", "TRANSACTIONAL", "NON_TRANSACTIONAL"],
)
def test_table_layout_is_exact_and_readable_in_sql(
    postgres_dsn: str, state_type: StateType, query: str, expected: list[tuple[Any, ...]]
) -> None:
    factory = PostgresMapState.factory(postgres_dsn, "counts", state_type)
    state = make_state(factory)
    apply_batch(state, 1, {("cow",): 2})
    apply_batch(state, 2, {("cow",): 3, ("dog",): 1})
    apply_batch(state, 3, {("cow",): 2, (): 10})
    assert rows(postgres_dsn, query) == expected
    columns = rows(
        postgres_dsn,
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_name = 'counts' ORDER BY ordinal_position",
    )
    value_columns = {
        StateType.OPAQUE: [
            ("txid", "bigint", "NO"),
            ("curr", "jsonb", "YES"),
            ("prev", "jsonb", "YES"),
        ],
        StateType.TRANSACTIONAL: [("txid", "bigint", "NO"), ("value", "jsonb", "YES")],
        StateType.NON_TRANSACTIONAL: [("value", "jsonb", "YES")],
    }[state_type]
    assert columns == [("key", "text", "NO"), ("key_values", "jsonb", "YES"), *value_columns]
    # SQL reads the group-by values from key_values.
    assert rows(postgres_dsn, "SELECT key_values->>0 FROM counts WHERE key <> '[]' ORDER BY 1") == [
        ("cow",),
        ("dog",),
    ]
    raw = PostgresMapState.contents(factory, raw=True)
    assert PostgresMapState.contents(factory) == {("cow",): 7, ("dog",): 1, (): 10}
    if state_type is StateType.OPAQUE:
        assert raw[("cow",)] == OpaqueValue(3, 7, 5)
    elif state_type is StateType.TRANSACTIONAL:
        assert raw[("cow",)] == TransactionalValue(3, 7)


def test_none_values_are_sql_nulls(postgres_dsn: str) -> None:
    factory = PostgresMapState.factory(postgres_dsn, "nulls", StateType.NON_TRANSACTIONAL)
    state = make_state(factory)
    state.begin_commit(1)
    state.multi_put([("a",), ("b",)], [None, {"x": None}])
    state.commit(1)
    assert rows(postgres_dsn, "SELECT key, value IS NULL, value FROM nulls ORDER BY key") == [
        ('["a"]', True, None),
        ('["b"]', False, {"x": None}),
    ]


@contextmanager
def statements(connection: psycopg.Connection[Any]) -> Iterator[list[str]]:
    """The messages ``connection`` sends to the server during the block, by libpq's
    trace: each ``Sync`` (extended protocol) or ``Query`` (simple) is one statement
    waited for, a round trip."""
    handle, path = tempfile.mkstemp()
    sent: list[str] = []
    connection.pgconn.trace(handle)
    connection.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
    try:
        yield sent
    finally:
        connection.pgconn.untrace()
        os.close(handle)
        with open(path) as trace:
            lines = [line.split("\t") for line in trace.read().splitlines()]
        os.remove(path)
        sent.extend(line[2].strip() for line in lines if line[0] == "F")


def round_trips(sent: list[str]) -> int:
    return sum(message in ("Sync", "Query") for message in sent)


def test_a_batch_is_one_round_trip_to_read_and_one_to_write(postgres_dsn: str) -> None:
    factory = PostgresMapState.factory(postgres_dsn, "trips", StateType.OPAQUE, cache_size=0)
    state = make_state(factory)
    backing = state.backing  # type: ignore[attr-defined]
    apply_batch(state, 1, {("w", n): 1 for n in range(500)})  # connects, creates the table
    connection = backing._connection
    with statements(connection) as sent:
        assert backing.multi_get([("w", n) for n in range(1000)])[:2] == [
            OpaqueValue(1, 1, None),
            OpaqueValue(1, 1, None),
        ]
    assert round_trips(sent) == 1
    with statements(connection) as sent:
        apply_batch(state, 2, {("w", n): 2 for n in range(1000)})
    assert round_trips(sent) == 2  # the read of the batch's keys, then the write
    assert sent.count("Parse") == 2 and sent.count("Execute") == 2
    assert values_of(state, ("w", 0), ("w", 999)) == [3, 2]


def test_the_cache_saves_reads(postgres_dsn: str) -> None:
    factory = PostgresMapState.factory(postgres_dsn, "cached", StateType.OPAQUE, cache_size=10)
    state = make_state(factory)
    assert isinstance(state.backing, CachedMap)  # type: ignore[attr-defined]
    apply_batch(state, 1, {("cow",): 1})
    connection = state.backing.backing._connection  # type: ignore[attr-defined]
    with statements(connection) as sent:
        assert apply_batch(state, 2, {("cow",): 1}) == [2]
    assert round_trips(sent) == 1  # the write only


def test_tables_are_separate_and_a_table_of_another_state_type_is_refused(
    postgres_dsn: str,
) -> None:
    opaque = PostgresMapState.factory(postgres_dsn, "words", StateType.OPAQUE)
    apply_batch(make_state(opaque), 1, {("cow",): 1})
    other = PostgresMapState.factory(postgres_dsn, "other_words", StateType.OPAQUE)
    assert values_of(make_state(other), ("cow",)) == [None]
    wrong = PostgresMapState.factory(postgres_dsn, "words", StateType.TRANSACTIONAL)
    with pytest.raises(
        StateError,
        match=r"PostgresMapState table 'words' has the columns of an opaque state "
        r"\(curr, key, key_values, prev, txid\); a transactional state needs key, "
        r"key_values, txid, value",
    ):
        make_state(wrong).multi_get([("cow",)])


def test_a_table_in_a_schema(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        connection.execute("CREATE SCHEMA analytics")
    factory = PostgresMapState.factory(postgres_dsn, "analytics.counts", StateType.OPAQUE)
    apply_batch(make_state(factory), 1, {("cow",): 4})
    assert rows(postgres_dsn, "SELECT key, curr FROM analytics.counts") == [('["cow"]', 4)]


def test_factory_is_picklable_shared_and_hides_the_password() -> None:
    dsn = "postgresql://squall:s3cret@db.example:5432/app"
    factory = PostgresMapState.factory(dsn, "counts", cache_size=0)
    assert pickle.loads(pickle.dumps(factory)) == factory
    assert factory.locality is StateLocality.SHARED
    assert "s3cret" not in repr(factory)
    assert "postgresql://squall:***@db.example:5432/app" in repr(factory)
    assert redact_dsn("host=db password='a b' dbname=app") == "host=db password=*** dbname=app"
    assert redact_dsn("host=db password=s3cret") == "host=db password=***"
    assert redact_dsn("postgresql://db/app?password=s3cret") == "postgresql://db/app?password=***"


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        (("nonsense", "t"), ValueError, "dsn 'nonsense' is not a PostgreSQL connection string"),
        ((42, "t"), ValueError, "dsn must be a PostgreSQL connection string"),
        (("postgresql://h/db", "bad name"), ValueError, "table must be a SQL"),
        (("postgresql://h/db", "a.b.c"), ValueError, "table must be a SQL"),
        (("postgresql://h/db", "1t"), ValueError, "table must be a SQL"),
        (("postgresql://h/db", "t", "OPAQUE"), TypeError, "state_type must be a StateType"),
        (("postgresql://h/db", "t", StateType.OPAQUE, -1), ValueError, "cache_size must be"),
        (
            ("postgresql://h/db", "t", StateType.OPAQUE, 0, 0),
            ValueError,
            "connect_timeout must be a whole number of seconds >= 1, got 0",
        ),
    ],
)
def test_factory_arguments_are_checked(
    arguments: tuple[Any, ...], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        PostgresMapState.factory(*arguments)


def test_a_factory_connects_nowhere_and_an_unreachable_server_fails_reads_clearly() -> None:
    port = free_port()  # nothing listens there
    dsn = f"postgresql://squall:s3cret@127.0.0.1:{port}/app"
    factory = PostgresMapState.factory(dsn, "counts", connect_timeout=2)
    state = factory.make_state({}, Context(), 1, 3)  # no connection yet: a submit passes
    started = time.monotonic()
    with pytest.raises(StateConnectionError) as raised:
        state.multi_get([("cow",)])
    assert time.monotonic() - started < 3.0
    message = str(raised.value)
    assert message.startswith(
        f"PostgresMapState cannot reach postgresql://squall:***@127.0.0.1:{port}/app "
        "(table 'counts', component 'b1' partition 1 of 3): connection failed: "
    )
    assert "Connection refused" in message and "s3cret" not in message
    assert isinstance(raised.value, ConnectionError)


def test_a_server_that_goes_away_fails_the_call_then_the_state_reconnects() -> None:
    server = PostgresServer()
    try:
        server.start()
        dsn = server.create_database("app").replace("squall@", "squall:s3cret@")
        factory = PostgresMapState.factory(dsn, "counts", StateType.TRANSACTIONAL, cache_size=0)
        state = factory.make_state({}, Context(), 0, 1)
        apply_batch(state, 1, {("cow",): 1})
        server.stop()
        redacted = f"postgresql://squall:***@127.0.0.1:{server.port}/app"
        with pytest.raises(
            StateConnectionError, match=re.escape(f"PostgresMapState cannot reach {redacted}")
        ):
            state.multi_get([("cow",)])
        state.begin_commit(2)
        with pytest.raises(StateConnectionError, match="connection failed"):
            state.multi_update([("cow",)], [lambda old: old + 1])
        server.start()
        assert apply_batch(state, 2, {("cow",): 1}) == [2]  # the replay, on a new connection
        assert PostgresMapState.contents(factory) == {("cow",): 2}
    finally:
        server.close()


def test_importing_without_psycopg_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "try:\n"
        "    import squall.connectors.postgres\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == (
        "squall.connectors.postgres needs psycopg 3, the 'postgres' extra: "
        "pip install 'squall[postgres]'"
    )


def test_connect_timeout_and_application_name_come_from_the_options_or_the_dsn(
    postgres_dsn: str,
) -> None:
    assert "connect_timeout=5)" in repr(PostgresMapState.factory(postgres_dsn, "t"))
    in_dsn = f"{postgres_dsn}?connect_timeout=3&application_name=reports"
    assert "connect_timeout=3)" in repr(PostgresMapState.factory(in_dsn, "t"))
    assert "connect_timeout=2)" in repr(PostgresMapState.factory(in_dsn, "t", connect_timeout=2))
    for dsn, options, name in [
        (postgres_dsn, {}, "squall"),
        (in_dsn, {}, "reports"),
        (in_dsn, {"application_name": "counts"}, "counts"),
    ]:
        factory = PostgresMapState.factory(dsn, "names", cache_size=0, **options)
        backing = factory.make_backing_map({}, None, 0, 1)
        backing.multi_get([("cow",)])
        assert backing._connection is not None
        assert backing._connection.execute("SHOW application_name").fetchone() == (name,)
        backing.close()
