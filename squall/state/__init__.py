"""Stateful bolts: state the engine saves with checkpoints and gives back after a
restart (Storm's "State support in core storm").

* :class:`StatefulBolt`: a bolt whose ``init_state`` receives its
  :class:`KeyValueState`; :class:`StatefulWindowedBolt`, the same for a windowed bolt.
* Providers (``topology.state.provider``): ``memory``, ``sqlite``, ``redis``,
  ``postgres`` (see :mod:`squall.state.providers`).
* The checkpoint protocol: :mod:`squall.state.protocol` (the transaction record),
  :mod:`squall.state.checkpoint_spout`, :mod:`squall.state.spouts` and
  :mod:`squall.state.executors` (the spout and bolt sides), :mod:`squall.state.wiring`.
"""

from squall.state.base import KeyValueState, State
from squall.state.bolt import StatefulBolt
from squall.state.codec import StateSerializationError
from squall.state.windowed import StatefulWindowedBolt

__all__ = [
    "KeyValueState",
    "State",
    "StateSerializationError",
    "StatefulBolt",
    "StatefulWindowedBolt",
]
