"""The bolt side of the checkpoint protocol: every bolt of a topology with stateful
bolts runs inside one of these wrappers (Storm's ``StatefulBoltExecutor`` and
``CheckpointTupleForwarder``).

A wrapper receives the bolt's tuples and the checkpoint tuples on ``$checkpoint``. It
aligns each checkpoint (see :mod:`squall.state.alignment`), does the action, then passes
the checkpoint tuple on to its own subscribers, anchored to the ones it received, and
acks those. Checkpoint tuples never reach user code.

* A stateful bolt's state is prepared, committed or rolled back with the action; the
  acks of its inputs are held back until the state holding their effect is committed
  (and turned into fails if it is rolled back), so a crash never loses the effect of an
  acked tuple. No tuple is executed before ``init_state``.
* Every wrapper records, with each prepare, the trees it cannot vouch for: those of the
  inputs it failed since the last prepare and of the inputs it still holds unacked. A
  restarted spout replays those even if they were emitted before the checkpoint (see
  :mod:`squall.state.spouts`).

Where it runs: on the bolt task's thread, as the task's component.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from time import perf_counter
from typing import TYPE_CHECKING, Any

from squall.model.collectors import Anchors, OutputCollector
from squall.model.components import BasicBolt, Bolt
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.errors import FailedException, ReportedFailedException
from squall.model.hooks import SettlesBeforeCheckpoint, implements
from squall.model.tuple import DEFAULT_STREAM, Tuple
from squall.runtime.checkpointing import CHECKPOINT_STREAM
from squall.runtime.collectors import BasicBoltCollector, BoltCollector, engine_collector
from squall.runtime.context import TopologyContext
from squall.state.alignment import BarrierAlignment
from squall.state.base import BufferedKeyValueState
from squall.state.bolt import StatefulBolt
from squall.state.checkpoint_spout import CHECKPOINT_FIELDS
from squall.state.protocol import Action
from squall.state.wrapped import WrappedBolt

if TYPE_CHECKING:
    from squall.state.providers import StateProvider

#: The key, in a task's checkpoint namespace, of the trees it cannot vouch for.
EXCLUDED_KEY = "excluded"


def checkpoint_namespace(component_id: str, task_index: int) -> str:
    """The namespace of a task's checkpoint records."""
    return f"$checkpoint-{component_id}-{task_index}"


def state_namespace(component_id: str, task_index: int) -> str:
    """The namespace of a stateful bolt task's state."""
    return f"{component_id}-{task_index}"


