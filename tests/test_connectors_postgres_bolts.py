"""PostgresInsertBolt and PostgresLookupBolt against a real PostgreSQL server, on
LocalCluster and SparkCluster with the same assertions where the engines agree: exact
table contents, acks only once rows are committed, a rejected write failing exactly its
batch's tuples, upserts keeping one row per key under replays, exact lookup results,
a server that goes away and comes back, and wrong options refused at submit."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from squall import Bolt, InvalidTopologyError, Spout, TopologyBuilder
from squall.connectors.postgres import PostgresInsertBolt, PostgresLookupBolt
from squall.model.topology import StormTopology
from squall.testing import CapturingBolt, SharedRecord
from tests.conftest import ENGINE_SETTINGS, Engine, EngineSettings, Run, on_engines
from tests.servers import PostgresServer

PASSWORD = "s3cret"


@pytest.fixture
def engine_settings() -> dict[str, EngineSettings]:
    """20 s for a result locally, 90 s on Spark (an outage is ridden out by replays)."""
    return {
        "local": ENGINE_SETTINGS["local"].tuned(timeout=20.0),
        "spark": ENGINE_SETTINGS["spark"].tuned(timeout=90.0),
    }


def execute(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        for statement in statements:
            connection.execute(statement)  # type: ignore[arg-type]


def table(dsn: str, query: str = "SELECT id, name, qty, attempt FROM items ORDER BY id") -> Any:
    with psycopg.connect(dsn) as connection:
        return [list(row) for row in connection.execute(query)]  # type: ignore[arg-type]


ITEMS = "CREATE TABLE items (id INT PRIMARY KEY, name TEXT, qty INT CHECK (qty >= 0), attempt INT)"


def rows(ids: range | list[int]) -> list[list[Any]]:
    """``[id, name, qty]`` of each id."""
    return [[n, f"item-{n}", n * 10] for n in ids]


class RowSpout(Spout):
    """Emits ``[id, name, qty, attempt]`` rows, msg id ``id``: each chunk in one
    ``next_tuple`` call (so one Spark micro-batch), the next one only once the test has
    released it when ``gated``. With ``replay`` a failed row is emitted again with
    ``attempt`` one higher. Records ``acked`` as ``(id, committed)``, where ``committed``
    says whether the row was in ``check``'s table (``(dsn, table)``) when the ack came."""

    outputs = ["id", "name", "qty", "attempt"]

    def __init__(
        self,
        chunks: list[list[list[Any]]],
        replay: bool = False,
        gated: bool = False,
        check: tuple[str, str] | None = None,
    ) -> None:
        self.chunks = chunks
        self.replay = replay
        self.gated = gated
        self.check = check
        self.record = SharedRecord()

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.next_chunk = 0
        self.retry: list[list[Any]] = []
        self.rows = {row[0]: row for chunk in self.chunks for row in chunk}
        self.attempts: dict[int, int] = {}

    def next_tuple(self) -> None:
        emit: list[list[Any]] = []
        if self.retry:
            emit, self.retry = self.retry, []
        elif self.next_chunk < len(self.chunks) and (
            not self.gated or self.next_chunk < len(self.record.get("released"))
        ):
            emit = [[*row, 0] for row in self.chunks[self.next_chunk]]
            self.next_chunk += 1
        for values in emit:
            self.collector.emit(values, msg_id=values[0])

    def ack(self, msg_id: Any) -> None:
        committed = None
        if self.check is not None:
            dsn, name = self.check
            with psycopg.connect(dsn) as connection:
                found = connection.execute(
                    f"SELECT count(*) FROM {name} WHERE id = %s",  # type: ignore[arg-type]
                    (msg_id,),
                ).fetchone()
            committed = found is not None and found[0] == 1
        self.record.append("acked", (msg_id, committed))

    def fail(self, msg_id: Any) -> None:
        self.record.append("failed", msg_id)
        if self.replay:
            self.attempts[msg_id] = self.attempts.get(msg_id, 0) + 1
            self.retry.append([*self.rows[msg_id], self.attempts[msg_id]])

    def acked(self) -> list[Any]:
        return sorted(msg_id for msg_id, _ in self.record.get("acked"))

    def failed(self) -> list[Any]:
        return sorted(self.record.get("failed"))


def release(spout: RowSpout) -> None:
    spout.record.append("released", True)


class FailFirstAttempt(Bolt):
    """Fails every tuple whose ``attempt`` is 0, acks the others."""

    def execute(self, tup: Any) -> None:
        if tup["attempt"] == 0:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def sink(dsn: str, **options: Any) -> PostgresInsertBolt:
    return PostgresInsertBolt(
        dsn, "items", ["id", "name", "qty", "attempt"], **{"max_delay_secs": None, **options}
    )


