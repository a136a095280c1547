"""What ``squall run`` and ``squall info`` print: tables that fit any width without cutting
a number, and the error summary (groups, honest counts, the closing line)."""

from __future__ import annotations

import io
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from rich.console import Console, RenderableType

from squall import BasicBolt, Spout, TopologyBuilder
from squall.cli.display import metrics_table, summary_view, topology_table
from squall.cli.errors_view import (
    error_groups,
    errors_line,
    errors_reported,
    errors_view,
)
from squall.cli.main import main
from squall.model.config import effective_config
from squall.runtime.engine_figures import LocalFigures, QueryFigures, SparkFigures
from squall.runtime.metrics import ComponentStats, ErrorInfo, TopologyInfo
from squall.runtime.plan import build_plan
from squall.runtime.system import system_topology

ROOT = Path(__file__).resolve().parent.parent
WORD_COUNT = str(ROOT / "examples" / "word_count.py")
WIDTHS = [40, 60, 80, 120, 200]
ORDER = ["sentences", "b1-persistentAggregate", "count"]


def render(renderable: RenderableType, width: int | None) -> str:
    """What ``renderable`` prints on a console of ``width`` columns that is not a terminal."""
    console = Console(file=io.StringIO(), width=width, highlight=False, color_system=None)
    assert not console.is_terminal
    console.print(renderable)
    output = console.file.getvalue()  # type: ignore[attr-defined]
    return str(output)


def user_traceback(error: str, line: int) -> str:
    """A traceback as squall records it: the engine's frame, then the user's."""
    return (
        "Traceback (most recent call last):\n"
        f'  File "{ROOT}/squall/local/executor.py", line 321, in execute_batch\n'
        "    bolt.execute(tup, collector)\n"
        f'  File "/home/user/app/aggregate.py", line {line}, in execute\n'
        "    raise make_error(tup)\n"
        f"{error}\n"
    )


def error(at: float, component: str, task: int, text: str, line: int = 12) -> ErrorInfo:
    return ErrorInfo(at, component, task, text, user_traceback(text, line))


def realistic_info(spark_resources: str | None = None) -> TopologyInfo:
    """A long run's metrics: counts in the millions, a long component id, errors on two
    components (one of them with more errors than it kept), the acker. On the local
    engine; with ``spark_resources``, on a Spark session running on those."""
    aggregate_errors = [
        error(100.0 + i, "b1-persistentAggregate", 3 + i % 2, "ValueError: bad 3") for i in range(7)
    ]
    aggregate_errors += [
        error(110.0 + i, "b1-persistentAggregate", 4, "KeyError: 'k'", 20) for i in range(3)
    ]
    components = {
        "sentences": ComponentStats(
            "sentences",
            "spout",
            [8],
            emitted=1_234_567,
            transferred=1_234_567,
            acked=1_234_000,
            failed=567,
            timed_out=12,
            complete_latency_ms=1_234.5678,
            complete_latency_percentiles={50.0: 1_000.0, 99.0: 4_321.0, 99.9: 8_000.0},
        ),
        "b1-persistentAggregate": ComponentStats(
            "b1-persistentAggregate",
            "bolt",
            [3, 4],
            emitted=12_345_678,
            transferred=24_691_356,
            executed=1_234_567,
            acked=1_233_000,
            failed=1_567,
            execute_latency_ms=0.0123,
            execute_latency_percentiles={50.0: 0.01, 99.0: 0.087, 99.9: 0.1},
            capacity=0.987,
            errors=aggregate_errors,
            errors_total=1_234,
        ),
        "count": ComponentStats(
            "count",
            "bolt",
            [5, 6, 7],
            emitted=0,
            transferred=0,
            executed=12_345_678,
            acked=12_345_678,
            execute_latency_ms=2.5,
            execute_latency_percentiles={50.0: 2.0, 99.0: 9.75, 99.9: 12.0},
            capacity=0.5,
            errors=[error(99.0, "count", 6, "ZeroDivisionError: division by zero", 40)],
            errors_total=1,
        ),
        "__acker": ComponentStats(
            "__acker",
            "bolt",
            [1, 2],
            executed=2_469_134,
            execute_latency_ms=0.001,
            capacity=0.1,
        ),
    }
    if spark_resources is not None:
        spark = SparkFigures({"core": QueryFigures()}, "/checkpoints", spark_resources)
        return TopologyInfo("wc", "ACTIVE", 1_234.5, 0, components, spark=spark)
    local = LocalFigures(pending=1_234, queued=56_789)
    return TopologyInfo("wc", "ACTIVE", 1_234.5, 2, components, local=local)


