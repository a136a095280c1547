"""The errors of the Spark engine: the one it raises when Spark itself cannot run a
topology, and the one that carries a component's exception from a Spark task to the
driver.

A component's code (a batch bolt, a Trident operation, a spout's emitter, a committer)
runs in a Spark task, in a Python worker that shares nothing with the driver but what
Spark carries back: the text of the task's failure. :class:`ComponentFailure` wraps the
component's exception in an error whose text holds one marker line, ``squall component
error: {...}`` (a JSON object: the component id, the task id, the exception's line and
its traceback text), before the original traceback. The driver receives the failed
job's error (Spark's and Py4J's text, with the worker's traceback in it) and recovers
the component with :func:`component_failure`.
"""

from __future__ import annotations

import contextlib
import json
import traceback
from dataclasses import dataclass
from typing import Any

from squall.model.errors import FailedException, ReportedFailedException, SquallError

#: What begins the line that names the component in a failure's text.
MARKER = "squall component error: "
#: The attribute a failure is noted under on an exception raised in the driver process.
_NOTED = "_squall_component_failure"
#: How many chained exceptions :func:`component_failure` looks through.
_CHAIN = 10


class SparkUnavailableError(SquallError):
    """PySpark cannot start: Java is missing, the master URL is invalid or unreachable,
    or the session failed to start. The message is one line naming the cause."""


@dataclass(frozen=True)
class FailureSource:
    """Which component's code raised a micro-batch's error, and what it raised.

    Attributes:
        component_id: the component whose code raised (the id the local engine reports
            the error under).
        task_id: the task that ran it.
        error: the exception's line, ``ValueError: ...`` (as the local engine reports).
        traceback: the exception's traceback text, where the task ran.
        reported: whether the component reports it in its errors: not a
            ``FailedException`` (it fails the batch silently, as in Storm) unless it is
            a ``ReportedFailedException``.
    """

    component_id: str
    task_id: int
    error: str
    traceback: str
    reported: bool = True

    @classmethod
    def of(cls, exc: BaseException, component_id: str, task_id: int) -> FailureSource:
        """What ``exc``, raised by task ``task_id`` of ``component_id``, says."""
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        reported = not isinstance(exc, FailedException) or isinstance(exc, ReportedFailedException)
        return cls(component_id, task_id, f"{type(exc).__name__}: {exc}", trace, reported)

    def marker(self) -> str:
        """The one line that names the component in a failure's text."""
        payload = {
            "component": self.component_id,
            "task": self.task_id,
            "error": self.error,
            "traceback": self.traceback,
            "reported": self.reported,
        }
        return MARKER + json.dumps(payload, sort_keys=True)


class ComponentFailure(Exception):
    """A component's exception, raised again by the Spark task that ran the component,
    so its failure's text names the component.

    Its text is the marker line (see :func:`component_failure`), then the original
    exception's traceback, so the last line of the task's failure is still the original
    exception's (``ValueError: ...``). Picklable. Raised in a Spark task (an executor's
    Python worker, or a source's process).
    """

    def __init__(self, source: FailureSource) -> None:
        super().__init__(source)
        self.source = source

    @classmethod
    def of(cls, exc: BaseException, component_id: str, task_id: int) -> ComponentFailure:
        """The failure of ``exc``, raised by task ``task_id`` of ``component_id``."""
        if isinstance(exc, ComponentFailure):
            return exc
        return cls(FailureSource.of(exc, component_id, task_id))

    def __str__(self) -> str:
        return f"{self.source.marker()}\n{self.source.traceback.rstrip()}"

    def __reduce__(self) -> tuple[Any, ...]:
        return ComponentFailure, (self.source,)


def note_component(exc: BaseException, component_id: str, task_id: int) -> None:
    """Note on ``exc``, raised in the driver process by task ``task_id`` of
    ``component_id`` (a stage run on the driver), which component raised it, so the
    driver reports it as a Spark task's :class:`ComponentFailure` (the exception itself
    is raised on unchanged). The first note stays."""
    if getattr(exc, _NOTED, None) is not None:
        return
    # An exception type without attributes is reported unnamed.
    with contextlib.suppress(AttributeError):
        setattr(exc, _NOTED, FailureSource.of(exc, component_id, task_id))


def component_failure(exc: BaseException) -> FailureSource | None:
    """Which component's code raised ``exc`` (a failed micro-batch's error on the
    driver), or None if no component's did (an engine or Spark error).

    Looks at ``exc`` and the exceptions it chains: a :class:`ComponentFailure`, an
    exception :func:`note_component` noted, then the text of each (a failed Spark job's
    error, which holds the task's failure), whose last marker line names the component.
    Pure work on the driver.
    """
    seen: BaseException | None = exc
    for _ in range(_CHAIN):
        if seen is None:
            break
        if isinstance(seen, ComponentFailure):
            return seen.source
        noted = getattr(seen, _NOTED, None)
        if isinstance(noted, FailureSource):
            return noted
        try:
            text = str(seen)
        except Exception:  # a broken __str__: look no further in this one
            text = ""
        found = failure_in_text(text)
        if found is not None:
            return found
        seen = seen.__cause__ or seen.__context__
    return None


def failure_in_text(text: str) -> FailureSource | None:
    """The component named by the last marker line in ``text`` (a Spark failure's
    message, whose task failure may be repeated), or None if there is none or it cannot
    be read. Pure text work."""
    decoder = json.JSONDecoder()
    start = text.rfind(MARKER)
    while start >= 0:
        try:
            payload, _ = decoder.raw_decode(text, start + len(MARKER))
        except ValueError:
            payload = None
        source = _source_of(payload)
        if source is not None:
            return source
        start = text.rfind(MARKER, 0, start)
    return None


def _source_of(payload: object) -> FailureSource | None:
    """The :class:`FailureSource` a marker's JSON object describes, if it is one."""
    if not isinstance(payload, dict):
        return None
    component, task = payload.get("component"), payload.get("task")
    error, trace = payload.get("error"), payload.get("traceback")
    if not (isinstance(component, str) and isinstance(error, str) and isinstance(trace, str)):
        return None
    if isinstance(task, bool) or not isinstance(task, int):
        return None
    reported = payload.get("reported", True)
    if not isinstance(reported, bool):
        return None
    return FailureSource(component, task, error, trace, reported)
