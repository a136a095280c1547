"""Per-request completion in linear DRPC topologies (Storm's ``CoordinatedBolt``).

Every tuple of a linear DRPC topology carries its request id as its first value. Each
step runs in a :class:`CoordinatedBolt`, which counts, per request id and per target
task, the tuples its step emits. When a task has finished a request, it tells every
task of the next step, on the direct stream :data:`COORDINATED_STREAM`, how many tuples
of that request it sent there. A task of the next step has thus received all of a
request once it has heard from every task of the previous step (from one task for the
second step: a request enters the first step as one tuple) and has acked as many tuples
as they announced. It then finishes the request: a batch bolt's ``finish_batch`` runs,
a bolt implementing :class:`FinishedCallback` gets ``finished_id(id)``, and the task
reports its own counts downstream, so completion flows down the steps request by
request. Counting makes completion exact whatever order the tuples arrive in.

A request one of whose tuples fails at a step is failed there: it never finishes at
that step (later tuples of it are failed too), so no partial result goes on, and the
failed tuple fails the request's tuple tree, which makes the DRPC spout fail the request
at its broker.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from squall.model.batch import BatchBolt, BatchOutputCollector
from squall.model.collectors import Anchors, BasicOutputCollector, OutputCollector
from squall.model.components import BasicBolt, Bolt
from squall.model.config import Config
from squall.model.context import TopologyContext
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.errors import FailedException, ReportedFailedException
from squall.model.hooks import CleansUpTask, MakesBatchInstances, PreparesTask, implements
from squall.model.tuple import DEFAULT_STREAM, Tuple

#: The direct stream on which a step tells each task of the next step how many tuples of
#: a finished request it sent there (Storm's ``__coordinated``): fields ``id``, ``count``.
COORDINATED_STREAM = "$coordinated"

#: How long a task keeps the state of a request that never finishes there (a failed
#: request, or one that reached a task of the last step that is not its finisher), in
#: seconds, when the configuration sets no ``topology.message.timeout.secs``.
_DEFAULT_TIMEOUT_SECS = 30.0


@runtime_checkable
class FinishedCallback(Protocol):
    """Storm's ``FinishedCallback``: a bolt of a linear DRPC topology implementing
    ``finished_id`` is told when its task has received every tuple of a request.

    Runs on the task's thread, after the ``execute`` of the request's last tuple (or
    when the last count from the previous step arrives). Emits there count as the
    request's; raising fails the request.
    """

    def finished_id(self, id: Any) -> None:
        """Every tuple of request ``id`` has reached this task."""
        ...


@dataclass
class _Tracking:
    """What a task knows of one request."""

    started: float
    received_id: bool
    #: Regular tuples of the request acked by the step.
    received: int = 0
    #: Tuples the previous step announced for this task, and how many of its tasks did.
    expected: int = 0
    reports: int = 0
    failed: bool = False
    #: Tuples acked (or failed) only when the request finishes here.
    held: list[Tuple] = field(default_factory=list)
    #: Tuples this task emitted for the request, per target task.
    sent: dict[int, int] = field(default_factory=dict)
    #: A batch bolt's instance for the request.
    batch: BatchBolt | None = None
    batch_collector: BatchOutputCollector | None = None


class CoordinatedBolt(Bolt):
    """Runs one step of a linear DRPC topology with request coordination (see the module
    docstring). Made by ``LinearDRPCTopologyBuilder``; runs on the step's tasks.

    Args:
        delegate: the step: a ``Bolt``, ``BasicBolt`` or ``BatchBolt`` (one instance per
            request).
        sources: the previous step's component id -> whether one of its tasks reports
            a request (the first step's successor) or all of them do; empty for the
            first step, which finishes a request with its one input tuple.
        id_stream: ``(component, stream)`` of the request ids: a last step whose
            requests end in ``finish_batch``/``finished_id`` finishes a request only on
            the task that receives its id, the task its result tuples go to.
    """

    def __init__(
        self,
        delegate: Bolt | BasicBolt | BatchBolt,
        sources: Mapping[str, bool],
        id_stream: tuple[str, str] | None = None,
    ) -> None:
        self.delegate = delegate
        self.sources = dict(sources)
        self.id_stream = id_stream

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The step's streams, and the direct :data:`COORDINATED_STREAM`."""
        self.delegate.declare_output_fields(declarer)
        declarer.declare_stream(COORDINATED_STREAM, ["id", "count"], direct=True)

    def get_component_configuration(self) -> dict[str, Any] | None:
        """The step's own component configuration."""
        return self.delegate.get_component_configuration()

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        """Prepare the step on its task, with a collector that counts its emits."""
        self._conf = conf
        self._context = context
        self._out = collector
        self._reports_expected = sum(
            1 if single else len(context.get_component_tasks(source))
            for source, single in self.sources.items()
        )
        targets = context.get_this_targets().get(COORDINATED_STREAM, {})
        self._next_tasks = sorted(
            task for component in targets for task in context.get_component_tasks(component)
        )
        timeout = conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS)
        self._keep_secs = float(timeout) if timeout else _DEFAULT_TIMEOUT_SECS
        self._tracked: dict[Any, _Tracking] = {}
        self._counting = _CountingCollector(self)
        delegate = self.delegate
        if isinstance(delegate, BatchBolt):
            if implements(delegate, PreparesTask):
                delegate.prepare_task(conf, context)
        elif isinstance(delegate, BasicBolt):
            self._basic = _BasicCollector(self._counting)
            delegate.prepare(conf, context)
        else:
            delegate.prepare(conf, context, self._counting)

    def cleanup(self) -> None:
        """Clean the step up."""
        delegate = self.delegate
        if isinstance(delegate, BatchBolt):
            if implements(delegate, CleansUpTask):
                delegate.cleanup_task()
        else:
            delegate.cleanup()

    # -- tuples -----------------------------------------------------------------------

    def execute(self, tup: Tuple) -> None:
        """A request id, a count from the previous step, or one of the step's tuples."""
        request = tup.values[0]
        track = self._track(request)
        if self.id_stream is not None and tup.source_global_stream_id == self.id_stream:
            track.received_id = True
            self._check(request, tup, regular=False)
        elif tup.source_stream == COORDINATED_STREAM:
            track.reports += 1
            track.expected += int(tup.values[1])
            self._check(request, tup, regular=False)
        elif track.failed:
            self._out.fail(tup)  # the request failed here already: nothing more of it
        else:
            self._run(request, track, tup)

    def _run(self, request: Any, track: _Tracking, tup: Tuple) -> None:
        """Execute the step on one of its tuples."""
        delegate = self.delegate
        try:
            if isinstance(delegate, BatchBolt):
                collector = self._batch(request, track)
                collector.anchor = tup
                delegate_instance = track.batch
                assert delegate_instance is not None
                delegate_instance.execute(tup)
                self._counting.ack(tup)
            elif isinstance(delegate, BasicBolt):
                self._basic.input = tup
                delegate.execute(tup, self._basic)
                self._counting.ack(tup)
            else:
                delegate.execute(tup)
        except Exception as exc:
            self._report(exc)
            self._counting.fail(tup)

    def _batch(self, request: Any, track: _Tracking) -> BatchOutputCollector:
        """The batch bolt's instance for ``request`` (made and prepared on first use)."""
        if track.batch_collector is None:
            delegate = self.delegate
            assert isinstance(delegate, BatchBolt)
            collector = BatchOutputCollector(self._counting)
            instance = (
                delegate.for_batch()
                if implements(delegate, MakesBatchInstances)
                else copy.deepcopy(delegate)
            )
            instance.prepare(self._conf, self._context, collector, request)
            track.batch, track.batch_collector = instance, collector
        return track.batch_collector

    def _report(self, exc: Exception) -> None:
        if not isinstance(exc, FailedException) or isinstance(exc, ReportedFailedException):
            self._out.report_error(exc)

    def _track(self, request: Any) -> _Tracking:
        track = self._tracked.get(request)
        if track is None:
            now = time.monotonic()
            self._expire(now)
            track = self._tracked[request] = _Tracking(now, self.id_stream is None)
        return track

    def _expire(self, now: float) -> None:
        """Forget requests older than the message timeout (never finished here): their
        held tuples fail, as their trees have timed out anyway."""
        tracked = self._tracked
        while tracked:
            request, track = next(iter(tracked.items()))
            if now - track.started < self._keep_secs:
                return
            del tracked[request]
            for held in track.held:
                self._out.fail(held)

    def _check(self, request: Any, tup: Tuple, regular: bool) -> bool:
        """Finish ``request`` if this task has all of it, or fail what it holds if it
        failed; ack or fail ``tup`` unless held or regular. Returns whether it failed."""
        track = self._tracked.get(request)
        if track is None:
            if not regular:
                self._out.fail(tup)
            return False
        held = not regular and (
            self.id_stream is not None
            if tup.source_stream != COORDINATED_STREAM
            else self.id_stream is None
        )
        if held:
            track.held.append(tup)
        failed = track.failed
        if not failed and track.received_id and self._complete(track):
            failed = not self._finish(request, track, tup)
        if failed:
            track.failed = True
            for tuple_held in track.held:
                self._out.fail(tuple_held)
            track.held.clear()
            track.batch = track.batch_collector = None
        if not held and not regular:
            if failed:
                self._out.fail(tup)
            else:
                self._out.ack(tup)
        return failed

    def _complete(self, track: _Tracking) -> bool:
        if not self.sources:
            return True
        return track.reports == self._reports_expected and track.received == track.expected

    def _finish(self, request: Any, track: _Tracking, last: Tuple) -> bool:
        """The task has all of ``request``: end it here and report downstream. Returns
        False if the step raised (the request fails)."""
        delegate = self.delegate
        try:
            if isinstance(delegate, BatchBolt):
                collector = self._batch(request, track)
                collector.anchor = last
                assert track.batch is not None
                track.batch.finish_batch()
            elif implements(delegate, FinishedCallback):
                delegate.finished_id(request)
        except Exception as exc:
            self._report(exc)
            return False
        del self._tracked[request]
        for task in self._next_tasks:
            self._out.emit_direct(
                task, [request, track.sent.get(task, 0)], last, COORDINATED_STREAM
            )
        for held in track.held:
            self._out.ack(held)
        return True

    # -- what the step's collector reports ----------------------------------------------

    def _sent(self, values: Sequence[Any], tasks: Sequence[int]) -> None:
        track = self._tracked.get(values[0]) if len(values) else None
        if track is not None:
            sent = track.sent
            for task in tasks:
                sent[task] = sent.get(task, 0) + 1

    def _acked(self, tup: Tuple) -> None:
        track = self._tracked.get(tup.values[0])
        if track is not None:
            track.received += 1
        if self._check(tup.values[0], tup, regular=True):
            self._out.fail(tup)
        else:
            self._out.ack(tup)

    def _failed(self, tup: Tuple) -> None:
        track = self._tracked.get(tup.values[0])
        if track is not None:
            track.failed = True
        self._check(tup.values[0], tup, regular=True)
        self._out.fail(tup)


