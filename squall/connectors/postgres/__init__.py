"""PostgreSQL connectors, through psycopg 3 (``pip install 'squall[postgres]'``).

* :class:`PostgresMapState`: a Trident map state in a table (``txid`` columns:
  exactly-once with transactional or opaque state).
* :class:`PostgresInsertBolt`: inserts (or upserts) tuples in batches, acking them once
  committed (at-least-once; exactly-once rows with an upsert).
* :class:`PostgresLookupBolt`: a parameterized query per tuple, a tuple per result row.
* :class:`PostgresStateProvider` (:mod:`~squall.connectors.postgres.provider`, its store
  in :mod:`~squall.connectors.postgres.store`): stateful bolts' state,
  ``topology.state.provider`` ``postgres``.

Every one carries only options (a connection string, names, sizes) and connects in the
task that uses it, so it runs on both engines. Errors name the server with its password
hidden.
"""

from __future__ import annotations

try:
    import psycopg  # noqa: F401  (checked here, used by the modules below)
except ImportError as missing:
    raise ImportError(
        "squall.connectors.postgres needs psycopg 3, the 'postgres' extra: "
        "pip install 'squall[postgres]'"
    ) from missing

from squall.connectors.postgres.connection import redact_dsn
from squall.connectors.postgres.insert import PostgresInsertBolt
from squall.connectors.postgres.lookup import PostgresLookupBolt
from squall.connectors.postgres.provider import PostgresStateProvider
from squall.connectors.postgres.state import PostgresMapState, PostgresMapStateFactory

__all__ = [
    "PostgresInsertBolt",
    "PostgresLookupBolt",
    "PostgresMapState",
    "PostgresMapStateFactory",
    "PostgresStateProvider",
    "redact_dsn",
]
