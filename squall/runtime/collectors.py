"""Collectors: how user code emits, acks and fails. Engine-neutral.

The classes here implement the interfaces of :mod:`squall.model.collectors`
(:class:`BoltCollector` is an ``OutputCollector``, :class:`SpoutCollector` a
``SpoutOutputCollector``, :class:`BasicBoltCollector` a ``BasicOutputCollector``); the
interfaces are re-exported here under their names.

A collector belongs to one task and is used only from that task's thread. The emit
here is the one of every engine: it checks the stream, chooses the targets, counts, does
the XOR anchoring and hands the routed tuple to the task's sink
(:mod:`squall.runtime.sinks`; by default, a ``Tuple`` appended per target to the
*outboxes*, any objects with ``append`` indexed by task id, that the engine provides).
Acker messages go to the ``__acker`` tasks' outboxes by root id.

Acking follows Storm's algorithm (see :mod:`squall.runtime.acker`). A bolt's acks are
XOR-combined per root id within the batch its executor is running and sent once per
root at the end of the batch (``flush_acks``): XOR is associative, so the acker sees the
same values with far fewer messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from random import getrandbits
from time import perf_counter
from typing import Any

from mypy_extensions import mypyc_attr

from squall.model.clock import Clock
from squall.model.collectors import BasicOutputCollector, OutputCollector, SpoutOutputCollector
from squall.model.fields import Fields
from squall.model.tuple import (
    DEFAULT_STREAM,
    SYSTEM_COMPONENT,
    SYSTEM_TASK_ID,
    StreamInfo,
    Tuple,
    tracked_tuple,
)
from squall.runtime.acker import (
    ACK_ACK_STREAM,
    ACK_BULK_STREAM,
    ACK_FAIL_STREAM,
    ACK_INIT_STREAM,
    ACK_RESET_TIMEOUT_STREAM,
    ID_BITS,
)
from squall.runtime.emitchecks import (
    direct_only,
    not_direct,
    not_subscribed,
    undeclared_stream,
    wrong_width,
)
from squall.runtime.metrics import TaskStats
from squall.runtime.routing import StreamRoute
from squall.runtime.sinks import EmitSink, OutboxSink

_INIT_FIELDS = Fields("id", "ack_val", "spout_task")
_ACK_FIELDS = Fields("id", "ack_val")
_BULK_FIELDS = Fields("acks", "inits")

#: The streams an :class:`AckBuffer` sends on (as component ``__system``), with their
#: fields.
ACK_BUFFER_STREAMS: dict[str, Fields] = {
    ACK_INIT_STREAM: _INIT_FIELDS,
    ACK_ACK_STREAM: _ACK_FIELDS,
    ACK_BULK_STREAM: _BULK_FIELDS,
}

Observer = Callable[[str, int, Sequence[Any], list[int]], None]
"""Called as ``observer(stream_id, task_id, values, targets)`` after every user emit."""


class AckBuffer:
    """Ack values XOR-combined per root id before they are sent to the ackers.

    Shared by the tasks of one worker (one thread) and flushed by the engine after each
    round of work. XOR is associative, so the ackers end in the same state as if every
    message had been sent alone, with far fewer messages: a tree created and completed
    within one round costs one message, the init carrying the combined value (zero).
    Fails and timeout resets are not buffered.

    Args:
        outboxes: indexed by task id, as in :class:`TaskWiring`.
        acker_tasks: the ``__acker`` task ids.
        bulk_to: acker tasks that get one ``__ack_bulk`` message per flush, carrying
            every root's value and init, instead of a message per root: those in other
            worker processes, where each message crosses between processes.
    """

    __slots__ = (
        "_ack_info",
        "_acker_tasks",
        "_ackers",
        "_bulk_info",
        "_bulk_to",
        "_init_info",
        "_outboxes",
        "acks",
        "inits",
        "messages_sent",
    )

    def __init__(
        self,
        outboxes: Sequence[Any],
        acker_tasks: list[int],
        bulk_to: frozenset[int] = frozenset(),
    ) -> None:
        self._outboxes = outboxes
        self._acker_tasks = acker_tasks
        self._ackers = len(acker_tasks)
        self._bulk_to = bulk_to
        self._init_info = StreamInfo(SYSTEM_COMPONENT, ACK_INIT_STREAM, _INIT_FIELDS)
        self._ack_info = StreamInfo(SYSTEM_COMPONENT, ACK_ACK_STREAM, _ACK_FIELDS)
        self._bulk_info = StreamInfo(SYSTEM_COMPONENT, ACK_BULK_STREAM, _BULK_FIELDS)
        #: root id -> XOR of the values acked or initialised since the last flush.
        self.acks: dict[int, int] = {}
        #: root id -> spout task, for trees whose init is in ``acks``.
        self.inits: dict[int, int] = {}
        #: Messages sent to the ackers so far (one writer: the owning thread).
        self.messages_sent = 0

    def flush(self) -> None:
        """Send one message per root id with a pending value. Called on the owning thread."""
        acks = self.acks
        if not acks:
            return
        if self._bulk_to:
            self._flush_in_bulk()
            return
        outboxes, ackers, acker_tasks = self._outboxes, self._ackers, self._acker_tasks
        inits = self.inits
        sent = 0
        if inits:
            info = self._init_info
            for root, spout_task in inits.items():
                outboxes[acker_tasks[root % ackers]].append(
                    Tuple([root, acks.pop(root, 0), spout_task], info, SYSTEM_TASK_ID)
                )
            sent = len(inits)
            inits.clear()
        info = self._ack_info
        for root, value in acks.items():
            if value:
                sent += 1
                outboxes[acker_tasks[root % ackers]].append(
                    Tuple([root, value], info, SYSTEM_TASK_ID)
                )
        acks.clear()
        self.messages_sent += sent

    def _flush_in_bulk(self) -> None:
        """``flush`` when some ackers take bulk messages: those get one message each,
        ``[{root: value}, {root: spout task}]``; the others one message per root."""
        acks, inits = self.acks, self.inits
        outboxes, ackers, acker_tasks = self._outboxes, self._ackers, self._acker_tasks
        bulk_to = self._bulk_to
        parts: dict[int, tuple[dict[int, int], dict[int, int]]] = {}
        sent = 0
        init_info, ack_info = self._init_info, self._ack_info
        for root, value in acks.items():
            task = acker_tasks[root % ackers]
            spout_task = inits.get(root)
            if task in bulk_to:
                part = parts.get(task)
                if part is None:
                    part = parts[task] = ({}, {})
                if spout_task is not None:
                    part[1][root] = spout_task
                elif not value:
                    continue
                part[0][root] = value
            elif spout_task is not None:
                sent += 1
                outboxes[task].append(Tuple([root, value, spout_task], init_info, SYSTEM_TASK_ID))
            elif value:
                sent += 1
                outboxes[task].append(Tuple([root, value], ack_info, SYSTEM_TASK_ID))
        acks.clear()
        inits.clear()
        info = self._bulk_info
        for task, (values, spout_tasks) in parts.items():
            if values:
                sent += 1
                outboxes[task].append(Tuple([values, spout_tasks], info, SYSTEM_TASK_ID))
        self.messages_sent += sent

    def send_bulk(self, acks: dict[int, int]) -> None:
        """Send ``acks`` (root id -> value) now, one message per acker task: for many
        acks at once (a stateful bolt's, released at a commit). Called on the owning
        thread."""
        ackers, acker_tasks = self._ackers, self._acker_tasks
        if ackers == 1:
            parts = {acker_tasks[0]: acks}
        else:
            parts = {}
            for root, value in acks.items():
                task = acker_tasks[root % ackers]
                part = parts.get(task)
                if part is None:
                    parts[task] = {root: value}
                else:
                    part[root] = value
        for task, part in parts.items():
            self._outboxes[task].append(Tuple([part, {}], self._bulk_info, SYSTEM_TASK_ID))
        self.messages_sent += len(parts)


@dataclass
class TaskWiring:
    """What one task's collector is connected to, built by the engine per task.

    Attributes:
        component_id: the task's component.
        task_id: the task.
        routes: stream id -> route, for every stream the component declares.
        outboxes: indexed by task id; ``outboxes[t].append(tup)`` delivers to task ``t``.
        stats: the task's counters.
        acker_tasks: the ``__acker`` task ids (empty: acking is off).
        ack_buffer: where acks are combined before they are sent (shared per worker);
            a private one when not given.
        sink: where the task's emits are delivered; an :class:`OutboxSink` on
            ``outboxes`` when not given.
    """

    component_id: str
    task_id: int
    routes: dict[str, StreamRoute]
    outboxes: Sequence[Any]
    stats: TaskStats
    acker_tasks: list[int]
    ack_buffer: AckBuffer | None = None
    sink: EmitSink | None = None


@mypyc_attr(allow_interpreted_subclasses=True)
class _Emitter:
    """State and checks shared by every collector of one task.

    Emits are delivered to the task's :class:`~squall.runtime.sinks.EmitSink`; acker
    messages (fails, timeout resets, the ack buffer's) to ``outboxes``.
    """

    def __init__(self, wiring: TaskWiring) -> None:
        self._component_id = wiring.component_id
        self._task_id = wiring.task_id
        #: Every route, system streams included (stats, fails, timeout resets).
        self._all_routes = wiring.routes
        #: The routes user code may emit on: system streams are reserved to the engine.
        self._routes = (
            wiring.routes
            if wiring.component_id.startswith("__")
            else {sid: r for sid, r in wiring.routes.items() if not sid.startswith("__")}
        )
        self._outboxes = wiring.outboxes
        self._stats = wiring.stats
        self._acker_tasks = wiring.acker_tasks
        self._ackers = len(wiring.acker_tasks)
        self._tracking = bool(wiring.acker_tasks)
        self._ack_buffer = wiring.ack_buffer or AckBuffer(wiring.outboxes, wiring.acker_tasks)
        self._observer: Observer | None = None
        sink = wiring.sink or OutboxSink(wiring.outboxes)
        self._sink = sink
        # The sink's methods, bound once: called once per emit on the hot path.
        self._send_untracked = sink.send
        self._send_tree = sink.send_tree
        self._send_to = sink.send_to
        #: The outboxes when the sink is the default one: the bolt emit's usual cases
        #: then do what :class:`OutboxSink` does inline (one call less per emit, some 5%
        #: of a local word count's work); None with any other sink.
        self._inline_outboxes = None if wiring.sink else wiring.outboxes
        wiring.stats.routes = wiring.routes

    @property
    def stats(self) -> TaskStats:
        """The task's counters."""
        return self._stats

    def set_observer(self, observer: Observer | None) -> None:
        """Install a callback seeing every user emit (debug logging, test capture)."""
        self._observer = observer

    def use_ack_buffer(self, buffer: AckBuffer) -> None:
        """Send acks through ``buffer`` from now on: the engine moved the task to the
        thread that owns ``buffer`` (the local engine's rebalance). Call while the task
        does not run, after its previous buffer was flushed."""
        self._ack_buffer = buffer

    def _route(self, stream: str, values: Sequence[Any]) -> StreamRoute:
        # Called once the fast check failed: the errors are built by emitchecks, which
        # the Spark engine's batch path raises too.
        try:
            route = self._routes[stream]
        except KeyError:
            raise undeclared_stream(self._component_id, stream, self._routes) from None
        if len(values) != route.width:
            raise wrong_width(self._component_id, stream, values, route.info.fields)
        return route

    def _direct_route(self, task_id: int, stream: str, values: Sequence[Any]) -> StreamRoute:
        route = self._route(stream, values)
        if not route.direct:
            raise not_direct(self._component_id, stream)
        if task_id not in route.direct_targets:
            raise not_subscribed(self._component_id, stream, task_id, route.direct_targets)
        return route

    def _non_direct(self, route: StreamRoute) -> None:
        raise direct_only(self._component_id, route.stream_id)

    def _send_system(self, stream: str, root: int) -> None:
        """Send ``[root]`` on an unbuffered acker stream (fail, reset timeout) right away."""
        route = self._all_routes[stream]
        route.emitted += 1
        route.transferred += 1
        self._outboxes[self._acker_tasks[root % self._ackers]].append(
            Tuple([root], route.info, self._task_id)
        )

    def emit_system(self, stream: str, values: Sequence[Any]) -> None:
        """Emit ``values`` untracked on the system stream ``stream`` (such as
        ``__metrics``), which user code may not emit on: for the engine, on the task's
        thread. Counted in the stream's figures; not seen by the emit observer."""
        route = self._all_routes[stream]
        targets = route.router.choose(self._task_id, values)
        route.emitted += 1
        route.transferred += len(targets)
        if targets:
            self._send_untracked(route.info, self._task_id, targets, values)

    def report_error(self, error: BaseException | str) -> None:
        """Record an error in this component's metrics (with traceback) and the log."""
        self._stats.record_error(error)


@mypyc_attr(allow_interpreted_subclasses=True)  # the Spark engine's wire collectors
class BoltCollector(_Emitter):
    """A bolt task's :class:`~squall.model.collectors.OutputCollector`: emit anchored
    tuples, ack or fail inputs."""

    def __init__(self, wiring: TaskWiring) -> None:
        super().__init__(wiring)
        #: Shared with the other tasks of the worker (see :class:`AckBuffer`).
        self.pending_acks = self._ack_buffer.acks
        #: The tuple whose processing latency is being sampled, and when it started.
        self.sample_tuple: Tuple | None = None
        self.sample_start = 0.0

    def use_ack_buffer(self, buffer: AckBuffer) -> None:
        """Send acks through ``buffer`` from now on (see ``_Emitter.use_ack_buffer``)."""
        super().use_ack_buffer(buffer)
        self.pending_acks = buffer.acks

    def emit(
        self,
        values: Sequence[Any],
        anchors: Tuple | Sequence[Tuple] | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> list[int]:
        """Emit ``values`` on ``stream``, anchored to ``anchors`` (a Tuple or a list).

        Returns the ids of the tasks the tuple was sent to.

        Raises:
            ValueError: the stream is not declared, is direct, or the number of values
                differs from its fields.
        """
        # The hot path of the engine: checks and the common single-anchor case inline.
        route = self._routes.get(stream)
        if route is None or route.direct or len(values) != route.width:
            route = self._route(stream, values)
            self._non_direct(route)
        source = self._task_id
        targets = route.router.choose(source, values)
        route.emitted += 1
        route.transferred += len(targets)
        outboxes = self._inline_outboxes
        if anchors is None or not self._tracking:
            if outboxes is None:
                self._send_untracked(route.info, source, targets, values)
            else:
                tup = Tuple(values, route.info, source)
                for target in targets:
                    outboxes[target].append(tup)
        elif isinstance(anchors, Tuple):
            root = anchors.root
            if root >= 0:  # one anchor of one tree
                if outboxes is None:
                    anchors.ack_val ^= self._send_tree(route.info, source, targets, values, root)
                else:
                    for target in targets:
                        edge = getrandbits(ID_BITS)
                        anchors.ack_val ^= edge
                        outboxes[target].append(
                            tracked_tuple(values, route.info, source, root, edge)
                        )
            elif anchors.tree_list:
                self._send_anchored(route, targets, values, (anchors,))
            else:
                self._send_untracked(route.info, source, targets, values)
        else:
            self._send_anchored(route, targets, values, anchors)
        if self._observer is not None:
            self._observer(route.stream_id, source, values, targets)
        return targets

    def emit_direct(
        self,
        task_id: int,
        values: Sequence[Any],
        anchors: Tuple | Sequence[Tuple] | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """Emit ``values`` to task ``task_id`` on direct stream ``stream``.

        Raises:
            ValueError: the stream is not direct, or ``task_id`` does not subscribe to it.
        """
        route = self._routes.get(stream)
        if (
            route is None
            or not route.direct
            or len(values) != route.width
            or task_id not in route.direct_targets
        ):
            route = self._direct_route(task_id, stream, values)
        if anchors is None and self._observer is None:
            route.emitted += 1
            route.transferred += 1
            self._send_to(route.info, self._task_id, task_id, values, None)
            return
        self._send(route, [task_id], values, anchors)

    def _send(
        self,
        route: StreamRoute,
        targets: list[int],
        values: Sequence[Any],
        anchors: Tuple | Sequence[Tuple] | None,
    ) -> None:
        route.emitted += 1
        route.transferred += len(targets)
        source = self._task_id
        if anchors is None or not self._tracking:
            self._send_untracked(route.info, source, targets, values)
        else:
            if isinstance(anchors, Tuple):
                anchors = (anchors,)
            self._send_anchored(route, targets, values, anchors)
        if self._observer is not None:
            self._observer(route.stream_id, source, values, targets)

    def _send_anchored(
        self,
        route: StreamRoute,
        targets: list[int],
        values: Sequence[Any],
        anchors: Sequence[Tuple],
    ) -> None:
        """Storm's bolt emit: per target and per anchor a new edge id, XORed into the
        anchor's ack value and into the new tuple's id for each of the anchor's roots."""
        send_to = self._send_to
        info = route.info
        source = self._task_id
        for target in targets:
            combined: dict[int, int] = {}
            for anchor in anchors:
                anchor_roots = anchor.tree_ids
                if anchor_roots:
                    edge = getrandbits(ID_BITS)
                    anchor.ack_val ^= edge
                    for root in anchor_roots[::2]:
                        combined[root] = combined.get(root, 0) ^ edge
            roots = tuple(chain.from_iterable(combined.items())) if combined else None
            send_to(info, source, target, values, roots)

    def ack(self, tup: Tuple) -> None:
        """Mark ``tup`` processed. Every input must be acked or failed exactly once."""
        root = tup.root
        if root >= 0:  # one tree: the common case
            pending = self.pending_acks
            pending[root] = pending.get(root, 0) ^ tup.edge ^ tup.ack_val
        elif roots := tup.tree_list:
            pending = self.pending_acks
            value = tup.ack_val
            for position in range(0, len(roots), 2):
                root = roots[position]
                pending[root] = pending.get(root, 0) ^ roots[position + 1] ^ value
        self._stats.acked += 1
        if tup is self.sample_tuple:
            elapsed = perf_counter() - self.sample_start
            self._stats.process_secs += elapsed
            self._stats.process_count += 1
            self._stats.process_latency.record(elapsed * 1000.0)
            self.sample_tuple = None

    def settle(self, tup: Tuple) -> None:
        """Complete ``tup``'s part of its trees now, as an ack would, and stop tracking
        it: a later ``ack`` only counts it, and emits anchored to it are not tracked.

        For engines whose bolt state is durable at the end of a batch (Spark): a tuple
        held in that state (a window) needs no replay once the batch commits.
        """
        if tup.tree_ids:
            acked = self._stats.acked
            self.ack(tup)  # the same XOR into the ledger
            self._stats.acked = acked  # counted when the engine acks it for good
            tup.tree_ids = None
            tup.ack_val = 0

    def fail(self, tup: Tuple) -> None:
        """Fail ``tup``: its spout tuple's ``fail`` is called (and a reliable spout replays)."""
        roots = tup.tree_ids
        if roots:
            for root in roots[::2]:
                self._send_system(ACK_FAIL_STREAM, root)
        self._stats.failed += 1
        if tup is self.sample_tuple:
            self.sample_tuple = None

    def fail_trees(self, roots: Iterable[int]) -> None:
        """Fail the trees of ``roots`` (their spout tuples' ``fail`` is called), as
        failing a tuple of each would."""
        for root in roots:
            self._send_system(ACK_FAIL_STREAM, root)

    def ack_values(self, values: dict[int, int]) -> None:
        """Send acks combined beforehand, root id -> the XOR of the acked tuples' edge
        ids and ack values (what ``ack`` would have sent, one tuple at a time), in one
        message per acker task."""
        if values and self._tracking:
            self._ack_buffer.send_bulk(values)

    def reset_timeout(self, tup: Tuple) -> None:
        """Restart the message timeout of every tree ``tup`` belongs to (long work)."""
        roots = tup.tree_ids
        if roots:
            for root in roots[::2]:
                self._send_system(ACK_RESET_TIMEOUT_STREAM, root)

    def flush_acks(self) -> None:
        """Send the combined acks now (engines flush their shared buffers themselves)."""
        self._ack_buffer.flush()


class BasicBoltCollector:
    """A basic bolt task's :class:`~squall.model.collectors.BasicOutputCollector`:
    emits are anchored to the input being executed."""

    __slots__ = ("_out", "input")

    def __init__(self, out: BoltCollector) -> None:
        self._out = out
        #: The input tuple being executed (set by the engine).
        self.input: Tuple | None = None

    @property
    def output_collector(self) -> BoltCollector:
        """The underlying :class:`BoltCollector`."""
        return self._out

    def emit(self, values: Sequence[Any], stream: str = DEFAULT_STREAM) -> list[int]:
        """Emit ``values`` on ``stream`` anchored to the current input; returns task ids."""
        return self._out.emit(values, self.input, stream)

    def emit_direct(
        self, task_id: int, values: Sequence[Any], stream: str = DEFAULT_STREAM
    ) -> None:
        """Emit ``values`` to task ``task_id`` on direct ``stream``, anchored to the input."""
        self._out.emit_direct(task_id, values, self.input, stream)

    def reset_timeout(self, tup: Tuple) -> None:
        """Restart the message timeout of ``tup``'s trees."""
        self._out.reset_timeout(tup)

    def report_error(self, error: BaseException | str) -> None:
        """Record an error in this component's metrics and the log."""
        self._out.report_error(error)


@mypyc_attr(allow_interpreted_subclasses=True)  # the Spark engine's collectors
class SpoutCollector(_Emitter):
    """A spout task's :class:`~squall.model.collectors.SpoutOutputCollector`: emit
    tuples, tracked when given a ``msg_id``.

    The engine's spout executor owns ``pending`` (root id -> ``(msg_id, start_ms)``,
    oldest first) and ``completed`` (msg ids to ack right away: untracked emits when acking
    is off, and emits that reached no task). Entries are tuples, not lists: the garbage
    collector stops tracking a tuple of plain values, and a spout may have hundreds of
    thousands of trees in flight (a stateful topology holds acks until its commit).
    """

    def __init__(self, wiring: TaskWiring, clock: Clock) -> None:
        super().__init__(wiring)
        self._clock = clock
        self.pending: dict[int, tuple[Any, float]] = {}
        self.completed: list[Any] = []
        #: Emits so far (the executor compares it to see whether next_tuple emitted).
        self.emit_count = 0
        #: Set by the engine while some message ids must not be emitted again (their
        #: effect is already held by committed states): called with each emit's msg id,
        #: True skips the emit (the id is acked to the spout at once).
        self.skip_emit: Callable[[Any], bool] | None = None
        #: Positions in the acker tasks of those root ids are chosen among (see
        #: ``prefer_ackers``); empty: any.
        self._near_ackers: tuple[int, ...] = ()

    def prefer_ackers(self, acker_tasks: Iterable[int]) -> None:
        """Choose root ids whose acker task is one of ``acker_tasks`` from now on (those
        in this task's worker process: its inits and the completions then stay in the
        process). Root ids stay random in every other bit. Called before the task
        runs."""
        near = set(acker_tasks)
        self._near_ackers = tuple(i for i, task in enumerate(self._acker_tasks) if task in near)

    def emit(
        self, values: Sequence[Any], msg_id: Any = None, stream: str = DEFAULT_STREAM
    ) -> list[int]:
        """Emit ``values`` on ``stream``; with ``msg_id`` the tuple tree is tracked.

        ``ack(msg_id)``/``fail(msg_id)`` are later called on this spout task. Returns the
        ids of the tasks the tuple was sent to.

        Raises:
            ValueError: the stream is not declared, is direct, or the number of values
                differs from its fields.
        """
        route = self._route(stream, values)
        if route.direct:
            self._non_direct(route)
        targets = route.router.choose(self._task_id, values)
        self._send(route, targets, values, msg_id)
        return targets

    def emit_direct(
        self, task_id: int, values: Sequence[Any], msg_id: Any = None, stream: str = DEFAULT_STREAM
    ) -> None:
        """Emit ``values`` to task ``task_id`` on direct stream ``stream``."""
        route = self._direct_route(task_id, stream, values)
        self._send(route, [task_id], values, msg_id)

    def _send(
        self, route: StreamRoute, targets: list[int], values: Sequence[Any], msg_id: Any
    ) -> None:
        self.emit_count += 1
        if msg_id is not None and self.skip_emit is not None and self.skip_emit(msg_id):
            self.completed.append(msg_id)
            return
        route.emitted += 1
        route.transferred += len(targets)
        source = self._task_id
        if msg_id is None or not self._tracking:
            self._send_untracked(route.info, source, targets, values)
            if msg_id is not None:
                self.completed.append(msg_id)
        elif not targets:
            self.completed.append(msg_id)
        else:
            near = self._near_ackers
            if near:
                root = getrandbits(ID_BITS - 1)
                root += near[root % len(near)] - root % self._ackers
            else:
                root = getrandbits(ID_BITS)
            ack_val = self._send_tree(route.info, source, targets, values, root)
            self.pending[root] = (msg_id, self._clock.now_ms())
            buffer = self._ack_buffer
            buffer.inits[root] = source
            acks = buffer.acks
            acks[root] = acks.get(root, 0) ^ ack_val
        if self._observer is not None:
            self._observer(route.stream_id, source, values, targets)


def engine_collector(collector: OutputCollector, where: str) -> BoltCollector:
    """``collector`` as the engine's :class:`BoltCollector`, for the bolts an engine
    wraps around user bolts (stateful and windowed bolts' executors), which use its
    engine-facing methods. Called once, in ``prepare`` or when first needed.

    Raises:
        TypeError: ``collector`` is not the engine's (``where`` names the component).
    """
    if not isinstance(collector, BoltCollector):
        raise TypeError(
            f"{where} runs on the engine's bolt collector, got {type(collector).__name__}"
        )
    return collector


__all__ = [
    "ACK_BUFFER_STREAMS",
    "AckBuffer",
    "BasicBoltCollector",
    "BasicOutputCollector",
    "BoltCollector",
    "Observer",
    "OutputCollector",
    "SpoutCollector",
    "SpoutOutputCollector",
    "TaskWiring",
    "engine_collector",
]

# The interfaces the collectors implement. They are registered rather than derived from:
# compiled, the collectors are native classes, which derive from no Python class, and
# user code and the engines' wrappers derive from the interfaces.
OutputCollector.register(BoltCollector)
SpoutOutputCollector.register(SpoutCollector)
BasicOutputCollector.register(BasicBoltCollector)
