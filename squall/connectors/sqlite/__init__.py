"""SQLite backends: state kept in database files, with Python's own ``sqlite3``
(nothing to install).

* :class:`SqliteMapState` (:mod:`~squall.connectors.sqlite.state`): a Trident map state
  in a table of a database file (exactly-once with transactional or opaque state);
  tasks of one machine share the file.
* :class:`SqliteStateProvider` (:mod:`~squall.connectors.sqlite.provider`, its store in
  :mod:`~squall.connectors.sqlite.store`): stateful bolts' state, a file per topology
  prefix in a directory; ``topology.state.provider`` ``sqlite``.

Every one carries only options (a path, names) and opens its connection in the task
that uses it.
"""

from squall.connectors.sqlite.provider import SqliteStateProvider
from squall.connectors.sqlite.state import SqliteMapState, SqliteMapStateFactory

__all__ = ["SqliteMapState", "SqliteMapStateFactory", "SqliteStateProvider"]
