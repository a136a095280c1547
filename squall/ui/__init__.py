"""The web UI and REST API of a running cluster: :class:`UIServer`, its bounds
:class:`UILimits`."""

from squall.ui.limits import UILimits
from squall.ui.server import UIServer

__all__ = ["UILimits", "UIServer"]
