"""The spout log: what a source emitted, per batch, durably, so batches replay exactly.

A source's driver side (the Python process Spark starts for the source) writes one
file per batch, a :class:`LoggedBatch`, and its :class:`BatchSummary` beside it: for a
batch spout, the batch's tuples and a snapshot of the spout after emitting them; for a
partitioned spout, the number of partitions of the transaction; for a coordinated
spout, its transaction metadata; for a DRPC stream, the request; for a core spout, its
new trees and task snapshots, with its packets in an Arrow file per Spark partition
reading them, the init values of its trees (what the driver settles the XOR ledger
from) and, once the driver has finished the batch, its outcome. The partitions of a
partitioned spout's batch are read on executors, each writing its metadata and tuple
count beside the batch file, so a transactional spout replays a batch from its stored
metadata and an opaque spout continues from the previous batch's. After a crash, Spark
replays a batch from these files and a new reader resumes the spout from the last
snapshot: no tuple is emitted twice or lost.

Files of committed batches are removed (see :meth:`SpoutLog.forget_before`), keeping
the newest, so the log stays small however long the topology runs. The directory must
be visible to the driver and the executors (any local master; on a cluster, a location
every node reaches: its files go through ``control.storage``).
"""

from __future__ import annotations

import json
import pickle
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import cloudpickle

from squall.runtime.codepickle import dumps_value
from squall.spark.control import storage
from squall.spark.control.storage import join
from squall.spark.execute.ledger import LedgerPart
from squall.spark.execute.packets import Packet, Values, packets_to_arrow
from squall.trident.spouts import BatchSpout

if TYPE_CHECKING:
    import pyarrow


PICKLE = pickle.HIGHEST_PROTOCOL
_BATCH = re.compile(r"^(\d{12})\.batch$")
_PARTITION = re.compile(r"^(\d{12})\.p(\d+)$")


class BatchSummary(NamedTuple):
    """What is read of a logged batch without loading it (a file of its own)."""

    #: Tuples the batch holds (for a partitioned or coordinated spout's batch, emitted
    #: on executors: 0, see :meth:`SpoutLog.partition_total`).
    tuples: int
    #: A partitioned or coordinated spout's batch: the Spark partitions reading it.
    partitions: int | None
    #: A DRPC stream's batch: the request's id.
    request_id: str | None


class SpoutTaskSnapshot(NamedTuple):
    """A spout task's state after a batch."""

    #: The spout object (see ``execute.taskstate.picklable_state``).
    component: bytes
    #: Its routers' state, or None if they cannot be pickled.
    routes: bytes | None
    #: Its tuple trees in flight: root id -> ``[message id, emit time]``.
    pending: dict[int, tuple[Any, float]]


@dataclass
class CoreBatch:
    """What a core spout logs with a batch."""

    #: Packets of the batch's tuples for the bolts' tasks (logged in slices, see
    #: ``SpoutLog.write_slices``).
    packets: int
    #: Root id -> the spout task that emitted each new tree.
    roots: dict[int, int]
    #: Every task's state after the batch.
    snapshots: list[SpoutTaskSnapshot]
    #: Batches whose outcome was applied before this one was polled: all before it.
    applied: int


@dataclass
class LoggedBatch:
    """What a source logged about one batch."""

    #: The tuples' values (a batch spout's, a DRPC request's).
    rows: list[Values] = field(default_factory=list)
    #: A batch spout after emitting the batch.
    spout: BatchSpout | None = None
    #: A partitioned or coordinated spout's batch: the Spark partitions reading it.
    partitions: int | None = None
    #: A DRPC stream's batch: the request's id.
    request_id: str | None = None
    #: A coordinated spout's transaction metadata (its coordinator's own type).
    transaction: object = None
    #: A core spout's batch: its trees and the tasks' snapshots.
    core: CoreBatch | None = None
    #: Tuples the batch holds, when they are not ``rows`` (a core spout's).
    tuples: int | None = None

    def summary(self) -> BatchSummary:
        """The batch's summary."""
        tuples = len(self.rows) if self.tuples is None else self.tuples
        return BatchSummary(tuples, self.partitions, self.request_id)


