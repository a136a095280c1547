"""The coordinator spout of a transactional topology (Storm's
``TransactionalSpoutCoordinator``): one task that numbers transactions, emits each
batch to the emitters, and sends commits in strict transaction order."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Any

from squall.model.components import Spout
from squall.model.config import Config
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.errors import InvalidTopologyError
from squall.model.hooks import (
    Exhaustible,
    HandlesFailedTransaction,
    ReportsMetrics,
    ValidatesSubmission,
    implements,
)
from squall.runtime.backoff import RetryBackoff
from squall.runtime.collectors import SpoutOutputCollector
from squall.runtime.context import TopologyContext
from squall.runtime.coordination import CoordinationStore, open_store, txid_key
from squall.transactional.attempt import AttemptStatus, TransactionAttempt
from squall.transactional.batch import BATCH_STREAM, COMMIT_STREAM

FIRST_TXID = 1
#: Storm's ``topology.trident.batch.emit.interval.millis`` is 500 ms by default; the
#: embedded engine's default is shorter, for interactive latency.
DEFAULT_EMIT_INTERVAL_MS = 50
_LAST_COMMITTED = "last_committed"


@dataclass
class TransactionStatus:
    """A transaction in flight: its current attempt and where it stands."""

    attempt: TransactionAttempt
    status: AttemptStatus

    def become(self, status: AttemptStatus) -> None:
        """Move to ``status``; the state machine rejects any other transition."""
        if not self.status.can_become(status):
            raise RuntimeError(f"transaction {self.attempt}: {self.status} -> {status}")
        self.status = status


class TransactionalSpoutCoordinator(Spout, ValidatesSubmission, ReportsMetrics):
    """Plans and drives the transactions of one transactional id.

    ``next_tuple`` first commits the next transaction in order if its batch is
    processed, then starts new transactions while fewer than
    ``topology.max.spout.pending`` (default 1) are in flight and the user's coordinator
    ``is_ready``, at most one new transaction every
    ``topology.trident.batch.emit.interval.millis`` (default 50 ms; 0: no pause).
    After a failed transaction nothing starts (neither its replay nor a later
    transaction) until the back-off of :class:`~squall.runtime.backoff.RetryBackoff` has
    passed on the task's clock (``topology.trident.batch.retry.initial.millis``, doubling
    per consecutive failure up to ``topology.trident.batch.retry.max.millis``); a
    completed commit resets it. Each transaction's metadata is decided once and stored,
    and the last committed txid is stored when a commit completes, so a restarted
    topology (same ``topology.transactional.state.dir``) continues where it left off.
    """

    def __init__(self, spout: Any, transactional_id: str) -> None:
        self.spout = spout
        self.transactional_id = transactional_id

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare_stream(BATCH_STREAM, ["attempt", "metadata", "committed"])
        declarer.declare_stream(COMMIT_STREAM, ["attempt"])

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Transactional topologies need acking: their batches complete through it; the
        retry back-off must be valid."""
        if conf.get(Config.TOPOLOGY_ACKER_EXECUTORS) == 0:
            raise InvalidTopologyError(
                f"transactional topology {self.transactional_id!r} needs acking to know "
                "when batches complete: topology.acker.executors must not be 0"
            )
        RetryBackoff.from_conf(conf, f"component {component_id!r}")

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self.collector = collector
        self.store: CoordinationStore = open_store(conf, context)
        self.namespace = f"{self.transactional_id}/coordinator"
        self.coordinator = self.spout.get_coordinator(conf, context)
        self.max_in_flight = int(conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING) or 1)
        self.last_committed: int = self.store.get(self.namespace, _LAST_COMMITTED, FIRST_TXID - 1)
        self.active: dict[int, TransactionStatus] = {}
        self.random = random.Random()
        self.clock = context.clock
        interval = conf.get(Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS)
        self.emit_interval_ms = float(DEFAULT_EMIT_INTERVAL_MS if interval is None else interval)
        self.last_start_ms: float | None = None
        self.backoff = RetryBackoff.from_conf(conf, f"component {context.component_id!r}")
        #: No transaction starts before this time (the clock's ms) after a failure.
        self.retry_at_ms: float | None = None

    def next_tuple(self) -> None:
        self._commit_next()
        self._start_transactions()

    def _commit_next(self) -> None:
        txid = self.last_committed + 1
        current = self.active.get(txid)
        if current is None or current.status is not AttemptStatus.PROCESSED:
            return
        current.become(AttemptStatus.COMMITTING)
        attempt = current.attempt
        self.collector.emit([attempt], msg_id=("commit", attempt), stream=COMMIT_STREAM)

    def _start_transactions(self) -> None:
        if self.retry_at_ms is not None:
            if self.clock.now_ms() < self.retry_at_ms:
                return
            self.retry_at_ms = None
        txid = self.last_committed + 1
        while len(self.active) < self.max_in_flight:
            if (
                self.emit_interval_ms > 0
                and self.last_start_ms is not None
                and self.clock.now_ms() - self.last_start_ms < self.emit_interval_ms
            ):
                return
            while txid in self.active:
                txid += 1
            metadata = self._metadata(txid)
            if metadata is _NOT_READY:
                return
            if self.emit_interval_ms > 0:
                self.last_start_ms = self.clock.now_ms()
            attempt = TransactionAttempt(txid, self.random.getrandbits(63))
            self.active[txid] = TransactionStatus(attempt, AttemptStatus.PROCESSING)
            committed = self.last_committed if self.last_committed >= FIRST_TXID else None
            self.collector.emit(
                [attempt, metadata, committed], msg_id=("batch", attempt), stream=BATCH_STREAM
            )

    def _metadata(self, txid: int) -> Any:
        """The stored metadata of ``txid`` (a replay), or new metadata if the user's
        coordinator is ready to start it."""
        key = txid_key(txid)
        stored = self.store.get(self.namespace, key)
        if stored is not None:
            return stored[0]
        if not self.coordinator.is_ready():
            return _NOT_READY
        previous = self.store.get(self.namespace, txid_key(txid - 1))
        metadata = self.coordinator.initialize_transaction(
            txid, previous[0] if previous is not None else None
        )
        self.store.put(self.namespace, key, (metadata,))
        return metadata

    def ack(self, msg_id: Any) -> None:
        phase, attempt = msg_id
        current = self.active.get(attempt.transaction_id)
        if current is None or current.attempt != attempt:
            return  # a superseded attempt
        if phase == "batch":
            current.become(AttemptStatus.PROCESSED)
            return
        txid = attempt.transaction_id
        del self.active[txid]
        self.backoff.succeeded()
        self.last_committed = txid
        self.store.put(self.namespace, _LAST_COMMITTED, txid)
        self.store.delete(self.namespace, txid_key(txid - 1))

    def fail(self, msg_id: Any) -> None:
        _, attempt = msg_id
        txid = attempt.transaction_id
        current = self.active.get(txid)
        if current is None or current.attempt != attempt:
            return
        # This transaction and every later one are replayed with new attempts, once the
        # back-off has passed.
        for later in [t for t in self.active if t >= txid]:
            del self.active[later]
        self.retry_at_ms = self.clock.now_ms() + self.backoff.failed()
        if implements(self.coordinator, HandlesFailedTransaction):
            # The coordinator may replace the transaction's metadata (e.g. give up).
            key = txid_key(txid)
            stored = self.store.get(self.namespace, key)
            replacement = self.coordinator.transaction_failed(
                txid, stored[0] if stored is not None else None
            )
            if replacement is not None:
                self.store.put(self.namespace, key, (replacement,))

    def close(self) -> None:
        self.coordinator.close()

    def metrics(self) -> dict[str, float]:
        """Counters for ``get_topology_info``: last committed txid, transactions active,
        consecutive failed transactions since the last commit and the back-off they
        cause (ms; 0 when the last transaction committed)."""
        return {
            "last_committed_txid": self.last_committed,
            "active_transactions": len(self.active),
            "consecutive_failures": self.backoff.failures,
            "retry_backoff_ms": self.backoff.delay_ms,
        }


