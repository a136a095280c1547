"""SQLite backends: a Trident map state in a database file.

* :class:`SqliteMapState`: a Trident map state in a table of a database file
  (exactly-once with transactional or opaque state); tasks of one machine share the file.

Every one carries only options (a path, names) and opens its connection in the task
that uses it. ``sqlite3`` is part of Python: nothing needs installing.
"""

from squall.connectors.sqlite.state import SqliteMapState, SqliteMapStateFactory

__all__ = ["SqliteMapState", "SqliteMapStateFactory"]
