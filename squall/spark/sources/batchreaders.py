"""One streaming reader per kind of Trident or transactional source.

* :class:`BatchSpoutReader`: a batch spout emits each batch on the driver side; its
  tuples and a snapshot of the spout after them are logged. An empty batch is not
  logged, so an idle batch spout costs no micro-batch.
* :class:`DRPCReader`: a DRPC stream fetches one request per batch.
* :class:`TransactionalPartitionedReader`, :class:`OpaquePartitionedReader`: the
  spout's coordinator decides the number of partitions on the driver side; each
  partition is one Spark partition, read by the spout's emitter on an executor.
* :class:`CoordinatedReader`: a transactional topology's spout; its coordinator plans
  each transaction on the driver side, its emitter tasks emit it on executors.

The cluster picks the reader once, from the plan's source kind (:data:`READERS`).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from squall.runtime.context import TopologyContext
from squall.spark.control.taskcache import TASKS
from squall.spark.errors import ComponentFailure
from squall.spark.execute.listener import report_batch_emits
from squall.spark.execute.packets import Packet
from squall.spark.execute.routing import route, route_emits
from squall.spark.plan.batch import Edge, SourceKind
from squall.spark.sources.sourcereader import BatchPartition, Rows, SourceReader
from squall.spark.sources.spoutlog import LoggedBatch, LoggedPartition
from squall.transactional.attempt import TransactionAttempt
from squall.transactional.spouts import Coordinator

#: The most polls skipped between two empty batches of an idle partitioned spout.
MAX_IDLE_POLLS = 32


class LoggedRowsReader(SourceReader):
    """A source whose batches are emitted on the driver side and logged whole: a
    batch is read in slices, one per task of the first stages (contiguous shares, in
    emit order), so a stage over an aligned edge needs no exchange."""

    def parts(self, index: int) -> int:
        return max([1, *(edge.tasks for edge in self.setup.edges)])

    def read_part(self, partition: BatchPartition) -> list[Packet]:
        setup = self.setup
        part, slices = partition.slice_index, partition.slices
        everything = self.log.batch(partition.index).rows
        size = len(everything)
        values = everything[part * size // slices : (part + 1) * size // slices]
        sender = setup.emitter_context(0)  # the emitter's one task emits every slice
        return route(setup.edges, setup.fields, sender, setup.layout.plan, values, part, slices)

    def emitter_task(self, part: int) -> int:
        """The emitter's one task emits every part."""
        return super().emitter_task(0)


class BatchSpoutReader(LoggedRowsReader):
    """A Trident batch spout, open in the source's process (restored from the log's
    last snapshot after a restart); committed batches are acked to it."""

    aligns_slices = True

    def open(self) -> None:
        last = self.log.last()
        if last is not None and last.spout is not None:
            self.spout = last.spout
        else:
            self.spout = self.setup.batch_spout()
            self.spout.open(self.setup.conf, self.setup.emitter_context(0))

    def log_batch(self, index: int) -> bool:
        # The batch's first attempt (a replay reads the logged rows).
        rows = self.rows(TransactionAttempt(index + 1, 0))
        try:
            self.spout.emit_batch(index + 1, rows)
        except Exception as exc:  # it stops the query: the failure names the spout
            raise ComponentFailure.of(exc, self.setup.source_id, self.emitter_task(0)) from None
        if not rows.rows:
            return False
        self.log.append(index, LoggedBatch(rows.rows, spout=self.spout))
        return True

    def committed(self, end: int) -> None:
        for index in range(self.acked, end):
            self.spout.ack(index + 1)


