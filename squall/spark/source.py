"""A Trident spout as a Spark streaming source (Python Data Source API).

Offsets count the spout's batches. Each time Spark asks for the latest offset, the
reader asks the spout for one new batch and writes it to the spout log; ``read``
returns a logged batch, so a micro-batch replays identically after a crash. An empty
batch is not logged (the offset does not move, so Spark runs no micro-batch). While the
topology is deactivated (a pause file exists), the spout is not polled. Rows are
routed to the first segments' partitions as they are read, so they enter the plan
without a routing stage.
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
from squall.spark.stages import route_pickled, rows_to_arrow

SOURCE_NAME = "squall_spout"
#: Rows leave the source already routed to the first segments (see ``stages``).
SCHEMA = "dest int, port string, target int, values binary, meta string"


class _Rows:
    """The collector a batch spout emits through, inside the reader."""

    def __init__(self) -> None:
        self.rows: list[list[Any]] = []

    def emit(self, values: Any) -> None:
        self.rows.append(list(values))

    def report_error(self, error: BaseException | str) -> None:
        raise RuntimeError(str(error)) if isinstance(error, str) else error


class BatchPartition(InputPartition):
    """Slice ``slice_index`` of ``slices`` of logged batch ``index``."""

    def __init__(self, index: int, slice_index: int = 0, slices: int = 1) -> None:
        self.index = index
        self.slice_index = slice_index
        self.slices = slices


class SpoutStreamReader(DataSourceStreamReader):
    """Runs in the Python process Spark starts for the source (driver side)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.log = SpoutLog(options["log"])
        self.pause_file = options["pause"]
        self.drpc: Any = None
        if options.get("drpc_function"):
            from squall.drpc import DRPCInvocationsClient

            self.drpc_function = options["drpc_function"]
            self.drpc = DRPCInvocationsClient(options["drpc_host"], int(options["drpc_port"]))
        with open(options["routes"], "rb") as handle:
            self.edges, self.fields = pickle.load(handle)
        # Each batch is read in as many slices as its first segments have tasks.
        self.slices = max([1, *(edge.tasks for edge in self.edges)])
        spout = self.log.last_spout()
        if spout is None and self.drpc is None:
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
        if self.drpc is not None:  # a DRPC stream: one request per batch
            request = self.drpc.fetch_request(self.drpc_function)
            if request is not None:
                self.log.append(self.size, [[request.args]], None, request.request_id)
                self.size += 1
            return {"batch": self.size}
        rows = _Rows()
        self.spout.emit_batch(self.size + 1, rows)
        if rows.rows:
            self.log.append(self.size, rows.rows, self.spout)
            self.size += 1
        return {"batch": self.size}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [
            BatchPartition(i, part, self.slices)
            for i in range(start["batch"], end["batch"])
            for part in range(self.slices)
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa

        index = partition.index  # type: ignore[attr-defined]
        part, slices = partition.slice_index, partition.slices  # type: ignore[attr-defined]
        blobs = self.log.rows(index)[part::slices]
        meta = self.log.meta(index)
        yield rows_to_arrow(route_pickled(self.edges, self.fields, part, blobs), pa, meta)

    def commit(self, end: dict[str, int]) -> None:
        if self.spout is None:
            return
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
