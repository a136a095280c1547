"""``BatchingSink``: the buffering every sink bolt shares.

A sink turns each tuple into an item (a row, a stream entry), buffers tuples and items,
and writes a buffer in one round trip; it acks the buffer's tuples once the write
succeeded and fails them all when it did not, so a reliable spout replays them
(at-least-once). A buffer is written when it holds ``batch`` tuples, when its oldest
tuple has waited ``max_delay_secs`` (checked on every tuple and on a tick tuple of that
period), at the end of every Spark micro-batch and when the task is cleaned up.

Runs in the sink's task (a local engine worker thread; on Spark an executor's Python
worker). Not thread-safe: a task's methods are called from one thread.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from squall.connectors.errors import ConnectorError
from squall.model.components import Bolt
from squall.model.config import Config
from squall.model.hooks import ReportsMetrics, SettlesBatch
from squall.model.tuple import Tuple, is_tick_tuple

if TYPE_CHECKING:
    from squall.runtime.collectors import OutputCollector


class BatchingSink(Bolt, SettlesBatch, ReportsMetrics):
    """A bolt that writes its tuples in batches and acks each after its batch is
    written.

    Subclasses set ``batch`` and ``max_delay_secs`` (their options), call
    :meth:`start_buffer` in ``prepare``, and implement :meth:`item` (a tuple's item)
    and :meth:`write` (one batch). ``written_metric`` names the count of items written
    in :meth:`metrics`.
    """

    #: The metric counting the items written.
    written_metric: ClassVar[str] = "written"
    #: Attributes a pickled (Spark-snapshotted) task leaves out: the unwritten buffer
    #: (a snapshot is taken after the micro-batch's buffer was written).
    transient: ClassVar[tuple[str, ...]] = ("_buffer", "_items")

    batch: int
    max_delay_secs: float | None
    collector: OutputCollector

    def __init__(self) -> None:
        """No task yet: :meth:`start_buffer` (from ``prepare``) starts the buffer; the
        counters are zero until then."""
        #: Whether :meth:`start_buffer` ran (the task was prepared).
        self._prepared = False
        self._written = 0
        self._failed_writes = 0

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the :attr:`transient` attributes."""
        state = dict(vars(self))
        for name in self.transient:
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        if self._prepared:  # it starts with an empty buffer
            self._buffer: list[Tuple] = []
            self._items: list[Any] = []

    def get_component_configuration(self) -> dict[str, Any] | None:
        """Tick tuples every ``max_delay_secs`` (they write an idle buffer)."""
        if self.max_delay_secs is None:
            return None
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: self.max_delay_secs}

    def start_buffer(self, collector: OutputCollector, label: str) -> None:
        """Start the task's empty buffer and counters (from ``prepare``); ``label``
        names the sink in error messages (``PostgresInsertBolt 'sink'``)."""
        self._prepared = True
        self.collector = collector
        self.label = label
        self._buffer = []
        self._items = []
        self._oldest = 0.0
        self._written = 0
        self._failed_writes = 0

    @abstractmethod
    def item(self, tup: Tuple) -> Any:
        """The item that ``tup`` writes.

        Raises:
            KeyError, ValueError, IndexError: the tuple cannot be written (a missing
                field, a value of no supported type); it is failed alone.
        """

    @abstractmethod
    def write(self, items: list[Any]) -> Exception | None:
        """Write ``items`` in one round trip (all or none); returns None once they are
        written, or the error to report (then their tuples are failed). Waits out an
        outage's back-off first."""

    def execute(self, tup: Tuple) -> None:
        """Buffer the tuple's item; write the buffer when it is full or old. A tick
        tuple writes the buffer. Runs once per input tuple."""
        if is_tick_tuple(tup):
            self.flush()
            return
        try:
            item = self.item(tup)
        except (KeyError, ValueError, IndexError) as error:
            self.collector.report_error(
                ConnectorError(f"{self.label}: cannot write a tuple: {error}")
            )
            self.collector.fail(tup)
            return
        if not self._buffer:
            self._oldest = time.monotonic()
        self._buffer.append(tup)
        self._items.append(item)
        if len(self._buffer) >= self.batch or (
            self.max_delay_secs is not None
            and time.monotonic() - self._oldest >= self.max_delay_secs
        ):
            self.flush()

    def settle_batch(self) -> None:
        """Spark, at the end of each micro-batch: write the buffer, so its tuples are
        acked (or failed) within their micro-batch."""
        self.flush()

    def settle_before_checkpoint(self) -> None:
        """A checkpoint of a topology with stateful bolts: write the buffer, so its
        tuples are acked (or failed) before the checkpoint passes (see
        :class:`~squall.model.hooks.SettlesBeforeCheckpoint`)."""
        self.flush()

    def flush(self) -> None:
        """Write the buffer; ack its tuples once written, or report the error and fail
        them all."""
        if not self._buffer:
            return
        tuples, items = self._buffer, self._items
        self._buffer, self._items = [], []
        error = self.write(items)
        if error is not None:
            self._failed_writes += 1
            self.collector.report_error(error)
            fail = self.collector.fail
            for tup in tuples:
                fail(tup)
            return
        self._written += len(items)
        ack = self.collector.ack
        for tup in tuples:
            ack(tup)

    def metrics(self) -> dict[str, float]:
        """The items written (``written_metric``) and ``failed_writes`` (batches whose
        tuples were failed)."""
        return {
            self.written_metric: self._written,
            "failed_writes": self._failed_writes,
        }

    def flush_at_cleanup(self) -> bool:
        """Write what is buffered (from ``cleanup``); False if the task was never
        prepared. Not guaranteed to run: a killed process skips it, and its unwritten
        tuples, never acked, are replayed by a reliable spout."""
        if not self._prepared:
            return False
        self.flush()
        return True