class DRPCReader(LoggedRowsReader):
    """A DRPC stream: one request per batch, fetched over HTTP from the invocations
    port the cluster named in the options; the request id is logged with it."""

    def open(self) -> None:
        from squall.drpc import DRPCInvocationsClient

        function = self.setup.drpc_function
        if function is None:
            raise ValueError(f"DRPC source {self.setup.source_id!r} names no function")
        self.function = function
        options = self.options
        self.client = DRPCInvocationsClient(
            options["drpc_host"], int(options["drpc_port"]), token=options.get("drpc_token")
        )

    def log_batch(self, index: int) -> bool:
        request = self.client.fetch_request(self.function)
        if request is None:
            return False
        self.log.append(index, LoggedBatch([[request.args]], request_id=request.request_id))
        return True


class EmittedOnExecutorsReader(SourceReader):
    """A source whose coordinator plans each batch on the driver side while its
    emitters emit it on executors, one Spark partition each.

    After a batch in which no partition emitted anything, the source is offered less
    and less often (every 1, 2, 4 ... up to ``MAX_IDLE_POLLS`` polls) until tuples come
    again.
    """

    emits_on_executors = True

    def open(self) -> None:
        self.coordinator = self.make_coordinator()
        self.empty_streak = 0
        self.skips_left = 0
        # A batch logged before a restart starts no back-off: the spout is polled at once.
        self.observed_empty = self.size - 1

    @abstractmethod
    def make_coordinator(self) -> Any:
        """The spout's coordinator (driver-side process)."""

    def parts(self, index: int) -> int:
        return self.log.partitions(index)

    def idle(self) -> bool:
        """Whether to skip this poll: the last batch emitted nothing, and fewer polls
        than its back-off passed since (doubling per empty batch)."""
        last = self.size - 1
        if last < 0:
            return False
        total = self.log.partition_total(last, self.log.partitions(last))
        if total != 0:
            self.empty_streak = 0
            return False
        if self.observed_empty != last:
            self.observed_empty = last
            self.empty_streak += 1
            self.skips_left = min(2 ** (self.empty_streak - 1), MAX_IDLE_POLLS)
        if self.skips_left > 0:
            self.skips_left -= 1
            return True
        return False


class PartitionedReader(EmittedOnExecutorsReader):
    """A partitioned Trident spout: the coordinator decides the number of partitions of
    each batch; each partition is emitted by the spout's emitter on an executor, its
    metadata and tuple count logged beside the batch."""

    def make_coordinator(self) -> Any:
        setup = self.setup
        return setup.partitioned_spout().get_coordinator(setup.conf, setup.coordinator_context())

    def log_batch(self, index: int) -> bool:
        if self.idle() or not self.coordinator.is_ready():
            return False
        partitions = int(self.coordinator.number_of_partitions())
        self.log.append(index, LoggedBatch(partitions=partitions))
        return True

    def read_part(self, partition: BatchPartition) -> list[Packet]:
        """Emit spout partition ``slice_index`` with the emitter task the local engine
        gives it (partition ``p`` of emitter task ``p % tasks``), routed as that task."""
        setup = self.setup
        part = partition.slice_index
        task = part % setup.tasks
        emitter, sender = TASKS.get(
            self.options["run"],
            ("emitter", setup.source_id, task),
            lambda: self._emitter(task),
        )
        values = self._emit(emitter, partition.index, part)
        return route(setup.edges, setup.fields, sender, setup.layout.plan, values)

    def _emitter(self, task: int) -> tuple[Any, TopologyContext]:
        setup = self.setup
        context = setup.emitter_context(task)
        return setup.partitioned_spout().get_emitter(setup.conf, context), context

    def _emit(self, emitter: Any, index: int, partition: int) -> list[list[Any]]:
        attempt = TransactionAttempt(index + 1, self.log.attempt(index))
        out = self.rows(attempt)
        self.emit_partition(emitter, attempt, out, index, partition)
        return out.rows

    @abstractmethod
    def emit_partition(
        self, emitter: Any, attempt: TransactionAttempt, out: Rows, index: int, partition: int
    ) -> None:
        """Emit ``partition`` of batch ``index`` into ``out`` with the spout's emitter,
        logging the partition's metadata and tuple count when they are new."""