#: Every figure ``realistic_info`` holds, as squall writes it.
ALWAYS_SHOWN = {  # the essential columns: never hidden
    "sentences": ["1,234,567", "0", "1,234,000", "567", "0"],
    "b1-persistentAggregate": ["12,345,678", "1,234,567", "1,233,000", "1,567", "1,234"],
    "count": ["0", "12,345,678", "12,345,678", "0", "1"],
    "__acker": ["0", "2,469,134", "0", "0", "0"],
}
MAYBE_HIDDEN = {  # column name -> the values it holds
    "transferred": ["1,234,567", "24,691,356"],
    "complete ms": ["1,234.568"],
    "complete p99": ["4,321.000"],
    "execute ms": ["0.012", "2.500", "0.001"],
    "execute p99": ["0.087", "9.750"],
    "capacity": ["0.987", "0.500", "0.100"],
}
NUMBER = re.compile(r"(?<![\w.,])\d[\d,.]*")
WELL_FORMED = re.compile(r"\d{1,3}(,\d{3})*(\.\d+)?|\d+")


def assert_fits(output: str, width: int) -> None:
    """No line is wider than ``width``, nothing is cut with an ellipsis, and every number
    is whole: a number broken across lines or cut would leave a malformed piece."""
    lines = output.splitlines()
    assert max(len(line) for line in lines) <= width, output
    assert "…" not in output and "..." not in output, output
    for token in NUMBER.findall(output):
        assert WELL_FORMED.fullmatch(token.rstrip(".,")), (token, output)


def shown(output: str, value: str) -> bool:
    return re.search(rf"(?<![\d,.]){re.escape(value)}(?![\d,.])", output) is not None


def hidden_columns(output: str) -> list[str]:
    """The columns the note under a metrics table says are hidden."""
    flat = " ".join(output.split())
    note = re.search(r"hidden at \d+ columns: (.*?)(?: Most recent errors| no errors|$)", flat)
    return [] if note is None else note[1].split(", ")


# --- the metrics table at any width -----------------------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_summary_shows_every_number_whole_at_any_width(width: int) -> None:
    output = render(summary_view(realistic_info(), ORDER), width)
    assert_fits(output, width)
    for component, values in ALWAYS_SHOWN.items():
        assert component in output.replace("\n", "") or _folded(component, output), output
        for value in values:
            assert shown(output, value), (component, value, output)
    hidden = hidden_columns(output)
    for column, values in MAYBE_HIDDEN.items():
        for value in values:
            assert shown(output, value) or column in hidden, (column, value, output)
    assert output.rstrip().endswith("1,235 errors in 2 components")


def _folded(component: str, output: str) -> bool:
    """``component`` is wrapped over the first cells of consecutive table rows."""
    cells = [re.split(r"[│┃]", line)[1].strip() for line in output.splitlines() if "│" in line]
    return any(component == "".join(cells[i : i + 3]) for i in range(len(cells)))


