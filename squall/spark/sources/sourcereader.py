"""The streaming reader of a spout: what every source kind shares.

Offsets count a source's batches (``{"source": id, "batch": n}``). Each time Spark asks
for the latest offset, the reader's driver side (in the Python process Spark starts for
the source) makes at most one new batch and logs it (see ``sources.spoutlog``); ``read``
returns a logged batch, so a micro-batch replays identically after a crash. While the
topology is deactivated (a pause file exists), no source is polled. Rows leave the
source as packets already routed to the first stages' partitions.

Each kind of source is a subclass (see ``sources.batchreaders``): it says how a batch is
made on the driver side, in how many Spark partitions it is read and how a partition
is read on an executor.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from squall.model.fields import Fields
from squall.model.tuple import DEFAULT_STREAM
from squall.runtime.emitchecks import wrong_width
from squall.spark.control.rundir import QueryDirectory, SourceDirectory
from squall.spark.errors import ComponentFailure
from squall.spark.execute.packets import Packet, Values, packets_to_arrow
from squall.spark.launch.processsetup import prepare_process
from squall.spark.sources.setup import SourceSetup, read_source_setup
from squall.spark.sources.spoutlog import SpoutLog
from squall.trident.spouts import SpoutCollector

#: A source's offset: ``{"source": id, "batch": number of batches}``.
Offset = dict[str, Any]


class BatchPartition(InputPartition):
    """Part ``slice_index`` of ``slices`` of logged batch ``index`` (for a partitioned
    spout: its partition ``slice_index`` of ``slices``; for a coordinated spout: its
    emitter task, with ``committed`` the last committed transaction)."""

    def __init__(self, index: int, slice_index: int = 0, slices: int = 1, committed: int = 0):
        self.index = index
        self.slice_index = slice_index
        self.slices = slices
        self.committed = committed


class Rows(SpoutCollector):
    """The collector a spout or an emitter emits through, inside the reader: it keeps
    each tuple's values (a Trident spout's collector, without the batch attempt a
    batch's tuples are given later).

    With the emitting component, the fields of its stream (the attempt first, as the
    system topology declares them) and the batch's attempt, each emit is checked as the
    local engine's collector checks it: a tuple of more or fewer values raises the same
    ``ValueError`` from ``emit``. Runs where the spout emits (the source's process or an
    executor), on the reader's thread.
    """

    __slots__ = ("_attempt", "_component_id", "_fields", "_width", "rows")

    def __init__(
        self, component_id: str = "", fields: Fields | None = None, attempt: Any = None
    ) -> None:
        self.rows: list[Values] = []
        self._component_id = component_id
        self._fields = fields
        self._width = -1 if fields is None else len(fields) - 1
        self._attempt = attempt

    def emit(self, values: Sequence[Any]) -> None:
        """Keep one tuple of the batch.

        Raises:
            ValueError: the number of values differs from the spout's output fields.
        """
        if len(values) != self._width and self._fields is not None:
            raise wrong_width(
                self._component_id, DEFAULT_STREAM, [self._attempt, *values], self._fields
            )
        self.rows.append(list(values))

    def report_error(self, error: BaseException | str) -> None:
        raise RuntimeError(str(error)) if isinstance(error, str) else error


class SourceReader(DataSourceStreamReader):
    """One Trident or transactional source.

    Spark creates the reader in the source's driver-side Python process
    (``latestOffset``, ``partitions``, ``commit``) and ships a copy to executors for
    ``read``; the copy holds only the options and the log (the set-up is loaded again
    where it is needed), so it stays small.
    """

    #: Whether the source's batches are emitted on executors, while Spark reads them
    #: (the driver then computes the source's frame once per micro-batch).
    emits_on_executors: ClassVar[bool] = False
    #: Whether Spark partition ``i`` of a batch is slice ``i`` of it in emit order, so
    #: a stage over an aligned edge needs no exchange (see ``execute.routing.aligned``).
    aligns_slices: ClassVar[bool] = False

    def __init__(self, options: dict[str, str], setup: SourceSetup | None = None) -> None:
        prepare_process()
        self.options = dict(options)
        self.query = QueryDirectory(options["query_dir"])
        self.files = SourceDirectory(options["source_dir"])
        self.log = SpoutLog(self.files.spout_log)
        self._setup = setup
        self._opened = False
        #: Batches logged (the index of the next one) and batches acked (committed).
        self.size = 0
        self.acked = 0

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "query": self.query, "files": self.files, "log": self.log}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup = None
        self._opened = False

    @property
    def setup(self) -> SourceSetup:
        """The source's set-up, loaded once per process."""
        if self._setup is None:
            self._setup = read_source_setup(self.files.setup)
        return self._setup

    def rows(self, attempt: Any) -> Rows:
        """A collector for the spout's tuples of the batch of ``attempt``, checking each
        as the local engine does (against the emitter's declared stream)."""
        setup = self.setup
        spec = setup.layout.topology.get_component(setup.source_id)
        declared = spec.streams.get(DEFAULT_STREAM)
        return Rows(setup.source_id, None if declared is None else declared.fields, attempt)

    def _driver_side(self) -> None:
        """Open the source on the driver side, once: its spout, coordinator or client."""
        if self._opened:
            return
        self._opened = True
        self.size = self.log.size()
        self.acked = self.log.first()  # earlier batches were committed and acked
        self.open()

    def initialOffset(self) -> Offset:
        return {"source": self.options["source"], "batch": 0}

    def latestOffset(self, start: Offset, limit: Any) -> Offset:
        """One batch per micro-batch: a batch logged earlier (before a restart) if Spark
        has not read it yet, else a new one (unless paused or there is none)."""
        self._driver_side()
        position = int(start["batch"])
        if position < self.size:
            position += 1
        elif not self.query.is_paused() and self.log_batch(self.size):
            self.size += 1
            position = self.size
        return {"source": self.options["source"], "batch": position}

    def partitions(self, start: Offset, end: Offset) -> list[InputPartition]:
        self._driver_side()
        return [
            BatchPartition(index, part, parts, self.acked)
            for index in range(int(start["batch"]), int(end["batch"]))
            for parts in [self.parts(index)]
            for part in range(parts)
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Runs on an executor: the packets of one part of a logged batch.

        Raises:
            ComponentFailure: the spout's emitter raised (or its emit's check did),
                named with the source's component and the emitter's task.
        """
        import pyarrow as pa

        prepare_process()
        assert isinstance(partition, BatchPartition)
        try:
            packets = self.read_part(partition)
        except Exception as exc:
            task = self.emitter_task(partition.slice_index)
            raise ComponentFailure.of(exc, self.setup.source_id, task) from None
        yield packets_to_arrow(packets, pa)

    def emitter_task(self, part: int) -> int:
        """The task id of the emitter that emits part ``part`` of a batch: the local
        engine's emitter task ``part % tasks``."""
        ids = self.setup.layout.task_ids(self.setup.source_id)
        return ids[part % len(ids)] if ids else -1

    def commit(self, end: Offset) -> None:
        """Batches before ``end`` are committed: let the source know, drop their log
        files (keeping the newest batch's)."""
        self._driver_side()
        committed = int(end["batch"])
        self.committed(committed)
        self.acked = max(self.acked, committed)
        self.log.forget_before(committed - 1)

    # -- what each kind of source says ------------------------------------------------

    @abstractmethod
    def open(self) -> None:
        """Make the driver side of the source (driver-side process, once)."""

    @abstractmethod
    def log_batch(self, index: int) -> bool:
        """Log batch ``index`` if the source has one now (driver-side process)."""

    @abstractmethod
    def parts(self, index: int) -> int:
        """How many Spark partitions read batch ``index`` (driver-side process)."""

    @abstractmethod
    def read_part(self, partition: BatchPartition) -> list[Packet]:
        """The packets of one part of a logged batch (executor)."""

    def committed(self, end: int) -> None:
        """Batches before ``end`` are committed (driver-side process); nothing to do
        unless the kind says otherwise."""
