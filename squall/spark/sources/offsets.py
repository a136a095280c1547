"""Which batches of each source a micro-batch holds, read from the query's offset log;
and which micro-batch a query's checkpoint has committed last.

Spark writes a micro-batch's end offsets (one JSON line per source) to
``<checkpoint>/offsets/<batch_id>`` before running it; the previous batch's are its
start. The driver reads them to know which logged spout batches a micro-batch holds
(their DRPC requests, their tuple counts) without a Spark job.
"""

from __future__ import annotations

import json
import os


class OffsetLog:
    """The offset log of one streaming query's checkpoint."""

    def __init__(self, checkpoint: str) -> None:
        self.directory = os.path.join(checkpoint, "offsets")

    def _ends(self, batch_id: int) -> dict[str, int]:
        ends: dict[str, int] = {}
        if batch_id < 0:
            return ends
        try:
            with open(os.path.join(self.directory, str(batch_id))) as handle:
                lines = handle.read().splitlines()[2:]
        except FileNotFoundError:
            return ends
        for line in lines:
            if line.startswith("{"):
                offset = json.loads(line)
                ends[offset["source"]] = int(offset["batch"])
        return ends

    def ranges(self, batch_id: int) -> dict[str, range]:
        """Source id -> the indexes of its logged batches in micro-batch ``batch_id``."""
        ends = self._ends(batch_id)
        starts = self._ends(batch_id - 1)
        return {source: range(starts.get(source, 0), end) for source, end in ends.items()}


def last_committed_batch(checkpoint: str) -> int | None:
    """The id of the newest micro-batch a query's checkpoint has committed, or None if
    it has committed none (a new checkpoint). Spark writes ``<checkpoint>/commits/<id>``
    once a micro-batch has finished; a query started on this checkpoint goes on after it.
    """
    try:
        names = os.listdir(os.path.join(checkpoint, "commits"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    ids = [int(name) for name in names if name.isdigit()]
    return max(ids) if ids else None
