"""Tables that fit the console's width without cutting a number.

Rich shrinks a table that is too wide by narrowing its columns, and a narrowed column
cuts what does not fit (``1,23…``). Here a table's columns are sized by squall instead:
columns of numbers and short words get a fixed width that holds their longest cell (so
nothing in them is ever cut), and only the columns of free text (component ids, streams)
are left to rich, which wraps them. Before a table is used, its width is measured with
rich; a view tries narrower variants (shorter headers, fewer columns) and, when none
fits, shows its data as ``key value`` blocks instead (:func:`pairs_grid`).

Everything here runs while rich renders, on the thread that prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, ConsoleOptions, JustifyMethod
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

#: A width no table reaches, to measure a table's natural width.
_UNBOUNDED = 1_000_000
#: Most ``key value`` pairs on one line of a block (:func:`pairs_grid`).
MAX_PAIRS_PER_LINE = 3
#: Spaces between two pairs on a line, besides the column padding.
PAIR_GAP = 2


def longest_line(text: str) -> int:
    """Length of the longest line of ``text``."""
    return max((len(line) for line in text.splitlines()), default=0)


def longest_word(text: str) -> int:
    """Length of the longest run of non-spaces in ``text``: rich never breaks it when the
    column is at least that wide."""
    return max((len(word) for word in text.split()), default=0)


@dataclass(frozen=True)
class FitColumn:
    """One column of a table that adapts to the width.

    Attributes:
        name: the column's name, as the note on hidden columns says it.
        headers: header texts, the preferred first, then shorter ones for narrow layouts.
        cells: one cell per row.
        justify: the cells' and the header's justification.
        flexible: True for free text (component ids, streams): the column takes the width
            the others leave and wraps, folding a word longer than the column. False: the
            column is as wide as its longest cell (or, in a compact layout, its longest
            word), so its cells wrap only at spaces and are never cut.
        comfortable: for a flexible column, the narrowest it may be made (its longest line
            if shorter); a layout that cannot give it that much does not fit.
    """

    name: str
    headers: tuple[str, ...]
    cells: tuple[Text, ...]
    justify: JustifyMethod = "left"
    flexible: bool = False
    comfortable: int = 12

    def sized(self, compact: bool) -> tuple[int, str]:
        """The width and header of this column when it is not flexible.

        Not compact: wide enough for every cell and the first header on one line each.
        Compact: wide enough for the longest word of every cell, with the header that
        needs the least width (a header may then wrap at its spaces).
        """
        if not compact:
            width = max([len(self.headers[0])] + [longest_line(c.plain) for c in self.cells])
            return width, self.headers[0]
        cells = max((longest_word(cell.plain) for cell in self.cells), default=0)

        def cost(indexed: tuple[int, str]) -> tuple[int, int, int]:
            index, header = indexed
            width = max(cells, longest_word(header))
            return width, int(len(header) > width), index

        _, header = min(enumerate(self.headers), key=cost)
        return max(cells, longest_word(header)), header

    def need(self) -> int:
        """The narrowest a flexible column may be made."""
        natural = max([longest_line(self.headers[0])] + [longest_line(c.plain) for c in self.cells])
        return min(natural, self.comfortable)


def fitted_table(
    console: Console,
    options: ConsoleOptions,
    columns: Sequence[FitColumn],
    compact: bool,
    row_styles: Sequence[str | None] = (),
    **table_options: Any,
) -> Table | None:
    """A table of ``columns`` if it fits ``options.max_width``, else None.

    The width is measured with rich on a copy of the table whose flexible columns have
    their narrowest allowed width; the table returned leaves those columns to rich, which
    shares the width left between them. Columns that are not flexible have a fixed width,
    so no cell in them is cut.

    Args:
        console: the console that renders.
        options: the render options (their ``max_width`` is the room available).
        columns: the columns, in order.
        compact: size fixed columns by their longest word and shortest header.
        row_styles: a style per row (None: none).
        table_options: passed to ``rich.table.Table`` (title, caption, box, ...).
    """
    sized = [None if column.flexible else column.sized(compact) for column in columns]
    probe = Table(**table_options)
    for column, size in zip(columns, sized, strict=True):
        probe.add_column(column.headers[0], width=column.need() if size is None else size[0])
    needed = Measurement.get(console, options.update_width(_UNBOUNDED), probe).minimum
    if needed > options.max_width:
        return None
    table = Table(**table_options)
    for column, size in zip(columns, sized, strict=True):
        if size is None:
            table.add_column(column.headers[0], justify=column.justify, overflow="fold")
        else:
            table.add_column(size[1], justify=column.justify, width=size[0])
    rows = len(columns[0].cells) if columns else 0
    styles = list(row_styles) or [None] * rows
    for index in range(rows):
        table.add_row(*(column.cells[index] for column in columns), style=styles[index])
    return table


def pairs_grid(
    console: Console,
    options: ConsoleOptions,
    rows: Sequence[Sequence[tuple[str, Text]]],
    key_width: int,
    value_width: int,
) -> list[Table]:
    """One grid of ``key value`` pairs per entry of ``rows``, as many pairs per line as fit.

    Every grid has the same number of pairs per line and the same column widths, so the
    grids line up when printed one after the other. Values are right-justified in
    ``value_width`` and never wrapped or cut; keys fold only if even one pair per line
    does not fit.
    """
    per_line = 1
    for candidate in range(MAX_PAIRS_PER_LINE, 1, -1):
        probe = _grid(candidate, key_width, value_width)
        probe.add_row(*(Text("") for _ in probe.columns))
        needed = Measurement.get(console, options.update_width(_UNBOUNDED), probe).minimum
        if needed <= options.max_width:
            per_line = candidate
            break
    grids = []
    for pairs in rows:
        grid = _grid(per_line, key_width, value_width)
        for start in range(0, len(pairs), per_line):
            cells: list[Text] = []
            for index, (key, value) in enumerate(pairs[start : start + per_line]):
                cells += [Text(""), Text(key), value] if index else [Text(key), value]
            grid.add_row(*cells)
        grids.append(grid)
    return grids


def _grid(per_line: int, key_width: int, value_width: int) -> Table:
    """A grid of ``per_line`` (key, value) column pairs with a gap column between pairs.

    With one pair per line the key column may fold (it is the only one that can give)."""
    grid = Table.grid(padding=(0, 1, 0, 0))
    for index in range(per_line):
        if index:
            grid.add_column(width=PAIR_GAP)
        grid.add_column(width=key_width if per_line > 1 else None, overflow="fold")
        grid.add_column(width=value_width, justify="right", no_wrap=True)
    return grid
