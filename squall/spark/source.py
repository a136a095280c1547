"""A Trident spout as a Spark streaming source (Python Data Source API).

Offsets count the spout's batches. Each time Spark asks for the latest offset, the
reader asks the spout for one new batch and writes it to the spout log; ``read``
returns a logged batch, so a micro-batch replays identically after a crash. An empty
batch is not logged (the offset does not move, so Spark runs no micro-batch). While the
topology is deactivated (a pause file exists), the spout is not polled.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)

from squall.spark.spoutlog import SpoutLog

SOURCE_NAME = "squall_spout"
SCHEMA = "batch long, values binary"


class _Rows:
    """The collector a batch spout emits through, inside the reader."""

    def __init__(self) -> None:
        self.rows: list[list[Any]] = []

    def emit(self, values: Any) -> None:
        self.rows.append(list(values))

    def report_error(self, error: BaseException | str) -> None:
        raise RuntimeError(str(error)) if isinstance(error, str) else error


class BatchPartition(InputPartition):
    """One logged batch."""

    def __init__(self, index: int) -> None:
        self.index = index


class SpoutStreamReader(DataSourceStreamReader):
    """Runs in the Python process Spark starts for the source (driver side)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.log = SpoutLog(options["log"])
        self.pause_file = options["pause"]
        spout = self.log.last_spout()
        if spout is None:
            with open(options["spout"], "rb") as handle:
                spout = pickle.load(handle)
            spout.open({}, None)
        self.spout = spout
        self.size = self.log.size()
        self.acked = 0

    def initialOffset(self) -> dict[str, int]:
        return {"batch": 0}

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        """One batch per micro-batch: a batch logged earlier (before a restart) if Spark
        has not read it yet, else a new one from the spout (unless paused or empty)."""
        position = int(start["batch"])
        if position < self.size:
            return {"batch": position + 1}
        if os.path.exists(self.pause_file):
            return {"batch": self.size}
        rows = _Rows()
        self.spout.emit_batch(self.size + 1, rows)
        if rows.rows:
            self.log.append(self.size, rows.rows, self.spout)
            self.size += 1
        return {"batch": self.size}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [BatchPartition(i) for i in range(start["batch"], end["batch"])]

    def read(self, partition: InputPartition) -> Iterator[tuple[int, bytes]]:
        index = partition.index  # type: ignore[attr-defined]
        for values in self.log.rows(index):
            yield (index, pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL))

    def commit(self, end: dict[str, int]) -> None:
        for batch_id in range(self.acked + 1, end["batch"] + 1):
            self.spout.ack(batch_id)
        self.acked = max(self.acked, end["batch"])


class SpoutSource(DataSource):
    """``spark.readStream.format("squall_spout").option("log", ...).option("spout", ...)``"""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return SpoutStreamReader(dict(self.options))
