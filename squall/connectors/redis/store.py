"""The Redis store: stateful bolts' states in a Redis server.

Layout: a namespace's three keys share the name ``squall:state:{<qualified>}``, where
``<qualified>`` is ``<prefix>:<namespace>`` (see
:func:`~squall.state.providers.provider.qualified_namespace`; the braces make them one
hash slot on a Redis Cluster)::

    squall:state:{wordcount:count-0}:entries   hash: key -> value (committed entries)
    squall:state:{wordcount:count-0}:prepared  hash: "" -> the prepared txid (decimal);
                                               key -> "+" value (a put) or "-" (a
                                               deletion)
    squall:state:{wordcount:count-0}:txid      string: the last committed txid (decimal)

Keys and values are the codec's bytes; the codec never makes the empty key, so the
prepared txid cannot clash with a key. ``prepare`` is one ``MULTI``/``EXEC`` (the old
prepared hash deleted, the new one written); ``commit`` is one Lua script that applies
the prepared changes, sets the committed txid and deletes the prepared hash, or does
nothing if the prepared txid is not the one committed.

Every command is bounded in time (``connect_timeout``, ``socket_timeout``); a broken
connection is retried once on a new one. A server that cannot be reached raises
:class:`~squall.runtime.state_errors.StateConnectionError` naming the URL (password
hidden) and namespace; any other Redis error raises
:class:`~squall.runtime.state_errors.StateError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol, cast

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from squall.connectors.redaction import redact_url
from squall.connectors.redis.client import close_quietly, one_line
from squall.runtime.state_errors import StateConnectionError, StateError
from squall.state.base import StateStore
from squall.state.providers.provider import qualified_namespace


class RedisStoreSettings(Protocol):
    """What a store reads of its provider (a :class:`RedisStateProvider` of
    :mod:`squall.connectors.redis.provider`): the provider module
    imports this one, never the other way."""

    @property
    def prefix(self) -> str: ...

    @property
    def url(self) -> str: ...

    @property
    def connect_timeout(self) -> float: ...

    @property
    def socket_timeout(self) -> float: ...


#: The field of the prepared hash holding the prepared txid.
TXID_FIELD = b""
#: How a prepared change is marked: a put (followed by the value) or a deletion.
PUT_MARK, DELETE_MARK = b"+", b"-"
#: Fields per ``HSET`` when a large transaction is prepared.
_CHUNK = 10_000

#: KEYS: prepared hash, entries hash, txid key; ARGV: the txid to commit.
_COMMIT_SCRIPT = """
local prepared = redis.call('HGET', KEYS[1], '')
if prepared ~= ARGV[1] then
  return 0
end
local fields = redis.call('HGETALL', KEYS[1])
for index = 1, #fields, 2 do
  local key, change = fields[index], fields[index + 1]
  if key ~= '' then
    if string.sub(change, 1, 1) == '+' then
      redis.call('HSET', KEYS[2], key, string.sub(change, 2))
    else
      redis.call('HDEL', KEYS[2], key)
    end
  end
end
redis.call('SET', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[1])
return 1
"""


def key_names(qualified: str) -> tuple[str, str, str]:
    """The names of a qualified namespace's keys: ``(entries, prepared, txid)``."""
    base = f"squall:state:{{{qualified}}}"
    return f"{base}:entries", f"{base}:prepared", f"{base}:txid"


