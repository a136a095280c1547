"""``PostgresInsertBolt``: writes tuples to a PostgreSQL table in batches.

Guarantee: at-least-once. A tuple is acked only once the transaction holding its row
has committed; when the write fails, every tuple of that batch is failed, so a reliable
spout replays them. Replays therefore write rows again: with ``on_conflict="update"``
(or ``"nothing"``) on the table's key columns a replayed row replaces (or leaves) the
one already there, so the table holds each row exactly once.

Where it runs: the bolt carries only options. Each task opens its own connection in
``prepare`` (a local engine worker thread; on Spark an executor's Python worker) and
buffers its tuples. A buffer is written (one transaction: one ``INSERT`` per row,
sent together in a pipeline) when it holds ``batch`` tuples, when its oldest tuple has
waited ``max_delay_secs`` (checked on every tuple and on a tick tuple of that period),
at the end of every Spark micro-batch (trees do not outlive their micro-batch there),
and when the task is cleaned up.

Failures: a server that cannot be reached, at ``prepare`` or later, never stops the
topology: the error, naming the bolt and the server (password hidden), is reported in
the component's errors, the batch's tuples are failed, and the next write waits for the
back-off (from 0.1 s, doubling, at most 5 s). A write the server rejects (a constraint,
a value of the wrong type) fails that batch's tuples and reports the error. A tuple
lacking one of the fields is failed alone.

The bolt does not create its table: create it beforehand (with the primary key or
unique constraint that ``conflict_columns`` names), or give ``init_sql`` statements
(``CREATE TABLE IF NOT EXISTS ...``) that every new connection runs before its first
write, so a table is made even when the server comes up after the topology.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from squall.connectors.errors import ConnectorError
from squall.connectors.options import OptionChecker
from squall.connectors.postgres.connection import (
    column_list,
    db_value,
    dsn_problem,
    name_problem,
    one_line,
    redact_dsn,
    table_identifier,
    timeout_problem,
)
from squall.connectors.postgres.task import TaskConnection
from squall.connectors.sink import BatchingSink
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.hooks import ValidatesSubmission
from squall.model.tuple import Tuple

if TYPE_CHECKING:
    from squall.runtime.collectors import OutputCollector
    from squall.runtime.context import TopologyContext

CONFLICT_ACTIONS = ("nothing", "update")


class PostgresInsertBolt(BatchingSink, ValidatesSubmission):
    """Inserts each tuple as a row of ``table``, batched; acks after the commit.

    See the module docstring for the guarantee and the failure behaviour. Declares no
    output stream. ``metrics()``: ``rows_written`` and ``failed_writes``.
    """

    written_metric = "rows_written"

    def __init__(
        self,
        dsn: str,
        table: str,
        columns: Sequence[str] | Mapping[str, str],
        batch: int = 500,
        on_conflict: str | None = None,
        conflict_columns: Sequence[str] | None = None,
        max_delay_secs: float | None = 1.0,
        connect_timeout: int | None = None,
        application_name: str | None = None,
        init_sql: str | Sequence[str] | None = None,
    ) -> None:
        """Keep the options; they are checked when the topology is submitted.

        Args:
            dsn: the database, ``postgresql://user[:password]@host[:port]/dbname`` or
                ``host=... dbname=...``.
            table: the table, ``name`` or ``schema.name`` (names are quoted, so
                case-sensitive).
            columns: the tuple fields to write, each to the column of the same name
                (a list), or a mapping of field -> column.
            batch: the most tuples written in one transaction.
            on_conflict: ``None`` (a duplicate key fails the batch), ``"nothing"``
                (``ON CONFLICT DO NOTHING``: the row already there stays) or
                ``"update"`` (the row already there takes the new values).
            conflict_columns: the columns of the key that decides a conflict (a primary
                key or unique constraint); required with ``"update"``, optional with
                ``"nothing"`` (any constraint).
            max_delay_secs: the longest a tuple waits in the buffer before a write
                (a tick tuple of this period flushes an idle buffer); ``None``: no
                ticks, the buffer is written when full, at the end of a Spark
                micro-batch and at clean-up.
            connect_timeout: seconds to open a connection (default: the DSN's
                ``connect_timeout``, else 5; libpq waits at least 2).
            application_name: the connection's name in ``pg_stat_activity``
                (default: the DSN's, else ``squall``).
            init_sql: a statement, or statements, run on every new connection before
                it writes (each committed on its own): idempotent set-up such as
                ``CREATE TABLE IF NOT EXISTS``. One that fails is reported like a
                failed write and run again on the next attempt.
        """
        super().__init__()
        self.dsn = dsn
        self.table = table
        self.columns = dict(columns) if isinstance(columns, Mapping) else list(columns)
        self.batch = batch
        self.on_conflict = on_conflict
        self.conflict_columns = None if conflict_columns is None else list(conflict_columns)
        self.max_delay_secs = max_delay_secs
        self.connect_timeout = connect_timeout
        self.application_name = application_name
        self.init_sql = [init_sql] if isinstance(init_sql, str) else init_sql

    def __repr__(self) -> str:
        return f"PostgresInsertBolt(dsn={redact_dsn(str(self.dsn))!r}, table={self.table!r})"

    # --- options ---------------------------------------------------------------------

    def _field_columns(self) -> list[tuple[str, str]]:
        if isinstance(self.columns, dict):
            return list(self.columns.items())
        return [(name, name) for name in self.columns]

    def check_options(self, checker: OptionChecker) -> None:
        """Check every option; raise the checker's error at the first wrong one."""
        for problem in (
            dsn_problem(self.dsn),
            name_problem("table", self.table, qualified=True),
            timeout_problem(self.connect_timeout),
        ):
            if problem is not None:
                raise checker.fail(problem)
        checker.positive_int("batch", self.batch)
        if self.init_sql is not None:
            if isinstance(self.init_sql, (bytes, Mapping)) or not isinstance(
                self.init_sql, Sequence
            ):
                raise checker.fail(
                    f"init_sql must be a SQL statement or a list of them, got {self.init_sql!r}"
                )
            for statement in self.init_sql:
                checker.text("a statement in init_sql", statement)
        if self.max_delay_secs is not None:
            checker.positive_number("max_delay_secs", self.max_delay_secs)
        pairs = self._field_columns() if isinstance(self.columns, (list, dict)) else []
        if not pairs:
            raise checker.fail(f"columns must name at least one field, got {self.columns!r}")
        for field, column in pairs:
            checker.text("a field in columns", field)
            problem = name_problem("a column", column)
            if problem is not None:
                raise checker.fail(problem)
        names = [column for _, column in pairs]
        if len(set(names)) != len(names):
            raise checker.fail(f"columns names a column twice: {names}")
        if self.on_conflict is not None:
            checker.choice("on_conflict", self.on_conflict, CONFLICT_ACTIONS)
        if self.conflict_columns is not None:
            if self.on_conflict is None:
                raise checker.fail("conflict_columns is given without on_conflict")
            if not self.conflict_columns or any(c not in names for c in self.conflict_columns):
                raise checker.fail(
                    f"conflict_columns must be some of the columns written ({names}), "
                    f"got {self.conflict_columns}"
                )
        elif self.on_conflict == "update":
            raise checker.fail(
                'on_conflict="update" needs conflict_columns: the columns of the primary '
                "key or unique constraint that decides which row to update"
            )

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Check the options where the topology is submitted.

        Raises:
            InvalidTopologyError: an option is wrong; the message names the component.
        """
        self.check_options(OptionChecker(component_id, type(self).__name__))

    def statement(self) -> sql.Composed:
        """The ``INSERT`` of one row."""
        columns = [column for _, column in self._field_columns()]
        insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            table_identifier(self.table),
            column_list(columns),
            sql.SQL(", ").join(sql.Placeholder() * len(columns)),
        )
        if self.on_conflict is None:
            return insert
        target: sql.Composable = sql.SQL("")
        if self.conflict_columns:
            target = sql.SQL(" ({})").format(column_list(self.conflict_columns))
        updated = [c for c in columns if c not in (self.conflict_columns or [])]
        if self.on_conflict == "nothing" or not updated:
            return sql.SQL("{} ON CONFLICT{} DO NOTHING").format(insert, target)
        assignments = sql.SQL(", ").join(
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(column)) for column in updated
        )
        return sql.SQL("{} ON CONFLICT{} DO UPDATE SET {}").format(insert, target, assignments)

    # --- the task --------------------------------------------------------------------

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """No output streams."""

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        """Check the options, connect (an unreachable server is reported, not raised:
        the first write tries again). Runs once per task, in the task's process.

        Raises:
            InvalidTopologyError: an option is wrong.
        """
        name = type(self).__name__
        self.check_options(OptionChecker(context.component_id, name))
        self._fields = [field for field, _ in self._field_columns()]
        self._statement = self.statement()
        self.start_buffer(collector, f"{name} {context.component_id!r}")
        self._connection = TaskConnection(
            self.dsn,
            self.label,
            self.connect_timeout,
            self.application_name,
            self.init_sql or (),
        )
        try:
            self._connection.get()
        except psycopg.Error as error:
            collector.report_error(self._connection.failed(error))

    def item(self, tup: Tuple) -> list[Any]:
        """The tuple's row: the values of the written fields, adapted."""
        return [db_value(tup[field]) for field in self._fields]

    def write(self, items: list[list[Any]]) -> Exception | None:
        """Write the rows in one transaction, after the back-off of an outage."""
        self._connection.wait()
        try:
            connection = self._connection.get()
            with connection.transaction(), connection.cursor() as cursor:
                cursor.executemany(self._statement, items)
        except Exception as error:  # whatever broke the write, its tuples are failed
            if isinstance(error, psycopg.Error) and self._connection.lost(error):
                return self._connection.failed(error)
            self._connection.succeeded()
            return ConnectorError(
                f"{self.label}: writing {len(items)} row(s) to {self.table} on "
                f"{redact_dsn(self.dsn)} failed: {one_line(error)}; the batch's tuples are "
                "failed"
            )
        self._connection.succeeded()
        return None

    def cleanup(self) -> None:
        """Write what is buffered, then close the connection (see
        :meth:`~squall.connectors.sink.BatchingSink.flush_at_cleanup`)."""
        if not self._prepared:
            return
        try:
            self.flush_at_cleanup()
        finally:
            self._connection.close()
