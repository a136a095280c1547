"""The error summary ``squall run`` prints after the final metrics.

What a run knows of its errors: per component, ``errors_total`` counts every error
reported, and ``errors`` holds only the most recent ones recorded in full (with their
message and traceback). Each task records at most ``topology.max.error.report.per.interval``
errors per ``topology.error.throttle.interval.secs`` in full (Storm's throttle; the others
are only counted), and a component keeps the last ``ERRORS_KEPT`` of those. So totals
here always come from ``errors_total``, and a group's count is how many of the errors
kept in full it holds, never an estimate of the whole run.

Pure functions from a ``TopologyInfo`` to text and rich renderables; they run on the
thread that prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text

import squall
from squall.cli.formats import count, plural, task_ranges
from squall.runtime.metrics import ComponentStats, ErrorInfo, TopologyInfo

#: Lines of a group's newest traceback shown in the summary.
TRACEBACK_LINES = 8
#: Groups of errors shown in the summary (the most recent ones).
GROUPS_SHOWN = 5

_SQUALL_DIR = str(Path(squall.__file__).resolve().parent)


def errors_reported(info: TopologyInfo) -> int:
    """Every error the topology's components reported (their ``errors_total``, summed).

    Throttled errors are included: this is the number ``squall run``'s closing line
    gives, and 0 means no component reported any error. A command that must fail when
    errors happened (``--fail-on-error``) exits non-zero when this is not 0.
    """
    return sum(_component_total(stats.errors_total, stats.errors) for stats in _stats(info))


def errors_line(info: TopologyInfo) -> str:
    """The summary's closing line: ``"877 errors in 2 components"``,
    ``"1 error in 1 component"``, or ``"no errors"``."""
    totals = [_component_total(stats.errors_total, stats.errors) for stats in _stats(info)]
    total = sum(totals)
    if not total:
        return "no errors"
    return f"{plural(total, 'error')} in {plural(sum(1 for n in totals if n), 'component')}"


@dataclass(frozen=True)
class ErrorGroup:
    """Errors of one component with the same text (exception type and message).

    Attributes:
        component_id: the component.
        error: the text shared by the group, such as ``"ValueError: bad 3"``.
        count: how many of the component's errors kept in full are in the group.
        tasks: the tasks that reported them, sorted.
        newest: the group's most recent error (its traceback is the one shown).
    """

    component_id: str
    error: str
    count: int
    tasks: tuple[int, ...]
    newest: ErrorInfo


def error_groups(info: TopologyInfo) -> list[ErrorGroup]:
    """The errors kept in full, grouped by (component, text), the newest group last.

    A group's place is the time of its newest error.
    """
    members: dict[tuple[str, str], list[ErrorInfo]] = {}
    for stats in _stats(info):
        for error in stats.errors:
            members.setdefault((stats.component_id, error.error), []).append(error)
    groups = [
        ErrorGroup(
            component_id,
            text,
            len(errors),
            tuple(sorted({error.task_id for error in errors})),
            max(errors, key=lambda error: error.time),
        )
        for (component_id, text), errors in members.items()
    ]
    return sorted(groups, key=lambda group: group.newest.time)


def short_traceback(trace: str, limit: int = TRACEBACK_LINES) -> list[str]:
    """The start of a traceback without squall's own frames (the user's code first).

    Frames in squall's package are dropped, so what is left starts at the user's code;
    at most ``limit`` lines are kept.
    """
    lines = trace.rstrip("\n").splitlines()
    kept: list[str] = []
    skipping = False
    for line in lines:
        if line.startswith("Traceback (most recent call last)"):
            continue
        if line.startswith('  File "'):
            filename = line.split('"', 2)[1]
            skipping = str(Path(filename).resolve()).startswith(_SQUALL_DIR)
            if skipping:
                continue
        elif skipping and line.startswith("    "):
            continue
        else:
            skipping = False
        kept.append(line)
    return kept[:limit]


def errors_view(info: TopologyInfo, limit: int = GROUPS_SHOWN) -> RenderableType | None:
    """The most recent errors, grouped, then the closing line; None if no error.

    Components come in the order of their newest error shown, and each one's groups
    in the order of their newest error: the newest last. A component's line gives its
    total (``errors_total``); under it, each of its groups among the ``limit`` most recent
    ones gives its count (of the component's errors kept in full), the tasks that reported
    it and the start of its newest traceback. Groups beyond ``limit`` are counted in a
    line of their own.
    """
    if not errors_reported(info):
        return None
    groups = error_groups(info)
    shown = groups[-limit:] if limit > 0 else []
    by_component: dict[str, list[ErrorGroup]] = {}
    for group in shown:
        by_component.setdefault(group.component_id, []).append(group)
    components = sorted(
        (stats for stats in _stats(info) if stats.errors_total or stats.errors),
        key=lambda stats: (
            stats.component_id in by_component,
            max((g.newest.time for g in by_component.get(stats.component_id, ())), default=0),
        ),
    )
    parts: list[RenderableType] = [
        Text("Most recent errors, by component and message, newest last:", style="bold red")
    ]
    for stats in components:
        parts.append(_component_line(stats.component_id, stats.errors_total, stats.errors))
        if stats.component_id not in by_component and stats.errors:
            parts.append(
                Padding(Text("(older errors, not shown)", style="dim"), (0, 0, 0, 2), expand=False)
            )
        for group in by_component.get(stats.component_id, ()):
            parts.extend(_group_lines(group))
    hidden = len(groups) - len(shown)
    if hidden:
        parts.append(Text(f"{plural(hidden, 'older group')} not shown", style="dim"))
    parts.append(Text(errors_line(info), style="bold red"))
    return Group(*parts)


def _stats(info: TopologyInfo) -> list[ComponentStats]:
    return list(info.components.values())


def _component_total(total: int, kept: list[ErrorInfo]) -> int:
    """A component's error count: ``errors_total``, never fewer than the errors kept."""
    return max(total, len(kept))


def _component_line(component_id: str, total: int, kept: list[ErrorInfo]) -> Text:
    total = _component_total(total, kept)
    line = Text.assemble((component_id, "bold"), f": {plural(total, 'error')}")
    if not kept:
        line.append(" (none recorded in full)")
    elif len(kept) < total:
        line.append(f"; grouped below: the last {count(len(kept))} recorded in full")
    return line


def _group_lines(group: ErrorGroup) -> list[RenderableType]:
    tasks = list(group.tasks)
    where = f"task {tasks[0]}" if len(tasks) == 1 else f"tasks {task_ranges(tasks)}"
    head = Text.assemble(f"{count(group.count)}x ", (group.error, "red"), f"  ({where})")
    lines: list[RenderableType] = [Padding(head, (0, 0, 0, 2), expand=False)]
    body = short_traceback(group.newest.traceback)
    if body and body[-1] == group.error:
        body = body[:-1]  # the exception line repeats the group's text
    if body:
        lines.append(Padding(Text("\n".join(body), style="dim"), (0, 0, 0, 6), expand=False))
    return lines