def test_wide_console_gets_every_column_on_one_line() -> None:
    output = render(summary_view(realistic_info(), ORDER), 200)
    header = next(line for line in output.splitlines() if "component" in line)
    for name in (
        "kind",
        "tasks",
        "emitted",
        "transferred",
        "executed",
        "acked",
        "failed",
        "execute ms",
        "execute p99",
        "complete ms",
        "complete p99",
        "capacity",
        "errors",
    ):
        assert name in header
    assert "hidden" not in output
    row = next(line for line in output.splitlines() if "b1-persistentAggregate" in line)
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert cells == [
        "b1-persistentAggregate",
        "bolt",
        "2",
        "12,345,678",
        "24,691,356",
        "1,234,567",
        "1,233,000",
        "1,567",
        "0.012",
        "0.087",
        "-",
        "-",
        "0.987",
        "1,234",
    ]


def test_narrow_tables_hide_columns_in_order_and_say_so() -> None:
    """At 85 columns the 22-character id and the counts in the millions leave room for
    the essential columns only; at 80 not even for them (the id is never broken), so
    every component becomes a block."""
    assert "┃ component" not in render(metrics_table(realistic_info(), order=ORDER), 80)
    output = render(metrics_table(realistic_info(), order=ORDER), 85)
    assert_fits(output, 85)
    hidden = hidden_columns(output)
    assert hidden == [
        "transferred",
        "complete p99",
        "complete ms",
        "tasks",
        "kind",
        "capacity",
        "execute p99",
        "execute ms",
    ]
    assert "┃ component" in output  # still a table


def test_narrow_console_gets_one_block_per_component() -> None:
    output = render(metrics_table(realistic_info(), order=ORDER), 40)
    assert_fits(output, 40)
    assert "hidden" not in output  # blocks show every metric
    block = output[output.index("b1-persistentAggregate (bolt, 2 tasks)") :]
    lines = [" ".join(line.split()) for line in block.splitlines()[1:10]]
    assert lines == [
        "emitted 12,345,678",
        "transferred 24,691,356",
        "executed 1,234,567",
        "acked 1,233,000",
        "failed 1,567",
        "execute ms 0.012",
        "execute p99 0.087",
        "capacity 0.987",
        "errors 1,234",
    ]


def test_p99_latencies_are_shown_next_to_the_means_and_hidden_before_them() -> None:
    components = {
        "sentences": ComponentStats(
            "sentences",
            "spout",
            [3],
            emitted=12_345,
            transferred=12_345,
            acked=12_340,
            complete_latency_ms=3.25,
            complete_latency_percentiles={50.0: 2.5, 99.0: 17.5, 99.9: 40.0},
        ),
        "count": ComponentStats(
            "count",
            "bolt",
            [1, 2],
            executed=98_765,
            acked=98_765,
            execute_latency_ms=0.042,
            execute_latency_percentiles={50.0: 0.031, 99.0: 0.218, 99.9: 1.0},
            capacity=0.25,
        ),
    }
    info = TopologyInfo("wc", "ACTIVE", 5.0, 1, components, local=LocalFigures())

    def row(output: str, component: str) -> list[str]:
        line = next(line for line in output.splitlines() if f"│ {component} " in line)
        return [cell.strip() for cell in line.split("│")[1:-1]]

    wide = render(metrics_table(info, order=["sentences", "count"]), 140)
    assert "hidden" not in wide
    assert row(wide, "sentences")[-6:] == ["-", "-", "3.250", "17.500", "-", "0"]
    assert row(wide, "count")[-6:] == ["0.042", "0.218", "-", "-", "0.250", "0"]
    at_90 = render(metrics_table(info, order=["sentences", "count"]), 90)
    assert_fits(at_90, 90)
    assert hidden_columns(at_90) == ["transferred", "complete p99", "complete ms", "tasks", "kind"]
    assert row(at_90, "count")[-4:] == ["0.042", "0.218", "0.250", "0"]
    at_80 = render(metrics_table(info, order=["sentences", "count"]), 80)
    assert_fits(at_80, 80)
    # At 80 columns capacity goes first: the mean and its p99 stay side by side.
    assert hidden_columns(at_80)[-1] == "capacity"
    assert row(at_80, "count")[-3:] == ["0.042", "0.218", "0"]
    assert "│ p99 " in at_80.replace("┃", "│") or " p99 ┃" in at_80


