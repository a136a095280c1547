"""The spout log: what a batch source emitted, per batch, durably, so batches replay
exactly.

A source's driver side (the Python process Spark starts for the source) writes one
file per batch: for a batch spout, the batch's rows and a snapshot of the spout after
emitting them; for a partitioned spout, the number of partitions of the transaction;
for a DRPC stream, the request. The partitions of a partitioned spout's batch are read
on executors, each writing its metadata and tuple count beside the batch file, so a
transactional spout replays a batch from its stored metadata and an opaque spout
continues from the previous batch's. After a crash, Spark replays a batch from these
files and a new reader resumes the spout from the last snapshot: no tuple is emitted
twice or lost.

Files of committed batches are removed (see :meth:`SpoutLog.forget_before`), keeping
the newest, so the log stays small however long the topology runs. The directory must
be visible to the driver and the executors (any local master; a shared mount on a
cluster).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
from typing import Any

import cloudpickle

from squall.spark.control.rundir import write_atomically

_BATCH = re.compile(r"^(\d{12})\.batch$")
_PARTITION = re.compile(r"^(\d{12})\.p(\d+)$")


class SpoutLog:
    """Batch files ``<directory>/<index>.batch`` (index from 0, contiguous)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    def _path(self, index: int) -> str:
        return os.path.join(self.directory, f"{index:012d}.batch")

    def _indexes(self) -> list[int]:
        return sorted(
            int(match.group(1))
            for match in map(_BATCH.match, os.listdir(self.directory))
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

    def append(
        self,
        index: int,
        rows: list[list[Any]],
        spout: Any,
        meta: str = "",
        data: Any = None,
        count: int | None = None,
    ) -> None:
        """Write batch ``index`` (its rows, the spout after it, the source's note about
        it and the source's own data: a coordinated spout's transaction metadata, a core
        spout's packets), atomically. ``count`` is the number of tuples when they are
        not ``rows``."""
        with open(self._path(index) + ".count", "w") as handle:
            handle.write(f"{len(rows) if count is None else count}\n{meta}")
        payload = cloudpickle.dumps({"rows": rows, "spout": spout, "data": data})
        write_atomically(self._path(index), payload)

    def data(self, index: int) -> Any:
        """The transaction metadata logged with batch ``index``."""
        with open(self._path(index), "rb") as handle:
            return pickle.load(handle)["data"]

    def count(self, index: int) -> int:
        """Number of tuples logged with batch ``index`` (0 if it is not logged)."""
        try:
            with open(self._path(index) + ".count") as handle:
                return int(handle.readline())
        except (OSError, ValueError):
            return 0

    def meta(self, index: int) -> str:
        """What the source noted with batch ``index`` (a DRPC request id, a partitioned
        spout's partition count), or ""."""
        try:
            with open(self._path(index) + ".count") as handle:
                handle.readline()
                return handle.read()
        except OSError:
            return ""

    def rows(self, index: int) -> list[list[Any]]:
        """The rows of batch ``index``: each tuple's values."""
        with open(self._path(index), "rb") as handle:
            rows: list[list[Any]] = pickle.load(handle)["rows"]
        return rows

    def last_spout(self) -> Any:
        """The spout as it was after the last batch, or None if there is none."""
        size = self.size()
        if size == 0:
            return None
        with open(self._path(size - 1), "rb") as handle:
            return pickle.load(handle)["spout"]

    def set_attempt(self, index: int, attempt: int) -> None:
        """Batch ``index`` is being run for the ``attempt``-th time (from 0), by the
        driver: emitters on executors give their tuples that attempt id."""
        path = self._path(index) + ".attempt"
        if attempt or os.path.exists(path):
            write_atomically(path, str(attempt).encode())

    def attempt(self, index: int) -> int:
        """The attempt of batch ``index`` being run (0 unless it was run again)."""
        try:
            with open(self._path(index) + ".attempt") as handle:
                return int(handle.read() or 0)
        except (OSError, ValueError):
            return 0

    # -- partitions of a partitioned spout's batch (written on executors) --------------

    def _partition_path(self, index: int, partition: int) -> str:
        return os.path.join(self.directory, f"{index:012d}.p{partition}")

    def write_partition(self, index: int, partition: int, meta: Any, count: int) -> None:
        """Record what partition ``partition`` emitted in batch ``index``: its
        metadata and the number of tuples."""
        payload = pickle.dumps((meta, count), pickle.HIGHEST_PROTOCOL)
        write_atomically(self._partition_path(index, partition), payload)

    def partition(self, index: int, partition: int) -> tuple[Any, int] | None:
        """``(meta, count)`` of a partition of batch ``index``, or None if it was not
        read yet."""
        try:
            with open(self._partition_path(index, partition), "rb") as handle:
                meta, count = pickle.load(handle)
        except FileNotFoundError:
            return None
        return meta, int(count)

    def previous_partition_meta(self, index: int, partition: int) -> Any:
        """The metadata of ``partition`` in the latest batch before ``index`` that read
        it (None if none did)."""
        found = self.partition(index - 1, partition)
        if found is not None:
            return found[0]
        earlier = [
            int(match.group(1))
            for match in map(_PARTITION.match, os.listdir(self.directory))
            if match is not None and int(match.group(2)) == partition
        ]
        earlier = [i for i in earlier if i < index]
        if not earlier:
            return None
        found = self.partition(max(earlier), partition)
        return found[0] if found is not None else None

    def partition_total(self, index: int, partitions: int) -> int | None:
        """Tuples emitted by all partitions of batch ``index``; None while a partition
        has not been read."""
        total = 0
        for partition in range(partitions):
            found = self.partition(index, partition)
            if found is None:
                return None
            total += found[1]
        return total

    # -- outcomes of a core spout's batches (written by the driver) -------------------

    def _outcome_path(self, index: int) -> str:
        return os.path.join(self.directory, f"{index:012d}.outcome")

    def write_outcome(self, index: int, failed: set[int]) -> None:
        """Record that the trees of batch ``index`` completed except ``failed`` (driver)."""
        write_atomically(self._outcome_path(index), pickle.dumps(sorted(failed)))

    def outcome(self, index: int) -> set[int] | None:
        """The roots of the trees of batch ``index`` that failed, or None while the
        driver has not finished the batch."""
        try:
            with open(self._outcome_path(index), "rb") as handle:
                return set(pickle.load(handle))
        except FileNotFoundError:
            return None

    def forget_before(self, index: int) -> None:
        """Remove the files of batches before ``index`` (committed ones); the files of
        ``index`` and later stay."""
        for name in os.listdir(self.directory):
            match = re.match(r"^(\d{12})\.", name)
            if match is not None and int(match.group(1)) < index:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(self.directory, name))
