"""Batch sources of a Trident topology: the coordinator side and the emitters.

All regular spouts of a topology share one coordinator (every transaction includes a
batch from each spout, as Storm's master batch coordinator does); each DRPC stream has
its own coordinator, one request per transaction.
"""

from __future__ import annotations

from typing import Any

from squall.model.context import TopologyContext
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.fields import Fields
from squall.model.hooks import HandlesFailedTransaction, ValidatesSubmission, implements
from squall.runtime.coordination import open_store, txid_key
from squall.transactional.attempt import TransactionAttempt
from squall.transactional.batch import BatchOutputCollector
from squall.trident.segment import ATTEMPT_FIELD
from squall.trident.spouts import make_coordinator, make_emitter

DRPC_MAX_ATTEMPTS = 3


class MultiCoordinator:
    """Coordinates several spouts: a transaction's metadata maps stream id -> the
    spout's metadata; a transaction starts when every spout is ready."""

    def __init__(self, coordinators: dict[str, Any]) -> None:
        self.coordinators = coordinators

    def initialize_transaction(self, txid: int, prev_metadata: Any) -> dict[str, Any]:
        previous = prev_metadata or {}
        return {
            stream: coordinator.initialize_transaction(txid, previous.get(stream))
            for stream, coordinator in self.coordinators.items()
        }

    def is_ready(self) -> bool:
        return all(c.is_ready() for c in self.coordinators.values())

    def close(self) -> None:
        for coordinator in self.coordinators.values():
            coordinator.close()


class SpoutGroupSource:
    """The transactional spout the coordinator of the regular spouts drives."""

    def __init__(self, spouts: dict[str, Any]) -> None:
        self.spouts = spouts

    def get_coordinator(self, conf: dict[str, Any], context: TopologyContext) -> MultiCoordinator:
        return MultiCoordinator(
            {s: make_coordinator(sp, conf, context) for s, sp in self.spouts.items()}
        )


class TridentSpoutAdapter:
    """The emitter side of one Trident spout (run by an ``EmitterExecutor``)."""

    def __init__(self, stream_id: str, spout: Any, fields: Fields) -> None:
        self.stream_id = stream_id
        self.spout = spout
        self.fields = fields

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare([ATTEMPT_FIELD, *self.fields])

    def get_component_configuration(self) -> dict[str, Any] | None:
        return None

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """The Trident spout's own submit-time checks, if it has them
        (``ValidatesSubmission``; a connector checks its options)."""
        if implements(self.spout, ValidatesSubmission):
            self.spout.validate_submission(component_id, conf)

    def get_emitter(self, conf: dict[str, Any], context: TopologyContext) -> _StreamEmitter:
        return _StreamEmitter(
            make_emitter(self.spout, self.stream_id, conf, context), self.stream_id
        )


class _StreamEmitter:
    def __init__(self, emitter: Any, stream_id: str) -> None:
        self._emitter = emitter
        self._stream_id = stream_id

    def emit_batch(
        self, attempt: TransactionAttempt, metadata: Any, collector: BatchOutputCollector
    ) -> None:
        self._emitter.emit_batch(attempt, metadata[self._stream_id], collector)

    def cleanup_before(self, txid: int) -> None:
        self._emitter.cleanup_before(txid)

    def close(self) -> None:
        self._emitter.close()


def resolve_drpc(drpc: Any, conf: dict[str, Any]) -> Any:
    """The object a DRPC stream fetches requests from and returns results to: the
    given ``LocalDRPC``, or a client of the invocations port of the first DRPC server
    named in the configuration (``drpc.servers``, loopback by default;
    ``drpc.invocations.port``; ``drpc.invocations.authorization.token``)."""
    if drpc is not None:
        return drpc
    from squall.drpc import invocations_clients_from_conf

    servers = conf.get("drpc.servers") or ["127.0.0.1"]
    return invocations_clients_from_conf({**conf, "drpc.servers": servers})[0]


class DRPCSource:
    """Coordinator side of a DRPC stream: a transaction starts when a request is
    waiting; its metadata is the request. After ``DRPC_MAX_ATTEMPTS`` failed attempts
    the request is failed (the client gets an error) and the transaction emits nothing."""

    def __init__(self, function: str, drpc: Any) -> None:
        self.function = function
        self.drpc = drpc

    def get_coordinator(self, conf: dict[str, Any], context: TopologyContext) -> DRPCCoordinator:
        return DRPCCoordinator(self.function, resolve_drpc(self.drpc, conf))


class DRPCCoordinator(HandlesFailedTransaction):
    """See :class:`DRPCSource`."""

    def __init__(self, function: str, drpc: Any) -> None:
        self.function = function
        self.drpc = drpc
        self.waiting: Any = None
        self.failures: dict[int, int] = {}

    def is_ready(self) -> bool:
        if self.waiting is None:
            self.waiting = self.drpc.fetch_request(self.function)
        return self.waiting is not None

    def initialize_transaction(self, txid: int, prev_metadata: Any) -> dict[str, Any]:
        request, self.waiting = self.waiting, None
        return {"request_id": request.request_id, "args": request.args}

    def transaction_failed(self, txid: int, metadata: Any) -> Any:
        """Count a failed attempt; past the limit fail the request. Returns replacement
        metadata (an empty batch), or None to replay the same request."""
        count = self.failures.get(txid, 0) + 1
        self.failures[txid] = count
        if count < DRPC_MAX_ATTEMPTS or not metadata or metadata.get("failed"):
            return None
        self.drpc.fail_request(
            metadata["request_id"], f"DRPC function {self.function!r} failed {count} times"
        )
        return {**metadata, "failed": True}

    def close(self) -> None:
        """Nothing to release."""


class DRPCSpoutAdapter:
    """Emitter side of a DRPC stream: one tuple ``[args]`` per request."""

    def __init__(self) -> None:
        self.fields = Fields("args")

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare([ATTEMPT_FIELD, "args"])

    def get_component_configuration(self) -> dict[str, Any] | None:
        return None

    def get_emitter(self, conf: dict[str, Any], context: TopologyContext) -> _DRPCEmitter:
        return _DRPCEmitter()


class _DRPCEmitter:
    def emit_batch(
        self, attempt: TransactionAttempt, metadata: Any, collector: BatchOutputCollector
    ) -> None:
        if metadata and not metadata.get("failed"):
            collector.emit([attempt, metadata["args"]])

    def cleanup_before(self, txid: int) -> None:
        """Nothing kept."""

    def close(self) -> None:
        """Nothing to release."""


class DRPCResultReturner:
    """Used by the final processor of a DRPC stream: finds the batch's request in the
    coordination store and returns the result to it."""

    def __init__(self, namespace: str, function: str, drpc: Any) -> None:
        self.namespace = namespace
        self.function = function
        self.drpc = drpc

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        self.store = open_store(conf, context)
        self.client = resolve_drpc(self.drpc, conf)

    def return_result(self, attempt: TransactionAttempt, result: str) -> None:
        stored = self.store.get(self.namespace, txid_key(attempt.transaction_id))
        if stored is None:
            return
        metadata = stored[0]
        if metadata and not metadata.get("failed"):
            self.client.result(metadata["request_id"], result)
