"""The window operation's runtime in a segment (Storm's ``WindowTridentProcessor`` and
its Trident window managers).

In each task, every batch's tuples (projected to the operation's input fields) join the
task's windows when the batch finishes at the task, in transaction order (the segment
commits: see ``squall.trident.windowing.operation``). Windows fire as Storm's do, with
squall's :class:`~squall.windowing.manager.WindowManager` (processing time): a count
window as the tuples arrive, across batches; a duration window on the task's clock
(``TopologyContext.clock``), checked when a batch finishes. Each window that fires
(never an empty one) is aggregated at once and its result kept in the task's windows
store; the results of the windows fired since the previous batch are emitted in the
batch that finishes, each row as ``[TriggerInfo, *function values]``.

Replays: a batch already added is not added again, and a batch run again emits the
results it emitted before (recorded in the store under its txid) until it commits, when
``WindowsStateUpdater`` drops them. With a store factory given to the operation, the
tuples are kept in the store as well, so a task made again (a restarted topology)
resumes its windows: the tuples still in a window, how many tuples count towards the
next count window, and the fired results not yet committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from squall.model.clock import SYSTEM_CLOCK, Clock
from squall.model.context import TopologyContext
from squall.model.fields import Fields
from squall.model.tuple import Tuple
from squall.trident.graph import Node
from squall.trident.operations import (
    Aggregator,
    CombinerAggregator,
    ReducerAggregator,
    TridentCollector,
)
from squall.trident.processors import BatchRun, Processor, projector
from squall.trident.tuple import TridentTuple
from squall.trident.windowing.config import WindowConfig
from squall.trident.windowing.store import KEY_SEPARATOR, Entry, WindowsStore
from squall.windowing.manager import WindowManager
from squall.windowing.spec import Duration
from squall.windowing.window import TupleWindow

#: The field of the window operation's output that carries each row's trigger.
TRIGGER_FIELD_NAME = "_task_info"

#: Key prefixes in a windows store (each followed by the window task id).
TRIGGER_PREFIX = "tr" + KEY_SEPARATOR
TRIGGER_INPROCESS_PREFIX = "tip" + KEY_SEPARATOR
TRIGGER_COUNT_PREFIX = "tc" + KEY_SEPARATOR
TUPLE_PREFIX = "tu" + KEY_SEPARATOR
ADDED_PREFIX = "ta" + KEY_SEPARATOR
SINCE_TRIGGER_PREFIX = "ts" + KEY_SEPARATOR


def generate_window_trigger_key(window_task_id: str, trigger_id: int) -> str:
    """The store key of trigger ``trigger_id``'s result."""
    return f"{TRIGGER_PREFIX}{window_task_id}{trigger_id}"


def window_trigger_inprocess_key(window_task_id: str, txid: int) -> str:
    """The store key of the triggers emitted in transaction ``txid``."""
    return f"{TRIGGER_INPROCESS_PREFIX}{window_task_id}{txid}"


@dataclass(frozen=True)
class TriggerInfo:
    """Which window task and trigger an output row comes from (Storm's
    ``WindowTridentProcessor.TriggerInfo``)."""

    window_task_id: str
    trigger_id: int

    def generate_trigger_key(self) -> str:
        """The store key of this trigger's result."""
        return generate_window_trigger_key(self.window_task_id, self.trigger_id)


@dataclass(eq=False)
class _Held:
    """A tuple in the windows: its store key (when tuples are stored) and the tuple."""

    key: str
    tuple: TridentTuple


def aggregate_window(
    aggregator: Any, trigger_id: int, tuples: list[TridentTuple], width: int, where: str
) -> list[list[Any]]:
    """Run ``aggregator`` over one window's tuples: the rows it emits (an
    ``Aggregator``: any number, its batch id is the trigger id, as in Storm; a combiner
    or reducer aggregator: one value).

    Raises:
        ValueError: a row does not have ``width`` values (the message names ``where``).
    """
    rows: list[list[Any]]
    if isinstance(aggregator, Aggregator):
        rows = []
        collector = TridentCollector(rows)
        state = aggregator.init(trigger_id, collector)
        for tup in tuples:
            aggregator.aggregate(state, tup, collector)
        aggregator.complete(state, collector)
    elif isinstance(aggregator, CombinerAggregator):
        value = aggregator.zero()
        for index, tup in enumerate(tuples):
            one = aggregator.init(tup)
            value = one if index == 0 else aggregator.combine(value, one)
        rows = [[value]]
    else:
        reducer = cast(ReducerAggregator, aggregator)
        value = reducer.init()
        for tup in tuples:
            value = reducer.reduce(value, tup)
        rows = [[value]]
    for row in rows:
        if len(row) != width:
            raise ValueError(
                f"{where}: aggregator {type(aggregator).__name__} emitted {len(row)} value(s) "
                f"for {width} function field(s): {row!r}"
            )
    return rows


