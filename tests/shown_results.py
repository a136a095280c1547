"""Reading back what ``squall run`` shows of a topology's results (``--show`` or the
file's ``show``) from its output, for the tests that run documented commands."""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass
from types import ModuleType
from typing import Any

_HEADER = re.compile(
    r"^(?P<component>\S+) emitted (?P<total>[\d,]+) tuples? on stream (?P<stream>\S+?)"
    r"(?P<which>; .*)?:$"
)


@dataclass
class Shown:
    """One block: how many tuples a component emitted on a stream, and those shown."""

    total: int
    lines: list[str]
    keyed: bool

    def values(self) -> list[Any]:
        """The tuples shown, parsed (each a list of plain Python values)."""
        return [ast.literal_eval(line) for line in self.lines]


def shown_blocks(output: str) -> dict[tuple[str, str], Shown]:
    """The blocks under the final metrics of ``output``, by (component, stream)."""
    lines = output.splitlines()
    blocks: dict[tuple[str, str], Shown] = {}
    for index, line in enumerate(lines):
        match = _HEADER.match(line.rstrip())
        if match is None:
            continue
        shown = []
        for following in lines[index + 1 :]:
            if not following.startswith("  ["):
                break
            shown.append(following.strip())
        keyed = "values of" in (match["which"] or "")
        total = int(match["total"].replace(",", ""))
        blocks[(match["component"], match["stream"])] = Shown(total, shown, keyed)
    return blocks


def shown_targets(command: str, module: ModuleType) -> tuple[list[str], int]:
    """What ``command`` shows: its ``--show`` options, else the module's ``show``; and
    how many tuples per block (``--show-last``, else 10)."""
    words = shlex.split(command)
    options = [words[i + 1] for i, word in enumerate(words) if word == "--show"]
    last = next((int(words[i + 1]) for i, w in enumerate(words) if w == "--show-last"), 10)
    default = getattr(module, "show", [])
    return options or ([default] if isinstance(default, str) else list(default)), last


def shows(target: str, component: str) -> bool:
    """Whether a shown block of ``component`` is what ``target`` asks for: the component
    itself, or a Trident name given to an operation of segment ``b<N>-<target>``."""
    return component == target or re.fullmatch(rf"b\d+-{re.escape(target)}", component) is not None


def check_shown(command: str, output: str, module: ModuleType) -> dict[tuple[str, str], Shown]:
    """Every component ``command`` shows has a block of tuples, as many as it says.

    Returns the blocks, for the checks of each example's values."""
    targets, last = shown_targets(command, module)
    blocks = shown_blocks(output)
    for target in targets:
        component = target.split("@")[0].split(":")[0]
        mine = {key: block for key, block in blocks.items() if shows(component, key[0])}
        assert mine, f"{command}: nothing shown for {target!r} in:\n{output}"
        for (_, stream), block in mine.items():
            assert block.total > 0, (component, stream)
            if block.keyed:
                assert 1 <= len(block.lines) <= last, (component, stream, block)
            else:
                assert len(block.lines) == min(last, block.total), (component, stream, block)
    return blocks
