"""The emit listener of a Spark run (``SparkCluster.submit_topology(...,
emit_listener=...)``): called for every tuple a component emits, wherever the emitting
task runs (an executor's Python worker, the driver, a source's process).

The cluster puts the listener in the run's configuration under :data:`EMIT_LISTENER_KEY`,
so it travels, pickled, with every task's set-up. It is called as
``listener(component_id, stream_id, task_id, values, targets)``: ``values`` as the
component emitted them (a batch component's with its ``TransactionAttempt`` first),
``targets`` the task ids the tuple went to as far as the emitting side knows (empty for
a batch component's emits, routed after its batch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from squall.runtime.cluster import EmitListener
from squall.runtime.collectors import Observer

#: The configuration key carrying the listener (set by the cluster, never by users).
EMIT_LISTENER_KEY = "squall.spark.emit.listener"


def emit_listener(conf: dict[str, Any]) -> EmitListener | None:
    """The run's emit listener, or None."""
    listener: EmitListener | None = conf.get(EMIT_LISTENER_KEY)
    return listener


def observer(conf: dict[str, Any], component_id: str) -> Observer | None:
    """A collector observer (``set_observer``) passing the emits of ``component_id`` to
    the run's listener, or None without one."""
    listener = emit_listener(conf)
    if listener is None:
        return None

    def observe(stream: str, task: int, values: Sequence[Any], targets: list[int]) -> None:
        listener(component_id, stream, task, values, targets)

    return observe


def report_batch_emits(
    conf: dict[str, Any],
    component_id: str,
    task_id: int,
    attempt: Any,
    emits: Sequence[tuple[str, Sequence[Any], int | None]],
) -> None:
    """Pass a batch component's emits (``(stream, values without the attempt, direct
    task)``) of one task to the run's listener, the attempt put back in front."""
    listener = emit_listener(conf)
    if listener is None:
        return
    for stream, values, direct in emits:
        listener(
            component_id, stream, task_id, [attempt, *values], [] if direct is None else [direct]
        )
