"""The errors of states: what a Trident map state, a stateful bolt's store or a backend
behind either raises when it is used against its contract or cannot reach its system.

Engine-neutral and backend-neutral, so the state interfaces (``squall.state``,
``squall.trident.state``) and the backends filed with their systems
(``squall.connectors``) raise the same types. Also importable from
``squall.trident.state``.
"""

from __future__ import annotations

from squall.model.errors import SquallError


class StateError(SquallError):
    """A state was used against its contract (writes outside a commit, batches out of
    txid order, writes to a read-only state, values a backend cannot store), or its
    backend failed (a file that cannot be made, a table of other columns)."""


class NotInCommitError(StateError):
    """A write (``multi_update``/``multi_put``) was made outside
    ``begin_commit(txid)`` ... ``commit(txid)``."""


class ReadOnlyStateError(StateError):
    """A write was made to a read-only state (a static lookup state)."""


class StateConnectionError(StateError, ConnectionError):
    """A state backend (a database server) cannot be reached. The message names it."""


__all__ = ["NotInCommitError", "ReadOnlyStateError", "StateConnectionError", "StateError"]
