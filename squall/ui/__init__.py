"""The web UI and REST API of a running cluster: :class:`UIServer`."""

from squall.ui.server import UIServer

__all__ = ["UIServer"]
