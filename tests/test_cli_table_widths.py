"""``squall run``'s metrics table at 80, 100 and 120 columns, as docs/cli.md describes it:
which columns each width shows, and component ids that are never broken across lines."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from squall.cli.display import metrics_table
from squall.runtime.engine_figures import LocalFigures
from squall.runtime.metrics import ComponentStats, TopologyInfo

WORD_COUNT_ORDER = ["sentences", "split", "count"]
ROLLING_ORDER = ["wordGenerator", "counter", "intermediateRanker", "finalRanker"]


def word_count_info() -> TopologyInfo:
    """The word count's figures after 3 seconds: counts in the millions."""
    components = {
        "sentences": ComponentStats(
            "sentences",
            "spout",
            [8],
            emitted=180_096,
            transferred=180_096,
            acked=180_096,
            complete_latency_ms=2.876,
            complete_latency_percentiles={99.0: 4.64},
        ),
        "split": ComponentStats(
            "split",
            "bolt",
            [2, 3],
            emitted=1_152_780,
            transferred=1_152_780,
            executed=180_096,
            acked=180_096,
            execute_latency_ms=0.006,
            execute_latency_percentiles={99.0: 0.008},
            capacity=0.203,
        ),
        "count": ComponentStats(
            "count",
            "bolt",
            [4, 5, 6, 7],
            emitted=1_152_780,
            executed=1_152_780,
            acked=1_152_780,
            execute_latency_ms=0.001,
            execute_latency_percentiles={99.0: 0.002},
            capacity=0.147,
        ),
        "__acker": ComponentStats(
            "__acker",
            "bolt",
            [1],
            executed=180_096,
            execute_latency_ms=0.001,
            execute_latency_percentiles={99.0: 0.001},
            capacity=0.051,
        ),
    }
    return TopologyInfo("word_count", "INACTIVE", 3.0, 1, components, local=LocalFigures())


def rolling_info() -> TopologyInfo:
    """RollingTopWords after 4 seconds: an 18-character id, counts in the hundreds."""

    def bolt(component: str, tasks: list[int], executed: int, ms: float) -> ComponentStats:
        return ComponentStats(
            component,
            "bolt",
            tasks,
            emitted=5,
            transferred=5,
            executed=executed,
            acked=executed,
            execute_latency_ms=ms,
            execute_latency_percentiles={99.0: ms * 4},
            capacity=0.002,
        )

    components = {
        "wordGenerator": ComponentStats(
            "wordGenerator", "spout", [2, 3, 4, 5, 6], emitted=195, transferred=195
        ),
        "counter": bolt("counter", [7, 8, 9, 10], 199, 0.107),
        "intermediateRanker": bolt("intermediateRanker", [11, 12, 13, 14], 13, 0.027),
        "finalRanker": bolt("finalRanker", [15], 10, 0.008),
        "__acker": ComponentStats("__acker", "bolt", [1]),
    }
    return TopologyInfo("rolling_top_words", "ACTIVE", 4.0, 1, components, local=LocalFigures())


def rendered(info: TopologyInfo, order: list[str], width: int) -> str:
    console = Console(
        file=io.StringIO(), width=width, record=True, highlight=False, color_system=None
    )
    console.print(metrics_table(info, order=order))
    return console.export_text()


def row(output: str, component: str) -> list[str]:
    """The cells of ``component``'s row (its id whole in the first cell)."""
    (line,) = [line for line in output.splitlines() if line.startswith(f"│ {component} ")]
    return [cell.strip() for cell in line.split("│")[1:-1]]


def body_rows(output: str) -> list[str]:
    """The first cell of every line of the table's body."""
    lines = [line for line in output.splitlines() if line.startswith("│")]
    return [line.split("│")[1].strip() for line in lines]


@pytest.mark.parametrize(
    ("width", "hidden", "count_row"),
    [
        (
            120,
            "transferred, complete p99",
            [
                *["count", "bolt", "4", "1,152,780", "1,152,780", "1,152,780", "0"],
                *["0.001", "0.002", "-", "0.147", "0"],
            ],
        ),
        (
            100,
            "transferred, complete p99, complete ms, tasks",
            [
                *["count", "bolt", "1,152,780", "1,152,780", "1,152,780", "0"],
                *["0.001", "0.002", "0.147", "0"],
            ],
        ),
        (
            80,
            "transferred, complete p99, complete ms, tasks, kind, capacity, execute p99",
            ["count", "1,152,780", "1,152,780", "1,152,780", "0", "0.001", "0"],
        ),
    ],
)
def test_word_count_table_shows_the_documented_columns(
    width: int, hidden: str, count_row: list[str]
) -> None:
    output = rendered(word_count_info(), WORD_COUNT_ORDER, width)
    assert max(len(line) for line in output.splitlines()) <= width
    assert " ".join(output.split(f"hidden at {width} columns: ")[1].split()) == hidden
    assert row(output, "count") == count_row
    assert body_rows(output) == ["sentences", "split", "count", "__acker"]


@pytest.mark.parametrize(
    ("width", "hidden", "ranker_row"),
    [
        (
            120,
            "transferred, complete p99",
            [
                *["intermediateRanker", "bolt", "4", "5", "13", "13", "0"],
                *["0.027", "0.108", "-", "0.002", "0"],
            ],
        ),
        (
            100,
            "transferred, complete p99, complete ms, tasks, kind",
            ["intermediateRanker", "5", "13", "13", "0", "0.027", "0.108", "0.002", "0"],
        ),
        (
            80,
            "transferred, complete p99, complete ms, tasks, kind, capacity, execute p99",
            ["intermediateRanker", "5", "13", "13", "0", "0.027", "0"],
        ),
    ],
)
def test_long_ids_stay_whole_and_take_room_from_other_columns(
    width: int, hidden: str, ranker_row: list[str]
) -> None:
    """Every id is on one line of its row: no row of the body continues an id (before,
    ``intermediateRanker`` was broken into ``intermediateRank`` and ``er`` at 100)."""
    output = rendered(rolling_info(), ROLLING_ORDER, width)
    assert max(len(line) for line in output.splitlines()) <= width
    assert " ".join(output.split(f"hidden at {width} columns: ")[1].split()) == hidden
    assert row(output, "intermediateRanker") == ranker_row
    assert body_rows(output) == [*ROLLING_ORDER, "__acker"]


def test_an_id_longer_than_a_table_can_hold_gets_blocks_not_a_broken_id() -> None:
    info = rolling_info()
    long_id = "b1-each(Split)+window(CountAsAggregator)+1"
    stats = info.components.pop("intermediateRanker")
    stats.component_id = long_id
    info.components[long_id] = stats
    output = rendered(info, ["wordGenerator", "counter", long_id, "finalRanker"], 80)
    assert "┃ component" not in output
    assert f"{long_id} (bolt, 4 tasks)" in output.splitlines()
