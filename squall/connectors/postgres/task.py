"""The connection of one bolt task to PostgreSQL, with its outage back-off.

Runs in the task that owns it (a local engine worker thread, a Spark executor's Python
worker); not thread-safe. It carries no connection when pickled (a Spark snapshot of
the bolt): the restored task opens a new one on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from squall.connectors.errors import ConnectorUnavailableError
from squall.connectors.outage import Outage
from squall.connectors.postgres.connection import (
    close_quietly,
    connect,
    one_line,
    redact_dsn,
    server_lost,
)


class TaskConnection:
    """A task's connection, opened on first use and again after the server went away,
    and the back-off between attempts while it is away.

    Args:
        dsn: the database.
        connector: the connector's name in messages (``PostgresInsertBolt 'sink'``).
        connect_timeout: seconds to open a connection (None: the DSN's, else 5).
        application_name: the connection's name in ``pg_stat_activity``.
        init_sql: statements run, in order, on every new connection before it is used
            (each committed on its own), e.g. ``CREATE TABLE IF NOT EXISTS``.

    Attributes:
        outage: the task's back-off schedule; names the connector and the address.
    """

    def __init__(
        self,
        dsn: str,
        connector: str,
        connect_timeout: int | None,
        application_name: str | None,
        init_sql: Sequence[str] = (),
    ) -> None:
        self.dsn = dsn
        self.connect_timeout = connect_timeout
        self.application_name = application_name
        self.init_sql = tuple(init_sql)
        self.outage = Outage(connector, redact_dsn(dsn))
        self._connection: psycopg.Connection[Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the connection (a restored copy opens its own)."""
        state = dict(vars(self))
        state["_connection"] = None
        return state

    def get(self) -> psycopg.Connection[Any]:
        """The open connection (autocommit), made if there is none; a new one has run
        ``init_sql``.

        Raises:
            psycopg.OperationalError: the server cannot be reached.
            psycopg.Error: a statement of ``init_sql`` failed (the connection is
                closed: the next call connects and runs them again).
        """
        connection = self._connection
        if connection is None or connection.closed:
            connection = connect(self.dsn, self.connect_timeout, self.application_name)
            try:
                for statement in self.init_sql:
                    connection.execute(statement.encode())
            except BaseException:
                close_quietly(connection)
                raise
            self._connection = connection
        return connection

    def lost(self, error: BaseException) -> bool:
        """Whether ``error``, raised while using this connection, means the server
        cannot be used (see :func:`~squall.connectors.postgres.connection.server_lost`)."""
        return server_lost(error, self._connection)

    def failed(self, error: BaseException) -> ConnectorUnavailableError:
        """Record that the server cannot be used: drop the connection, schedule the
        next attempt; the error to report (connector, address, cause, next attempt)."""
        self.close()
        return self.outage.failed(ConnectionError(one_line(error)))

    def succeeded(self) -> None:
        """Record a successful exchange (the back-off starts over)."""
        if self.outage.failures:
            self.outage.recovered()

    def wait(self) -> None:
        """Sleep until the back-off allows the next attempt (no wait without an
        outage)."""
        self.outage.wait()

    def close(self) -> None:
        """Close the connection; the next :meth:`get` opens a new one."""
        connection, self._connection = self._connection, None
        close_quietly(connection)