def topology_of(spout: Spout, *bolts: tuple[str, Any]) -> StormTopology:
    """``spout`` as ``rows``, each bolt subscribed to it."""
    builder = TopologyBuilder()
    builder.set_spout("rows", spout)
    for name, bolt in bolts:
        builder.set_bolt(name, bolt).shuffle_grouping("rows")
    return builder.create_topology()


def errors_of(run: Run) -> list[str]:
    return [error.error for errors in run.errors().values() for error in errors]


# --- PostgresInsertBolt --------------------------------------------------------------------


def test_rows_are_written_in_batches_and_acked_only_once_committed(
    engine: Engine, postgres_dsn: str
) -> None:
    """Seven rows, batches of three: locally the first six are written and acked in two
    batches, the seventh waits in the buffer (no ticks) until clean-up writes it; on
    Spark the end of the micro-batch writes it too. Every ack comes after its row is
    committed."""
    execute(postgres_dsn, ITEMS)
    spout = RowSpout([rows(range(7))], check=(postgres_dsn, "items"))
    topology = topology_of(spout, ("sink", sink(postgres_dsn, batch=3)))
    with engine.running(topology, name="insert") as run:
        if engine.is_spark:
            run.wait_until(lambda: len(spout.acked()) == 7, engine.timeout)
            run.wait_idle()
        else:
            run.wait_until(
                lambda: run.info().components["sink"].executed == 7 and len(spout.acked()) == 6,
                engine.timeout,
            )
            assert table(postgres_dsn) == [[*row, 0] for row in rows(range(6))]
            assert run.info().components["sink"].acked == 6
        acks = spout.record.get("acked")
        assert errors_of(run) == []
    assert sorted(acks) == [(n, True) for n in range(engine.pick(6, 7))]  # once each, committed
    assert spout.failed() == []
    assert table(postgres_dsn) == [[*row, 0] for row in rows(range(7))]


def test_a_rejected_write_fails_exactly_its_batch(engine: Engine, postgres_dsn: str) -> None:
    """Row 4 breaks a CHECK constraint: the batch [3, 4, 5] is rolled back and its
    three tuples failed, the other batches written and acked."""
    execute(postgres_dsn, ITEMS)
    data = rows(range(9))
    data[4][2] = -1
    spout = RowSpout([data])
    topology = topology_of(spout, ("sink", sink(postgres_dsn, batch=3)))
    with engine.running(topology, name="rejected") as run:
        run.wait_until(lambda: len(spout.acked()) + len(spout.failed()) == 9, engine.timeout)
        run.wait_idle()
        errors = errors_of(run)
    assert spout.failed() == [3, 4, 5]
    assert spout.acked() == [0, 1, 2, 6, 7, 8]
    assert table(postgres_dsn) == [[*row, 0] for row in rows([0, 1, 2, 6, 7, 8])]
    assert len(errors) == 1
    assert re.search(
        r"ConnectorError: PostgresInsertBolt 'sink': writing 3 row\(s\) to items on "
        r"postgresql://squall@127\.0\.0\.1:\d+/test_\w+ failed: new row for relation "
        r'"items" violates check constraint "items_qty_check" .*; the batch\'s tuples are failed',
        errors[0],
    ), errors[0]


@pytest.mark.parametrize(
    ("engine", "on_conflict"),
    on_engines(local=[("update",), ("nothing",)], spark=[("update",)]),
    indirect=["engine"],
)
def test_upserts_keep_one_row_per_key_under_replays(
    engine: Engine, postgres_dsn: str, on_conflict: str
) -> None:
    """Every tuple tree fails once (another bolt fails attempt 0), so the spout replays
    every row and the sink writes each twice: the table holds each row once, with the
    replay's attempt (``update``) or the first one's (``nothing``)."""
    execute(postgres_dsn, ITEMS)
    spout = RowSpout([rows(range(6))], replay=True)
    insert = sink(postgres_dsn, batch=2, on_conflict=on_conflict, conflict_columns=["id"])
    topology = topology_of(spout, ("sink", insert), ("flaky", FailFirstAttempt()))
    with engine.running(topology, name="upserts") as run:
        run.wait_until(lambda: len(spout.acked()) == 6, engine.timeout)
        run.wait_idle()
        sink_stats = run.info().components["sink"]
        assert errors_of(run) == []
    assert spout.failed() == list(range(6))
    assert spout.acked() == list(range(6))
    assert (sink_stats.executed, sink_stats.acked) == (12, 12)
    attempt = 1 if on_conflict == "update" else 0
    assert table(postgres_dsn) == [[*row, attempt] for row in rows(range(6))]


