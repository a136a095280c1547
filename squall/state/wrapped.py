"""``WrappedBolt``: the base of the engine's wrappers around a user's bolt (the
checkpoint components, the micro-batch stateful bolt): declarations, component
configuration and metrics are the wrapped bolt's."""

from __future__ import annotations

from typing import Any

from squall.model.components import BasicBolt, Bolt
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.hooks import ReportsMetrics, implements


class WrappedBolt(Bolt, ReportsMetrics):
    """A bolt that runs ``bolt`` and answers for it at build time and in metrics.

    Args:
        bolt: the user's bolt (a ``Bolt`` or ``BasicBolt``).
    """

    def __init__(self, bolt: Bolt | BasicBolt) -> None:
        self.bolt = bolt

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The bolt's streams."""
        self.bolt.declare_output_fields(declarer)

    def get_component_configuration(self) -> dict[str, Any] | None:
        """The bolt's."""
        return self.bolt.get_component_configuration()

    def metrics(self) -> dict[str, float]:
        """The bolt's own metrics, if it has any (read from another thread: see
        :class:`~squall.model.hooks.ReportsMetrics`)."""
        bolt = self.bolt
        return dict(bolt.metrics()) if implements(bolt, ReportsMetrics) else {}
