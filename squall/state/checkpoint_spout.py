"""``$checkpointspout``: the system spout that drives the checkpoint protocol.

Added to a topology that has a stateful bolt (one task). It keeps the transaction
record (:mod:`squall.state.protocol`) in the state provider under namespace
``$checkpointspout`` and emits one checkpoint tuple at a time on stream ``$checkpoint``
(fields ``txid``, ``action``, ``seq``), tracked by the acker: the tuple's tree completes
once every bolt has done the action. It goes to every data spout task, which passes it
on in band behind the tuples it emitted before (see :mod:`squall.state.spouts`), and
from there through every bolt (see :mod:`squall.state.executors`).

Where it runs: a spout task like any other (the local engine's worker thread). Not
used on Spark, whose micro-batches are the transactions.
"""

from __future__ import annotations

import logging
from typing import Any

from squall.model.components import Spout
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.fields import Fields
from squall.runtime.checkpointing import CHECKPOINT_STREAM
from squall.runtime.collectors import SpoutOutputCollector
from squall.runtime.context import TopologyContext
from squall.state.base import BufferedKeyValueState
from squall.state.protocol import Action, Record

logger = logging.getLogger("squall")

CHECKPOINT_COMPONENT = "$checkpointspout"
CHECKPOINT_FIELDS = Fields("txid", "action", "seq")
#: ``topology.state.checkpoint.interval.ms`` unless configured.
DEFAULT_INTERVAL_MS = 1000
#: The key of the record in the spout's namespace.
_RECORD_KEY = "record"
#: The longest wait before a failed action or save is tried again.
_RETRY_MS = 1000.0


class CheckpointSpout(Spout):
    """Drives prepare, commit, rollback and recovery (see the module docstring).

    Args:
        interval_ms: the time between the end of one transaction and the next prepare.
    """

    def __init__(self, interval_ms: float = DEFAULT_INTERVAL_MS) -> None:
        self.interval_ms = interval_ms
        #: Whether ``open`` opened the record's store (``close`` closes it).
        self._state_open = False

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """``$checkpoint``: ``[txid, action, seq]``."""
        declarer.declare_stream(CHECKPOINT_STREAM, CHECKPOINT_FIELDS)

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        """Read the record; the first action is the recovery's."""
        from squall.state.providers import provider_for

        self.collector = collector
        self._clock = context.clock
        provider = provider_for(conf, context.topology_name)
        self._state: BufferedKeyValueState = provider.make_state(
            CHECKPOINT_COMPONENT, f"component {CHECKPOINT_COMPONENT!r}"
        )
        self._state_open = True
        stored = self._state.get(_RECORD_KEY)
        self.record = Record.initial() if stored is None else Record.from_value(stored)
        self._saves = self._state.committed_txid() or 0
        #: The action to emit next (None: a prepare once the interval has passed).
        self._next: Action | None = self.record.recovery_action()
        #: Whether the states are not handed out yet (INITSTATE not completed).
        self.recovering = True
        self._in_flight: tuple[int, Action, int] | None = None
        self._seq = 0
        self._not_before = 0.0

    def next_tuple(self) -> None:
        """Emit the next action when none is in flight and its time has come."""
        if self._in_flight is not None:
            return
        now = self._clock.now_ms()
        if now < self._not_before:
            return
        action = self._next
        if action is None:
            action = Action.PREPARE
        before = self.record.before(action)
        if before != self.record and not self._save(before):
            return
        self.record = before
        txid = before.txid
        self._seq += 1
        self._in_flight = (txid, action, self._seq)
        self.collector.emit(
            [txid, action.value, self._seq], (txid, action, self._seq), CHECKPOINT_STREAM
        )

    def ack(self, msg_id: Any) -> None:
        """Every bolt did the action: record its outcome and choose the next one."""
        if msg_id != self._in_flight:
            return
        self._in_flight = None
        _, action, _ = msg_id
        after = self.record.after(action)
        if after != self.record and not self._save(after):
            # Not recorded: the same action is sent again (each is idempotent).
            self._next = action
            return
        self.record = after
        if action is Action.INITSTATE:
            self.recovering = False
            self._schedule_prepare()
        elif action is Action.PREPARE:
            self._next = Action.COMMIT
        elif self.recovering:
            self._next = Action.INITSTATE
        else:
            self._schedule_prepare()

    def fail(self, msg_id: Any) -> None:
        """An action failed or timed out: a prepare is rolled back, anything else is sent
        again, after a pause; then ``INITSTATE`` is sent again.

        A failure may mean that a task was started again (its worker process died) and
        waits for its state: the recovery ends with ``INITSTATE``, which a task that
        has its state already ignores.
        """
        if msg_id != self._in_flight:
            return
        self._in_flight = None
        self.recovering = True
        _, action, _ = msg_id
        self._next = Action.ROLLBACK if action is Action.PREPARE else action
        self._not_before = self._clock.now_ms() + min(self.interval_ms, _RETRY_MS)

    def close(self) -> None:
        """Close the provider's connection."""
        if self._state_open:
            self._state.close()

    def _schedule_prepare(self) -> None:
        self._next = None
        self._not_before = self._clock.now_ms() + self.interval_ms

    def _save(self, record: Record) -> bool:
        """Store ``record``; on a provider error, report it and retry later."""
        try:
            self._state.put(_RECORD_KEY, record.to_value())
            self._saves += 1
            self._state.prepare_commit(self._saves)
            self._state.commit(self._saves)
        except Exception as error:
            try:
                self._state.rollback()
            except Exception:  # the provider is away: its next save starts over
                logger.debug("rollback of the checkpoint record failed", exc_info=True)
            self.collector.report_error(error)
            self._not_before = self._clock.now_ms() + _RETRY_MS
            return False
        return True
