"""``squall run --show``: the last tuples chosen components emitted, shown under the
final metrics.

A :class:`ShownEmits` is the run's emit listener (``submit_topology(...,
emit_listener=...)``): the engine calls it on the emitting task's thread after every
emit of a user component, and it keeps, for each shown component and stream, how many
tuples were emitted and the last ones, or with ``@FIELD`` the latest tuple of each of
the values of FIELD seen last (at most ``--show-last`` of them, so memory stays
constant whatever the run's length). :meth:`ShownEmits.view` renders them on the
command's thread once the topology is stopped.

In a Trident topology, COMPONENT may also be a name given with ``.name(...)``
(:func:`resolve_targets`): it stands for the stream carrying that operation's output,
in the component its segment runs in. A Trident bolt's tuples are shown without the
batch's attempt (their first field, ``$attempt``), as the operations see them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from squall.cli.formats import count
from squall.model.topology import StormTopology
from squall.trident.ir import NamedOperation, TridentIR
from squall.trident.segment import ATTEMPT_FIELD

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
    """One ``--show COMPONENT[:STREAM][@FIELD]``: a component, optionally one of its
    streams, and optionally a field whose latest tuple per value is shown (instead of
    the last tuples)."""

    component: str
    stream: str | None = None
    by: str | None = None

    @classmethod
    def parse(cls, text: str) -> ShowTarget:
        """``COMPONENT``, ``COMPONENT:STREAM``, either followed by ``@FIELD`` (split at
        the last ``@``, then at the last colon).

        Raises:
            ValueError: an empty component, stream or field.
        """
        rest, at, by = text.rpartition("@")
        if not at:
            rest, by = text, ""
        component, colon, stream = rest.rpartition(":")
        if not colon:
            component, stream = rest, ""
        if not component.strip() or (colon and not stream.strip()) or (at and not by.strip()):
            raise ValueError(f"{text!r} is not COMPONENT[:STREAM][@FIELD]")
        return cls(component.strip(), stream.strip() or None, by.strip() or None)

    def __str__(self) -> str:
        stream = "" if self.stream is None else f":{self.stream}"
        by = "" if self.by is None else f"@{self.by}"
        return f"{self.component}{stream}{by}"

    def streams(self, topology: StormTopology) -> list[str]:
        """The streams shown: STREAM, else every stream the component declares but its
        internal ones."""
        if self.stream is not None:
            return [self.stream]
        spec = topology.get_component(self.component)
        return [stream for stream in spec.streams if not stream.startswith(_INTERNAL)]


def trident_names(topology: StormTopology) -> dict[str, list[NamedOperation]]:
    """The operations of a Trident topology given a name with ``.name(...)``, by name
    (empty for other topologies)."""
    ir = getattr(topology, "batch_ir", None)
    named: dict[str, list[NamedOperation]] = {}
    if isinstance(ir, TridentIR):
        for operation in ir.named_operations():
            named.setdefault(operation.name, []).append(operation)
    return named


def resolve_targets(
    targets: Iterable[ShowTarget], topology: StormTopology
) -> tuple[list[ShowTarget], list[str]]:
    """``targets`` with each Trident name that is not a component id replaced by the
    component and stream carrying its operation's output, and one message per name that
    cannot be shown that way (given to several operations; an operation whose output
    stays inside its component; a ``:STREAM`` given with the name).

    Runs on the command's thread, before the topology is submitted."""
    named = trident_names(topology)
    resolved: list[ShowTarget] = []
    problems: list[str] = []
    for target in targets:
        if target.component in topology or target.component not in named:
            resolved.append(target)
            continue
        name = target.component
        operations = named[name]
        operation = operations[0]
        where = operation.component_id
        if len(operations) > 1:
            components = ", ".join(repr(o.component_id) for o in operations)
            problems.append(
                f"Trident name {name!r} is given to {len(operations)} operations (in "
                f"{components}); give them different names or show a component"
            )
        elif operation.stream is None:
            problems.append(
                f"Trident name {name!r} names an operation of component {where!r} whose "
                "tuples go on to the next operation inside that component, on no stream; "
                f"show {where!r} for what the component emits"
            )
        elif target.stream is not None:
            problems.append(
                f"Trident name {name!r} shows its operation's output (stream "
                f"{operation.stream!r} of component {where!r}); it takes no :STREAM"
            )
        else:
            resolved.append(ShowTarget(where, operation.stream, target.by))
    return resolved, problems


def shown_fields(fields: Iterable[str]) -> list[str]:
    """The fields of a stream as shown: a Trident bolt's without the batch's attempt."""
    listed = list(fields)
    return listed[1:] if listed[:1] == [ATTEMPT_FIELD] else listed


