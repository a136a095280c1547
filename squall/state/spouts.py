"""The spout side of the checkpoint protocol: how a data spout task cuts its stream at
each checkpoint and, after a restart, skips what the committed states already hold.

Every data spout task of a topology with stateful bolts receives the checkpoint
spout's tuples. On each it:

* ``PREPARE(t)``: asks the spout to make the acks it received durable (its optional
  ``commit_acks()``, see :class:`~squall.model.hooks.CommitsAcks`), then records,
  prepared for ``t``, the trees it has in flight (root id and message id). Everything
  it emitted before is ahead of the checkpoint tuple it then passes on, so the states
  prepared for ``t`` hold the whole effect of these trees, unless a bolt reports a tree
  it cannot vouch for (one it failed, or holds unacked).
* ``COMMIT(t)``/``ROLLBACK(t)``: commits or drops that record.
* ``INITSTATE(t)``, at start and after any failed checkpoint: reads the record
  committed for ``t`` and the trees every bolt task excluded, and from then on skips
  the message ids of the other trees when the spout emits them again (a restarted
  reliable spout replays what it had in flight): a skipped message is acked to the
  spout at once and reaches no bolt. The spout emits nothing before this, and fails a
  ``PREPARE`` that comes first (a task started again in a new worker process), so that
  the recovery ends with ``INITSTATE``. A task that has it already ignores it.

Skipped ids are kept until the spout emits them again, for at most twice the message
timeout after the start. Message ids must be storable (:mod:`squall.state.codec`);
one that is not is reported and its message replayed in full after a restart.

Runs on the spout task's thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from squall.model.hooks import CommitsAcks, implements
from squall.model.tuple import Tuple
from squall.runtime.checkpointing import CHECKPOINT_STREAM
from squall.runtime.collectors import BoltCollector, SpoutCollector
from squall.runtime.context import TopologyContext
from squall.state.base import BufferedKeyValueState
from squall.state.codec import StateSerializationError, decode, encode
from squall.state.executors import EXCLUDED_KEY, checkpoint_namespace
from squall.state.protocol import Action

if TYPE_CHECKING:
    from squall.state.providers import StateProvider

#: The key, in a spout task's checkpoint namespace, of its trees in flight.
IN_FLIGHT_KEY = "in_flight"


class SpoutCheckpointer:
    """One data spout task's part in the checkpoint protocol.

    Args:
        spout: the user's spout.
        collector: the spout's collector (whose ``pending`` trees are recorded and
            whose emits are skipped after a restart).
        out: a bolt-style collector on the same task, to pass checkpoint tuples on.
        provider: the topology's state provider.
        context: the task's context.
        bolt_tasks: ``(component id, task index)`` of every bolt task.
        keep_skipped_ms: how long after the start skipped ids are kept.
    """

    def __init__(
        self,
        spout: Any,
        collector: SpoutCollector,
        out: BoltCollector,
        provider: StateProvider,
        context: TopologyContext,
        bolt_tasks: list[tuple[str, int]],
        keep_skipped_ms: float,
    ) -> None:
        self._spout = spout
        self._collector = collector
        self._out = out
        self._provider = provider
        self._context = context
        self._bolt_tasks = bolt_tasks
        self._keep_skipped_ms = keep_skipped_ms
        self._label = f"spout {context.component_id!r} task {context.task_index}"
        self._records: BufferedKeyValueState | None = None
        self._initialized = False
        #: Encoded message ids not to emit again, and until when they are kept.
        self._skipped: set[bytes] = set()
        self._skip_until = 0.0
        self._unstorable_reported = False

    @property
    def initialized(self) -> bool:
        """Whether ``INITSTATE`` has arrived (the spout may emit)."""
        return self._initialized

    @property
    def output_collector(self) -> BoltCollector:
        """The collector that passes checkpoint tuples on and acks or fails them."""
        return self._out

    def start(self) -> None:
        """Open the task's records (on the task's thread, after the spout's ``open``)."""
        context = self._context
        self._records = self._provider.make_state(
            checkpoint_namespace(context.component_id, context.task_index), self._label
        )

    def on_checkpoint(self, tup: Tuple) -> None:
        """Do the action, then pass the checkpoint tuple on and ack it; a failed action
        fails it."""
        txid, action, seq = tup.values
        out = self._out
        if action == Action.PREPARE.value and not self._initialized:
            # Started again (its worker died) before INITSTATE: the failed prepare makes
            # the checkpoint spout recover, which ends with INITSTATE.
            out.fail(tup)
            return
        try:
            self._act(txid, Action(action))
        except Exception as error:
            self._collector.report_error(error)
            out.fail(tup)
            return
        out.emit([txid, action, seq], tup, CHECKPOINT_STREAM)
        out.ack(tup)

    def close(self) -> None:
        """Close the records' store."""
        if self._records is not None:
            self._records.close()

    def _act(self, txid: int, action: Action) -> None:
        records = self._records
        assert records is not None, "start() opens the records"
        if action is Action.PREPARE:
            spout = self._spout
            if implements(spout, CommitsAcks):
                spout.commit_acks()
            records.put(IN_FLIGHT_KEY, [txid, self._in_flight()])
            records.prepare_commit(txid)
        elif action is Action.COMMIT:
            records.commit(txid)
        elif action is Action.ROLLBACK:
            records.rollback()
        elif action is Action.INITSTATE and not self._initialized:
            self._skipped = self._recover(txid)
            if self._skipped:
                self._skip_until = self._context.clock.now_ms() + self._keep_skipped_ms
                self._collector.skip_emit = self._skips
            self._initialized = True

    def _skips(self, msg_id: Any) -> bool:
        """Whether to skip an emit of ``msg_id`` (each id is skipped once)."""
        try:
            key = encode(msg_id)
        except StateSerializationError:
            return False
        skipped = self._skipped
        if key not in skipped:
            return False
        skipped.discard(key)
        if not skipped:
            self._collector.skip_emit = None
        return True

    def _in_flight(self) -> list[list[Any]]:
        """``[roots, message ids]``: the trees in flight, then the ids still to skip
        (root None); message ids that cannot be stored are left out (reported once).
        Two flat lists, not a pair per tree: a spout may have hundreds of thousands in
        flight."""
        pending = self._collector.pending
        roots: list[Any] = list(pending)
        ids = [entry[0] for entry in pending.values()]
        try:
            encode(ids)  # all storable: the common case, checked in one pass
        except StateSerializationError:
            kept = [index for index, msg_id in enumerate(ids) if self._storable(msg_id)]
            roots = [roots[index] for index in kept]
            ids = [ids[index] for index in kept]
        skipped = self._skipped
        if skipped:
            if self._context.clock.now_ms() > self._skip_until:
                skipped.clear()
                self._collector.skip_emit = None
            roots.extend([None] * len(skipped))
            ids.extend(decode(key) for key in skipped)
        return [roots, ids]

    def _storable(self, msg_id: Any) -> bool:
        try:
            encode(msg_id)
        except StateSerializationError as error:
            self._unstorable(msg_id, error)
            return False
        return True

    def _unstorable(self, msg_id: Any, error: StateSerializationError) -> None:
        if not self._unstorable_reported:
            self._unstorable_reported = True
            self._collector.report_error(
                StateSerializationError(
                    f"{self._label}: message id {msg_id!r} cannot be stored ({error}); "
                    "after a restart its message is replayed in full (at-least-once)"
                )
            )

    def _recover(self, txid: int) -> set[bytes]:
        """The encoded message ids to skip: those of the trees in flight at ``txid``'s
        cut that no bolt task excluded."""
        assert self._records is not None
        stored = self._records.get(IN_FLIGHT_KEY)
        if not stored or stored[0] != txid:
            return set()
        excluded: set[int] = set()
        for component_id, task_index in self._bolt_tasks:
            records = self._provider.make_state(
                checkpoint_namespace(component_id, task_index), self._label
            )
            try:
                found = records.get(EXCLUDED_KEY)
            finally:
                records.close()
            if not found or found[0] != txid:
                return set()  # a bolt without this transaction: skip nothing
            excluded.update(found[1])
        roots, ids = stored[1]
        return {
            encode(msg_id)
            for root, msg_id in zip(roots, ids, strict=True)
            if root is None or root not in excluded
        }