def test_fields_map_to_columns_and_dicts_are_stored_as_jsonb(
    engine: Engine, postgres_dsn: str
) -> None:
    execute(postgres_dsn, "CREATE TABLE labels (item INT, label TEXT, extra JSONB)")

    class Labels(Spout):
        outputs = ["id", "name", "attrs"]

        def next_tuple(self) -> None:
            if not getattr(self, "done", False):
                self.done = True
                self.collector.emit([1, "one", {"colour": "red"}], msg_id=1)
                self.collector.emit([2, "two", {"sizes": [1, 2]}], msg_id=2)

    bolt = PostgresInsertBolt(
        postgres_dsn,
        "labels",
        {"id": "item", "name": "label", "attrs": "extra"},
        batch=10,
        max_delay_secs=0.05,
    )
    topology = topology_of(Labels(), ("sink", bolt))
    query = "SELECT item, label, extra FROM labels ORDER BY item"
    expected = [[1, "one", {"colour": "red"}], [2, "two", {"sizes": [1, 2]}]]
    with engine.running(topology, name="mapped") as run:
        run.wait_until(lambda: table(postgres_dsn, query) == expected, engine.timeout)
        assert errors_of(run) == []


# --- the server goes away ------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the test's own, to stop and start again."""
    own = PostgresServer()
    try:
        own.start()
        yield own
    finally:
        own.close()


def test_rows_written_while_the_server_is_away_are_replayed_once_it_is_back(
    engine: Engine, server: PostgresServer
) -> None:
    """The second chunk's batch cannot be written: its tuples fail, an error names the
    bolt and the server (password hidden), the spout replays them, and once the server
    is back every row is in the table exactly once."""
    dsn = server.create_database("app").replace("squall@", f"squall:{PASSWORD}@")
    execute(dsn, ITEMS)
    spout = RowSpout([rows(range(3)), rows(range(3, 6))], replay=True, gated=True)
    insert = sink(dsn, batch=3, on_conflict="update", conflict_columns=["id"], connect_timeout=2)
    redacted = f"postgresql://squall:***@127.0.0.1:{server.port}/app"
    named = re.compile(
        rf"ConnectorUnavailableError: PostgresInsertBolt 'sink' cannot reach "
        rf"{re.escape(redacted)}: .*\(attempt \d+; retrying in [\d.]+ s\)"
    )
    with engine.running(topology_of(spout, ("sink", insert)), name="outage") as run:
        release(spout)
        run.wait_until(lambda: spout.acked() == [0, 1, 2], engine.timeout)
        server.stop()
        release(spout)
        run.wait_until(lambda: any(map(named.search, errors_of(run))), engine.timeout)
        server.start()
        run.wait_until(lambda: spout.acked() == list(range(6)), engine.timeout)
        errors = errors_of(run)
    assert table(dsn, "SELECT id, name, qty FROM items ORDER BY id") == rows(range(6))
    assert set(spout.failed()) == {3, 4, 5}
    assert errors and all(named.search(error) for error in errors), errors
    assert all(PASSWORD not in error for error in errors)


def test_init_sql_creates_the_table_once_the_server_is_up(
    engine: Engine, server: PostgresServer
) -> None:
    """The server is down when the topology starts: the sink reports it and its tuples
    fail and are replayed; once the server is up, the first connection runs
    ``init_sql`` (creating the table) and every row is written exactly once."""
    dsn = server.create_database("fresh")
    server.stop()
    spout = RowSpout([rows(range(4))], replay=True)
    insert = sink(
        dsn,
        batch=2,
        on_conflict="update",
        conflict_columns=["id"],
        connect_timeout=2,
        init_sql=[
            ITEMS.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"),
            "CREATE INDEX IF NOT EXISTS items_name ON items (name)",
        ],
    )
    with engine.running(topology_of(spout, ("sink", insert)), name="init") as run:
        run.wait_until(lambda: spout.failed() != [], engine.timeout)
        server.start()
        run.wait_until(lambda: spout.acked() == list(range(4)), engine.timeout)
    assert table(dsn, "SELECT id, name, qty FROM items ORDER BY id") == rows(range(4))
    indexes = "SELECT indexname FROM pg_indexes WHERE tablename = 'items' ORDER BY 1"
    assert table(dsn, indexes) == [["items_name"], ["items_pkey"]]


