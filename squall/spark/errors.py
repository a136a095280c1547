"""The error the Spark engine raises when Spark itself cannot run a topology."""

from __future__ import annotations

from squall.model.errors import SquallError


class SparkUnavailableError(SquallError):
    """PySpark cannot start: Java is missing, the master URL is invalid or unreachable,
    or the session failed to start. The message is one line naming the cause."""
