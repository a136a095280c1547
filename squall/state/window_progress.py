"""A stateful windowed bolt made with ``with_message_id_field(field)`` (Storm's
``StatefulWindowedBoltExecutor``): windows resume after a restart without firing again.

Each input tuple carries an increasing integer message id in ``field`` (per source task
and stream, as a spout numbers what it emits). Whenever a window fires, the task records
for each source task and stream the highest message id that has left every window
(``last_expired``) and the highest one a window has evaluated (``last_evaluated``), in a
state of its own (namespace ``<component>-<task index>-window``) saved with every
checkpoint next to the bolt's state.

After a restart (or a rollback), the spouts replay what was not acked: the tuples still
held in windows, then the rest. Until every source task and stream with a record has
replayed past its ``last_evaluated``, the task recovers:

* a tuple whose id is at most ``last_expired`` already left every window: it is acked
  and dropped;
* one whose id is at most ``last_evaluated`` was in a window that fired: it goes back in
  the windows without counting towards a trigger;
* the first one past ``last_evaluated`` ends its source's recovery; it and any tuple of a
  source without a record wait until every source has recovered.

The windows then go on as they would have: the next window fires after the sliding
interval's new tuples, and its ``get_new()`` leaves the replayed tuples out. Where it
runs: on the bolt task's thread, as the windowed bolt's executor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from squall.model.tuple import Tuple, is_tick_tuple
from squall.runtime.collectors import OutputCollector
from squall.runtime.context import TopologyContext
from squall.state.persistent_windows import window_namespace
from squall.state.windowed import StatefulWindowedBoltExecutor
from squall.windowing.window import TupleWindow

if TYPE_CHECKING:
    from squall.state.base import BufferedKeyValueState, KeyValueState

#: A source task and stream: ``(task id, stream id)``.
TaskStream = tuple[int, str]


class MessageIdWindowedBoltExecutor(StatefulWindowedBoltExecutor):
    """Runs a :class:`~squall.state.windowed.StatefulWindowedBolt` made with
    ``with_message_id_field`` (see the module docstring)."""

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        """Prepare as any stateful windowed bolt and open the task's progress state."""
        from squall.state.providers import provider_for

        field = self.bolt.message_id_field
        assert field is not None, "made by with_message_id_field"
        self.field: str = field
        self.context = context
        #: Per source task and stream: ``[last_expired, last_evaluated]`` being recovered.
        self.recovering: dict[TaskStream, tuple[int, int]] = {}
        self.pending: list[Tuple] = []
        self.replayed: list[Tuple] = []
        self.initialized = False
        super().prepare(conf, context, collector)
        self.progress: BufferedKeyValueState = provider_for(conf, context.topology_name).make_state(
            window_namespace(context.component_id, context.task_index),
            f"windowed bolt {context.component_id!r} task {context.task_index} (window progress)",
        )
        self._progress_open = True

    def init_state(self, state: KeyValueState) -> None:
        """Hand the bolt its state, then read where each source's windows stood."""
        if self.initialized:
            return
        super().init_state(state)
        self._read_progress()
        self.initialized = True

    def _read_progress(self) -> None:
        self.recovering.clear()
        self.replayed.clear()
        for source in self.context.get_this_sources():
            if source.stream_id.startswith("__") or source.stream_id.startswith("$"):
                continue
            for task in self.context.get_component_tasks(source.component_id):
                saved = self.progress.get(f"{task}/{source.stream_id}")
                if saved is not None:
                    self.recovering[(task, source.stream_id)] = (saved[0], saved[1])

    def execute(self, tup: Tuple) -> None:
        if is_tick_tuple(tup):
            if not self.recovering:
                super().execute(tup)
            return
        if not self.initialized:
            self.pending.append(tup)
            return
        if not self.recovering:
            super().execute(tup)
            return
        key = (tup.source_task, tup.source_stream)
        msg_id = self._message_id(tup)
        saved = self.recovering.get(key)
        if saved is None:
            self.pending.append(tup)
        elif msg_id <= saved[0]:
            self.collector.ack(tup)
        elif msg_id <= saved[1]:
            self.replayed.append(tup)
        else:
            self.pending.append(tup)
            del self.recovering[key]
            if not self.recovering:
                self._resume()

    def _resume(self) -> None:
        """Every source has recovered: the replayed tuples go back in the windows (no
        trigger counts them), then the tuples that waited run."""
        manager = self.manager
        if self.replayed:
            now = int(self.clock.now_ms())
            held = sorted(
                (
                    (self._timestamp(tup) if self.watermarks is not None else now, tup)
                    for tup in self.replayed
                ),
                key=lambda entry: entry[0],
            )
            bookkeeping = {
                **manager.bookkeeping(),
                "count_since_trigger": 0,
                "counted": len(held),
            }
            manager.restore(held, [], [tup for _, tup in held], bookkeeping)
            self.replayed = []
        pending, self.pending = self.pending, []
        for tup in pending:
            super().execute(tup)

    def _message_id(self, tup: Tuple) -> int:
        if not tup.contains(self.field):
            raise ValueError(
                f"windowed bolt {self.component_id!r}: tuple from {tup.source_component!r} "
                f"stream {tup.source_stream!r} has no message id field {self.field!r} "
                f"(its fields are {tup.fields.to_list()})"
            )
        msg_id = tup.get_value_by_field(self.field)
        if not isinstance(msg_id, int) or isinstance(msg_id, bool):
            raise ValueError(
                f"windowed bolt {self.component_id!r}: message id field {self.field!r} must "
                f"be an integer, got {msg_id!r} ({type(msg_id).__name__}) in tuple "
                f"{list(tup.values)!r}"
            )
        return msg_id

    def _activate(self, window: TupleWindow) -> None:
        """Fire the window, then record how far each source's tuples got."""
        super()._activate(window)
        progress: dict[TaskStream, list[int | None]] = {}
        for position, tuples in ((0, window.get_expired()), (1, window.get_new())):
            for tup in tuples:
                entry = progress.setdefault((tup.source_task, tup.source_stream), [None, None])
                msg_id = self._message_id(tup)
                current = entry[position]
                entry[position] = msg_id if current is None else max(current, msg_id)
        for (task, stream), (expired, evaluated) in progress.items():
            key = f"{task}/{stream}"
            saved = self.progress.get(key)
            low = -(2**63)
            old_expired, old_evaluated = (low, low) if saved is None else saved
            self.progress.put(
                key,
                [
                    max(old_expired, low if expired is None else expired),
                    max(old_evaluated, low if evaluated is None else evaluated),
                ],
            )

    def pre_prepare(self, txid: int) -> None:
        """The bolt's hook, then the progress is prepared for ``txid`` (not while
        recovering: what was saved stays until the windows are back)."""
        super().pre_prepare(txid)
        if self.initialized and not self.recovering:
            self.progress.prepare_commit(txid)
            self._prepared = True

    def pre_commit(self, txid: int) -> None:
        """The bolt's hook, then the progress prepared for ``txid`` is committed."""
        super().pre_commit(txid)
        if not self.initialized or (not self.recovering and getattr(self, "_prepared", False)):
            self.progress.commit(txid)

    def pre_rollback(self) -> None:
        """The bolt's hook, then the progress goes back to the last commit."""
        super().pre_rollback()
        self.progress.rollback()

    def cleanup(self) -> None:
        """Clean the bolt up, then close the progress state's store."""
        try:
            super().cleanup()
        finally:
            if getattr(self, "_progress_open", False):
                self.progress.close()