def test_a_console_that_is_not_a_terminal_uses_its_default_width(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    console = Console(file=io.StringIO(), highlight=False)
    console.print(summary_view(realistic_info(), ORDER))
    output = console.file.getvalue()  # type: ignore[attr-defined]
    assert_fits(output, console.width)
    assert shown(output, "12,345,678") and "1,235 errors in 2 components" in output


def test_caption_shows_the_engines_resources_instead_of_workers() -> None:
    info = realistic_info(spark_resources="local[2, 4]: 2 cores")
    for width in (60, 200):
        output = render(metrics_table(info), width)
        assert_fits(output, width)
        flat = " ".join(output.split())
        assert "ACTIVE, up 1,234.5 s, local[2, 4]: 2 cores, 0 tree(s) pending" in flat
        assert "0 tuple(s) queued" in flat and "worker" not in flat
    # A session that cannot say what it runs on: the workers (none on Spark).
    output = render(metrics_table(realistic_info(spark_resources="")), 200)
    assert "ACTIVE, up 1,234.5 s, 0 worker(s), 0 tree(s) pending" in output
    output = render(metrics_table(realistic_info()), 200)
    assert "ACTIVE, up 1,234.5 s, 2 worker(s), 1,234 tree(s) pending, 56,789 tuple(s)" in output


def test_caption_names_the_tuples_windows_hold() -> None:
    info = realistic_info()
    info.components["count"].custom["window_tuples_held"] = 8
    info.components["sentences"].custom["window_tuples_held"] = 1_000
    flat = " ".join(render(metrics_table(info), 200).split())
    assert "1,234 tree(s) pending, 1,008 tuple(s) held by windows, 56,789 tuple(s) queued" in flat


# --- the topology table at any width ----------------------------------------------------


class Sentences(Spout):
    outputs = ["sentence"]

    def next_tuple(self) -> None:
        pass


class Aggregate(BasicBolt):
    outputs = ["word", "count", "first_seen", "last_seen"]

    def execute(self, tup: Any, collector: Any) -> None:
        pass


def topology_view(workers: int = 3) -> RenderableType:
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences())
    builder.set_bolt("b1-persistentAggregate", Aggregate(), 3).set_num_tasks(1200).fields_grouping(
        "sentences", ["sentence"]
    )
    effective = effective_config({"topology.workers": workers})
    full = system_topology(builder.create_topology(), effective)
    plan = build_plan(full, effective)
    return topology_table(full, plan, f"app.py: {workers} worker(s)")


@pytest.mark.parametrize("width", WIDTHS)
def test_topology_table_keeps_numbers_and_task_ranges_whole(width: int) -> None:
    output = render(topology_view(), width)
    assert_fits(output, width)
    flat = " ".join(output.split())
    assert shown(output, "1,200")  # the bolt's task count
    assert "4-1203" in output  # its task ids: a range never split
    assert "workers 0, 1, 2" in flat or re.search(r"│ 0, 1, 2\s*│", output)
    assert "first_seen," in output and "last_seen]" in output
    assert "[sentence]" in output  # field lists are text, not markup


def test_topology_table_is_a_table_when_wide_and_blocks_when_narrow() -> None:
    wide = render(topology_view(), 200)
    assert "┃ component" in wide and "task ids" in wide
    row = next(line for line in wide.splitlines() if "b1-persistentAggregate" in line)
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert cells[:6] == ["b1-persistentAggregate", "bolt", "3", "1,200", "4-1203", "0, 1, 2"]
    narrow = render(topology_view(), 60)
    assert "┃" not in narrow
    assert "b1-persistentAggregate (bolt): 3 executors, 1,200 tasks, task ids 4-1203" in (
        " ".join(narrow.split())
    )


# --- the error summary -------------------------------------------------------------------


