"""Persistent windows: a :class:`~squall.state.windowed.StatefulWindowedBolt` whose
window contents are saved with every checkpoint (Storm's persistent windowing,
``with_persistence()``).

Every input tuple put in a window is written to a second state of the task (namespace
``<component>-<task index>-window``, next to the bolt's own state) and acked at once;
as for any stateful bolt the engine holds the ack back until the checkpoint that saves
the tuple has committed. With the tuples, each checkpoint saves where the windows stand
(the window manager's bookkeeping and the watermarks), so:

* a restarted task (or one whose transaction was rolled back) starts from the windows
  as last committed, and the spouts replay exactly the tuples that came after; the
  windows fire as they would have (a window that fired after the last commit fires
  again: emits are at least once, as Storm's);
* the window span is not bounded by the message timeout, and tuples held in windows do
  not count against ``topology.max.spout.pending``: they are acked at the checkpoint
  that saves them, not when they leave the windows.

With ``with_max_events_in_memory(n)`` the windows hold any number of tuples, yet at
most ``n`` of their values stay in memory: the ``n`` saved last (newest sequence
numbers), tuples still held in a window or waiting to be a window's ``get_expired()``.
The others are kept as references (their sequence numbers in the window state, which
stores every tuple anyway) and read back from the state when a window fires: its
``get()``, ``get_new()`` and ``get_expired()`` are then copies of the tuples, the same
tuples in the same order as without the limit, and live while ``execute(window)`` runs
(so during ``execute`` the window's values are in memory too). Without the limit
nothing of this runs: the windows hand the saved tuples themselves to the bolt.

Emits are not anchored (the window's tuples are acked already): a downstream failure
replays nothing. ``get_new()`` and ``get_expired()`` are exact across restarts: each
checkpoint saves which tuples left the windows since the last trigger (their entries
are deleted after the next trigger) and the bounds of the last window fired.

Where it runs: on the bolt task's thread, as the windowed bolt's executor.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from squall.model.tuple import StreamInfo, Tuple
from squall.runtime.collectors import OutputCollector
from squall.runtime.context import TopologyContext
from squall.state.bolt import StatefulBolt
from squall.windowing.executor import WindowedBoltExecutor, WindowedOutputCollector
from squall.windowing.window import TupleWindow

if TYPE_CHECKING:
    from squall.state.base import BufferedKeyValueState, KeyValueState
    from squall.windowing.bolt import WindowedBolt

logger = logging.getLogger(__name__)

#: The key, in a task's window state, of where the windows stand (the other keys are
#: the tuples' sequence numbers).
WINDOWS_KEY = "windows"


class _SpilledValues(Sequence[Any]):
    """The values of a window tuple kept only in the window state (see the module
    docstring): a saved tuple whose values are this is a reference, read back from the
    state when a window fires."""

    def __getitem__(self, index: Any) -> Any:
        raise RuntimeError("a window tuple's values were left in the window state")

    def __len__(self) -> int:
        raise RuntimeError("a window tuple's values were left in the window state")

    def __repr__(self) -> str:
        return "<values in the window state>"

    def __reduce__(self) -> str:
        return "SPILLED"


#: The values of every saved tuple whose values are not in memory.
SPILLED = _SpilledValues()


def window_namespace(component_id: str, task_index: int) -> str:
    """The namespace of a persistent windowed bolt task's window contents."""
    return f"{component_id}-{task_index}-window"


class PersistentWindowCollector(WindowedOutputCollector):
    """The collector of a windowed bolt with persistent windows: emits are not
    anchored (the window's tuples were acked when saved; ``anchors`` is ignored), and
    ``ack``/``fail`` of a window tuple do nothing."""

    def __init__(self, out: OutputCollector, component_id: str) -> None:
        super().__init__(out, {})
        self._component_id = component_id
        self._warned_fail = False

    def _anchors(self, anchors: Tuple | Sequence[Tuple] | None) -> Tuple | Sequence[Tuple] | None:
        """Nothing: the window's tuples were acked when saved (``anchors`` is ignored)."""
        return None

    def fail(self, tup: Tuple) -> None:
        """No effect: the tuple is saved in the windows and acked (a warning is logged
        the first time)."""
        if not self._warned_fail:
            self._warned_fail = True
            logger.warning(
                "windowed bolt %r has persistent windows: fail() of a window tuple has "
                "no effect (window tuples are acked once saved)",
                self._component_id,
            )

    def reset_timeout(self, tup: Tuple) -> None:
        """No effect: window tuples are acked once saved."""