class LoggedPartition(NamedTuple):
    """What one partition of a partitioned spout's batch emitted (on an executor)."""

    #: The emitter's metadata of the partition (its own type).
    meta: object
    tuples: int


class SpoutLog:
    """Batch files ``<directory>/<index>.batch`` (index from 0, contiguous)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        storage.makedirs(directory)

    def _path(self, index: int) -> str:
        return join(self.directory, f"{index:012d}.batch")

    def _indexes(self) -> list[int]:
        return sorted(
            int(match.group(1))
            for match in map(_BATCH.match, storage.listdir(self.directory))
            if match is not None
        )

    def size(self) -> int:
        """Number of batches written (the index of the next one)."""
        indexes = self._indexes()
        return indexes[-1] + 1 if indexes else 0

    def first(self) -> int:
        """Index of the oldest batch still logged (0 if none is)."""
        indexes = self._indexes()
        return indexes[0] if indexes else 0

    def append(self, index: int, batch: LoggedBatch) -> None:
        """Write batch ``index``: its summary, then the batch, atomically (the source's
        driver side)."""
        summary = json.dumps(batch.summary()._asdict()).encode()
        storage.write_bytes(self._path(index) + ".summary", summary, durable=False)
        storage.write_bytes(self._path(index), cloudpickle.dumps(batch))

    def batch(self, index: int) -> LoggedBatch:
        """Logged batch ``index``."""
        batch: LoggedBatch = pickle.loads(storage.read_bytes(self._path(index)))
        return batch

    def summary(self, index: int) -> BatchSummary | None:
        """The summary of batch ``index``, or None if it is not logged."""
        try:
            return BatchSummary(**json.loads(storage.read_bytes(self._path(index) + ".summary")))
        except (OSError, ValueError):
            return None

    def emitted(self, index: int) -> int:
        """Tuples emitted into batch ``index``: those logged with it, or for a batch
        read in partitions (emitted on executors), what its partitions emitted so far
        (0 if it is not logged)."""
        summary = self.summary(index)
        if summary is None:
            return 0
        if summary.partitions is None:
            return summary.tuples
        return self.partition_total(index, summary.partitions) or 0

    def partitions(self, index: int) -> int:
        """The Spark partitions reading batch ``index`` of a partitioned or coordinated
        spout (0 if it is not logged)."""
        summary = self.summary(index)
        return summary.partitions or 0 if summary is not None else 0

    def request_id(self, index: int) -> str | None:
        """The DRPC request of batch ``index`` (None if there is none)."""
        summary = self.summary(index)
        return summary.request_id if summary is not None else None

    def last(self) -> LoggedBatch | None:
        """The last batch logged, or None if there is none."""
        size = self.size()
        return self.batch(size - 1) if size else None

    def set_attempt(self, index: int, attempt: int) -> None:
        """Batch ``index`` is being run for the ``attempt``-th time (from 0), by the
        driver: emitters on executors give their tuples that attempt id."""
        path = self._path(index) + ".attempt"
        if attempt or storage.exists(path):
            storage.write_bytes(path, str(attempt).encode())

    def attempt(self, index: int) -> int:
        """The attempt of batch ``index`` being run (0 unless it was run again)."""
        try:
            return int(storage.read_text(self._path(index) + ".attempt") or 0)
        except (OSError, ValueError):
            return 0

    # -- partitions of a partitioned spout's batch (written on executors) --------------

    def _partition_path(self, index: int, partition: int) -> str:
        return join(self.directory, f"{index:012d}.p{partition}")

    def write_partition(self, index: int, partition: int, logged: LoggedPartition) -> None:
        """Record what partition ``partition`` emitted in batch ``index`` (executor)."""
        payload = dumps_value(tuple(logged))  # metadata of a user class travels too
        storage.write_bytes(self._partition_path(index, partition), payload)

    def partition(self, index: int, partition: int) -> LoggedPartition | None:
        """What a partition of batch ``index`` emitted, or None if it was not read yet."""
        try:
            meta, count = pickle.loads(storage.read_bytes(self._partition_path(index, partition)))
        except FileNotFoundError:
            return None
        return LoggedPartition(meta, int(count))

    def previous_partition_meta(self, index: int, partition: int) -> object:
        """The metadata of ``partition`` in the latest batch before ``index`` that read
        it (None if none did)."""
        found = self.partition(index - 1, partition)
        if found is not None:
            return found.meta
        earlier = [
            int(match.group(1))
            for match in map(_PARTITION.match, storage.listdir(self.directory))
            if match is not None and int(match.group(2)) == partition
        ]
        earlier = [i for i in earlier if i < index]
        if not earlier:
            return None
        found = self.partition(max(earlier), partition)
        return found.meta if found is not None else None

    def partition_total(self, index: int, partitions: int) -> int | None:
        """Tuples emitted by all partitions of batch ``index``; None while a partition
        has not been read."""
        total = 0
        for partition in range(partitions):
            found = self.partition(index, partition)
            if found is None:
                return None
            total += found.tuples
        return total

    # -- a core spout's packets, in slices read by the Spark partitions ---------------

    def _slice_path(self, index: int, part: int) -> str:
        return join(self.directory, f"{index:012d}.s{part}")

    def write_slices(self, index: int, packets: list[Packet], slices: int) -> None:
        """Write the packets of batch ``index`` in ``slices`` Arrow files, slice ``i``
        holding those for task index ``i`` (modulo ``slices``) of each bolt (the
        source's driver side, before it logs the batch)."""
        import pyarrow as pa

        for part in range(slices):
            batch = packets_to_arrow([p for p in packets if p.target % slices == part], pa)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as writer:
                writer.write_batch(batch)
            storage.write_bytes(self._slice_path(index, part), sink.getvalue().to_pybytes())

    def slice(self, index: int, part: int) -> Iterator[pyarrow.RecordBatch]:
        """The packets of slice ``part`` of batch ``index`` (on an executor)."""
        import pyarrow as pa

        data = storage.read_bytes(self._slice_path(index, part))
        yield from pa.ipc.open_stream(pa.py_buffer(data))

    # -- the XOR ledger's start of a core spout's batches ------------------------------

    def _inits_path(self, index: int) -> str:
        return join(self.directory, f"{index:012d}.inits")

    def write_inits(self, index: int, inits: LedgerPart) -> None:
        """Record the init values of the trees batch ``index`` started (the source's
        driver side, before it logs the batch)."""
        storage.write_bytes(self._inits_path(index), pickle.dumps(tuple(inits), PICKLE))

    def inits(self, index: int) -> LedgerPart:
        """The init values of the trees batch ``index`` started (none if it started
        none)."""
        try:
            return LedgerPart(*pickle.loads(storage.read_bytes(self._inits_path(index))))
        except FileNotFoundError:
            return LedgerPart()

    # -- outcomes of a core spout's batches (written by the driver) -------------------

    def _outcome_path(self, index: int) -> str:
        return join(self.directory, f"{index:012d}.outcome")

    def write_outcome(self, index: int, failed: set[int]) -> None:
        """Record that the trees of batch ``index`` completed except ``failed`` (driver)."""
        storage.write_bytes(self._outcome_path(index), pickle.dumps(sorted(failed)))

    def outcome(self, index: int) -> set[int] | None:
        """The roots of the trees of batch ``index`` that failed, or None while the
        driver has not finished the batch."""
        try:
            return set(pickle.loads(storage.read_bytes(self._outcome_path(index))))
        except FileNotFoundError:
            return None

    def forget_before(self, index: int) -> None:
        """Remove the files of batches before ``index`` (committed ones); the files of
        ``index`` and later stay."""
        for name in storage.listdir(self.directory):
            match = re.match(r"^(\d{12})\.", name)
            if match is not None and int(match.group(1)) < index:
                storage.remove(join(self.directory, name))
