"""Which of a session's streaming queries have ended, learned from Spark's events.

``get_topology_info`` reports a topology FAILED or KILLED once a query of it has
ended. Asking the query (``isActive``) is a call into the JVM, slow while the JVM is
busy with micro-batches and costly to whoever polls the figures often (a dashboard, a
benchmark): the watch listens for Spark's query-terminated events instead, so the
question is answered in Python.

Runs on the driver: Spark delivers the events on its listener thread.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming import StreamingQueryListener

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class QueryEnd:
    """How a query ended: with ``error`` (Spark's message) or stopped (None)."""

    __slots__ = ("error",)

    def __init__(self, error: str | None) -> None:
        self.error = error


class TerminationWatch(StreamingQueryListener):
    """The ends of a session's streaming queries, by query id (see the module
    docstring). Register it with :meth:`attach` before starting the queries."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ended: dict[str, QueryEnd] = {}
        self._session: SparkSession | None = None

    def attach(self, spark: SparkSession) -> None:
        """Listen to ``spark``'s queries."""
        spark.streams.addListener(self)
        self._session = spark

    def detach(self) -> None:
        """Stop listening (the cluster shuts down)."""
        if self._session is not None:
            self._session.streams.removeListener(self)
            self._session = None

    def ended(self, query_id: str) -> QueryEnd | None:
        """How the query with id ``query_id`` ended, or None while it runs."""
        with self._lock:
            return self._ended.get(query_id)

    def onQueryStarted(self, event: Any) -> None:
        """Nothing: only ends are watched."""

    def onQueryProgress(self, event: Any) -> None:
        """Nothing: only ends are watched."""

    def onQueryIdle(self, event: Any) -> None:
        """Nothing: only ends are watched."""

    def onQueryTerminated(self, event: Any) -> None:
        """Record the end of a query (Spark's listener thread)."""
        with self._lock:
            self._ended[str(event.id)] = QueryEnd(event.exception)
