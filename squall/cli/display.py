"""Rich renderings of topologies and their metrics for the ``squall`` command.

Pure functions from squall's data (``TopologyInfo``, ``StormTopology``, ``TaskPlan``)
to rich renderables; nothing here talks to a cluster. The renderables choose their
layout when rich renders them, for the width they are given (a terminal's, ``COLUMNS``,
or the wide console ``squall`` uses for pipes): a table with every column when it fits;
else a table with shorter headers and, for metrics, fewer columns (saying which are
hidden); else one block per component. No number or task id range is ever cut.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from squall.cli.errors_view import errors_view
from squall.cli.fitting import FitColumn, fitted_table, pairs_grid
from squall.cli.formats import count, figure, fraction, milliseconds, plural, task_ranges
from squall.model.topology import ComponentSpec, StormTopology
from squall.runtime.acker import ACKER_COMPONENT
from squall.runtime.metrics import ComponentStats, TopologyInfo
from squall.runtime.plan import TaskPlan
from squall.windowing.executor import WINDOW_TUPLES_HELD

#: Metrics columns hidden when the table is too wide, first hidden first. The component
#: and the counts emitted, executed, acked, failed and errors are always shown; when even
#: they do not fit, every component gets a block of ``key value`` lines instead.
METRICS_HIDDEN_FIRST = (
    "transferred",
    "complete p99",
    "complete ms",
    "tasks",
    "kind",
    "capacity",
    "execute p99",
    "execute ms",
)


def _ordered(info: TopologyInfo, order: list[str] | None) -> list[ComponentStats]:
    """Components in ``order`` (unlisted ones after, by id), system components last."""
    position = {component_id: index for index, component_id in enumerate(order or [])}

    def key(stats: ComponentStats) -> tuple[int, int, str]:
        system = stats.component_id.startswith("__")
        return (int(system), position.get(stats.component_id, len(position)), stats.component_id)

    return sorted(info.components.values(), key=key)


def metrics_caption(info: TopologyInfo) -> str:
    """The line under the metrics: status, uptime, where it runs, pending, held and queued.

    Where it runs is the Spark session's resources when the engine gives them (such as
    ``"3 executors, 12 cores"``), else the number of workers; pending and queued are
    the local engine's (0 on Spark). Tuples held by windowed bolts are named when there
    are any: a held tuple emitted with a message id is also in a pending tree, an
    untracked one in none, which is why emitted and acked can differ with nothing pending.
    """
    spark, local = info.spark, info.local
    resources = spark.resources if spark is not None else ""
    where = resources or f"{info.workers} worker(s)"
    pending, queued = (local.pending, local.queued) if local is not None else (0, 0)
    held = sum(int(stats.custom.get(WINDOW_TUPLES_HELD, 0)) for stats in info.components.values())
    held_text = f"{count(held)} tuple(s) held by windows, " if held else ""
    return (
        f"{info.status}, up {info.uptime_secs:,.1f} s, {where}, "
        f"{count(pending)} tree(s) pending, {held_text}{count(queued)} tuple(s) queued"
    )


def _metric_values(stats: ComponentStats) -> dict[str, Text]:
    """The metrics of one component as the table shows them (``-``: does not apply)."""
    errors = stats.errors_total
    return {
        "tasks": Text(count(len(stats.tasks))),
        "emitted": Text(count(stats.emitted)),
        "transferred": Text(count(stats.transferred)),
        "executed": Text(count(stats.executed)),
        "acked": Text(count(stats.acked)),
        "failed": Text(count(stats.failed)),
        "execute ms": Text(milliseconds(stats.execute_latency_ms)),
        "execute p99": Text(milliseconds(stats.execute_latency_percentiles.get(99.0, 0.0))),
        "complete ms": Text(milliseconds(stats.complete_latency_ms)),
        "complete p99": Text(milliseconds(stats.complete_latency_percentiles.get(99.0, 0.0))),
        "capacity": Text(fraction(stats.capacity) if stats.kind == "bolt" else "-"),
        "errors": Text(count(errors), style="bold red" if errors else ""),
    }


#: Headers of the metrics columns, the full one first, then a shorter one.
_METRIC_HEADERS: dict[str, tuple[str, ...]] = {
    "execute ms": ("execute ms", "exec ms"),
    "execute p99": ("execute p99", "exec p99", "p99"),
    "complete ms": ("complete ms", "compl ms"),
    "complete p99": ("complete p99", "compl p99"),
    "capacity": ("capacity", "cap"),
}


class MetricsView:
    """One row of metrics per component, fitted to the width it is rendered at.

    Rendered by rich (on the printing thread) from a snapshot taken when it is built.
    """

    def __init__(self, info: TopologyInfo, title: str, order: list[str] | None) -> None:
        self.info = info
        self.title = title
        self.components = _ordered(info, order)

    def _columns(self) -> list[FitColumn]:
        values = [_metric_values(stats) for stats in self.components]
        kinds = [
            Text("system" if stats.component_id.startswith("__") else stats.kind)
            for stats in self.components
        ]
        columns = [
            # As wide as the longest id: an id is never broken across lines; columns are
            # hidden (then blocks used) to make room for it instead.
            FitColumn(
                "component",
                ("component",),
                tuple(Text(stats.component_id) for stats in self.components),
            ),
            FitColumn("kind", ("kind",), tuple(kinds)),
        ]
        for name in values[0] if values else _metric_values(ComponentStats("", "", [])):
            columns.append(
                FitColumn(
                    name,
                    _METRIC_HEADERS.get(name, (name,)),
                    tuple(row[name] for row in values),
                    justify="right",
                )
            )
        return columns

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        columns = self._columns()
        styles = ["dim" if s.component_id.startswith("__") else None for s in self.components]
        for hidden_count in range(len(METRICS_HIDDEN_FIRST) + 1):
            hidden = METRICS_HIDDEN_FIRST[:hidden_count]
            shown = [column for column in columns if column.name not in hidden]
            for compact in (False, True):
                table = fitted_table(
                    console,
                    options,
                    shown,
                    compact,
                    styles,
                    title=Text(self.title, style="table.title"),
                    caption=Text(metrics_caption(self.info), style="table.caption"),
                    header_style="bold",
                )
                if table is not None:
                    yield table
                    if hidden:
                        yield Text(
                            f"hidden at {options.max_width} columns: {', '.join(hidden)}",
                            style="dim",
                        )
                    return
        yield from self._blocks(console, options)

    def _blocks(self, console: Console, options: ConsoleOptions) -> Iterable[RenderableType]:
        """Every component as a title line and its metrics as ``key value`` pairs."""
        rows = []
        for stats in self.components:
            values = _metric_values(stats)
            del values["tasks"]
            rows.append([(key, value) for key, value in values.items() if value.plain != "-"])
        key_width = max((len(key) for row in rows for key, _ in row), default=0)
        value_width = max((len(value.plain) for row in rows for _, value in row), default=0)
        indented = options.update_width(max(1, options.max_width - 2))
        grids = pairs_grid(console, indented, rows, key_width, value_width)
        yield Text(self.title, style="table.title")
        for stats, grid in zip(self.components, grids, strict=True):
            system = stats.component_id.startswith("__")
            kind = "system" if system else stats.kind
            yield Text.assemble(
                (stats.component_id, "bold"),
                f" ({kind}, {plural(len(stats.tasks), 'task')})",
                style="dim" if system else "",
            )
            yield Padding(grid, (0, 0, 0, 2), style="dim" if system else "", expand=False)
        yield Text(metrics_caption(self.info), style="table.caption")


def metrics_table(
    info: TopologyInfo, title: str | None = None, order: list[str] | None = None
) -> RenderableType:
    """One row of metrics per component, in ``order`` (system components last, dimmed).

    Columns: component, kind, tasks, emitted, transferred, executed, acked, failed,
    execute latency (ms, bolts: the mean, then the 99th percentile), complete latency
    (ms, spouts: the same), capacity, errors (total),
    under a caption with the status, uptime, workers (or Spark's resources), pending
    trees and queued tuples. The layout is chosen when the result is rendered, for the
    width available: columns are hidden in the order of ``METRICS_HIDDEN_FIRST`` (a
    line under the table names them) and, when even the essential ones do not fit, each
    component becomes a block of ``key value`` lines. Numbers are never cut.
    """
    return MetricsView(info, title or f"topology {info.name!r}", order)


def own_metrics_table(info: TopologyInfo, order: list[str] | None = None) -> Table | None:
    """The components' own metrics (``custom``: a Kafka spout's offsets and lag per
    partition, a windowed bolt's late tuples ...), one row per component and metric in
    ``order`` then by name; None when no component has any."""
    rows = [
        (stats.component_id, name, stats.custom[name])
        for stats in _ordered(info, order)
        for name in sorted(stats.custom)
    ]
    if not rows:
        return None
    table = Table(title="components' own metrics", title_justify="left")
    table.add_column("component", no_wrap=True)
    table.add_column("metric", overflow="fold")
    table.add_column("value", justify="right", no_wrap=True)
    previous = None
    for component, name, value in rows:
        table.add_row(component if component != previous else "", name, figure(value))
        previous = component
    return table


def live_view(info: TopologyInfo, order: list[str] | None = None) -> RenderableType:
    """What ``squall run`` shows while a topology runs: the metrics table, then the
    components' own metrics (if any)."""
    table = metrics_table(info, order=order)
    own = own_metrics_table(info, order)
    return table if own is None else Group(table, own)


def summary_view(
    info: TopologyInfo,
    order: list[str] | None = None,
    shown: RenderableType | None = None,
) -> RenderableType:
    """The final metrics table, the components' own metrics (if any), ``shown`` (what
    the run shows of its results, if anything), then the most recent errors grouped,
    then a closing line (``877 errors in 2 components``, or ``no errors``)."""
    table = metrics_table(info, f"topology {info.name!r}: final metrics", order)
    own = own_metrics_table(info, order)
    errors = errors_view(info)
    parts: list[RenderableType] = [table]
    if own is not None:
        parts.append(own)
    if shown is not None:
        parts.append(shown)
    parts.append(errors if errors is not None else Text("no errors"))
    return Group(*parts)


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


def _texts(values: Iterable[str]) -> tuple[Text, ...]:
    return tuple(Text(value) for value in values)


class TopologyView:
    """Components in declaration order with executors, tasks, task ids, workers, streams
    and subscriptions, fitted to the width it is rendered at (on the printing thread)."""

    #: Narrowest the streams and inputs columns may be before blocks are used instead.
    TEXT_COLUMN_WIDTH = 24

    def __init__(self, topology: StormTopology, plan: TaskPlan, title: str) -> None:
        self.title = title
        self.specs = sorted(topology, key=lambda spec: spec.system)
        executors: dict[str, int] = {}
        workers: dict[str, set[int]] = {}
        for executor in plan.executors:
            executors[executor.component_id] = executors.get(executor.component_id, 0) + 1
            workers.setdefault(executor.component_id, set()).add(executor.worker)
        self.executors = {
            spec.component_id: executors.get(spec.component_id, 0) for spec in self.specs
        }
        self.tasks = {
            spec.component_id: plan.component_tasks[spec.component_id] for spec in self.specs
        }
        self.workers = {
            spec.component_id: sorted(workers.get(spec.component_id, ())) for spec in self.specs
        }

    def _columns(self) -> list[FitColumn]:
        ids = [spec.component_id for spec in self.specs]
        text = self.TEXT_COLUMN_WIDTH
        return [
            FitColumn("component", ("component",), _texts(ids), flexible=True),
            FitColumn(
                "kind",
                ("kind",),
                _texts("system" if spec.system else spec.kind for spec in self.specs),
            ),
            FitColumn(
                "executors",
                ("executors", "execs"),
                _texts(count(self.executors[i]) for i in ids),
                justify="right",
            ),
            FitColumn(
                "tasks",
                ("tasks",),
                _texts(count(len(self.tasks[i])) for i in ids),
                justify="right",
            ),
            FitColumn("task ids", ("task ids",), _texts(task_ranges(self.tasks[i]) for i in ids)),
            FitColumn(
                "workers",
                ("workers",),
                _texts(", ".join(str(w) for w in self.workers[i]) for i in ids),
            ),
            FitColumn(
                "streams",
                ("streams (fields)",),
                _texts(_streams(spec) for spec in self.specs),
                flexible=True,
                comfortable=text,
            ),
            FitColumn(
                "inputs",
                ("inputs (source:stream grouping)",),
                _texts(_inputs(spec) for spec in self.specs),
                flexible=True,
                comfortable=text,
            ),
        ]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        columns = self._columns()
        styles = ["dim" if spec.system else None for spec in self.specs]
        for compact in (False, True):
            table = fitted_table(
                console,
                options,
                columns,
                compact,
                styles,
                title=Text(self.title, style="table.title"),
                header_style="bold",
                show_lines=True,
            )
            if table is not None:
                yield table
                return
        yield from self._blocks()

    def _blocks(self) -> Iterable[RenderableType]:
        """Every component as a line of its figures, then its streams and inputs."""
        yield Text(self.title, style="table.title")
        for spec in self.specs:
            component_id = spec.component_id
            workers = self.workers[component_id]
            style = "dim" if spec.system else ""
            yield Text.assemble(
                (component_id, "bold"),
                f" ({'system' if spec.system else spec.kind}): "
                f"{plural(self.executors[component_id], 'executor')}, "
                f"{plural(len(self.tasks[component_id]), 'task')}, "
                f"task ids {task_ranges(self.tasks[component_id])}, "
                f"{'worker' if len(workers) == 1 else 'workers'} "
                f"{', '.join(str(w) for w in workers) or '-'}",
                style=style,
            )
            grid = Table.grid(padding=(0, 1, 0, 0))
            grid.add_column(width=len("streams"))
            grid.add_column(overflow="fold")
            grid.add_row(Text("streams"), Text(_streams(spec)))
            grid.add_row(Text("inputs"), Text(_inputs(spec)))
            yield Padding(grid, (0, 0, 0, 2), style=style, expand=False)


def topology_table(topology: StormTopology, plan: TaskPlan, title: str) -> RenderableType:
    """Components in declaration order with executors, task ids, workers, streams and
    subscriptions.

    ``topology`` should be the system topology (the user's plus ``__acker``) so that the
    task ids shown are the ones a run uses. The layout is chosen when the result is
    rendered: a table whose streams and inputs wrap, or, when they would be narrower than
    ``TopologyView.TEXT_COLUMN_WIDTH``, one block per component. Numbers and task id
    ranges are never cut.
    """
    return TopologyView(topology, plan, title)