class RedisStore(StateStore):
    """One namespace's state in a Redis server.

    Runs in the task that owns it; its client connects at the first command (and again
    after a broken connection). Pickles as its provider and namespace: an unpickled
    store connects again.
    """

    def __init__(self, provider: RedisStoreSettings, namespace: str) -> None:
        self.provider = provider
        #: The store's namespace, as the provider was asked for it.
        self.namespace = namespace
        #: The namespace under the provider's prefix (in the keys' names).
        self.qualified = qualified_namespace(provider.prefix, namespace)
        self.entries_key, self.prepared_key, self.txid_key = key_names(self.qualified)
        self._client: redis.Redis = redis.Redis.from_url(
            provider.url,
            socket_connect_timeout=provider.connect_timeout,
            socket_timeout=provider.socket_timeout,
            retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
        )
        self._commit_script = self._client.register_script(_COMMIT_SCRIPT)

    def __getstate__(self) -> dict[str, Any]:
        return {"provider": self.provider, "namespace": self.namespace}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["provider"], state["namespace"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"RedisStore(url={redact_url(self.provider.url)!r}, namespace={self.qualified!r})"

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        """Redis errors as state errors naming the server and namespace."""
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as error:
            raise StateConnectionError(
                f"state provider 'redis' cannot reach {redact_url(self.provider.url)} "
                f"(namespace {self.qualified!r}): {one_line(error)}"
            ) from error
        except redis.RedisError as error:
            raise StateError(
                f"state provider 'redis' failed on {redact_url(self.provider.url)} "
                f"(namespace {self.qualified!r}): {one_line(error)}"
            ) from error

    # -- reads ------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The committed value of ``key``, or None: one ``HGET``."""
        with self._failures():
            return cast("bytes | None", self._client.hget(self.entries_key, key))  # type: ignore[arg-type]

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every committed ``(key, value)``: ``HSCAN`` to the end, then yielded."""
        with self._failures():
            found = dict(self._client.hscan_iter(self.entries_key, count=1000))
        return iter(cast("dict[bytes, bytes]", found).items())

    def count(self) -> int:
        """The number of committed keys: ``HLEN``."""
        with self._failures():
            return int(cast(int, self._client.hlen(self.entries_key)))

    def prepared(self) -> tuple[int, dict[bytes, bytes | None]] | None:
        """The prepared transaction (one ``HGETALL``), or None."""
        with self._failures():
            fields = cast("dict[bytes, bytes]", self._client.hgetall(self.prepared_key))
        txid = fields.pop(TXID_FIELD, None)
        if txid is None:
            return None
        changes: dict[bytes, bytes | None] = {
            key: None if change == DELETE_MARK else change[len(PUT_MARK) :]
            for key, change in fields.items()
        }
        return int(txid), changes

    def committed_txid(self) -> int | None:
        """The txid of the last commit, or None before the first: one ``GET``."""
        with self._failures():
            txid = self._client.get(self.txid_key)
        return None if txid is None else int(cast(bytes, txid))

    # -- writes -----------------------------------------------------------------------

    def prepare(self, txid: int, changes: dict[bytes, bytes | None]) -> None:
        """Replace the prepared transaction with ``(txid, changes)``: one
        ``MULTI``/``EXEC`` of ``DEL`` and ``HSET`` s."""
        fields: list[tuple[bytes, bytes]] = [(TXID_FIELD, str(txid).encode("ascii"))]
        fields.extend(
            (key, DELETE_MARK if value is None else PUT_MARK + value)
            for key, value in changes.items()
        )
        with self._failures():
            pipeline = self._client.pipeline(transaction=True)
            pipeline.delete(self.prepared_key)
            for start in range(0, len(fields), _CHUNK):
                pipeline.hset(self.prepared_key, mapping=dict(fields[start : start + _CHUNK]))
            pipeline.execute()

    def commit(self, txid: int) -> None:
        """If ``txid`` is prepared: apply its changes, record ``txid`` as committed and
        drop it, atomically (one Lua script). Otherwise nothing."""
        with self._failures():
            self._commit_script(
                keys=[self.prepared_key, self.entries_key, self.txid_key], args=[str(txid)]
            )

    def rollback(self) -> None:
        """Drop the prepared transaction, if any: one ``DEL``."""
        with self._failures():
            self._client.delete(self.prepared_key)

    def close(self) -> None:
        """Close the client's connections (a later use opens new ones)."""
        close_quietly(self._client)


__all__ = ["DELETE_MARK", "PUT_MARK", "TXID_FIELD", "RedisStore", "key_names"]
