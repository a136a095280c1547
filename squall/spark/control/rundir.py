"""The files of a topology under the checkpoint directory, and what they say.

Everything a streaming query of topology ``<name>`` keeps lives in its query directory
(:class:`QueryDirectory`), ``<checkpoint_dir>/<name>/<query>/`` (``core`` for a core
topology, ``spouts`` or a DRPC stream's spout for a Trident or transactional one)::

    paused                  the topology is deactivated: no source is polled
    closing                 a core topology is being killed: close the spout tasks
    setup-<run>.pickle      a core run's set-up (one file per run)
    checkpoint/             Spark's checkpoint (see CheckpointDirectory)
    state/<bolt>/<task>/    a core bolt task's snapshots
    <source>/               one per source (see SourceDirectory)

The cluster (driver) writes the markers and set-ups; the sources' processes and the
executors read them and write their own (``closed``, ``polls``, ``stats.pickle``). The
directory must be visible to the driver and the executors: a local directory on a
local master, on a cluster a location every node reaches (a shared mount, HDFS, S3).
Every file is read and written through ``control.storage``.
"""

from __future__ import annotations

import json
import pickle
from typing import NamedTuple

from squall.runtime.metrics import ComponentStats
from squall.spark.control import storage
from squall.spark.control.storage import join


def _safe(name: str) -> str:
    """A component id or query key as one path component."""
    return name.replace("/", "_")


class Polls(NamedTuple):
    """What a core spout's source last said about its polls (for ``wait_idle``)."""

    #: Polls so far.
    polls: int
    #: Tuples emitted by the last poll.
    emitted: int
    #: Logged batches holding tuples whose outcome is not applied yet.
    unfinished: int


class CheckpointDirectory:
    """A streaming query's checkpoint, as Spark writes it.

    Spark writes a micro-batch's end offsets (one JSON line per source) to
    ``offsets/<batch id>`` before running it (the previous batch's are its start), and
    ``commits/<batch id>`` once it has finished.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def _ends(self, batch_id: int) -> dict[str, int]:
        ends: dict[str, int] = {}
        if batch_id < 0:
            return ends
        try:
            lines = storage.read_text(join(self.path, "offsets", str(batch_id))).splitlines()[2:]
        except FileNotFoundError:
            return ends
        for line in lines:
            if line.startswith("{"):
                offset = json.loads(line)
                ends[offset["source"]] = int(offset["batch"])
        return ends

    def ranges(self, batch_id: int) -> dict[str, range]:
        """Source id -> the indexes of its logged batches in micro-batch ``batch_id``
        (read on the driver, without a Spark job)."""
        ends = self._ends(batch_id)
        starts = self._ends(batch_id - 1)
        return {source: range(starts.get(source, 0), end) for source, end in ends.items()}

    def last_committed_batch(self) -> int | None:
        """The id of the newest micro-batch committed, or None (a new checkpoint): a
        query started on this checkpoint goes on after it."""
        names = storage.listdir(join(self.path, "commits"))
        ids = [int(name) for name in names if name.isdigit()]
        return max(ids) if ids else None


def last_committed_batch(checkpoint: str) -> int | None:
    """The newest micro-batch the query checkpoint ``checkpoint`` has committed, or
    None (see :meth:`CheckpointDirectory.last_committed_batch`)."""
    return CheckpointDirectory(checkpoint).last_committed_batch()


class SourceDirectory:
    """The files of one source, ``<query directory>/<source>/``."""

    def __init__(self, path: str) -> None:
        self.path = path

    @property
    def spout_log(self) -> str:
        """The spout log's directory (see ``sources.spoutlog``)."""
        return join(self.path, "spout-log")

    @property
    def setup(self) -> str:
        """A Trident or transactional source's set-up."""
        return join(self.path, "setup.pickle")

    @property
    def coordination(self) -> str:
        """A coordinated spout's coordination store."""
        return join(self.path, "coordination")

    @property
    def stats(self) -> str:
        """A core spout's metrics, written by its source."""
        return join(self.path, "stats.pickle")

    @property
    def closed(self) -> str:
        """A core spout's source has closed its tasks."""
        return join(self.path, "closed")

    @property
    def polls(self) -> str:
        """A core spout's polls (see :class:`Polls`)."""
        return join(self.path, "polls")

    def make(self) -> None:
        """Create the directory (driver)."""
        storage.makedirs(self.path)

    def clear_markers(self) -> None:
        """Remove what a core spout's source of an earlier run said (driver)."""
        storage.remove(self.closed)
        storage.remove(self.polls)

    def is_closed(self) -> bool:
        """Whether the source has closed its spout tasks."""
        return storage.exists(self.closed)

    def read_polls(self) -> Polls | None:
        """What the source last wrote about its polls (None before any)."""
        try:
            return Polls(*(int(n) for n in storage.read_text(self.polls).split()))
        except (OSError, ValueError, TypeError):
            return None

    def write_polls(self, polls: Polls) -> None:
        """Say what the source's polls are (its process)."""
        storage.write_bytes(self.polls, " ".join(map(str, polls)).encode(), durable=False)

    def write_stats(self, stats: ComponentStats) -> None:
        """Write the spout's metrics for the driver (its source's process)."""
        storage.write_bytes(self.stats, pickle.dumps(stats))

    def mark_closed(self) -> None:
        """Say that the source has closed its spout tasks (its process)."""
        storage.write_bytes(self.closed, b"")

    def read_stats(self) -> ComponentStats | None:
        """The spout's metrics the source last wrote (None before any)."""
        try:
            stats: ComponentStats = pickle.loads(storage.read_bytes(self.stats))
        except (OSError, EOFError, pickle.UnpicklingError):
            return None
        return stats