@pytest.mark.parametrize("engine", ["local"], indirect=True)
def test_a_failing_init_sql_is_reported_and_run_again(engine: Engine, postgres_dsn: str) -> None:
    """``init_sql`` that fails (here: the table it alters does not exist yet) fails the
    batch and is reported; the next write runs it again on a new connection."""
    spout = RowSpout([rows(range(2)), rows(range(2, 4))], replay=True, gated=True)
    alter = "ALTER TABLE items ADD COLUMN IF NOT EXISTS note TEXT"
    insert = sink(postgres_dsn, batch=2, init_sql=alter)
    with engine.running(topology_of(spout, ("sink", insert)), name="init-fails") as run:
        release(spout)
        run.wait_until(lambda: len(spout.failed()) >= 2, engine.timeout)
        errors = errors_of(run)
        execute(postgres_dsn, ITEMS)
        release(spout)
        run.wait_until(lambda: spout.acked() == list(range(4)), engine.timeout)
    assert 'relation "items" does not exist' in errors[0], errors
    query = "SELECT id, name, qty, note FROM items ORDER BY id"
    assert table(postgres_dsn, query) == [[*row, None] for row in rows(range(4))]


# --- PostgresLookupBolt --------------------------------------------------------------------


def test_lookups_emit_a_tuple_per_row_and_fail_the_tuples_whose_query_fails(
    engine: Engine, postgres_dsn: str
) -> None:
    execute(
        postgres_dsn,
        "CREATE TABLE products (id INT PRIMARY KEY, name TEXT, price INT)",
        "INSERT INTO products VALUES (1, 'widget', 4), (2, 'broken', 0), (3, 'gadget', 50)",
        "CREATE TABLE tags (product_id INT, tag TEXT)",
        "INSERT INTO tags VALUES (1, 'b'), (1, 'a'), (2, 'c')",
    )

    class Ids(Spout):
        outputs = ["id", "note"]

        def __init__(self) -> None:
            self.record = SharedRecord()

        def next_tuple(self) -> None:
            if not getattr(self, "done", False):
                self.done = True
                for product in (1, 2, 99, 3):
                    self.collector.emit([product, "n"], msg_id=product)

        def ack(self, msg_id: Any) -> None:
            self.record.append("acked", msg_id)

        def fail(self, msg_id: Any) -> None:
            self.record.append("failed", msg_id)

    ids = Ids()
    prices = PostgresLookupBolt(
        postgres_dsn,
        "SELECT name, 100 / price FROM products WHERE id = %(id)s",
        ["name", "per_unit"],
        keep=["id"],
    )
    tags = PostgresLookupBolt(
        postgres_dsn,
        "SELECT tag FROM tags WHERE product_id = %s ORDER BY tag",
        ["tag"],
        parameters=["id"],
        keep=["id"],
        emit_empty=True,
    )
    priced, tagged = CapturingBolt(), CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("ids", ids)
    builder.set_bolt("prices", prices).shuffle_grouping("ids")
    builder.set_bolt("tags", tags).shuffle_grouping("ids")
    builder.set_bolt("priced", priced).shuffle_grouping("prices")
    builder.set_bolt("tagged", tagged).shuffle_grouping("tags")
    with engine.running(builder.create_topology(), name="lookups") as run:
        outcomes = lambda: len(ids.record.get("acked")) + len(ids.record.get("failed"))  # noqa: E731
        run.wait_until(lambda: outcomes() == 4, engine.timeout)
        run.wait_idle()
        errors = run.errors()
        info = run.info()
    assert sorted(priced.values()) == [[1, "widget", 25], [3, "gadget", 2]]
    assert sorted(tagged.values(), key=str) == [[1, "a"], [1, "b"], [2, "c"], [3, None], [99, None]]
    assert sorted(ids.record.get("acked")) == [1, 3, 99]  # 99: no product, nothing emitted
    assert ids.record.get("failed") == [2]  # division by zero
    assert (info.components["prices"].acked, info.components["prices"].failed) == (3, 1)
    assert list(errors) == ["prices"] and len(errors["prices"]) == 1
    assert re.search(
        r"ConnectorError: PostgresLookupBolt 'prices': the query failed on "
        r"postgresql://squall@127\.0\.0\.1:\d+/test_\w+: division by zero",
        errors["prices"][0].error,
    )


# --- options -----------------------------------------------------------------------------

DSN = "postgresql://squall@127.0.0.1:1/app"