def test_errors_are_grouped_by_component_and_text_newest_last() -> None:
    groups = error_groups(realistic_info())
    assert [(g.component_id, g.error, g.count, g.tasks) for g in groups] == [
        ("count", "ZeroDivisionError: division by zero", 1, (6,)),
        ("b1-persistentAggregate", "ValueError: bad 3", 7, (3, 4)),
        ("b1-persistentAggregate", "KeyError: 'k'", 3, (4,)),
    ]
    assert groups[1].newest.time == 106.0


def test_error_summary_gives_totals_groups_and_tracebacks() -> None:
    output = render(errors_view(realistic_info()), 100)
    lines = [line.rstrip() for line in output.splitlines()]
    assert lines == [
        "Most recent errors, by component and message, newest last:",
        "count: 1 error",
        "  1x ZeroDivisionError: division by zero  (task 6)",
        '        File "/home/user/app/aggregate.py", line 40, in execute',
        "          raise make_error(tup)",
        "b1-persistentAggregate: 1,234 errors; grouped below: the last 10 recorded in full",
        "  7x ValueError: bad 3  (tasks 3-4)",
        '        File "/home/user/app/aggregate.py", line 12, in execute',
        "          raise make_error(tup)",
        "  3x KeyError: 'k'  (task 4)",
        '        File "/home/user/app/aggregate.py", line 20, in execute',
        "          raise make_error(tup)",
        "1,235 errors in 2 components",
    ]


def test_only_the_most_recent_groups_are_shown() -> None:
    errors = [error(float(i), "parse", 1 + i % 3, f"ValueError: bad {i}") for i in range(8)]
    info = TopologyInfo(
        "t",
        "ACTIVE",
        1.0,
        1,
        {
            "parse": ComponentStats("parse", "bolt", [1, 2, 3], errors=errors, errors_total=8),
            "quiet": ComponentStats("quiet", "bolt", [4]),
        },
    )
    output = render(errors_view(info, limit=5), 100)
    for i in range(8):
        assert (f"ValueError: bad {i} " in output) == (i >= 3), output
    assert "parse: 8 errors\n" in output
    assert "3 older groups not shown\n" in output
    assert output.rstrip().endswith("8 errors in 1 component")
    assert "quiet" not in output


def test_closing_line_and_errors_reported() -> None:
    none = TopologyInfo("t", "ACTIVE", 1.0, 1, {"a": ComponentStats("a", "bolt", [1])})
    assert (errors_line(none), errors_reported(none), errors_view(none)) == ("no errors", 0, None)
    assert render(summary_view(none), 80).rstrip().endswith("no errors")
    one = TopologyInfo(
        "t",
        "ACTIVE",
        1.0,
        1,
        {
            "a": ComponentStats(
                "a", "bolt", [1], errors=[error(1.0, "a", 1, "OSError: x")], errors_total=1
            ),
            "b": ComponentStats("b", "bolt", [2]),
        },
    )
    assert (errors_line(one), errors_reported(one)) == ("1 error in 1 component", 1)
    assert errors_reported(realistic_info()) == 1_235
    # Throttled errors count although none was recorded in full.
    throttled = TopologyInfo(
        "t",
        "ACTIVE",
        1.0,
        1,
        {
            "a": ComponentStats("a", "bolt", [1], errors_total=12_345),
        },
    )
    assert errors_line(throttled) == "12,345 errors in 1 component"
    assert "a: 12,345 errors (none recorded in full)" in render(errors_view(throttled), 80)


# --- end to end through the command ------------------------------------------------------

FLAKY = """
from squall import BasicBolt, Spout, TopologyBuilder


class Numbers(Spout):
    outputs = ["n"]

    def open(self, conf, context, collector):
        self.collector = collector
        self.next_number = 1

    def next_tuple(self):
        if self.next_number <= 20:
            self.collector.emit([self.next_number], msg_id=self.next_number)
            self.next_number += 1


class Flaky(BasicBolt):
    def execute(self, tup, collector):
        if tup["n"] % 5 == 0:
            raise ValueError("bad 3")
        if tup["n"] % 7 == 0:
            raise KeyError("k")


def build_topology():
    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers())
    builder.set_bolt("flaky", Flaky()).shuffle_grouping("numbers")
    return builder.create_topology()
"""


