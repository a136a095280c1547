"""``PostgresLookupBolt``: enriches each tuple with the rows of a query.

Guarantee: at-least-once, as the input: every output tuple is anchored to its input,
and the input is acked once its rows are emitted, or failed (so a reliable spout
replays it) when the query fails. The query reads; replays run it again.

What it emits: for each row of the query's result, one tuple of the ``keep`` fields of
the input followed by the row's columns; its fields are ``keep`` then ``outputs``. A
query with no rows emits nothing for that tuple (or, with ``emit_empty``, one tuple
whose ``outputs`` are ``None``, like a left join).

Parameters: by default the query's named placeholders, ``%(field)s``, take the tuple's
fields of those names. With ``parameters``, the query's positional ``%s`` placeholders
take those fields, in order. Values are sent as parameters, never spliced into the
SQL.

Where it runs: the bolt carries only options; each task opens its own connection in
``prepare`` (a local engine worker thread; on Spark an executor's Python worker), in
autocommit mode (each query is its own transaction), and runs one query per tuple
(psycopg prepares a query it runs often).

Failures: a server that cannot be reached fails the tuple and reports an error naming
the bolt and the server (password hidden); the next query waits for the back-off
(from 0.1 s, doubling, at most 5 s). A query the server rejects (an error in the SQL, a
division by zero), a row of another width than ``outputs``, or a tuple lacking a
parameter's field fails that tuple and reports the error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from squall.connectors.errors import ConnectorError
from squall.connectors.options import OptionChecker
from squall.connectors.postgres.connection import (
    db_value,
    dsn_problem,
    one_line,
    redact_dsn,
    timeout_problem,
)
from squall.connectors.postgres.task import TaskConnection
from squall.model.components import Bolt
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.hooks import ValidatesSubmission
from squall.model.tuple import Tuple

if TYPE_CHECKING:
    from squall.runtime.collectors import OutputCollector
    from squall.runtime.context import TopologyContext

#: psycopg's placeholders: ``%%`` (a literal ``%``), ``%(name)s`` and ``%s`` (also the
#: ``b`` and ``t`` formats).
_PLACEHOLDER = re.compile(r"%%|%\((?P<name>[^)]*)\)[sbt]|%[sbt]")


def placeholders(query: str) -> tuple[list[str], int]:
    """The names of ``query``'s named placeholders (each once, in order) and how many
    positional ones it has."""
    names: list[str] = []
    positional = 0
    for match in _PLACEHOLDER.finditer(query):
        if match.group(0) == "%%":
            continue
        name = match.group("name")
        if name is None:
            positional += 1
        elif name not in names:
            names.append(name)
    return names, positional


def _names(checker: OptionChecker, option: str, value: Any) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise checker.fail(f"{option} must be a list of field names, got {value!r}")
    for name in value:
        checker.text(f"a field in {option}", name)
    if len(set(value)) != len(value):
        raise checker.fail(f"{option} names a field twice: {list(value)}")
    return list(value)


class PostgresLookupBolt(Bolt, ValidatesSubmission):
    """Runs ``query`` for each tuple; emits a tuple per result row, anchored; acks the
    input after, fails it on errors. See the module docstring."""

    def __init__(
        self,
        dsn: str,
        query: str,
        outputs: Sequence[str],
        parameters: Sequence[str] | None = None,
        keep: Sequence[str] = (),
        emit_empty: bool = False,
        connect_timeout: int | None = None,
        application_name: str | None = None,
    ) -> None:
        """Keep the options; they are checked when the topology is submitted.

        Args:
            dsn: the database, ``postgresql://user[:password]@host[:port]/dbname`` or
                ``host=... dbname=...``.
            query: the SQL, with ``%(field)s`` placeholders (or ``%s`` with
                ``parameters``); ``%%`` is a literal ``%``.
            outputs: the names of the result's columns, in order: the emitted fields
                after ``keep``.
            parameters: the fields for the positional ``%s`` placeholders, in order.
            keep: input fields copied to the front of every emitted tuple.
            emit_empty: for a query with no rows, emit one tuple whose ``outputs`` are
                ``None`` instead of nothing.
            connect_timeout: seconds to open a connection (default: the DSN's
                ``connect_timeout``, else 5; libpq waits at least 2).
            application_name: the connection's name in ``pg_stat_activity``
                (default: the DSN's, else ``squall``).
        """
        self.dsn = dsn
        self.query = query
        self.output_names = list(outputs)
        self.parameters = None if parameters is None else list(parameters)
        self.keep = list(keep)
        self.emit_empty = emit_empty
        self.connect_timeout = connect_timeout
        self.application_name = application_name
        #: Whether ``prepare`` ran (it opens the connection ``cleanup`` closes).
        self._prepared = False

    def __repr__(self) -> str:
        return f"PostgresLookupBolt(dsn={redact_dsn(str(self.dsn))!r}, query={self.query!r})"

    def check_options(self, checker: OptionChecker) -> None:
        """Check every option; raise the checker's error at the first wrong one."""
        for problem in (dsn_problem(self.dsn), timeout_problem(self.connect_timeout)):
            if problem is not None:
                raise checker.fail(problem)
        query = checker.text("query", self.query)
        outputs = _names(checker, "outputs", self.output_names)
        if not outputs:
            raise checker.fail("outputs must name at least one result column")
        keep = _names(checker, "keep", self.keep)
        if set(keep) & set(outputs):
            raise checker.fail(
                f"keep and outputs share field(s) {sorted(set(keep) & set(outputs))}"
            )
        names, positional = placeholders(query)
        if self.parameters is None:
            if positional:
                raise checker.fail(
                    f"the query has {positional} positional placeholder(s) (%s): give "
                    "parameters (the fields they take, in order), or name them %(field)s"
                )
            return
        parameters = _names(checker, "parameters", self.parameters)
        if names:
            raise checker.fail(
                f"the query has named placeholders {names}: with parameters, use %s only"
            )
        if positional != len(parameters):
            raise checker.fail(
                f"the query has {positional} positional placeholder(s) (%s) but "
                f"parameters names {len(parameters)} field(s)"
            )

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Check the options where the topology is submitted.

        Raises:
            InvalidTopologyError: an option is wrong; the message names the component.
        """
        self.check_options(OptionChecker(component_id, type(self).__name__))

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The default stream: ``keep`` then ``outputs``."""
        declarer.declare([*self.keep, *self.output_names])

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        """Check the options, connect (an unreachable server is reported, not raised:
        the next tuple tries again). Runs once per task, in the task's process.

        Raises:
            InvalidTopologyError: an option is wrong.
        """
        name = type(self).__name__
        self.check_options(OptionChecker(context.component_id, name))
        self.collector = collector
        self._component = context.component_id
        self._named = placeholders(self.query)[0]
        self._connection = TaskConnection(
            self.dsn,
            f"{name} {context.component_id!r}",
            self.connect_timeout,
            self.application_name,
        )
        self._prepared = True
        try:
            self._connection.get()
        except psycopg.Error as error:
            collector.report_error(self._connection.failed(error))

    def _arguments(self, tup: Tuple) -> list[Any] | dict[str, Any]:
        if self.parameters is not None:
            return [db_value(tup[field]) for field in self.parameters]
        return {name: db_value(tup[name]) for name in self._named}

    def _failed(self, tup: Tuple, message: str) -> None:
        self.collector.report_error(
            ConnectorError(f"{type(self).__name__} {self._component!r}: {message}")
        )
        self.collector.fail(tup)

    def execute(self, tup: Tuple) -> None:
        """Run the query with the tuple's values; emit its rows anchored to the tuple,
        then ack it (fail it on an error). Waits out the back-off of an outage first.
        Runs once per input tuple."""
        try:
            arguments = self._arguments(tup)
            kept = [tup[field] for field in self.keep]
        except (KeyError, ValueError, IndexError) as error:
            self._failed(tup, f"the tuple lacks a field the bolt reads: {error}")
            return
        self._connection.wait()
        try:
            connection = self._connection.get()
            rows = connection.execute(self.query, arguments).fetchall()
        except psycopg.Error as error:
            if self._connection.lost(error):
                self.collector.report_error(self._connection.failed(error))
                self.collector.fail(tup)
            else:
                self._connection.succeeded()
                self._failed(tup, f"the query failed on {redact_dsn(self.dsn)}: {one_line(error)}")
            return
        self._connection.succeeded()
        width = len(self.output_names)
        wrong = next((row for row in rows if len(row) != width), None)
        if wrong is not None:
            self._failed(
                tup,
                f"the query returned a row of {len(wrong)} column(s) for the {width} "
                f"outputs {self.output_names}",
            )
            return
        for row in rows:
            self.collector.emit([*kept, *row], anchors=[tup])
        if not rows and self.emit_empty:
            self.collector.emit([*kept, *([None] * width)], anchors=[tup])
        self.collector.ack(tup)

    def cleanup(self) -> None:
        """Close the connection. Runs when the topology is killed; not guaranteed."""
        if self._prepared:
            self._connection.close()