class _CountingCollector(OutputCollector):
    """The step's collector: counts its emits per request and target task, and tells
    the coordinated bolt of its acks and fails."""

    def __init__(self, owner: CoordinatedBolt) -> None:
        self._owner = owner

    def emit(
        self, values: Sequence[Any], anchors: Anchors = None, stream: str = DEFAULT_STREAM
    ) -> list[int]:
        tasks = self._owner._out.emit(values, anchors, stream)
        self._owner._sent(values, tasks)
        return tasks

    def emit_direct(
        self,
        task_id: int,
        values: Sequence[Any],
        anchors: Anchors = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        self._owner._out.emit_direct(task_id, values, anchors, stream)
        self._owner._sent(values, [task_id])

    def ack(self, tup: Tuple) -> None:
        self._owner._acked(tup)

    def fail(self, tup: Tuple) -> None:
        self._owner._failed(tup)

    def reset_timeout(self, tup: Tuple) -> None:
        self._owner._out.reset_timeout(tup)

    def report_error(self, error: BaseException | str) -> None:
        self._owner._out.report_error(error)


class _BasicCollector(BasicOutputCollector):
    """A basic step's collector: emits anchored to the input being executed."""

    def __init__(self, out: _CountingCollector) -> None:
        self._out = out
        self.input: Tuple | None = None

    @property
    def output_collector(self) -> OutputCollector:
        return self._out

    def emit(self, values: Sequence[Any], stream: str = DEFAULT_STREAM) -> list[int]:
        return self._out.emit(values, self.input, stream)

    def emit_direct(
        self, task_id: int, values: Sequence[Any], stream: str = DEFAULT_STREAM
    ) -> None:
        self._out.emit_direct(task_id, values, self.input, stream)

    def reset_timeout(self, tup: Tuple) -> None:
        self._out.reset_timeout(tup)

    def report_error(self, error: BaseException | str) -> None:
        self._out.report_error(error)