def invoke(columns: str | None, *args: str) -> Result:
    env = {"COLUMNS": columns, "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
    return CliRunner().invoke(main, list(args), env=env)


@pytest.mark.parametrize("columns", [60, 80])
def test_info_and_run_fit_the_terminal(columns: int) -> None:
    result = invoke(str(columns), "info", WORD_COUNT)
    assert result.exit_code == 0, result.output
    assert_fits(result.output, columns)
    assert "task ids 2-5" in " ".join(result.output.split())  # count's 4 tasks, as blocks
    result = invoke(str(columns), "run", WORD_COUNT, "--seconds", "1", "--no-live")
    assert result.exit_code == 0, result.output
    assert_fits(result.output, columns)
    assert "final metrics" in result.output
    assert result.output.rstrip().endswith("no errors")


def test_a_pipe_gets_the_full_tables() -> None:
    result = invoke(None, "run", WORD_COUNT, "--seconds", "0.5", "--no-live")
    assert result.exit_code == 0, result.output
    assert "transferred" in result.output and "complete ms" in result.output
    assert "hidden" not in result.output
    result = invoke(None, "info", WORD_COUNT)
    assert "┃ component" in result.output and "inputs (source:stream grouping)" in result.output


def test_run_groups_errors_and_counts_throttled_ones(tmp_path: Path) -> None:
    """One task sees ValueError for 5, 10, 15, 20 and KeyError for 7, 14, in that order.
    The throttle records the first five in full; the sixth (20) is only counted."""
    path = tmp_path / "flaky.py"
    path.write_text(textwrap.dedent(FLAKY), encoding="utf-8")
    result = invoke(
        "100",
        "run",
        str(path),
        "--until-idle",
        "--seconds",
        "100",
        "--no-live",
        "--conf",
        "topology.max.error.report.per.interval=5",
        "--conf",
        "topology.error.throttle.interval.secs=3600",
    )
    assert result.exit_code == 0, result.output
    output = result.output
    assert_fits(output, 100)
    summary = output[output.index("Most recent errors") :].splitlines()
    assert [line.rstrip() for line in summary if not line.startswith("      ")] == [
        "Most recent errors, by component and message, newest last:",
        "flaky: 6 errors; grouped below: the last 5 recorded in full",
        "  2x KeyError: 'k'  (task 2)",
        "  3x ValueError: bad 3  (task 2)",
        "6 errors in 1 component",
    ]
    assert 'flaky.py", line 21, in execute' in " ".join(output.split())  # may wrap at spaces
    assert "squall/local" not in output


# --- the components' own metrics ----------------------------------------------------------


def test_the_summary_and_the_live_view_show_the_components_own_metrics() -> None:
    from squall.cli.display import live_view

    info = realistic_info()
    info.components["sentences"].custom.update(
        {
            "orders/partition_1/spoutLag": 0,
            "orders/partition_0/spoutLag": 12_345,
            "orders/totalSpoutLag": 12_345,
        }
    )
    info.components["count"].custom["late_tuples"] = 2.5
    for view in (summary_view(info, ORDER), live_view(info, ORDER)):
        output = render(view, 120)
        rows = [  # a component's id on its first row only
            " ".join(line.strip("│ ").split())
            for line in output.split("components' own metrics")[1].splitlines()
            if "│" in line
        ]
        assert [row.replace("│", "|") for row in rows] == [
            "sentences | orders/partition_0/spoutLag | 12,345",
            "orders/partition_1/spoutLag | 0",
            "orders/totalSpoutLag | 12,345",
            "count | late_tuples | 2.5",
        ]
    assert "components' own metrics" not in render(summary_view(realistic_info(), ORDER), 120)