class PersistentWindows(WindowedBoltExecutor, StatefulBolt):
    """The persistence of a stateful windowed bolt's executor made with
    ``with_persistence()`` (see the module docstring): put before the executor in the
    bases (:class:`~squall.state.windowed.PersistentWindowedBoltExecutor`), it saves
    and restores the windows around the executor's own checkpoint hooks, which hand
    them on to the bolt."""

    #: ``with_max_events_in_memory``: the most saved tuples whose values stay in
    #: memory (None: no bound, every saved tuple's values do).
    max_events_in_memory: int | None = None

    # -- set-up -----------------------------------------------------------------------

    def __init__(self, bolt: WindowedBolt) -> None:
        super().__init__(bolt)
        #: Whether ``prepare`` opened the window state's store (``cleanup`` closes it).
        self._window_state_open = False

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Nothing to check: window tuples are acked at the checkpoint that saves them,
        so neither the message timeout nor ``topology.max.spout.pending`` bounds the
        window."""

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        """Prepare as any windowed bolt and open the window state (the windows are
        restored by ``init_state``)."""
        from squall.state.providers import provider_for

        self.context = context
        self._stream_infos: dict[tuple[str, str], StreamInfo] = {}
        self._initialized = False
        super().prepare(conf, context, collector)
        self.window_state: BufferedKeyValueState = provider_for(
            conf, context.topology_name
        ).make_state(
            window_namespace(context.component_id, context.task_index),
            f"windowed bolt {context.component_id!r} task {context.task_index} (windows)",
        )
        self._window_state_open = True
        #: The most saved tuples with their values in memory at once (with a limit).
        self._peak_in_memory = 0
        self._forget_entries()

    def make_window_collector(self, collector: OutputCollector) -> WindowedOutputCollector:
        return PersistentWindowCollector(collector, self.component_id)

    def _forget_entries(self) -> None:
        #: The tuples saved (held, or left the windows and not yet deleted):
        #: sequence number -> (timestamp kept under, tuple); and id(tuple) -> number.
        self._entries: dict[int, tuple[int, Tuple]] = {}
        self._seq_of: dict[int, int] = {}
        self._next_seq = 0
        #: Numbers from here on were never prepared: their deletion writes nothing.
        self._unsaved_from = 0
        #: With ``max_events_in_memory``: the saved tuples whose values are in memory,
        #: by sequence number, oldest first (the others' values are ``SPILLED``).
        self._in_memory: dict[int, Tuple] = {}
        #: Tuples that left the windows since the last prepare, still saved.
        self._expired: list[Tuple] = []
        #: The last window fired: [first ts, first seq, last ts, last seq, highest seq
        #: saved when it fired] (see ``_restore``).
        self._previous_bounds: list[int] | None = None

    # -- tuples -----------------------------------------------------------------------

    def keep(self, tup: Tuple, ts: int) -> None:
        """Save the tuple, put it in the windows and ack it (the engine holds the ack
        back until the checkpoint commits).

        Raises:
            StateSerializationError: a value of the tuple cannot be stored.
        """
        ts = self.manager.kept_timestamp(ts)
        seq = self._next_seq
        self.window_state.put(
            seq, [ts, tup.source_component, tup.source_stream, tup.source_task, list(tup.values)]
        )
        self._next_seq = seq + 1
        self._entries[seq] = (ts, tup)
        self._seq_of[id(tup)] = seq
        self.manager.add(tup, ts)
        self.collector.ack(tup)
        limit = self.max_events_in_memory
        if limit is not None:
            in_memory = self._in_memory
            in_memory[seq] = tup
            if len(in_memory) > limit:
                oldest = next(iter(in_memory))
                in_memory.pop(oldest).values = SPILLED
            if len(in_memory) > self._peak_in_memory:
                self._peak_in_memory = len(in_memory)

    def values_in_memory(self) -> int:
        """How many saved tuples (held in windows, or left them and still saved) have
        their values in memory; with ``max_events_in_memory`` at most that many, the
        window being executed aside. Runs anywhere (for metrics and tests)."""
        return sum(1 for _, tup in list(self._entries.values()) if tup.values is not SPILLED)

    def metrics(self) -> dict[str, int]:
        """The windowed bolt's counters; with ``max_events_in_memory``, also the window
        values in memory now and at most so far (``window_values_in_memory``,
        ``window_values_in_memory_peak``)."""
        figures = super().metrics()
        if self.max_events_in_memory is not None:
            figures["window_values_in_memory"] = self.values_in_memory()
            figures["window_values_in_memory_peak"] = self._peak_in_memory
        return figures

    def _activate(self, window: TupleWindow) -> None:
        tuples = window.get()
        first, last = self._seq_of[id(tuples[0])], self._seq_of[id(tuples[-1])]
        self._previous_bounds = [
            self._entries[first][0],
            first,
            self._entries[last][0],
            last,
            self._next_seq - 1,
        ]
        if self.max_events_in_memory is not None:
            window = self._read_back(window)
        super()._activate(window)

    def _read_back(self, window: TupleWindow) -> TupleWindow:
        """The window with copies of its tuples, values read back from the window state
        where they are not in memory (``get_new()`` is worked out on the saved tuples
        first, as without a limit)."""
        seq_of, in_memory, state = self._seq_of, self._in_memory, self.window_state
        copies: dict[int, Tuple] = {}

        def copy(tuples: list[Tuple]) -> list[Tuple]:
            result = []
            for tup in tuples:
                found = copies.get(id(tup))
                if found is None:
                    seq = seq_of[id(tup)]
                    values = tup.values if seq in in_memory else list(state.get(seq)[4])
                    found = copies[id(tup)] = Tuple(values, tup.stream_info, tup.source_task)
                result.append(found)
            return result

        tuples = copy(window.get())
        return TupleWindow(
            tuples,
            copy(window.get_new()),
            copy(window.get_expired()),
            window.start_timestamp,
            window.end_timestamp,
        )

    def window_failed(self, window: TupleWindow) -> None:
        """The bolt's ``execute(window)`` raised (the error is reported); the tuples
        stay in the windows (they are saved and acked)."""

    def _expire(self, tuples: list[Tuple]) -> None:
        """Tuples left the windows: their entries go at the next prepare after the next
        trigger (until then they are that window's ``get_expired()``)."""
        self._expired.extend(tuples)

    def settle_batch(self) -> None:
        """Nothing to settle: window tuples were acked when saved."""

    # -- checkpoints ------------------------------------------------------------------

    def init_state(self, state: KeyValueState) -> None:
        """Restore the windows as last committed, then hand the bolt its state."""
        self._restore()
        self._initialized = True
        super().init_state(state)

    def pre_prepare(self, txid: int) -> None:
        """The bolt's hook, then the windows are prepared for ``txid``."""
        super().pre_prepare(txid)
        self._save(txid)

    def pre_commit(self, txid: int) -> None:
        """The bolt's hook, then the windows prepared for ``txid`` are committed."""
        super().pre_commit(txid)
        self.window_state.commit(txid)

    def pre_rollback(self) -> None:
        """The bolt's hook, then the windows go back to the last commit (the tuples
        since are replayed by their spouts)."""
        super().pre_rollback()
        self.window_state.rollback()
        if self._initialized:
            self._restore()

    def _save(self, txid: int) -> None:
        state = self.window_state
        manager = self.manager
        seq_of = self._seq_of
        expired = self._expired
        if expired:
            pending = {id(tup) for tup in manager.expired_since_trigger()}
            still: list[Tuple] = []
            entries, unsaved_from = self._entries, self._unsaved_from
            in_memory = self._in_memory
            for tup in expired:
                if id(tup) in pending:
                    still.append(tup)
                    continue
                seq = seq_of.pop(id(tup))
                del entries[seq]
                if in_memory:
                    in_memory.pop(seq, None)
                if seq >= unsaved_from:
                    state.discard_unsaved(seq)
                else:
                    state.delete(seq)
            self._expired = still
        watermarks = self.watermarks
        state.put(
            WINDOWS_KEY,
            {
                "next_seq": self._next_seq,
                "bookkeeping": manager.bookkeeping(),
                "expired": [seq_of[id(tup)] for tup in manager.expired_since_trigger()],
                "previous": self._previous_bounds if manager.previous_window() else None,
                "watermark": None
                if watermarks is None
                else [
                    watermarks.last_watermark,
                    [[c, s, ts] for (c, s), ts in watermarks.latest.items()],
                ],
            },
        )
        state.prepare_commit(txid)
        self._unsaved_from = self._next_seq

    def _restore(self) -> None:
        """Rebuild the windows from the window state (as last committed, with the
        prepared changes a recovery is about to commit)."""
        self._forget_entries()
        self.manager = self.new_manager()
        if self.watermarks is not None:
            self.watermarks.latest.clear()
            self.watermarks.last_watermark = None
        saved = self.window_state.get(WINDOWS_KEY)
        if saved is None:
            return
        entries = self._entries
        limit = self.max_events_in_memory
        # With a limit, only the newest saved tuples keep their values in memory.
        spill_below = -1 if limit is None else saved["next_seq"] - limit
        for seq, value in self.window_state:
            if seq == WINDOWS_KEY:
                continue
            ts, component, stream, task, values = value
            if seq < spill_below:
                values = SPILLED
            entries[seq] = (ts, Tuple(values, self._stream_info(component, stream), task))
        if limit is not None:
            self._in_memory = {
                seq: entries[seq][1] for seq in sorted(entries) if seq >= spill_below
            }
            self._peak_in_memory = max(self._peak_in_memory, len(self._in_memory))
        self._seq_of = {id(tup): seq for seq, (_, tup) in entries.items()}
        left = set(saved["expired"])
        ordered = sorted((ts, seq) for seq, (ts, _) in entries.items())
        held = [(ts, seq) for ts, seq in ordered if seq not in left]
        bounds = saved["previous"]
        previous: list[Tuple] = []
        if bounds is not None:
            low, high, newest = (bounds[0], bounds[1]), (bounds[2], bounds[3]), bounds[4]
            # The last window was a run of the tuples held then, in (ts, seq) order.
            previous = [
                entries[seq][1] for ts, seq in held if seq <= newest and low <= (ts, seq) <= high
            ]
        self._previous_bounds = bounds
        self._expired = [entries[seq][1] for _, seq in ordered if seq in left]
        self.manager.restore(
            [(ts, entries[seq][1]) for ts, seq in held],
            list(self._expired),
            previous,
            saved["bookkeeping"],
        )
        self._next_seq = self._unsaved_from = saved["next_seq"]
        if self.watermarks is not None and saved["watermark"] is not None:
            last, latest = saved["watermark"]
            self.watermarks.last_watermark = last
            self.watermarks.latest.update(((c, s), ts) for c, s, ts in latest)

    def _stream_info(self, component: str, stream: str) -> StreamInfo:
        info = self._stream_infos.get((component, stream))
        if info is None:
            try:
                fields = self.context.get_component_output_fields(component, stream)
            except KeyError as error:
                raise ValueError(
                    f"windowed bolt {self.component_id!r}: its saved windows hold tuples "
                    f"of component {component!r} stream {stream!r}, which this topology "
                    f"does not have ({error.args[0]})"
                ) from None
            info = self._stream_infos[(component, stream)] = StreamInfo(component, stream, fields)
        return info

    # -- snapshots (Spark) ------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_seq_of", None)  # by object id: rebuilt when unpickled
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        entries = state.get("_entries")
        if entries is not None:
            self._seq_of = {id(tup): seq for seq, (_, tup) in entries.items()}

    def cleanup(self) -> None:
        """Clean the bolt up, then close the window state's store."""
        try:
            super().cleanup()
        finally:
            if self._window_state_open:
                self.window_state.close()


__all__ = ["SPILLED", "WINDOWS_KEY", "PersistentWindowCollector", "PersistentWindows"]
