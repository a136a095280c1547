"""A ``BasicBolt`` in a transactional topology (Storm's ``TransactionalTopologyBuilder
.setBolt(id, IBasicBolt)``, which runs it in a ``BasicBoltExecutor``).

The basic bolt is one object per task, prepared once (``prepare(conf, context)``), as
in a core topology: it keeps no per-batch state of its own. Each tuple of a batch goes
to its ``execute(tup, collector)``; what it emits is anchored to that tuple and counted
for the batch's coordination, so the downstream batch bolts know when they have the
whole batch. An exception from ``execute`` fails the tuple, and so the batch (it is
replayed; ``FailedException`` fails it without reporting an error), as for any basic
bolt. Its emits must carry the batch's attempt first, like every batch component's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from squall.model.collectors import BasicOutputCollector
from squall.model.components import BasicBolt
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.errors import SquallError
from squall.model.hooks import CleansUpTask, MakesBatchInstances, PreparesTask
from squall.model.tuple import DEFAULT_STREAM, Tuple
from squall.transactional.batch import BatchBolt

if TYPE_CHECKING:
    from squall.model.collectors import OutputCollector
    from squall.model.context import TopologyContext
    from squall.transactional.batch import BatchOutputCollector


class BasicBatchCollector(BasicOutputCollector):
    """The collector a basic bolt gets in a transactional topology: emits go through
    the batch's collector (anchored to the tuple being executed, counted per task)."""

    __slots__ = ("_batch",)

    def __init__(self, batch: BatchOutputCollector) -> None:
        self._batch = batch

    @property
    def output_collector(self) -> OutputCollector:
        """Not available: in a transactional topology a basic bolt emits through this
        collector only (its emits must be counted for the batch).

        Raises:
            SquallError: always.
        """
        raise SquallError(
            "a basic bolt in a transactional topology emits through its "
            "BasicOutputCollector only (emits are counted for the batch)"
        )

    def emit(self, values: Sequence[Any], stream: str = DEFAULT_STREAM) -> list[int]:
        """Emit ``values`` (first value: the batch's attempt) on ``stream``."""
        return self._batch.emit(values, stream)

    def emit_direct(
        self, task_id: int, values: Sequence[Any], stream: str = DEFAULT_STREAM
    ) -> None:
        """Emit ``values`` to task ``task_id`` on direct ``stream``."""
        self._batch.emit_direct(task_id, values, stream)

    def reset_timeout(self, tup: Tuple) -> None:
        """Restart the message timeout of ``tup``'s trees (the batch's)."""
        self._batch.reset_timeout(tup)

    def report_error(self, error: BaseException | str) -> None:
        """Record an error in the component's metrics and the log."""
        self._batch.report_error(error)


class BasicBoltBatch:
    """One batch of a basic bolt: its tuples go to the task's bolt."""

    def __init__(self, bolt: BasicBolt) -> None:
        self._bolt = bolt
        self._collector: BasicBatchCollector | None = None

    def prepare(
        self,
        conf: dict[str, Any],
        context: TopologyContext,
        collector: BatchOutputCollector,
        id: Any,
    ) -> None:
        self._collector = BasicBatchCollector(collector)

    def execute(self, tup: Tuple) -> None:
        assert self._collector is not None, "prepare runs first"
        self._bolt.execute(tup, self._collector)

    def finish_batch(self) -> None:
        """Nothing: a basic bolt keeps no per-batch state."""


class BasicBoltBatchAdapter(BatchBolt, PreparesTask, MakesBatchInstances, CleansUpTask):
    """Runs a :class:`~squall.model.components.BasicBolt` as a batch bolt (see the
    module docstring). ``TransactionalTopologyBuilder.set_bolt`` makes it.

    Where it runs: the bolt's task (its worker thread on the local engine; on Spark the
    executor process of the bolt's stage, where ``prepare`` runs once per process and
    task).
    """

    def __init__(self, bolt: BasicBolt) -> None:
        self.bolt = bolt

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        self.bolt.declare_output_fields(declarer)

    def get_component_configuration(self) -> dict[str, Any] | None:
        return self.bolt.get_component_configuration()

    def prepare_task(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """The basic bolt's ``prepare``, once per task."""
        self.bolt.prepare(conf, context)

    def for_batch(self) -> BasicBoltBatch:
        """A batch of the task's bolt (no copy: the bolt is per task)."""
        return BasicBoltBatch(self.bolt)

    def cleanup_task(self) -> None:
        """The basic bolt's ``cleanup``."""
        self.bolt.cleanup()
