"""A segment: the Trident operations between two repartitions, run as a batch bolt.

The segment's processors form a small DAG. Tuples arriving on an input stream enter
its processor; at the end of a batch (detected by the batch layer) the processors
finish in topological order. Task-level resources (operations, states) are prepared
once per task (``prepare_task``); each batch gets fresh per-batch state (``for_batch``).
"""

from __future__ import annotations

from typing import Any

from squall.model.context import TopologyContext
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.fields import Fields
from squall.model.hooks import CleansUpTask, MakesBatchInstances, PreparesTask
from squall.model.tuple import Tuple
from squall.transactional.batch import BatchBolt, BatchOutputCollector
from squall.trident.processors import BatchRun, Processor

ATTEMPT_FIELD = "$attempt"


class TridentSegment(BatchBolt, PreparesTask, MakesBatchInstances, CleansUpTask):
    """Runs ``processors`` (topological order) for each batch.

    Args:
        processors: the segment's processors, children wired.
        entries: ``(source component, stream) -> (processor index, side)``.
        outputs: stream id -> fields of the tuples the segment emits on it.
    """

    def __init__(
        self,
        processors: list[Processor],
        entries: dict[tuple[str, str], tuple[int, int]],
        outputs: dict[str, Fields],
    ) -> None:
        self.processors = processors
        self.entries = entries
        self.output_streams = outputs
        self.task_index = 0
        for processor in processors:
            processor.wired()

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        for stream, fields in self.output_streams.items():
            declarer.declare_stream(stream, [ATTEMPT_FIELD, *fields])

    def prepare_task(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Prepare every processor once for this task."""
        self.task_index = context.task_index
        for processor in self.processors:
            processor.prepare(conf, context)

    def cleanup_task(self) -> None:
        """Release every processor's resources."""
        for processor in self.processors:
            processor.cleanup()

    def for_batch(self) -> SegmentBatch:
        """A fresh per-batch runner sharing this task's processors."""
        return SegmentBatch(self)


class SegmentBatch(BatchBolt):
    """One batch of a segment at one task."""

    def __init__(self, segment: TridentSegment) -> None:
        self.segment = segment
        self.run: BatchRun | None = None

    def prepare(
        self,
        conf: dict[str, Any],
        context: TopologyContext,
        collector: BatchOutputCollector,
        id: Any,
    ) -> None:
        self.run = BatchRun(id, collector, self.segment.processors, self.segment.task_index)

    def execute(self, tup: Tuple) -> None:
        run = self.run
        assert run is not None
        index, side = self.segment.entries[(tup.source_component, tup.source_stream)]
        values = list(tup.values)
        del values[0]
        self.segment.processors[index].process(run, run.states[index], values, side)

    def finish_batch(self) -> None:
        run = self.run
        assert run is not None
        for processor in self.segment.processors:
            processor.finish(run, run.states[processor.index])