class ExhaustibleSpoutCoordinator(TransactionalSpoutCoordinator, Exhaustible):
    """The coordinator spout of a transactional spout that can tell when it is done
    (one implementing ``is_exhausted()``, such as ``MemoryTransactionalSpout``): the
    topology's spout is then exhausted, for ``complete_topology``, once the user's
    spout (this task's copy, the one whose coordinator plans the transactions) says it
    will start no new transaction and every transaction started has committed.

    ``is_exhausted`` is called from another thread than the task's; starting
    transactions and reading the state happen under a lock, so a transaction being
    started is never missed.
    """

    def __init__(self, spout: Any, transactional_id: str, source: Exhaustible) -> None:
        super().__init__(spout, transactional_id)
        #: The user's spout (``spout`` itself, or the one a partitioned adapter wraps).
        self.source = source

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        super().open(conf, context, collector)
        #: The highest txid started (replays of failed ones are still to commit).
        self.highest_started = self.last_committed
        self._state_lock = threading.Lock()

    def _start_transactions(self) -> None:
        with self._state_lock:
            super()._start_transactions()
            if self.active:
                self.highest_started = max(self.highest_started, max(self.active))

    def is_exhausted(self) -> bool:
        """Whether the spout will start no new transaction and every transaction
        started has committed (False before the task is open)."""
        lock: threading.Lock | None = getattr(self, "_state_lock", None)
        if lock is None:
            return False
        with lock:
            return (
                not self.active
                and self.last_committed >= self.highest_started
                and self.source.is_exhausted()
            )


class _NotReady:
    def __repr__(self) -> str:
        return "<not ready>"


_NOT_READY = _NotReady()