class QueryDirectory:
    """The files of one streaming query of a topology (see the module's description)."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def of(cls, checkpoint_dir: str, topology: str, query: str) -> QueryDirectory:
        """The directory of query ``query`` of topology ``topology``."""
        return cls(join(checkpoint_dir, topology, _safe(query)))

    @property
    def name(self) -> str:
        """The query's name as a path component."""
        return storage.basename(self.path)

    @property
    def paused(self) -> str:
        """The topology is deactivated while this file exists."""
        return join(self.path, "paused")

    @property
    def closing(self) -> str:
        """A core topology's spouts close their tasks once this file exists."""
        return join(self.path, "closing")

    @property
    def checkpoint(self) -> CheckpointDirectory:
        """Spark's checkpoint of the query."""
        return CheckpointDirectory(join(self.path, "checkpoint"))

    @property
    def state(self) -> str:
        """Where a core topology's bolt tasks keep their snapshots."""
        return join(self.path, "state")

    def core_setup(self, run_key: str) -> str:
        """The set-up file of core run ``run_key`` (one per run: Python workers keep a
        set-up until its file is gone)."""
        return join(self.path, f"setup-{run_key}.pickle")

    def remove_core_setup(self, path: str) -> None:
        """Remove a core run's set-up file (its run is over)."""
        storage.remove(path)

    def source(self, source_id: str) -> SourceDirectory:
        """The directory of source ``source_id``."""
        return SourceDirectory(join(self.path, _safe(source_id)))

    def make(self) -> None:
        """Create the directory and clear what an earlier run left: the pause and close
        markers and earlier core runs' set-ups (driver)."""
        storage.makedirs(self.path)
        storage.remove(self.paused)
        storage.remove(self.closing)
        for name in storage.listdir(self.path):
            if name.startswith("setup-") and name.endswith(".pickle"):
                storage.remove(join(self.path, name))

    def pause(self) -> None:
        """Deactivate: the sources stop polling (driver)."""
        storage.write_bytes(self.paused, b"", durable=False)

    def resume(self) -> None:
        """Activate: the sources poll again (driver)."""
        storage.remove(self.paused)

    def is_paused(self) -> bool:
        """Whether the topology is deactivated (sources' processes)."""
        return storage.exists(self.paused)

    def close(self) -> None:
        """Ask a core topology's sources to close their spout tasks (driver)."""
        storage.write_bytes(self.closing, b"", durable=False)

    def is_closing(self) -> bool:
        """Whether the topology is being killed (sources' processes)."""
        return storage.exists(self.closing)
