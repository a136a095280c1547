"""How the ``squall`` command writes numbers and task ids, the same in every view.

Pure functions; they run wherever a view is built.
"""

from __future__ import annotations


def count(value: int) -> str:
    """A count with thousands separators: ``1234567`` gives ``"1,234,567"``."""
    return f"{value:,}"


def plural(value: int, noun: str) -> str:
    """``value`` and ``noun``, with an ``s`` unless ``value`` is 1: ``"1,234 errors"``."""
    return f"{count(value)} {noun}{'' if value == 1 else 's'}"


def milliseconds(value: float) -> str:
    """A latency in ms with three decimals and thousands separators; ``-`` for 0 (none)."""
    return f"{value:,.3f}" if value else "-"


def figure(value: float) -> str:
    """A metric of a component's own: a whole number with thousands separators, else
    up to three decimals: ``12345`` gives ``"12,345"``, ``0.25`` gives ``"0.25"``."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.3f}".rstrip("0")


def fraction(value: float) -> str:
    """A fraction such as a capacity, with three decimals: ``0.734``."""
    return f"{value:.3f}"


def task_ranges(tasks: list[int]) -> str:
    """Sorted task ids as runs: ``[2, 3, 4, 7]`` gives ``"2-4, 7"``; ``-`` for none.

    The text breaks only after a comma, so a range is never split when it wraps.
    """
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
