"""Per-partition work of a micro-batch for a transactional topology: one batch bolt
task run over its part of the batch.

Storm's batch coordination (``$coord`` counts, ``CoordinatedBolt``) is not needed on
Spark: a stage sees all of its partition's tuples of the batch at once, so each task
makes the bolt's instance for the batch, runs ``execute`` for every tuple and then
``finish_batch``. Rows carry tuple values without the attempt; the stage puts the
batch's ``TransactionAttempt`` back in front.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from squall.model.fields import Fields
from squall.model.grouping import GroupingKind
from squall.model.hooks import CleansUpTask, MakesBatchInstances, PreparesTask, implements
from squall.model.tuple import DEFAULT_STREAM, StreamInfo, Tuple
from squall.runtime.context import TopologyContext
from squall.runtime.emitchecks import check_emit, check_emit_direct
from squall.spark.control.taskcache import TASKS
from squall.spark.execute.figures import ReportKey, Reports
from squall.spark.execute.listener import report_batch_emits
from squall.spark.execute.packets import ArrowFunction, Packet, unpack_values
from squall.spark.execute.routing import Emit, route_emits
from squall.spark.execute.stages import arrow_function
from squall.spark.plan.batch import SegmentPlan
from squall.spark.plan.tasks import TaskLayout
from squall.transactional.attempt import TransactionAttempt

if TYPE_CHECKING:
    from pyspark.accumulators import Accumulator


@dataclass(frozen=True)
class DeclaredStreams:
    """The streams a batch component may emit on, as its collector on the local engine
    knows them: ``fields`` (stream -> fields, the attempt first) of every stream it
    declares in the system topology (``__`` streams are the engine's), and ``direct``
    (direct stream -> the tasks subscribing to it with a direct grouping)."""

    fields: dict[str, Fields]
    direct: dict[str, frozenset[int]]

    @classmethod
    def of(cls, layout: TaskLayout, component_id: str) -> DeclaredStreams:
        """The streams ``component_id`` declares in ``layout``'s topology."""
        topology = layout.topology
        spec = topology.get_component(component_id)
        fields: dict[str, Fields] = {}
        direct: dict[str, frozenset[int]] = {}
        for stream, declaration in spec.streams.items():
            if stream.startswith("__"):
                continue
            fields[stream] = declaration.fields
            if declaration.direct:
                direct[stream] = frozenset(
                    task
                    for subscriber, grouping in topology.subscribers(component_id, stream)
                    if grouping.kind is GroupingKind.DIRECT
                    for task in layout.task_ids(subscriber)
                )
        return cls(fields, direct)


class BatchEmits:
    """The collector of a batch bolt (or a transactional spout's emitter) on Spark:
    checks each emit as the local engine's collector does (the same errors, raised from
    the emit call: the batch fails), and keeps what it emits, routed after the batch.

    Runs in the task's process (an executor's Python worker, or the driver for a
    committer), on the task's thread.
    """

    def __init__(self, component_id: str, declared: DeclaredStreams) -> None:
        self.component_id = component_id
        self.declared = declared
        self.emits: list[Emit] = []

    def emit(self, values: Sequence[Any], stream: str = DEFAULT_STREAM) -> list[int]:
        """Emit ``values`` (first value: the batch's attempt) on ``stream``.

        Raises:
            ValueError: the stream is not declared, is direct, or the number of values
                differs from its fields (see :func:`~squall.runtime.emitchecks.check_emit`).
        """
        check_emit(self.component_id, stream, values, self.declared.fields, self.declared.direct)
        self.emits.append(Emit(stream, list(values[1:]), None))
        return []

    def emit_direct(
        self, task_id: int, values: Sequence[Any], stream: str = DEFAULT_STREAM
    ) -> None:
        """Emit ``values`` to task ``task_id`` on a direct stream.

        Raises:
            ValueError: the stream is not declared or not direct, the number of values
                differs from its fields, or ``task_id`` does not subscribe to it (see
                :func:`~squall.runtime.emitchecks.check_emit_direct`).
        """
        declared = self.declared
        check_emit_direct(
            self.component_id, task_id, stream, values, declared.fields, declared.direct
        )
        self.emits.append(Emit(stream, list(values[1:]), task_id))

    def reset_timeout(self, tup: Tuple) -> None:
        """Nothing: a micro-batch has no message timeout."""

    def report_error(self, error: BaseException | str) -> None:
        """Fail the batch with ``error`` (it is run again)."""
        if isinstance(error, BaseException):
            raise error
        raise RuntimeError(f"{self.component_id}: {error}")


class BatchBoltStage:
    """Runs one batch bolt component for one micro-batch (transaction ``txid``)."""

    def __init__(
        self, plan: SegmentPlan, txid: int, conf: dict[str, Any], run_key: str, attempt: int = 0
    ) -> None:
        self.plan = plan
        self.attempt = TransactionAttempt(txid, attempt)
        self.attempt_number = attempt
        self.conf = conf
        self.run_key = run_key
        #: Tuples in and emit calls of the last ``run_partition``.
        self.executed = 0
        self.emitted = 0
        self._streams: DeclaredStreams | None = None

    def _declared(self) -> DeclaredStreams:
        """The streams the bolt declares (worked out once per stage object)."""
        if self._streams is None:
            self._streams = DeclaredStreams.of(self.plan.layout, self.plan.component_id)
        return self._streams

    def _context(self, partition: int) -> TopologyContext:
        """The task's context, its bolt's ``prepare_task`` done once per process (the
        task cache runs its ``cleanup_task`` when the run is forgotten)."""
        key = ("batch bolt", self.plan.index, partition)
        prepared = TASKS.get(self.run_key, key, lambda: self._prepare(partition), _cleanup)
        return prepared[0]

    def _prepare(self, partition: int) -> tuple[TopologyContext, Any]:
        plan = self.plan
        context = plan.layout.context(plan.component_id, partition, self.conf)
        if implements(plan.segment.bolt, PreparesTask):
            plan.segment.bolt.prepare_task(self.conf, context)
        return (context, plan.segment.bolt)

    def run_partition(self, partition: int, packets: Iterable[Packet]) -> list[Packet]:
        """Run the bolt's instance for this batch over one partition's tuples; return
        the routed output."""
        plan = self.plan
        context = self._context(partition)
        declared = plan.segment.bolt
        bolt = (
            declared.for_batch()
            if implements(declared, MakesBatchInstances)
            else copy.deepcopy(declared)
        )
        collector = BatchEmits(plan.component_id, self._declared())
        attempt = self.attempt
        bolt.prepare(self.conf, context, collector, attempt)
        infos: dict[tuple[str, str], StreamInfo] = {}
        executed = 0
        for packet in packets:
            port = (packet.source, packet.stream)
            info = infos.get(port)
            if info is None:
                info = infos[port] = StreamInfo(*port, plan.input_fields[port])
            executed += packet.size
            for values in unpack_values(packet.tuples):
                bolt.execute(Tuple([attempt, *values], info, -1))
        bolt.finish_batch()
        report_batch_emits(self.conf, plan.component_id, context.task_id, attempt, collector.emits)
        self.executed = executed
        self.emitted = len(collector.emits)
        return route_emits(
            plan.outputs, plan.output_fields, context, plan.layout.plan, collector.emits, attempt
        )

    def report_key(self, partition: int) -> ReportKey:
        """The key of task ``partition``'s report of this micro-batch's attempt."""
        txid = self.attempt.transaction_id
        return ReportKey(txid - 1, self.attempt_number, self.plan.component_id, partition)

    def arrow_function(self, reports: Accumulator[Reports]) -> ArrowFunction:
        """The ``mapInArrow`` function running this stage on executors."""
        return arrow_function(self, reports)


def _cleanup(prepared: tuple[TopologyContext, Any]) -> None:
    """Let a task's bolt release its task-level resources (``cleanup_task``)."""
    _, bolt = prepared
    if implements(bolt, CleansUpTask):
        bolt.cleanup_task()
