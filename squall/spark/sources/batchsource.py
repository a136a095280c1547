"""Batch sources of a Trident topology as Spark streaming sources (Python Data Source
API).

Offsets count a source's batches (``{"source": id, "batch": n}``). Each time Spark
asks for the latest offset, the source's driver side makes at most one new batch and
logs it (see ``squall.spark.sources.spoutlog``):

* a batch spout emits the batch on the driver, and its rows are logged;
* a partitioned (transactional or opaque) spout's coordinator decides the number of
  partitions; the partitions are read on executors, one Spark partition each;
* a DRPC stream fetches one request.

``read`` returns a logged batch, so a micro-batch replays identically after a crash.
A batch spout's empty batch is not logged (the offset does not move, so Spark runs no
micro-batch); after a partitioned spout's empty batch, the next ones are offered less
often (up to every ``MAX_IDLE_POLLS`` polls) until tuples come again. While the topology
is deactivated (a pause file exists), no source is polled. Rows leave the source already
routed to the first segments' partitions, so they enter the plan without a routing
stage.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)

from squall.spark.execute.packets import PACKET_SCHEMA, Packet, packets_to_arrow
from squall.spark.execute.routing import route, route_emits
from squall.spark.execute.taskview import TaskView
from squall.spark.plan.batch import Edge, SourceKind
from squall.spark.runtime.workerprocess import prepare_process
from squall.spark.sources.spoutlog import SpoutLog

SOURCE_NAME = "squall_spout"
#: The most polls skipped between two empty batches of an idle partitioned spout.
MAX_IDLE_POLLS = 32

#: Spout emitters made in this process, by topology run, source and task (a Python
#: worker serves later runs too: a restarted topology gets new emitters).
_EMITTERS: dict[str, Any] = {}


@dataclass
class SourceSetup:
    """What a source reader needs, written by the cluster next to the spout log."""

    source_id: str
    kind: SourceKind
    spout: Any
    edges: list[Edge]
    fields: Any
    conf: dict[str, Any]
    drpc_function: str | None = None
    #: A coordinated spout's emitter tasks, the fields of each of its streams (without
    #: the attempt), every component's task count, and its coordination store's folder.
    tasks: int = 1
    output_fields: dict[str, Any] = field(default_factory=dict)
    component_tasks: dict[str, int] = field(default_factory=dict)
    store_dir: str = ""


class _Rows:
    """The collector a spout or an emitter emits through, inside the reader."""

    def __init__(self) -> None:
        self.rows: list[list[Any]] = []

    def emit(self, values: Any) -> None:
        self.rows.append(list(values))

    def report_error(self, error: BaseException | str) -> None:
        raise RuntimeError(str(error)) if isinstance(error, str) else error


class BatchPartition(InputPartition):
    """Part ``slice_index`` of ``slices`` of logged batch ``index`` (for a partitioned
    spout: its partition ``slice_index`` of ``slices``; for a coordinated spout: its
    emitter task, with ``committed`` the last committed transaction)."""

    def __init__(self, index: int, slice_index: int = 0, slices: int = 1, committed: int = 0):
        self.index = index
        self.slice_index = slice_index
        self.slices = slices
        self.committed = committed


class SpoutStreamReader(DataSourceStreamReader):
    """Spark creates this reader in the source's driver-side Python process
    (``latestOffset``, ``partitions``, ``commit``) and ships a copy to executors for
    ``read``; everything is loaded lazily, so the copy stays small."""

    def __init__(self, options: dict[str, str]) -> None:
        prepare_process()
        self.options = dict(options)
        self.log = SpoutLog(options["log"])
        self._setup: SourceSetup | None = None
        self._driver: _DriverSide | None = None

    @property
    def setup(self) -> SourceSetup:
        if self._setup is None:
            with open(self.options["setup"], "rb") as handle:
                self._setup = pickle.load(handle)
        return self._setup

    @property
    def driver(self) -> _DriverSide:
        if self._driver is None:
            self._driver = _DriverSide(self.setup, self.log, self.options)
        return self._driver

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "log": self.log, "_setup": None, "_driver": None}

    def initialOffset(self) -> dict[str, Any]:
        return {"source": self.options["source"], "batch": 0}

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        """One batch per micro-batch: a batch logged earlier (before a restart) if Spark
        has not read it yet, else a new one (unless paused or there is none)."""
        driver = self.driver
        position = int(start["batch"])
        if position < driver.size:
            position += 1
        elif not os.path.exists(self.options["pause"]) and driver.next_batch():
            position = driver.size
        return {"source": self.options["source"], "batch": position}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        driver = self.driver
        return [
            BatchPartition(index, part, parts, driver.acked)
            for index in range(int(start["batch"]), int(end["batch"]))
            for parts in [driver.parts(index)]
            for part in range(parts)
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Runs on an executor: the rows of one part of a logged batch."""
        import pyarrow as pa

        prepare_process()
        setup = self.setup
        index = partition.index  # type: ignore[attr-defined]
        part = partition.slice_index  # type: ignore[attr-defined]
        if setup.kind in ("transactional", "opaque"):
            packets = route(setup.edges, setup.fields, part, self._emit_partition(index, part))
            yield packets_to_arrow(packets, pa)
            return
        if setup.kind == "coordinated":
            committed = partition.committed  # type: ignore[attr-defined]
            yield packets_to_arrow(self._emit_task(index, part, committed), pa)
            return
        slices = partition.slices  # type: ignore[attr-defined]
        everything = self.log.rows(index)
        size = len(everything)  # slice ``part``: a contiguous share, in emit order
        values = everything[part * size // slices : (part + 1) * size // slices]
        yield packets_to_arrow(route(setup.edges, setup.fields, part, values, slices), pa)

    def _emit_partition(self, index: int, partition: int) -> list[list[Any]]:
        """Emit ``partition`` of batch ``index`` with the spout's emitter: a
        transactional spout replays a batch from its logged metadata; an opaque one
        always continues from the previous batch's (so a replay may differ)."""
        from squall.transactional.attempt import TransactionAttempt

        setup = self.setup
        key = f"{self.options['run']}#{setup.source_id}"
        emitter = _EMITTERS.get(key)
        if emitter is None:
            view = TaskView(setup.source_id, 0, 1, setup.conf)
            emitter = _EMITTERS[key] = setup.spout.get_emitter(setup.conf, view)
        attempt = TransactionAttempt(index + 1, self.log.attempt(index))
        out = _Rows()
        logged = self.log.partition(index, partition)
        if setup.kind == "transactional" and logged is not None:
            emitter.emit_partition_batch(attempt, out, partition, logged[0])
            return out.rows
        previous = self.log.previous_partition_meta(index, partition)
        if setup.kind == "transactional":
            meta = emitter.emit_partition_batch_new(attempt, out, partition, previous)
        else:
            meta = emitter.emit_partition_batch(attempt, out, partition, previous)
        self.log.write_partition(index, partition, meta, len(out.rows))
        return out.rows

    def _emit_task(self, index: int, task: int, committed: int) -> list[Packet]:
        """Run emitter task ``task`` of a coordinated spout for batch ``index`` (a
        transaction is emitted alike each time: its metadata is logged)."""
        from squall.spark.execute.batchbolts import BatchEmits
        from squall.transactional.attempt import TransactionAttempt
        from squall.transactional.store import SqliteCoordinationStore

        setup = self.setup
        key = f"{self.options['run']}#{setup.source_id}#{task}"
        emitter = _EMITTERS.get(key)
        if emitter is None:
            view = TaskView(
                setup.source_id,
                task,
                setup.tasks,
                setup.conf,
                setup.component_tasks,
                SqliteCoordinationStore(setup.store_dir),
            )
            emitter = _EMITTERS[key] = setup.spout.get_emitter(setup.conf, view)
        if committed:
            emitter.cleanup_before(committed)
        attempt = TransactionAttempt(index + 1, self.log.attempt(index))
        out = BatchEmits(setup.source_id)
        emitter.emit_batch(attempt, self.log.data(index), out)
        self.log.write_partition(index, task, None, len(out.emits))
        edges: dict[str, list[Edge]] = {}
        for edge in setup.edges:
            edges.setdefault(edge.stream, []).append(edge)
        return route_emits(edges, setup.output_fields, task, out.emits)

    def commit(self, end: dict[str, Any]) -> None:
        """Batches before ``end`` committed: ack them to a batch spout, drop their log
        files (keeping the newest batch's)."""
        self.driver.commit(int(end["batch"]))


class _DriverSide:
    """The spout, coordinator or DRPC client of a source, in its driver-side process."""

    def __init__(self, setup: SourceSetup, log: SpoutLog, options: dict[str, str]) -> None:
        self.setup = setup
        self.log = log
        self.size = log.size()
        self.acked = log.first()  # earlier batches were committed and acked
        self.spout: Any = None
        self.coordinator: Any = None
        self.drpc: Any = None
        self.empty_streak = 0
        self.skips_left = 0
        # A batch logged before a restart starts no back-off: the spout is polled at once.
        self.observed_empty = self.size - 1
        view = TaskView(setup.source_id, 0, 1, setup.conf)
        if setup.kind == "batch":
            self.spout = log.last_spout()
            if self.spout is None:
                self.spout = setup.spout
                self.spout.open(setup.conf, view)
        elif setup.kind == "drpc":
            from squall.drpc import DRPCInvocationsClient

            self.drpc = DRPCInvocationsClient(
                options["drpc_host"], int(options["drpc_port"]), token=options.get("drpc_token")
            )
        else:
            self.coordinator = setup.spout.get_coordinator(setup.conf, view)
        #: A coordinated spout's metadata of the last transaction (None before any).
        self.last_meta = (
            log.data(self.size - 1) if setup.kind == "coordinated" and self.size else None
        )

    def parts(self, index: int) -> int:
        """How many Spark partitions read batch ``index``."""
        if self.setup.kind in ("transactional", "opaque", "coordinated"):
            return int(self.log.meta(index))
        return max([1, *(edge.tasks for edge in self.setup.edges)])

    def next_batch(self) -> bool:
        """Log batch ``size`` if the source has one now."""
        kind = self.setup.kind
        if kind == "drpc":  # one request per batch
            request = self.drpc.fetch_request(self.setup.drpc_function)
            if request is None:
                return False
            self.log.append(self.size, [[request.args]], None, request.request_id)
        elif kind == "batch":
            rows = _Rows()
            self.spout.emit_batch(self.size + 1, rows)
            if not rows.rows:
                return False
            self.log.append(self.size, rows.rows, self.spout)
        elif kind == "coordinated":  # the coordinator plans; the emitter tasks emit
            if self._idle() or not self.coordinator.is_ready():
                return False
            meta = self.coordinator.initialize_transaction(self.size + 1, self.last_meta)
            self.log.append(self.size, [], None, str(self.setup.tasks), meta)
            self.last_meta = meta
        else:
            if self._idle() or not self.coordinator.is_ready():
                return False
            partitions = int(self.coordinator.number_of_partitions())
            self.log.append(self.size, [], None, str(partitions))
        self.size += 1
        return True

    def _idle(self) -> bool:
        """Whether to skip this poll (partitioned and coordinated spouts, whose
        batches are emitted on executors): the last batch emitted nothing, and fewer polls
        than its back-off passed since (doubling per empty batch, up to
        ``MAX_IDLE_POLLS``)."""
        last = self.size - 1
        if last < 0:
            return False
        total = self.log.partition_total(last, int(self.log.meta(last)))
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

    def commit(self, end: int) -> None:
        if self.spout is not None:
            for index in range(self.acked, end):
                self.spout.ack(index + 1)
        self.acked = max(self.acked, end)
        self.log.forget_before(end - 1)


class SpoutSource(DataSource):
    """``spark.readStream.format("squall_spout").option("setup", ...)...``"""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return PACKET_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        if "core_setup" in self.options:  # a core topology's spout
            from squall.spark.sources.coresource import CoreSpoutReader

            return CoreSpoutReader(dict(self.options))
        return SpoutStreamReader(dict(self.options))
