"""The frames of one micro-batch: how a stage's input is cut from the outputs before it.

Both pipelines (core bolts and Trident/transactional segments) run a micro-batch as a
chain of stages whose rows are packets (see ``execute.packets``): the sources' packets
in one frame, then each stage's output in a frame of its own. A stage reads the
packets addressed to it (``dest``) from every frame it subscribes to. An output read
by several stages is computed once (``localCheckpoint``); one read by a single stage is
pulled through by that stage's job, so a chain of stages costs one Spark job.

Runs on the driver, inside the ``foreachBatch`` call.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: The frame key of the sources' packets (one frame: the union of their sources).
SOURCES = "$sources"


class BatchFrames:
    """The frames of one micro-batch, by producer (``SOURCES`` or a component id).

    Args:
        sources: the micro-batch's frame (every source's packets).
        readers: how many stages read each producer's frame.
    """

    def __init__(self, sources: DataFrame, readers: dict[str, int]) -> None:
        self.readers = readers
        self._frames: dict[str, DataFrame] = {}
        self._materialized: set[str] = set()
        self.put(SOURCES, sources)

    def put(self, producer: str, output: DataFrame, computed: bool = False) -> None:
        """Keep ``producer``'s output, computed once now if several stages read it
        (unless it is ``computed`` already: rows made on the driver)."""
        if computed:
            self._frames[producer] = output
            self._materialized.add(producer)
        elif self.readers.get(producer, 0) > 1:
            self.materialize(producer, output)
        else:
            self._frames[producer] = output

    def materialize(self, producer: str, output: DataFrame | None = None) -> None:
        """Compute ``producer``'s output now, in a job of its own (once)."""
        if producer in self._materialized:
            return
        frame = self._frames[producer] if output is None else output
        self._frames[producer] = frame.localCheckpoint(eager=True)
        self._materialized.add(producer)

    def input_of(
        self, dest: int, producers: Iterable[str], extra: Iterable[DataFrame] = ()
    ) -> DataFrame | None:
        """The packets for stage ``dest`` from ``producers``' frames, with ``extra``
        frames (tick tuples); None if there are none to read."""
        from pyspark.sql import DataFrame
        from pyspark.sql.functions import col

        parts = [self._frames[p].filter(col("dest") == dest) for p in producers]
        parts.extend(extra)
        return reduce(DataFrame.unionAll, parts) if parts else None