class TrackingCollector(OutputCollector):
    """What the wrapped bolt's code gets as its collector: the task's collector, with
    acks and fails seen by the wrapper first. Used on the task's thread.

    Args:
        out: the task's collector.
        wrapper: the bolt wrapper that sees the fails.
        ack: what the bolt's ``ack`` calls (the wrapper's, a closure for a stateful
            bolt: the hottest call of its task).
    """

    __slots__ = ("_ack", "_out", "_wrapper")

    def __init__(
        self, out: BoltCollector, wrapper: CheckpointedBolt, ack: Callable[[Tuple], None]
    ) -> None:
        self._out = out
        self._wrapper = wrapper
        self._ack = ack

    def emit(
        self,
        values: Sequence[Any],
        anchors: Anchors = None,
        stream: str = DEFAULT_STREAM,
    ) -> list[int]:
        """As :meth:`OutputCollector.emit`."""
        return self._out.emit(values, anchors, stream)

    def emit_direct(
        self,
        task_id: int,
        values: Sequence[Any],
        anchors: Anchors = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """As :meth:`OutputCollector.emit_direct`."""
        self._out.emit_direct(task_id, values, anchors, stream)

    def ack(self, tup: Tuple) -> None:
        """Acknowledge ``tup`` (held back until commit by a stateful bolt)."""
        self._ack(tup)

    def fail(self, tup: Tuple) -> None:
        """Fail ``tup`` now."""
        self._wrapper.failed(tup)
        self._out.fail(tup)

    def reset_timeout(self, tup: Tuple) -> None:
        """As :meth:`OutputCollector.reset_timeout`."""
        self._out.reset_timeout(tup)

    def report_error(self, error: BaseException | str) -> None:
        """As :meth:`OutputCollector.report_error`."""
        self._out.report_error(error)


class CheckpointedBolt(WrappedBolt):
    """Runs a bolt that has no state of its own in a topology with stateful bolts: it
    aligns and passes on checkpoint tuples, and records the trees it cannot vouch for.

    Args:
        bolt: the user's bolt (a ``Bolt`` or ``BasicBolt``).
    """

    def __init__(self, bolt: Bolt | BasicBolt) -> None:
        super().__init__(bolt)
        #: The basic bolt the engine's runner executes itself (see
        #: :class:`~squall.runtime.checkpointing.BoltCheckpointing`), or None.
        self.basic_bolt = bolt if isinstance(bolt, BasicBolt) else None
        #: Replaced in ``prepare`` (here so that ``holding`` answers before it).
        self._alignment = BarrierAlignment(frozenset())
        self._ready = True
        #: The state stores ``prepare`` opened, in order; ``cleanup`` closes them.
        self._stores: list[BufferedKeyValueState] = []

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The bolt's streams, and ``$checkpoint``."""
        super().declare_output_fields(declarer)
        declarer.declare_stream(CHECKPOINT_STREAM, CHECKPOINT_FIELDS)

    # -- lifecycle --------------------------------------------------------------------

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        """Prepare the bolt, with a collector whose acks and fails the wrapper sees."""
        from squall.state.providers import provider_for

        self._out = engine_collector(collector, f"bolt {context.component_id!r}")
        self._stats = self._out.stats
        self._context = context
        senders = frozenset(
            task
            for source in context.get_this_sources()
            if source.stream_id == CHECKPOINT_STREAM
            for task in context.get_component_tasks(source.component_id)
        )
        self._alignment = BarrierAlignment(senders)
        self._provider: StateProvider = provider_for(conf, context.topology_name)
        self._label = f"component {context.component_id!r} task {context.task_index}"
        self._records: BufferedKeyValueState = self._provider.make_state(
            checkpoint_namespace(context.component_id, context.task_index), self._label
        )
        self._stores.append(self._records)
        #: Tracked inputs whose execute returned without an ack or fail: id -> tuple.
        self._unacked: dict[int, Tuple] = {}
        #: The input being executed, and whether the bolt acked or failed it already.
        self._current: Tuple | None = None
        self._settled = False
        #: Whether data tuples may be executed (a stateful bolt: after init_state).
        self._ready = True
        #: Roots of the inputs failed since the last prepare.
        self._failed_roots: list[int] = []
        self._basic = isinstance(self.bolt, BasicBolt)
        if self._basic:
            self._basic_collector = BasicBoltCollector(self._out)
            self.bolt.prepare(conf, context)  # type: ignore[call-arg]
        else:
            tracking = TrackingCollector(self._out, self, self._ack_function())
            self.bolt.prepare(conf, context, tracking)  # type: ignore[call-arg]

    def cleanup(self) -> None:
        """Clean the bolt up, then close the stores ``prepare`` opened (the records',
        then a stateful bolt's state), each even if closing one before it raised."""
        stores, self._stores = self._stores, []
        with ExitStack() as closing:
            for store in reversed(stores):  # the callbacks run last in, first out
                closing.callback(store.close)
            self.bolt.cleanup()

    # -- tuples -----------------------------------------------------------------------

    def execute(self, tup: Tuple) -> None:
        """A checkpoint tuple is aligned and acted on; a data tuple is executed, or held
        back while the task is not ready for it."""
        if tup.stream_info.stream_id == CHECKPOINT_STREAM:
            self._checkpoint(tup)
            return
        alignment = self._alignment
        if not self._ready or (alignment.holding and tup.source_task in alignment.arrived):
            alignment.held.append(tup)
            return
        self._run(tup)

    def execute_inputs(
        self,
        popleft: Callable[[], Tuple],
        count: int,
        meter: Any,
        stop_at: int,
        on_error: Callable[[Tuple, Exception], None],
    ) -> int:
        """The runner's loop for a bolt that is not basic: as ``execute`` for each of up
        to ``count`` tuples (``_run`` inline: the hot path of a stateful bolt), failures
        going to ``on_error``; stops before an execute once ``meter.transferred`` reaches
        ``stop_at``. Returns how many tuples were taken."""
        execute = self.bolt.execute
        alignment = self._alignment
        unacked = self._unacked
        checkpoints = CHECKPOINT_STREAM
        # Whether every data tuple runs now (changes only with a checkpoint tuple).
        flowing = self._ready and not alignment.holding
        for index in range(count):
            if meter is not None and meter.transferred >= stop_at:
                return index
            tup = popleft()
            if not flowing or tup.stream_info.stream_id == checkpoints:
                try:
                    self.execute(tup)
                except Exception as error:
                    on_error(tup, error)
                flowing = self._ready and not alignment.holding
                continue
            self._current = tup
            self._settled = False
            try:
                execute(tup)  # type: ignore[call-arg]
            except Exception as error:
                roots = tup.tree_ids
                if not self._settled and roots:  # failed now
                    self._failed_roots.extend(roots[::2])
                self._current = None
                on_error(tup, error)
                continue
            self._current = None
            if not self._settled and tup.tree_ids:  # held by the bolt for later
                unacked[id(tup)] = tup
        return count

    def _waits(self, tup: Tuple) -> bool:
        alignment = self._alignment
        return not self._ready or (alignment.holding and tup.source_task in alignment.arrived)

    @property
    def holding(self) -> bool:
        """Whether data tuples may have to wait (see ``take``)."""
        return not self._ready or self._alignment.holding

    def take(self, tup: Tuple) -> None:
        """A tuple the engine's runner hands over (a checkpoint tuple, or any while
        :attr:`holding`): as ``execute``, failures handled as the engine does."""
        if tup.stream_info.stream_id == CHECKPOINT_STREAM:
            self._checkpoint(tup)
        else:
            self._run_released(tup)

    def _run(self, tup: Tuple) -> None:
        """Execute ``tup`` in the bolt (exceptions propagate to the engine, which fails
        the tuple)."""
        if self._basic:
            basic = self._basic_collector
            basic.input = tup
            try:
                self.bolt.execute(tup, basic)  # type: ignore[call-arg, arg-type]
            except Exception:
                roots = tup.tree_ids
                if roots:
                    self._failed_roots.extend(roots[::2])
                raise
            finally:
                basic.input = None
            self._out.ack(tup)
            return
        self._current = tup
        self._settled = False
        try:
            self.bolt.execute(tup)  # type: ignore[call-arg]
        except Exception:
            roots = tup.tree_ids
            if not self._settled and roots:  # the engine fails it now
                self._failed_roots.extend(roots[::2])
            raise
        finally:
            self._current = None
        if not self._settled and tup.tree_ids:  # held by the bolt for later
            self._unacked[id(tup)] = tup

    def _run_released(self, tup: Tuple) -> None:
        """Execute a tuple that was held back, handling its failure as the engine does
        for any tuple."""
        if self._waits(tup):
            self._alignment.hold(tup)
            return
        try:
            self._run(tup)
        except Exception as error:
            self._out.fail(tup)
            if not isinstance(error, FailedException) or isinstance(error, ReportedFailedException):
                self._stats.record_error(error)

    def _ack_function(self) -> Callable[[Tuple], None]:
        """The bolt's ``collector.ack``."""
        return self.acked

    def acked(self, tup: Tuple) -> None:
        """The bolt acked ``tup``."""
        if tup is self._current:
            self._settled = True
        elif self._unacked:
            self._unacked.pop(id(tup), None)
        self._out.ack(tup)

    def failed(self, tup: Tuple) -> None:
        """The bolt failed ``tup`` (the caller fails it in the engine): its trees are
        not vouched for at the next prepare."""
        if tup is self._current:
            self._settled = True
        elif self._unacked:
            self._unacked.pop(id(tup), None)
        roots = tup.tree_ids
        if roots:
            self._failed_roots.extend(roots[::2])

    # -- checkpoints ------------------------------------------------------------------

    def _checkpoint(self, tup: Tuple) -> None:
        alignment = self._alignment
        if alignment.starts_round(tup):
            for held in alignment.release():
                self._run_released(held)
        action = Action(tup[1])
        complete, abandoned = alignment.arrive(tup, holds=action is Action.PREPARE)
        out = self._out
        for old in abandoned:
            out.ack(old)
        if not complete:
            return
        txid, seq = tup[0], tup[2]
        if action is Action.PREPARE and not self._ready:
            # Started again without its state (its worker died): the failed prepare
            # makes the checkpoint spout recover, which ends with INITSTATE.
            for received in complete:
                out.fail(received)
        else:
            self._act_and_pass_on(txid, action, seq, complete)
        for held in alignment.release():
            self._run_released(held)

    def _act_and_pass_on(self, txid: int, action: Action, seq: int, complete: list[Tuple]) -> None:
        """Do the action, then pass the checkpoint tuple on, anchored to every sender's,
        and ack those; a failed action fails them."""
        out = self._out
        try:
            self.act(txid, action)
        except Exception as error:
            self._stats.record_error(error)
            for received in complete:
                out.fail(received)
        else:
            out.emit([txid, action.value, seq], complete, CHECKPOINT_STREAM)
            for received in complete:
                out.ack(received)

    def act(self, txid: int, action: Action) -> None:
        """Do ``action`` for transaction ``txid`` (every sender's checkpoint tuple has
        arrived).

        Raises:
            Exception: the action could not be done (the checkpoint tuples are failed:
                a prepare is rolled back, anything else sent again).
        """
        records = self._records
        if action is Action.PREPARE:
            bolt = self.bolt
            if implements(bolt, SettlesBeforeCheckpoint):
                bolt.settle_before_checkpoint()
            excluded = list(self._failed_roots)
            for held in self._unacked.values():
                excluded.extend(held.tree_ids[::2])  # type: ignore[index]
            records.put(EXCLUDED_KEY, [txid, excluded])
            records.prepare_commit(txid)
            self._failed_roots = []
        elif action is Action.COMMIT:
            records.commit(txid)
        elif action is Action.ROLLBACK:
            records.rollback()


class StatefulBoltExecutor(CheckpointedBolt):
    """Runs a :class:`~squall.state.bolt.StatefulBolt`: its state follows the checkpoint
    actions, its inputs' acks wait for the commit, and it executes nothing before
    ``init_state``.

    Args:
        bolt: the user's stateful bolt.
    """

    bolt: StatefulBolt

    def __init__(self, bolt: StatefulBolt) -> None:
        super().__init__(bolt)

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        """Prepare the bolt and open its state (``init_state`` comes with the first
        ``INITSTATE`` checkpoint)."""
        #: The acks held back, combined per root (root id -> XOR of the acked tuples'
        #: edge ids and ack values): those since the last prepare, those before it.
        #: Combined, they keep no tuple alive until the commit.
        self._acked: dict[int, int] = {}
        self._prepared: dict[int, int] = {}
        #: Inputs acked since the last prepare (one cell: the ack closure counts in it).
        self._counts = [0]
        self._prepared_count = 0
        self._initialized = False
        super().prepare(conf, context, collector)
        self._ready = False  # until init_state
        self.state: BufferedKeyValueState = self._provider.make_state(
            state_namespace(context.component_id, context.task_index),
            f"StatefulBolt {context.component_id!r} task {context.task_index}",
        )
        self._stores.append(self.state)

    def acked(self, tup: Tuple) -> None:
        """The bolt acked ``tup``: the ack waits for the commit."""
        self._hold_ack(tup)

    def _ack_function(self) -> Callable[[Tuple], None]:
        """The bolt's ``collector.ack``: a closure over what it touches (the hottest
        call of a stateful bolt: once per input)."""
        acked = self._acked
        counts = self._counts
        out = self._out
        stats = self._stats
        unacked = self._unacked

        def hold_ack(tup: Tuple) -> None:
            if tup is self._current:
                self._settled = True
            elif unacked:
                unacked.pop(id(tup), None)
            if tup is out.sample_tuple:  # its process latency ends now, not at the commit
                elapsed = perf_counter() - out.sample_start
                stats.process_secs += elapsed
                stats.process_count += 1
                stats.process_latency.record(elapsed * 1000.0)
                out.sample_tuple = None
            roots = tup.tree_ids
            if roots:
                value = tup.ack_val
                if len(roots) == 2:
                    root = roots[0]
                    acked[root] = acked.get(root, 0) ^ roots[1] ^ value
                else:
                    for position in range(0, len(roots), 2):
                        root = roots[position]
                        acked[root] = acked.get(root, 0) ^ roots[position + 1] ^ value
            counts[0] += 1

        self._hold_ack = hold_ack
        return hold_ack

    def act(self, txid: int, action: Action) -> None:
        """The checkpoint action on the bolt's state, then on its records."""
        bolt, state, out = self.bolt, self.state, self._out
        if action is Action.PREPARE:
            bolt.pre_prepare(txid)
            state.prepare_commit(txid)
            super().act(txid, action)
            prepared, acked = self._prepared, self._acked
            if prepared:  # prepared again: the acks join those of the first attempt
                for root, value in acked.items():
                    prepared[root] = prepared.get(root, 0) ^ value
            else:
                self._prepared = acked.copy()
            acked.clear()  # (the ack closure holds this dict)
            self._prepared_count += self._counts[0]
            self._counts[0] = 0
        elif action is Action.COMMIT:
            bolt.pre_commit(txid)
            state.commit(txid)
            super().act(txid, action)
            out.ack_values(self._prepared)
            self._stats.acked += self._prepared_count
            self._prepared, self._prepared_count = {}, 0
        elif action is Action.ROLLBACK:
            bolt.pre_rollback()
            state.rollback()
            super().act(txid, action)
            out.fail_trees(self._prepared.keys() | self._acked.keys())
            self._stats.failed += self._prepared_count + self._counts[0]
            self._prepared = {}
            self._acked.clear()
            self._prepared_count = self._counts[0] = 0
        elif action is Action.INITSTATE and not self._initialized:
            bolt.init_state(state)
            self._initialized = True
            self._ready = True
