"""The errors connectors raise and report."""

from __future__ import annotations

from squall.model.errors import SquallError


class ConnectorError(SquallError):
    """A connector could not do what it was asked (bad data from its server, a write
    the server refused)."""


class ConnectorUnavailableError(ConnectorError, ConnectionError):
    """A connector's server cannot be reached. The message names the connector and
    the server's address (its password hidden); the connector retries with back-off."""
