"""A core topology's spout as a Spark streaming source.

The spout's tasks (see ``sources.spouttasks``) live in the source's driver-side Python
process. Each time Spark asks for the latest offset, the source applies the outcomes of
the micro-batches the driver finished, polls the tasks and logs the batch they emitted,
unless the topology is deactivated; ``read`` returns a logged batch's packets, so a
micro-batch replays identically after a crash, and a restarted source resumes its
spout tasks from the last snapshot. When the topology is killed, the cluster marks the
query closing (see ``control.rundir``); at the next trigger each source deactivates
and closes its tasks and marks itself closed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from squall.spark.control.rundir import QueryDirectory, SourceDirectory
from squall.spark.execute.taskstate import CoreSetup
from squall.spark.runtime.workerprocess import prepare_process
from squall.spark.sources.reader import Offset
from squall.spark.sources.spoutlog import SpoutLog
from squall.spark.sources.spouttasks import SpoutTasks


class CoreBatchPartition(InputPartition):
    """Part ``part`` of ``parts`` of logged batch ``index`` of a core spout: the packets
    for task index ``part`` of each bolt (see ``CorePlan.spout_slices``)."""

    def __init__(self, index: int, part: int, parts: int) -> None:
        self.index = index
        self.part = part
        self.parts = parts


class CoreSpoutReader(DataSourceStreamReader):
    """The streaming reader of one core spout (see the module docstring). Spark creates
    it in the source's driver-side process and ships a copy to executors for ``read``;
    the spout tasks are made lazily, so the copy stays small."""

    def __init__(self, options: dict[str, str], setup: CoreSetup) -> None:
        prepare_process()
        self.options = dict(options)
        self.query = QueryDirectory(options["query_dir"])
        self.files = SourceDirectory(options["source_dir"])
        self.log = SpoutLog(self.files.spout_log)
        self._setup: CoreSetup | None = setup
        self._tasks: SpoutTasks | None = None

    def __getstate__(self) -> Offset:
        state = {"options": self.options, "query": self.query, "files": self.files}
        return {**state, "log": self.log, "_setup": None, "_tasks": None}

    @property
    def tasks(self) -> SpoutTasks:
        """The spout's tasks, made and opened on first use (driver-side process)."""
        if self._tasks is None:
            if self._setup is None:
                raise RuntimeError("a core spout's tasks live in its source's process")
            self._tasks = SpoutTasks(self._setup, self.options["source"], self.log, self.files)
        return self._tasks

    def initialOffset(self) -> Offset:
        return {"source": self.options["source"], "batch": 0}

    def latestOffset(self, start: Offset, limit: Any) -> Offset:
        """One batch per micro-batch: one logged before a restart that Spark has not
        read yet, else a new one (unless paused or the spout emitted nothing)."""
        tasks = self.tasks
        position = int(start["batch"])
        if self.query.is_closing():  # the topology is being killed
            if not self.files.is_closed():
                tasks.close()
                self.files.mark_closed()
            return {"source": self.options["source"], "batch": position}
        if position < tasks.size:
            tasks.apply_outcomes()
            position += 1
        else:
            paused = self.query.is_paused()
            ticks = self.options.get("ticks")
            if tasks.next_batch(paused, float(ticks) if ticks else None):
                position = tasks.size
            tasks.write_polls()
        return {"source": self.options["source"], "batch": position}

    def partitions(self, start: Offset, end: Offset) -> list[InputPartition]:
        parts = self.tasks.setup.core.spout_slices(self.options["source"])
        return [
            CoreBatchPartition(index, part, parts)
            for index in range(int(start["batch"]), int(end["batch"]))
            for part in range(parts)
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Runs on an executor: the packets of a logged batch for one task index."""
        assert isinstance(partition, CoreBatchPartition)
        yield from self.log.slice(partition.index, partition.part)

    def commit(self, end: Offset) -> None:
        """Batches before ``end`` are committed: drop their files (keeping the newest
        batch's and any outcome not applied yet)."""
        keep = min(int(end["batch"]) - 1, self.tasks.applied)
        self.log.forget_before(keep)

    def stop(self) -> None:
        """Nothing: the spout tasks are closed when the cluster asks for it (a close
        file, seen at the next trigger) before it stops the query."""
