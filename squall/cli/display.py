"""Rich renderings of topologies and their metrics for the ``squall`` command.

Pure functions from squall's data (``TopologyInfo``, ``StormTopology``, ``TaskPlan``)
to rich renderables; nothing here talks to a cluster.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

import squall
from squall.model.topology import ComponentSpec, StormTopology
from squall.runtime.acker import ACKER_COMPONENT
from squall.runtime.metrics import ComponentStats, ErrorInfo, TopologyInfo
from squall.runtime.plan import TaskPlan

#: Lines of each error's traceback shown in the summary.
TRACEBACK_LINES = 8
#: Errors shown in the summary, newest last.
ERRORS_SHOWN = 5

_SQUALL_DIR = str(Path(squall.__file__).resolve().parent)


def _count(value: int) -> str:
    return f"{value:,}"


def _milliseconds(value: float) -> str:
    return f"{value:.3f}" if value else "-"


def _ordered(info: TopologyInfo, order: list[str] | None) -> list[ComponentStats]:
    """Components in ``order`` (unlisted ones after, by id), system components last."""
    position = {component_id: index for index, component_id in enumerate(order or [])}

    def key(stats: ComponentStats) -> tuple[int, int, str]:
        system = stats.component_id.startswith("__")
        return (int(system), position.get(stats.component_id, len(position)), stats.component_id)

    return sorted(info.components.values(), key=key)


def metrics_table(
    info: TopologyInfo, title: str | None = None, order: list[str] | None = None
) -> Table:
    """One row of metrics per component, in ``order`` (system components last, dimmed).

    Columns: component, kind, tasks, emitted, transferred, executed, acked, failed,
    execute latency (ms, bolts), complete latency (ms, spouts), capacity, errors (total).
    """
    table = Table(
        title=title or f"topology {info.name!r}",
        caption=(
            f"{info.status}, up {info.uptime_secs:.1f} s, {info.workers} worker(s), "
            f"{info.extra.get('pending', 0):,} tree(s) pending, "
            f"{info.extra.get('queued', 0):,} tuple(s) queued"
        ),
        header_style="bold",
    )
    table.add_column("component")
    table.add_column("kind")
    for header in ("tasks", "emitted", "transferred", "executed", "acked", "failed"):
        table.add_column(header, justify="right")
    table.add_column("execute ms", justify="right")
    table.add_column("complete ms", justify="right")
    table.add_column("capacity", justify="right")
    table.add_column("errors", justify="right")
    for stats in _ordered(info, order):
        system = stats.component_id.startswith("__")
        table.add_row(
            Text(stats.component_id),
            "system" if system else stats.kind,
            str(len(stats.tasks)),
            _count(stats.emitted),
            _count(stats.transferred),
            _count(stats.executed),
            _count(stats.acked),
            _count(stats.failed),
            _milliseconds(stats.execute_latency_ms),
            _milliseconds(stats.complete_latency_ms),
            f"{stats.capacity:.3f}" if stats.kind == "bolt" else "-",
            Text(str(stats.errors_total), style="bold red" if stats.errors_total else ""),
            style="dim" if system else None,
        )
    return table


def recent_errors(info: TopologyInfo, limit: int = ERRORS_SHOWN) -> list[ErrorInfo]:
    """The ``limit`` most recent errors over every component, oldest first."""
    errors = [error for stats in info.components.values() for error in stats.errors]
    return sorted(errors, key=lambda error: error.time)[-limit:]


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


def errors_view(info: TopologyInfo, limit: int = ERRORS_SHOWN) -> RenderableType | None:
    """The most recent errors with the first lines of their tracebacks (None if none)."""
    errors = recent_errors(info, limit)
    if not errors:
        return None
    total = sum(stats.errors_total for stats in info.components.values())
    parts: list[RenderableType] = [
        Text(f"Most recent errors ({len(errors)} of {total}):", style="bold red")
    ]
    for error in errors:
        parts.append(Text(f"{error.component_id} task {error.task_id}: {error.error}"))
        body = short_traceback(error.traceback)
        if body:
            parts.append(Text("\n".join(f"    {line}" for line in body), style="dim"))
    return Group(*parts)


def summary_view(info: TopologyInfo, order: list[str] | None = None) -> RenderableType:
    """The final metrics table followed by the most recent errors."""
    table = metrics_table(info, f"topology {info.name!r}: final metrics", order)
    errors = errors_view(info)
    return table if errors is None else Group(table, errors)


def _streams(spec: ComponentSpec) -> str:
    if spec.component_id == ACKER_COMPONENT:
        return "__ack_ack, __ack_fail, __ack_reset_timeout: [id] (direct, to spout tasks)"
    lines = []
    for stream_id, declaration in spec.streams.items():
        if stream_id.startswith("__") and not spec.system:
            continue
        direct = " (direct)" if declaration.direct else ""
        lines.append(f"{stream_id}: [{', '.join(declaration.fields)}]{direct}")
    return "\n".join(lines) or "-"


def _inputs(spec: ComponentSpec) -> str:
    if spec.component_id == ACKER_COMPONENT:
        return "the __ack_* streams of every spout and bolt, fields(id)"
    lines = [
        f"{sub.source}:{sub.stream_id} {sub.grouping.describe()}"
        for sub in spec.inputs
        if spec.system or not sub.stream_id.startswith("__")
    ]
    return "\n".join(lines) or "-"


def _task_ranges(tasks: list[int]) -> str:
    if not tasks:
        return "-"
    runs: list[str] = []
    start = previous = tasks[0]
    for task in [*tasks[1:], None]:
        if task is not None and task == previous + 1:
            previous = task
            continue
        runs.append(str(start) if start == previous else f"{start}-{previous}")
        if task is not None:
            start = previous = task
    return ", ".join(runs)


def topology_table(topology: StormTopology, plan: TaskPlan, title: str) -> Table:
    """Components in declaration order with executors, task ids, workers, streams and
    subscriptions.

    ``topology`` should be the system topology (the user's plus ``__acker``) so that the
    task ids shown are the ones a run uses.
    """
    table = Table(title=title, header_style="bold", show_lines=True)
    table.add_column("component")
    table.add_column("kind")
    table.add_column("executors", justify="right")
    table.add_column("tasks", justify="right")
    table.add_column("task ids")
    table.add_column("workers")
    table.add_column("streams (fields)")
    table.add_column("inputs (source:stream grouping)")
    executors: dict[str, int] = {}
    workers: dict[str, set[int]] = {}
    for executor in plan.executors:
        executors[executor.component_id] = executors.get(executor.component_id, 0) + 1
        workers.setdefault(executor.component_id, set()).add(executor.worker)
    for spec in sorted(topology, key=lambda spec: spec.system):
        tasks = plan.component_tasks[spec.component_id]
        table.add_row(
            Text(spec.component_id),
            "system" if spec.system else spec.kind,
            str(executors.get(spec.component_id, 0)),
            str(len(tasks)),
            _task_ranges(tasks),
            ", ".join(str(w) for w in sorted(workers.get(spec.component_id, ()))),
            Text(_streams(spec)),
            Text(_inputs(spec)),
            style="dim" if spec.system else None,
        )
    return table
