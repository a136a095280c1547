"""Trident windowing: aggregate the tuples of count or duration windows that span
batches (Storm's ``org.apache.storm.trident.windowing``).

``Stream.tumbling_window``, ``Stream.sliding_window`` and ``Stream.window`` take a
window configuration (:class:`TumblingCountWindow`, :class:`SlidingCountWindow`,
:class:`TumblingDurationWindow`, :class:`SlidingDurationWindow`), a windows store
factory (:class:`InMemoryWindowsStoreFactory`, or the durable
:class:`StateProviderWindowsStoreFactory` over squall's state providers), the input
fields, an aggregator and the function fields; the stream they return carries each
window's aggregate, emitted in the batch in which the window fires.
"""

from __future__ import annotations

from squall.runtime.lazy_exports import lazy_exports
from squall.trident.windowing.aggregator import CountAsAggregator
from squall.trident.windowing.config import (
    SlidingCountWindow,
    SlidingDurationWindow,
    TumblingCountWindow,
    TumblingDurationWindow,
    WindowConfig,
    WindowType,
)
from squall.trident.windowing.processor import (
    TRIGGER_FIELD_NAME,
    TriggerInfo,
    WindowTridentProcessor,
)
from squall.trident.windowing.state import (
    WindowsState,
    WindowsStateFactory,
    WindowsStateUpdater,
)
from squall.trident.windowing.store import (
    Entry,
    InMemoryWindowsStore,
    InMemoryWindowsStoreFactory,
    WindowsStore,
    WindowsStoreFactory,
)

# The durable store over the state providers lives in squall.connectors (a layer above
# this package, which may not import it); it is importable from here at first use.
_PROVIDER_STORES = {
    "StateProviderWindowsStore": "squall.connectors.windows_store",
    "StateProviderWindowsStoreFactory": "squall.connectors.windows_store",
}

__all__ = [
    "TRIGGER_FIELD_NAME",
    "CountAsAggregator",
    "Entry",
    "InMemoryWindowsStore",
    "InMemoryWindowsStoreFactory",
    "SlidingCountWindow",
    "SlidingDurationWindow",
    "StateProviderWindowsStore",
    "StateProviderWindowsStoreFactory",
    "TriggerInfo",
    "TumblingCountWindow",
    "TumblingDurationWindow",
    "WindowConfig",
    "WindowTridentProcessor",
    "WindowType",
    "WindowsState",
    "WindowsStateFactory",
    "WindowsStateUpdater",
    "WindowsStore",
    "WindowsStoreFactory",
]

__getattr__, __dir__ = lazy_exports(__name__, _PROVIDER_STORES, __all__)
