"""``squall run --show``: the last tuples chosen components emitted, shown under the
final metrics.

A :class:`ShownEmits` is the run's emit listener (``submit_topology(...,
emit_listener=...)``): the engine calls it on the emitting task's thread after every
emit of a user component, and it keeps, for each shown component and stream, how many
tuples were emitted and the last ones (a bounded queue, so memory stays constant
whatever the run's length). :meth:`ShownEmits.view` renders them on the command's
thread once the topology is stopped.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text

from squall.cli.formats import count
from squall.model.topology import StormTopology

EmitListener = Callable[[str, str, int, Sequence[Any], list[int]], None]
"""Called as ``listener(component_id, stream_id, task_id, values, targets)``."""

#: How many tuples ``--show`` keeps per component and stream unless told otherwise.
DEFAULT_LAST = 10
#: Prefixes of the streams a component without ``:STREAM`` is not shown on: system
#: streams (``__ack_init`` ...) and Trident's and transactional topologies' coordination
#: streams (``$coord``, ``$batch`` ...).
_INTERNAL = ("__", "$")


@dataclass(frozen=True)
class ShowTarget:
    """One ``--show COMPONENT[:STREAM]``: a component and, optionally, one stream."""

    component: str
    stream: str | None = None

    @classmethod
    def parse(cls, text: str) -> ShowTarget:
        """``COMPONENT`` or ``COMPONENT:STREAM`` (split at the last colon).

        Raises:
            ValueError: an empty component or stream.
        """
        component, colon, stream = text.rpartition(":")
        if not colon:
            component, stream = text, ""
        if not component.strip() or (colon and not stream.strip()):
            raise ValueError(f"{text!r} is not COMPONENT or COMPONENT:STREAM")
        return cls(component.strip(), stream.strip() or None)

    def __str__(self) -> str:
        return self.component if self.stream is None else f"{self.component}:{self.stream}"


def check_targets(targets: Iterable[ShowTarget], topology: StormTopology) -> list[str]:
    """What is wrong with ``targets`` for ``topology``: one message per unknown component,
    system component or undeclared stream (empty when every target can be shown)."""
    problems = []
    ids = topology.component_ids()
    for target in targets:
        spec = topology.get_component(target.component) if target.component in topology else None
        if target.component.startswith("__") or (spec is not None and spec.system):
            problems.append(f"{target.component!r} is a system component; its tuples are not shown")
        elif spec is None:
            problems.append(
                f"{target.component!r} is not a component of the topology "
                f"(its components: {', '.join(ids)})"
            )
        elif target.stream is not None and target.stream not in spec.streams:
            streams = ", ".join(s for s in spec.streams if not s.startswith("__")) or "none"
            problems.append(
                f"component {target.component!r} declares no stream {target.stream!r} "
                f"(its streams: {streams})"
            )
    return problems


class ShownEmits:
    """The emit listener of ``--show``: per shown component and stream, the number of
    tuples emitted and the last ``last`` of them.

    Called from every task thread of the engine; a lock keeps the counts and queues
    consistent. Emits of components that are not shown cost a set lookup.
    """

    def __init__(self, targets: Sequence[ShowTarget], topology: StormTopology, last: int) -> None:
        self.targets = list(targets)
        self.last = last
        self._topology = topology
        #: component -> the streams shown (None: all of them).
        self._wanted: dict[str, set[str] | None] = {}
        for target in self.targets:
            current = self._wanted.get(target.component, set())
            if target.stream is None or current is None:
                self._wanted[target.component] = None
            else:
                self._wanted[target.component] = current | {target.stream}
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}
        self._tuples: dict[tuple[str, str], deque[list[Any]]] = {}

    def __call__(
        self, component_id: str, stream: str, task: int, values: Sequence[Any], targets: list[int]
    ) -> None:
        if component_id not in self._wanted:
            return
        streams = self._wanted[component_id]
        if streams is not None and stream not in streams:
            return
        key = (component_id, stream)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1
            queue = self._tuples.get(key)
            if queue is None:
                queue = self._tuples[key] = deque(maxlen=self.last)
            queue.append(list(values))

    def emitted(self, component: str, stream: str = "default") -> tuple[int, list[list[Any]]]:
        """How many tuples ``component`` emitted on ``stream`` and the last ones kept,
        oldest first."""
        with self._lock:
            key = (component, stream)
            return self._counts.get(key, 0), list(self._tuples.get(key, ()))

    def view(self) -> RenderableType:
        """Per shown component and stream, a line saying how many tuples it emitted, then
        the last ones, one a line (their values as a Python list)."""
        parts: list[RenderableType] = []
        for target in self.targets:
            spec = self._topology.get_component(target.component)
            streams = (
                [target.stream]
                if target.stream is not None
                else [s for s in spec.streams if not s.startswith(_INTERNAL)]
            )
            with self._lock:
                emitting = [s for s in streams if self._counts.get((target.component, s))]
            if not emitting:
                where = f" on stream {target.stream}" if target.stream is not None else ""
                parts.append(Text(f"{target.component} emitted no tuples{where}"))
                continue
            for stream in emitting:
                total, last = self.emitted(target.component, stream)
                plural = "tuple" if total == 1 else "tuples"
                kept = "" if len(last) == total else f"; the last {len(last)}"
                parts.append(
                    Text(
                        f"{target.component} emitted {count(total)} {plural} "
                        f"on stream {stream}{kept}:"
                    )
                )
                lines = Text("\n".join(repr(values) for values in last))
                parts.append(Padding(lines, (0, 0, 0, 2), expand=False))
        return Group(*parts)