class TransactionalPartitionedReader(PartitionedReader):
    """A transactional partitioned spout: a batch is replayed from its logged metadata."""

    def emit_partition(
        self, emitter: Any, attempt: TransactionAttempt, out: Rows, index: int, partition: int
    ) -> None:
        logged = self.log.partition(index, partition)
        if logged is not None:
            emitter.emit_partition_batch(attempt, out, partition, logged.meta)
            return
        previous = self.log.previous_partition_meta(index, partition)
        meta = emitter.emit_partition_batch_new(attempt, out, partition, previous)
        self.log.write_partition(index, partition, LoggedPartition(meta, len(out.rows)))


class OpaquePartitionedReader(PartitionedReader):
    """An opaque partitioned spout: always continues from the previous batch's
    metadata (a replay may hold other tuples; opaque state counts each tuple once)."""

    def emit_partition(
        self, emitter: Any, attempt: TransactionAttempt, out: Rows, index: int, partition: int
    ) -> None:
        previous = self.log.previous_partition_meta(index, partition)
        meta = emitter.emit_partition_batch(attempt, out, partition, previous)
        self.log.write_partition(index, partition, LoggedPartition(meta, len(out.rows)))


class CoordinatedReader(EmittedOnExecutorsReader):
    """A transactional topology's spout: its coordinator plans each transaction (the
    metadata is logged, so a replay is emitted alike); emitter task ``i`` emits it in
    Spark partition ``i``."""

    def make_coordinator(self) -> Coordinator:
        setup = self.setup
        return setup.transactional_spout().get_coordinator(setup.conf, setup.coordinator_context())

    def open(self) -> None:
        super().open()
        #: The metadata of the last transaction (None before any).
        last = self.log.last()
        self.last_meta = last.transaction if last is not None else None

    def log_batch(self, index: int) -> bool:
        if self.idle() or not self.coordinator.is_ready():
            return False
        meta = self.coordinator.initialize_transaction(index + 1, self.last_meta)
        self.log.append(index, LoggedBatch(partitions=self.setup.tasks, transaction=meta))
        self.last_meta = meta
        return True

    def read_part(self, partition: BatchPartition) -> list[Packet]:
        """Run emitter task ``slice_index`` for the batch (its earlier transactions up
        to ``committed`` cleaned up first)."""
        from squall.spark.execute.batchbolts import BatchEmits, DeclaredStreams
        from squall.spark.sources.coordination import FileCoordinationStore

        setup = self.setup
        index, task = partition.index, partition.slice_index

        def make_emitter() -> tuple[Any, TopologyContext]:
            store = FileCoordinationStore(setup.store_dir)
            context = setup.emitter_context(task, store)
            return setup.transactional_spout().get_emitter(setup.conf, context), context

        emitter, sender = TASKS.get(
            self.options["run"], ("emitter", setup.source_id, task), make_emitter
        )
        if partition.committed:
            emitter.cleanup_before(partition.committed)
        attempt = TransactionAttempt(index + 1, self.log.attempt(index))
        out = BatchEmits(setup.source_id, DeclaredStreams.of(setup.layout, setup.source_id))
        emitter.emit_batch(attempt, self.log.batch(index).transaction, out)
        report_batch_emits(setup.conf, setup.source_id, sender.task_id, attempt, out.emits)
        self.log.write_partition(index, task, LoggedPartition(None, len(out.emits)))
        edges: dict[str, list[Edge]] = {}
        for edge in setup.edges:
            edges.setdefault(edge.stream, []).append(edge)
        plan = setup.layout.plan
        return route_emits(edges, setup.output_fields, sender, plan, out.emits, attempt)


#: The reader of each kind of source in a plan.
READERS: dict[SourceKind, type[SourceReader]] = {
    "batch": BatchSpoutReader,
    "drpc": DRPCReader,
    "transactional": TransactionalPartitionedReader,
    "opaque": OpaquePartitionedReader,
    "coordinated": CoordinatedReader,
}