@pytest.mark.parametrize(
    ("bolt", "message"),
    [
        (PostgresInsertBolt(DSN, "bad name", ["a"]), "table must be a SQL"),
        (PostgresInsertBolt(DSN, "t", ["a"], batch=0), "batch must be an int > 0, got 0"),
        (
            PostgresInsertBolt(DSN, "t", ["a"], on_conflict="update"),
            'on_conflict="update" needs conflict_columns',
        ),
        (
            PostgresInsertBolt(DSN, "t", ["a"], on_conflict="merge", conflict_columns=["a"]),
            "on_conflict must be one of 'nothing', 'update', got 'merge'",
        ),
        (
            PostgresInsertBolt(DSN, "t", ["a", "b"], on_conflict="update", conflict_columns=["c"]),
            r"conflict_columns must be some of the columns written \(\['a', 'b'\]\)",
        ),
        (PostgresInsertBolt(DSN, "t", ["a"], conflict_columns=["a"]), "without on_conflict"),
        (PostgresInsertBolt(DSN, "t", []), "columns must name at least one field"),
        (PostgresInsertBolt(DSN, "t", {"a": "x y"}), "a column must be a SQL name"),
        (PostgresInsertBolt(DSN, "t", ["a"], max_delay_secs=0), "max_delay_secs must be"),
        (
            PostgresInsertBolt(DSN, "t", ["a"], init_sql=["CREATE TABLE t (a INT)", ""]),
            "a statement in init_sql must be a non-empty string, got ''",
        ),
        (
            PostgresInsertBolt(DSN, "t", ["a"], init_sql=b"CREATE TABLE t (a INT)"),  # type: ignore[arg-type]
            "init_sql must be a SQL statement or a list of them",
        ),
        (
            PostgresInsertBolt("postgresql://squall:pw@h/db x", "t", ["a"]),
            r"dsn 'postgresql://squall:\*\*\*@h/db x' is not a PostgreSQL connection string",
        ),
        (PostgresLookupBolt(DSN, "SELECT %s", ["a"]), "give parameters"),
        (
            PostgresLookupBolt(DSN, "SELECT %s, %s", ["a"], parameters=["x"]),
            r"2 positional placeholder\(s\) \(%s\) but parameters names 1 field",
        ),
        (
            PostgresLookupBolt(DSN, "SELECT %(x)s", ["a"], parameters=["x"]),
            "with parameters, use %s only",
        ),
        (PostgresLookupBolt(DSN, "SELECT 1", []), "outputs must name at least one"),
    ],
)
def test_wrong_options_are_refused_at_submit_naming_the_component(
    cluster: Any, bolt: Any, message: str
) -> None:
    builder = TopologyBuilder()
    builder.set_spout("rows", RowSpout([]))
    builder.set_bolt("writer", bolt).shuffle_grouping("rows")
    with pytest.raises(InvalidTopologyError, match=message) as raised:
        cluster.submit_topology("options", {}, builder.create_topology())
    assert str(raised.value).startswith(f"component 'writer' ({type(bolt).__name__}): ")


def test_spark_refuses_wrong_options_at_submit_too(spark: Any, tmp_path: Any) -> None:
    from squall.spark import SparkCluster

    builder = TopologyBuilder()
    builder.set_spout("rows", RowSpout([]))
    builder.set_bolt("writer", PostgresInsertBolt(DSN, "t", ["a"], batch=0)).shuffle_grouping(
        "rows"
    )
    with (
        SparkCluster(spark=spark, checkpoint_dir=str(tmp_path)) as cluster,
        pytest.raises(
            InvalidTopologyError,
            match=r"component 'writer' \(PostgresInsertBolt\): batch must be an int > 0",
        ),
    ):
        cluster.submit_topology("options", {}, builder.create_topology())


class Context:
    component_id = "writer"


class Collector:
    """Stands in for a bolt's collector (pickled by reference, as an engine's is)."""

    def report_error(self, error: Any) -> None:
        raise AssertionError(f"unexpected error {error}")


def test_bolts_pickle_without_their_connection_and_hide_the_password(postgres_dsn: str) -> None:
    import pickle

    insert = PostgresInsertBolt(postgres_dsn.replace("squall@", "squall:pw@"), "t", ["a"])
    assert "pw" not in repr(insert) and "squall:***@" in repr(insert)
    insert.prepare({}, Context(), Collector())  # type: ignore[arg-type]
    copy = pickle.loads(pickle.dumps(insert))
    assert copy._connection._connection is None and copy._buffer == []
    assert not insert._connection._connection.closed  # the task's own stays open
    insert.cleanup()
    lookup = PostgresLookupBolt(postgres_dsn, "SELECT 1", ["one"])
    lookup.prepare({}, Context(), Collector())  # type: ignore[arg-type]
    assert pickle.loads(pickle.dumps(lookup))._connection._connection is None
    lookup.cleanup()
