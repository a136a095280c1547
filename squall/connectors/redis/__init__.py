"""Redis connectors: Redis Streams spouts and bolt, and state kept in Redis.

* :class:`RedisStreamSpout`: a reliable spout over a stream and a consumer group,
  at-least-once across crashes (``XACK`` on ack, replay on fail, pending entries
  reclaimed at start).
* :class:`RedisStreamTridentSpout`: a partitioned Trident spout, one partition per
  stream key, batches remembered as id ranges: exactly-once into transactional or
  opaque state (``opaque=False``: transactional, identical replays).
* :class:`RedisStreamBolt`: appends each tuple to a stream (``XADD``), acking after the
  write: at-least-once.
* :class:`RedisMapState` (:mod:`~squall.connectors.redis.state`): a Trident map state,
  a Redis string per key (exactly-once with transactional or opaque state).
* :class:`RedisStateProvider` (:mod:`~squall.connectors.redis.provider`, its store in
  :mod:`~squall.connectors.redis.store`): stateful bolts' state, ``topology.state.provider``
  ``redis``.

Each module's docstring states the guarantee, where each method runs and the options.
"""

from squall.connectors.redis.bolt import RedisStreamBolt
from squall.connectors.redis.entries import (
    DATA_FIELDS,
    ERROR_FIELDS,
    ERRORS_STREAM,
    EntryReader,
    MalformedEntryError,
)
from squall.connectors.redis.provider import RedisStateProvider
from squall.connectors.redis.spout import RedisStreamSpout
from squall.connectors.redis.state import RedisMapState, RedisMapStateFactory
from squall.connectors.redis.trident import (
    IdRange,
    OpaqueRedisStreamTridentSpout,
    RedisStreamTridentSpout,
    TransactionalRedisStreamTridentSpout,
)

__all__ = [
    "DATA_FIELDS",
    "ERRORS_STREAM",
    "ERROR_FIELDS",
    "EntryReader",
    "IdRange",
    "MalformedEntryError",
    "OpaqueRedisStreamTridentSpout",
    "RedisMapState",
    "RedisMapStateFactory",
    "RedisStateProvider",
    "RedisStreamBolt",
    "RedisStreamSpout",
    "RedisStreamTridentSpout",
    "TransactionalRedisStreamTridentSpout",
]
