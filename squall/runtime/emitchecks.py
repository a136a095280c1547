"""The checks of an emit, and their errors: one text on every engine and path.

The collectors (:mod:`squall.runtime.collectors`) check every emit on their fast path
and call these functions only to build the error once a check failed, so the hot path
costs what it did. The Spark engine's batch path (batch bolts and transactional spout
emitters, whose emits are routed after their batch) checks each emit with
:func:`check_emit` and :func:`check_emit_direct`, which raise the same errors.

Pure functions: they run wherever the emitting task runs (the task's thread, an
executor's Python worker, a source's process).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from squall.model.fields import Fields


def undeclared_stream(component_id: str, stream: object, declared: Iterable[str]) -> ValueError:
    """The error of an emit on ``stream``, which ``component_id`` does not declare
    (``declared``: the streams it may emit on), or which is reserved for the engine
    (an id starting with ``__``)."""
    if isinstance(stream, str) and stream.startswith("__"):
        return ValueError(
            f"component {component_id!r} emitted on stream {stream!r}: stream "
            "ids starting with '__' are reserved for the engine's system streams"
        )
    names = sorted(declared)
    return ValueError(
        f"component {component_id!r} emitted on stream {stream!r}, which it "
        f"does not declare (declared streams: {names or 'none'})"
    )


def wrong_width(
    component_id: str, stream: str, values: Sequence[Any], fields: Fields
) -> ValueError:
    """The error of an emit of ``values`` on ``stream``, whose ``fields`` are not as
    many as the values."""
    return ValueError(
        f"component {component_id!r} emitted {len(values)} value(s) on stream "
        f"{stream!r}, which declares {len(fields)} field(s) "
        f"{fields.to_list()}: {list(values)!r}"
    )


def not_direct(component_id: str, stream: str) -> ValueError:
    """The error of ``emit_direct`` on ``stream``, which is not declared direct."""
    return ValueError(
        f"component {component_id!r} used emit_direct on stream {stream!r}, "
        "which is not declared direct (declare it with direct=True)"
    )


def not_subscribed(
    component_id: str, stream: str, task_id: object, tasks: Iterable[int]
) -> ValueError:
    """The error of ``emit_direct`` to ``task_id``, which does not subscribe to
    ``stream`` with a direct grouping (``tasks``: those that do)."""
    return ValueError(
        f"component {component_id!r} emitted direct to task {task_id!r} on "
        f"stream {stream!r}, but that task does not subscribe to the stream with a "
        f"direct grouping (subscribed tasks: {sorted(tasks)})"
    )


def direct_only(component_id: str, stream: str) -> ValueError:
    """The error of ``emit`` on ``stream``, which is declared direct."""
    return ValueError(
        f"component {component_id!r} used emit on stream {stream!r}, "
        "which is declared direct: use emit_direct(task_id, values, ...)"
    )


def check_emit(
    component_id: str,
    stream: str,
    values: Sequence[Any],
    fields: Mapping[str, Fields],
    direct: Collection[str] = (),
) -> None:
    """Check an ``emit`` of ``values`` on ``stream`` by ``component_id``, which declares
    ``fields`` (stream -> its fields; the streams it may emit on), ``direct`` among
    them direct.

    Raises:
        ValueError: the stream is not declared (or reserved), is direct, or the number
            of values differs from its fields (as the collectors raise it).
    """
    declared = fields.get(stream)
    if declared is None:
        raise undeclared_stream(component_id, stream, fields)
    if len(values) != len(declared):
        raise wrong_width(component_id, stream, values, declared)
    if stream in direct:
        raise direct_only(component_id, stream)


def check_emit_direct(
    component_id: str,
    task_id: int,
    stream: str,
    values: Sequence[Any],
    fields: Mapping[str, Fields],
    direct: Mapping[str, Collection[int]],
) -> None:
    """Check an ``emit_direct`` of ``values`` to ``task_id`` on ``stream`` by
    ``component_id``, which declares ``fields`` (see :func:`check_emit`), ``direct``
    mapping each direct stream to the tasks that subscribe to it with a direct grouping.

    Raises:
        ValueError: the stream is not declared (or reserved), the number of values
            differs from its fields, the stream is not direct, or ``task_id`` does not
            subscribe to it (as the collectors raise it).
    """
    declared = fields.get(stream)
    if declared is None:
        raise undeclared_stream(component_id, stream, fields)
    if len(values) != len(declared):
        raise wrong_width(component_id, stream, values, declared)
    targets = direct.get(stream)
    if targets is None:
        raise not_direct(component_id, stream)
    if task_id not in targets:
        raise not_subscribed(component_id, stream, task_id, targets)


__all__ = [
    "check_emit",
    "check_emit_direct",
    "direct_only",
    "not_direct",
    "not_subscribed",
    "undeclared_stream",
    "wrong_width",
]
