"""The spout log: what a spout emitted, per batch, durably, so batches replay exactly.

The spout runs where Spark's source reader runs (a Python process the driver starts).
Each new batch is written as one file: the batch's rows and a snapshot of the spout
object after emitting them. After a crash, Spark replays a batch by reading its file,
and a new reader resumes the spout from the last snapshot, so no tuple is emitted
twice or lost.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

import cloudpickle


class SpoutLog:
    """Batch files ``<directory>/<index>.batch`` (index from 0, contiguous)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    def _path(self, index: int) -> str:
        return os.path.join(self.directory, f"{index:012d}.batch")

    def size(self) -> int:
        """Number of batches written."""
        count = 0
        while os.path.exists(self._path(count)):
            count += 1
        return count

    def append(self, index: int, rows: list[list[Any]], spout: Any, meta: str = "") -> None:
        """Write batch ``index`` (its rows, each pickled, and the spout after it),
        atomically."""
        blobs = [pickle.dumps(values, pickle.HIGHEST_PROTOCOL) for values in rows]
        payload = cloudpickle.dumps({"rows": blobs, "spout": spout})
        temporary = self._path(index) + ".tmp"
        with open(temporary, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        with open(self._path(index) + ".count", "w") as handle:
            handle.write(f"{len(blobs)}\n{meta}")
        os.replace(temporary, self._path(index))

    def count(self, index: int) -> int:
        """Number of tuples in batch ``index`` (0 if it is not logged)."""
        try:
            with open(self._path(index) + ".count") as handle:
                return int(handle.readline())
        except (OSError, ValueError):
            return 0

    def meta(self, index: int) -> str:
        """What the source noted with batch ``index`` (a DRPC request id), or ""."""
        try:
            with open(self._path(index) + ".count") as handle:
                handle.readline()
                return handle.read()
        except OSError:
            return ""

    def rows(self, index: int) -> list[bytes]:
        """The rows of batch ``index``, each pickled."""
        with open(self._path(index), "rb") as handle:
            return list(pickle.load(handle)["rows"])

    def last_spout(self) -> Any:
        """The spout as it was after the last batch, or None if there is none."""
        size = self.size()
        if size == 0:
            return None
        with open(self._path(size - 1), "rb") as handle:
            return pickle.load(handle)["spout"]
