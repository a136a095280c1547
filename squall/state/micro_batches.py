"""``MicroBatchStatefulBolt``: a stateful bolt on an engine whose micro-batches are its
transactions (the Spark engine), where no checkpoint spout is needed.

The engine snapshots every bolt task after each micro-batch and restores the snapshot
before a replayed batch, and it acks a batch's trees only once the batch has committed.
So the state's transactions follow the batches, the txid being the batch id tagged with
the query (:func:`transaction_id`):

* ``memory`` provider: the state lives in the task, so in its snapshot; it is prepared
  and committed at the end of each batch (the snapshot is what makes it durable).
* durable providers (``sqlite``, ``redis``, ``postgres``): at the end of batch ``b`` the
  changes are *prepared* in the provider as transaction ``b``; at the start of the next
  batch they are committed (the engine has committed ``b``: it starts a batch only then)
  or, when ``b`` itself runs again (a failed attempt), rolled back. The provider
  therefore never holds the effect of a batch that will be replayed, and the snapshot
  holds only the batch's changes, not the whole state. While the query is stopped, the
  provider's committed state lags its last batch, which the next run (same checkpoint
  or a new query) commits before anything else.

Runs on the executor's Python worker that hosts the task.
"""

from __future__ import annotations

import zlib
from typing import Any

from squall.model.hooks import SettlesBatch, implements
from squall.model.tuple import Tuple
from squall.runtime.collectors import OutputCollector
from squall.runtime.context import TopologyContext
from squall.state.base import BufferedKeyValueState
from squall.state.bolt import StatefulBolt
from squall.state.executors import state_namespace
from squall.state.wrapped import WrappedBolt


class MicroBatchStatefulBolt(WrappedBolt):
    """Runs a :class:`~squall.state.bolt.StatefulBolt` whose transactions are the
    engine's micro-batches (see the module docstring).

    Args:
        bolt: the user's stateful bolt.
    """

    bolt: StatefulBolt

    def __init__(self, bolt: StatefulBolt) -> None:
        super().__init__(bolt)
        #: Whether ``prepare`` opened the state's store (``cleanup`` closes it).
        self._state_open = False

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        """Prepare the bolt and open its state; ``init_state`` comes with the first
        batch, once a transaction an earlier query left prepared (its last batch) is
        settled (a task restored from a snapshot was initialized before it)."""
        from squall.state.providers import provider_for

        provider = provider_for(conf, context.topology_name)
        self._durable = provider.durable
        self.bolt.prepare(conf, context, collector)
        self.state: BufferedKeyValueState = provider.make_state(
            state_namespace(context.component_id, context.task_index),
            f"StatefulBolt {context.component_id!r} task {context.task_index}",
        )
        self._state_open = True
        #: The batch running now, and the one whose changes are prepared, not committed.
        self._batch = 0
        self._prepared_batch: int | None = None
        #: Prepared, not restored from a snapshot, and no batch run yet.
        self._fresh = True

    def begin_batch(self, batch_id: int, query: str) -> None:
        """Before the tuples of ``batch_id``: commit the batch before it, or roll back
        an earlier attempt of this one."""
        txid = transaction_id(query, batch_id)
        if self._fresh:  # no snapshot before this batch: settle what the store holds
            self._fresh = False
            left = self.state.store.prepared()
            if left is not None:
                if left[0] == txid:  # this very batch, run before and failed
                    self._rollback()
                else:  # an earlier batch: the engine committed it
                    self._commit(left[0])
            self.bolt.init_state(self.state)
        prepared = self._prepared_batch
        if prepared is not None:
            if prepared != txid:
                self._commit(prepared)
            else:
                self._rollback()
            self._prepared_batch = None
        self._batch = txid

    def _commit(self, txid: int) -> None:
        self.bolt.pre_commit(txid)
        self.state.commit(txid)

    def _rollback(self) -> None:
        self.bolt.pre_rollback()
        self.state.rollback()

    def execute(self, tup: Tuple) -> None:
        """The bolt's ``execute``."""
        self.bolt.execute(tup)

    def settle_batch(self) -> None:
        """After the batch's tuples: settle the bolt's own holdings, then prepare the
        state (and commit it, for the memory provider)."""
        bolt = self.bolt
        if implements(bolt, SettlesBatch):
            bolt.settle_batch()
        bolt.pre_prepare(self._batch)
        self.state.prepare_commit(self._batch)
        if self._durable:
            self._prepared_batch = self._batch
        else:
            self._commit(self._batch)

    def cleanup(self) -> None:
        """Clean the bolt up and close its state's store (prepared changes stay for the
        next run to settle)."""
        try:
            self.bolt.cleanup()
        finally:
            if self._state_open:
                self.state.close()


def transaction_id(query: str, batch_id: int) -> int:
    """The txid of batch ``batch_id`` of ``query``: the batch id, tagged with a 31-bit
    checksum of the query in the bits above 32 (a store's prepared transaction then
    says which query left it; it fits a signed 64-bit column)."""
    return ((zlib.crc32(query.encode()) & 0x7FFFFFFF) << 32) | (batch_id & 0xFFFFFFFF)


def with_micro_batch_state(topology: Any) -> Any:
    """``topology`` with each stateful bolt wrapped in :class:`MicroBatchStatefulBolt`
    (``topology`` itself when it has none)."""
    from squall.model.topology import StormTopology

    specs = list(topology)
    if not any(isinstance(spec.component, StatefulBolt) for spec in specs):
        return topology
    components = {}
    for spec in specs:
        copy = spec.copy()
        if isinstance(spec.component, StatefulBolt):
            copy.component = MicroBatchStatefulBolt(spec.component)
        components[copy.component_id] = copy
    result = StormTopology(components)
    result.batch_ir = topology.batch_ir
    return result