class WindowTridentProcessor(Processor):
    """A window operation in one task (see the module docstring)."""

    #: Keeps windows across batches in the task's memory: an engine runs every batch of
    #: a task in the same process (on Spark, the driver).
    spans_batches = True

    def __init__(self, node: Node, input_fields: Fields) -> None:
        super().__init__(node, input_fields)
        params = node.params
        self.config: WindowConfig = params["config"]
        self.store_factory = params["store_factory"]
        self.inputs: Fields = params["inputs"]
        self.aggregator = params["aggregator"]
        self.function_fields: Fields = params["function_fields"]
        self.store_tuples: bool = params["store_tuples"]
        self.window_id: str = params["window_id"]
        self._project = projector(self._projector(self.inputs))
        self.where = f"Trident window {self.window_id} ({type(self.aggregator).__name__})"
        self.store: WindowsStore | None = None
        self.manager: WindowManager | None = None
        self.clock: Clock = SYSTEM_CLOCK
        self.window_task_id = ""
        self.pending: list[tuple[int, list[list[Any]]]] = []
        self.trigger_id = 0
        self.added_txid = 0
        self.sliding_ms: int | None = None
        self.next_tick_ms = 0
        #: After a resume, until the first batch: every stored trigger result (id order)
        #: and the keys recording the triggers batches emitted.
        self._resumed: tuple[list[tuple[int, list[list[Any]]]], list[str]] | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Once per task: open the store, resume what it holds, start the windows."""
        self.aggregator.prepare(conf, context)
        self.clock = context.clock
        now = int(self.clock.now_ms())
        self.store = self.store_factory.create(conf)
        self.window_task_id = f"{self.window_id}{KEY_SEPARATOR}{context.task_index}{KEY_SEPARATOR}"
        spec = self.config.window_spec()
        self.manager = WindowManager(spec, self._on_activation, self._on_expiry, now)
        if isinstance(spec.sliding, Duration):
            self.sliding_ms = spec.sliding.ms
            self.next_tick_ms = now + spec.sliding.ms
        self.trigger_id = self.store.get(TRIGGER_COUNT_PREFIX + self.window_task_id) or 0
        if self.store_tuples:
            self._resume(now)

    def cleanup(self) -> None:
        """At shutdown: the aggregator's ``cleanup``, then the store's ``shutdown``."""
        try:
            cleanup = getattr(self.aggregator, "cleanup", None)
            if callable(cleanup):
                cleanup()
        finally:
            if self.store is not None:
                self.store.shutdown()

    def _resume(self, now: int) -> None:
        """Take back what the store holds for this window task (a restarted task)."""
        store, task = self._store(), self.window_task_id
        self.added_txid = store.get(ADDED_PREFIX + task) or 0
        held: list[tuple[tuple[int, int], str]] = []
        triggers: list[tuple[int, str]] = []
        in_process: list[str] = []
        for key in store.get_all_keys():
            if key.startswith(TUPLE_PREFIX + task):
                txid, index = key[len(TUPLE_PREFIX + task) :].split(KEY_SEPARATOR)
                if int(txid) <= self.added_txid:  # later ones: their batch runs again
                    held.append(((int(txid), int(index)), key))
            elif key.startswith(TRIGGER_PREFIX + task):
                triggers.append((int(key[len(TRIGGER_PREFIX + task) :]), key))
            elif key.startswith(TRIGGER_INPROCESS_PREFIX + task):
                in_process.append(key)
        held.sort()
        keys = [key for _, key in held]
        values = store.get(keys) if keys else []
        items = [
            _Held(key, TridentTuple(list(v), self.inputs))
            for key, v in zip(keys, values, strict=True)
        ]
        emitted = {i for ids in (store.get(in_process) if in_process else []) for i in ids or ()}
        triggers.sort()
        results = [(trigger_id, store.get(key)) for trigger_id, key in triggers]
        # Emitted ones are emitted again by their batch, unless the transactions are
        # numbered anew (see finish).
        self.pending = [(i, rows) for i, rows in results if i not in emitted]
        self._resumed = (results, in_process)
        since = store.get(SINCE_TRIGGER_PREFIX + task) or 0
        manager = self._manager()
        manager.restore(
            [(now, cast(Tuple, item)) for item in items],
            [],
            [],
            {
                "next_window_end": None,
                "counted": 0,
                "last_tick": now if self.sliding_ms is not None else None,
                "count_since_trigger": since,
            },
        )

    def _store(self) -> WindowsStore:
        assert self.store is not None, "the window operation was not prepared"
        return self.store

    def _manager(self) -> WindowManager:
        assert self.manager is not None, "the window operation was not prepared"
        return self.manager

    # -- windows -----------------------------------------------------------------------

    def _on_activation(self, window: TupleWindow) -> None:
        """A window fired: aggregate it, keep the result until it is committed."""
        self.trigger_id += 1
        trigger_id = self.trigger_id
        tuples = [cast(_Held, item).tuple for item in window.get()]
        rows = aggregate_window(
            self.aggregator, trigger_id, tuples, len(self.function_fields), self.where
        )
        self._store().put_all(
            [
                Entry(TRIGGER_COUNT_PREFIX + self.window_task_id, trigger_id),
                Entry(generate_window_trigger_key(self.window_task_id, trigger_id), rows),
            ]
        )
        self.pending.append((trigger_id, rows))

    def _on_expiry(self, expired: list[Tuple]) -> None:
        if self.store_tuples and expired:
            self._store().remove_all([cast(_Held, item).key for item in expired])

    def _tick(self, now: int) -> None:
        """Fire the duration windows due by ``now`` (each sliding interval since the
        task started), as Storm's timer would have."""
        sliding = self.sliding_ms
        if sliding is None or now < self.next_tick_ms:
            return
        manager = self._manager()
        if not len(manager):  # nothing held: every window due is empty; skip to the last
            self.next_tick_ms += (now - self.next_tick_ms) // sliding * sliding
        while self.next_tick_ms <= now:
            manager.on_time(self.next_tick_ms)
            self.next_tick_ms += sliding

    # -- batches -----------------------------------------------------------------------

    def start(self) -> list[list[Any]]:
        return []

    def process(self, run: BatchRun, state: Any, values: list[Any], side: int) -> None:
        state.append(self._project(values))

    def finish(self, run: BatchRun, state: Any) -> None:
        """The batch is complete here (at its commit): add its tuples to the windows,
        emit the results of the windows fired since the previous batch."""
        txid = run.attempt.transaction_id
        store, task = self._store(), self.window_task_id
        if self._resumed is not None:
            self._first_after_resume(txid)
        self._tick(int(self.clock.now_ms()))
        if txid > self.added_txid:
            self._add_batch(txid, state)
        in_process_key = window_trigger_inprocess_key(task, txid)
        emitted_ids = store.get(in_process_key)
        if emitted_ids is not None:  # the batch runs again: emit what it emitted
            keys = [generate_window_trigger_key(task, i) for i in emitted_ids]
            results = list(zip(emitted_ids, store.get(keys), strict=True))
        else:
            results, self.pending = self.pending, []
            if results:
                store.put(in_process_key, [trigger_id for trigger_id, _ in results])
        for trigger_id, rows in results:
            info = TriggerInfo(task, trigger_id)
            for row in rows or ():
                self.emit(run, [info, *row])

    def _first_after_resume(self, txid: int) -> None:
        """The first batch of a resumed task: a txid below the last one added means the
        transactions are numbered anew (the coordination store did not survive the
        restart, see ``topology.transactional.state.dir``): the results recorded under
        the old numbers are emitted as not yet emitted, and every batch is new."""
        assert self._resumed is not None
        results, in_process = self._resumed
        self._resumed = None
        if txid >= self.added_txid:
            return
        self.added_txid = 0
        self.pending = list(results)
        if in_process:
            self._store().remove_all(in_process)

    def _add_batch(self, txid: int, values_list: list[list[Any]]) -> None:
        store, task, manager = self._store(), self.window_task_id, self._manager()
        now = int(self.clock.now_ms())
        prefix = f"{TUPLE_PREFIX}{task}{txid}{KEY_SEPARATOR}"
        if self.store_tuples and values_list:
            # The tuples are in the store before they join the windows (as Storm's).
            store.put_all(Entry(f"{prefix}{i}", v) for i, v in enumerate(values_list))
        for i, values in enumerate(values_list):
            manager.add(cast(Tuple, _Held(f"{prefix}{i}", TridentTuple(values, self.inputs))), now)
        self.added_txid = txid
        if self.store_tuples:  # every batch: a resumed task tells replays from new batches
            since = manager.bookkeeping()["count_since_trigger"] or 0
            store.put_all(
                [Entry(ADDED_PREFIX + task, txid), Entry(SINCE_TRIGGER_PREFIX + task, since)]
            )


__all__ = [
    "TRIGGER_FIELD_NAME",
    "TriggerInfo",
    "WindowTridentProcessor",
    "aggregate_window",
    "generate_window_trigger_key",
    "window_trigger_inprocess_key",
]
