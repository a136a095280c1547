"""A core topology's spout as a Spark streaming source.

The spout's tasks (see ``sources.spouttasks``) live in the source's driver-side Python
process, where every call into them runs on one thread (``sources.spoutthread``). Each
time Spark asks for the latest offset, the source applies the outcomes of the
micro-batches the driver finished and hands Spark the next batch the spout emitted,
unless the topology is deactivated. While the spout keeps emitting, that batch was
polled and logged in the background while the driver ran the micro-batch before (as a
Storm spout keeps emitting while its tuples are in flight, within
``topology.max.spout.pending``), so the spout's work overlaps the bolts'; otherwise the
source polls the spout at the trigger. ``read`` returns a logged batch's packets, so a
micro-batch replays identically after a crash, and a restarted source resumes its
spout tasks from the last snapshot. When the topology is killed, the cluster marks the
query closing (see ``control.rundir``); at the next trigger each source deactivates
and closes its tasks and marks itself closed.

What the background poll changes, against polling at the trigger: outcomes (acks,
fails and the replays they cause) reach the spout one micro-batch later, and a batch
polled before a deactivate request is still run, like tuples in flight in Storm.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from squall.spark.control.rundir import QueryDirectory, SourceDirectory
from squall.spark.execute.taskstate import CoreSetup
from squall.spark.launch.processsetup import prepare_process
from squall.spark.sources.sourcereader import Offset
from squall.spark.sources.spoutlog import SpoutLog
from squall.spark.sources.spouttasks import SpoutTasks
from squall.spark.sources.spoutthread import SpoutThread


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
        self._thread: SpoutThread | None = None
        #: The poll of the next batch running in the background, if one is.
        self._next: Future[bool] | None = None

    def __getstate__(self) -> Offset:
        state = {"options": self.options, "query": self.query, "files": self.files}
        return {**state, "log": self.log, "_setup": None, "_tasks": None, "_thread": None}

    @property
    def thread(self) -> SpoutThread:
        """The thread every call into the spout's tasks runs on (driver-side process)."""
        if self._thread is None:
            self._thread = SpoutThread(f"squall-spout-{self.options['source']}")
        return self._thread

    @property
    def tasks(self) -> SpoutTasks:
        """The spout's tasks, made and opened on first use, on the spout thread
        (driver-side process)."""
        if self._tasks is None:
            setup = self._setup
            if setup is None:
                raise RuntimeError("a core spout's tasks live in its source's process")
            source = self.options["source"]
            self._tasks = self.thread.call(lambda: SpoutTasks(setup, source, self.log, self.files))
        return self._tasks

    def initialOffset(self) -> Offset:
        return {"source": self.options["source"], "batch": 0}

    def latestOffset(self, start: Offset, limit: Any) -> Offset:
        """One batch per micro-batch: one logged that Spark has not read yet (polled in
        the background during the micro-batch before, or logged before a restart),
        else a new one (unless paused or the spout emitted nothing). While the spout
        keeps emitting (this trigger has a batch, and no other is logged), the poll of
        the next batch starts in the background, unless paused.

        Raises:
            Exception: what the background poll raised (a failure of the source).
        """
        tasks, thread = self.tasks, self.thread
        if self._next is not None:
            polling, self._next = self._next, None
            polling.result()
        position = int(start["batch"])
        if self.query.is_closing():  # the topology is being killed
            if not self.files.is_closed():
                thread.call(tasks.close)
                self.files.mark_closed()
            return {"source": self.options["source"], "batch": position}
        if position < tasks.size:
            thread.call(tasks.apply_outcomes)
            position += 1
        elif thread.call(self._poll):
            position = tasks.size
        else:
            return {"source": self.options["source"], "batch": position}
        if position == tasks.size and not self.query.is_paused():
            self._next = thread.submit(self._poll)
        return {"source": self.options["source"], "batch": position}

    def _poll(self) -> bool:
        """Poll the spout's tasks for the next batch and log it; True if a batch was
        logged. Runs on the spout thread."""
        tasks = self.tasks
        ticks = self.options.get("ticks")
        logged = tasks.next_batch(self.query.is_paused(), float(ticks) if ticks else None)
        tasks.write_polls()
        return logged

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
        """End the spout thread. The spout tasks were closed when the cluster asked for
        it (a close file, seen at the next trigger) before it stopped the query."""
        if self._thread is not None:
            self._thread.stop()
