"""Redis state and failures for the Spark engine's state tests, in a module Spark's
Python workers import (a test file's classes would be pickled by reference to it).

:class:`NotingRedisFactory` notes in Redis, beside the state's keys (under
``notes:<key prefix>``, which ``RedisMapState.contents`` does not read), which processes
make and commit its states and every commit of every partition; it can also fail one
transaction's update once per partition, after the update was written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import redis

from squall.trident import Aggregator, TridentCollector, TridentTuple
from squall.trident.state import MapState, RedisMapStateFactory


def notes_prefix(factory: RedisMapStateFactory) -> str:
    """Where a :class:`NotingRedisFactory` keeps its notes."""
    return f"notes:{factory.key_prefix}"


class NotingState(MapState):
    """Wraps a partition's map state: adds the process id to ``<notes>pids`` when made
    and at each commit, and ``"<partition>:<txid>"`` to the list ``<notes>commits``.
    In transaction ``fail_txid`` the first update of each partition raises once it has
    been written (a failure in the state update itself)."""

    def __init__(
        self, inner: MapState, url: str, notes: str, partition: int, fail_txid: int
    ) -> None:
        self.inner = inner
        self.client = redis.Redis.from_url(url)
        self.notes = notes
        self.partition = partition
        self.fail_txid = fail_txid
        self.txid = 0
        self.client.sadd(f"{notes}pids", os.getpid())

    def begin_commit(self, txid: int) -> None:
        self.txid = txid
        self.inner.begin_commit(txid)

    def commit(self, txid: int) -> None:
        self.inner.commit(txid)
        self.client.sadd(f"{self.notes}pids", os.getpid())
        self.client.rpush(f"{self.notes}commits", f"{self.partition}:{txid}")

    def multi_get(self, keys: list[tuple[Any, ...]]) -> list[Any]:
        return self.inner.multi_get(keys)

    def multi_update(self, keys: list[tuple[Any, ...]], updaters: list[Any]) -> list[Any]:
        values = self.inner.multi_update(keys, updaters)
        failing = f"{self.notes}failed:{self.partition}"
        if self.txid == self.fail_txid and self.client.setnx(failing, 1):
            raise RuntimeError(f"injected failure in the state update of batch {self.txid}")
        return values

    def multi_put(self, keys: list[tuple[Any, ...]], values: list[Any]) -> None:
        self.inner.multi_put(keys, values)

    def close(self) -> None:
        self.inner.close()
        self.client.close()


@dataclass(frozen=True, repr=False)
class NotingRedisFactory(RedisMapStateFactory):
    """A :class:`RedisMapStateFactory` whose states are :class:`NotingState`."""

    fail_txid: int = 0

    def make_state(
        self, conf: dict[str, Any], context: Any, partition_index: int, num_partitions: int
    ) -> MapState:
        inner = super().make_state(conf, context, partition_index, num_partitions)
        return NotingState(inner, self.url, notes_prefix(self), partition_index, self.fail_txid)


def noted_pids(factory: RedisMapStateFactory) -> set[int]:
    """The processes that made or committed the factory's states."""
    client = redis.Redis.from_url(factory.url)
    try:
        return {int(pid) for pid in client.smembers(f"{notes_prefix(factory)}pids")}
    finally:
        client.close()


def noted_commits(factory: RedisMapStateFactory) -> dict[int, list[int]]:
    """Partition -> the txids it committed, in order."""
    client = redis.Redis.from_url(factory.url)
    try:
        entries = client.lrange(f"{notes_prefix(factory)}commits", 0, -1)
    finally:
        client.close()
    commits: dict[int, list[int]] = {}
    for entry in entries:
        partition, txid = entry.decode().split(":")
        commits.setdefault(int(partition), []).append(int(txid))
    return commits


class FailFirstAttemptOf(Aggregator):
    """Raises at the end of every task's part of the first attempt (attempt 0) of
    transaction ``txid``: Spark's task retries fail alike, so the micro-batch is run
    again (attempt 1), which passes."""

    def __init__(self, txid: int) -> None:
        self.txid = txid

    def init(self, batch_id: Any, collector: TridentCollector) -> Any:
        return batch_id

    def aggregate(self, state: Any, tup: TridentTuple, collector: TridentCollector) -> None:
        """Nothing to fold: the batch id is all it needs."""

    def complete(self, state: Any, collector: TridentCollector) -> None:
        if state.transaction_id == self.txid and state.attempt_id == 0:
            raise RuntimeError(f"injected failure after the state update of batch {self.txid}")