def check_targets(targets: Iterable[ShowTarget], topology: StormTopology) -> list[str]:
    """What is wrong with ``targets`` (resolved by :func:`resolve_targets`) for
    ``topology``: one message per unknown component, system component or undeclared
    stream (empty when every target can be shown)."""
    problems = []
    ids = topology.component_ids()
    names = list(trident_names(topology))
    for target in targets:
        spec = topology.get_component(target.component) if target.component in topology else None
        if target.component.startswith("__") or (spec is not None and spec.system):
            problems.append(f"{target.component!r} is a system component; its tuples are not shown")
        elif spec is None:
            also = f" nor a Trident name (its names: {', '.join(names)})" if names else ""
            problems.append(
                f"{target.component!r} is not a component of the topology "
                f"(its components: {', '.join(ids)}){also}"
            )
        elif target.stream is not None and target.stream not in spec.streams:
            streams = ", ".join(s for s in spec.streams if not s.startswith("__")) or "none"
            problems.append(
                f"component {target.component!r} declares no stream {target.stream!r} "
                f"(its streams: {streams})"
            )
        elif target.by is not None:
            for stream in target.streams(topology):
                fields = shown_fields(spec.streams[stream].fields)
                if target.by not in fields:
                    problems.append(
                        f"stream {stream!r} of component {target.component!r} has no field "
                        f"{target.by!r} (its fields: {', '.join(fields) or 'none'})"
                    )
    return problems


class ShownEmits:
    """The emit listener of ``--show``: per shown component and stream, the number of
    tuples emitted and the last ``last`` of them (with ``@FIELD``: the latest tuple of
    each of the ``last`` values of FIELD seen most recently).

    Called from every task thread of the engine; a lock keeps the counts and tuples
    consistent. Emits of components that are not shown cost a dict lookup.
    """

    def __init__(self, targets: Sequence[ShowTarget], topology: StormTopology, last: int) -> None:
        self.targets = list(targets)
        self.last = last
        #: (component, stream) shown -> the position of its ``@FIELD`` (None: none) and
        #: how many leading values are not shown (a Trident bolt's batch attempt).
        self._shown: dict[tuple[str, str], tuple[int | None, int]] = {}
        for target in self.targets:
            spec = topology.get_component(target.component)
            for stream in target.streams(topology):
                fields = list(spec.streams[stream].fields)
                index = fields.index(target.by) if target.by is not None else None
                hidden = len(fields) - len(shown_fields(fields))
                self._shown[(target.component, stream)] = (index, hidden)
        self._components = {component for component, _ in self._shown}
        self._topology = topology
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}
        self._tuples: dict[tuple[str, str], OrderedDict[Any, list[Any]]] = {}

    def __call__(
        self, component_id: str, stream: str, task: int, values: Sequence[Any], targets: list[int]
    ) -> None:
        if component_id not in self._components:
            return
        key = (component_id, stream)
        if key not in self._shown:
            return
        index, hidden = self._shown[key]
        with self._lock:
            count_so_far = self._counts.get(key, 0) + 1
            self._counts[key] = count_so_far
            kept = self._tuples.get(key)
            if kept is None:
                kept = self._tuples[key] = OrderedDict()
            slot = _hashable(values[index]) if index is not None else count_so_far
            kept[slot] = list(values[hidden:])
            kept.move_to_end(slot)
            if len(kept) > self.last:
                kept.popitem(last=False)

    def emitted(self, component: str, stream: str = "default") -> tuple[int, list[list[Any]]]:
        """How many tuples ``component`` emitted on ``stream`` and the ones kept, oldest
        (least recently updated) first."""
        with self._lock:
            key = (component, stream)
            return self._counts.get(key, 0), list(self._tuples.get(key, {}).values())

    def view(self) -> RenderableType:
        """Per shown component and stream, a line saying how many tuples it emitted, then
        the ones kept, one a line (their values as a Python list)."""
        parts: list[RenderableType] = []
        for target in self.targets:
            streams = target.streams(self._topology)
            with self._lock:
                emitting = [s for s in streams if self._counts.get((target.component, s))]
            if not emitting:
                where = f" on stream {target.stream}" if target.stream is not None else ""
                parts.append(Text(f"{target.component} emitted no tuples{where}"))
                continue
            for stream in emitting:
                total, kept = self.emitted(target.component, stream)
                plural = "tuple" if total == 1 else "tuples"
                if target.by is not None:
                    which = f"; the latest of each of the last {len(kept)} values of {target.by}"
                else:
                    which = "" if len(kept) == total else f"; the last {len(kept)}"
                parts.append(
                    Text(
                        f"{target.component} emitted {count(total)} {plural} "
                        f"on stream {stream}{which}:"
                    )
                )
                parts.append(Text("\n".join(f"  {values!r}" for values in kept)))
        return Group(*parts)


def _hashable(value: Any) -> Any:
    """``value`` as a dict key (its ``repr`` when it cannot be one)."""
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value
