"""``squall run`` on a terminal: the live table, then the final one in its place.

The command runs under a pseudo-terminal, and what it writes is replayed on a small
terminal model (cursor moves, line erasures, a screen of fixed height whose lines
scroll off into the scrollback), so the test reads what a user's terminal shows.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORD_COUNT = "examples/word_count.py"
_CSI = re.compile(r"\x1b\[([?0-9;]*)([A-Za-z])")


def terminal_text(data: str, width: int, height: int) -> list[str]:
    """The lines a terminal of ``width`` x ``height`` holds (scrollback included) after
    ``data``: text, carriage returns, line feeds, cursor up (which stops at the top of
    the screen: lines that scrolled off stay) and line erasure; other escape sequences
    (colours, cursor visibility) change no text."""
    lines: list[list[str]] = [[]]
    row = col = 0
    index = 0
    while index < len(data):
        char = data[index]
        match = _CSI.match(data, index) if char == "\x1b" else None
        if match:
            params, final = match.groups()
            if final == "A":
                top = max(0, len(lines) - height)
                row = max(top, row - int(params or 1))
            elif final == "K" and params == "2":
                lines[row] = []
            index = match.end()
            continue
        if char == "\r":
            col = 0
        elif char == "\n" or (char != "\x1b" and col >= width):
            row += 1
            if row == len(lines):
                lines.append([])
            if char != "\n":
                col = 0
                continue
        elif char != "\x1b":
            line = lines[row]
            line.extend(" " * (col - len(line)))
            if col < len(line):
                line[col] = char
            else:
                line.append(char)
            col += 1
        index += 1
    return ["".join(line).rstrip() for line in lines]


def run_on_terminal(args: list[str], width: int, height: int, timeout: float = 90.0) -> str:
    """``squall *args`` under a pseudo-terminal of ``width`` x ``height``: its output."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["TERM"] = "xterm-256color"
    script = Path(sys.executable).with_name("squall")
    process = subprocess.Popen(
        [str(script), *args], cwd=ROOT, stdin=slave, stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    output = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the command ended and closed the terminal
                    break
                if not chunk:
                    break
                output += chunk
            elif process.poll() is not None:
                break
        else:
            pytest.fail(f"squall {' '.join(args)} still running after {timeout:g} s")
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        os.close(master)
    assert process.returncode == 0, output.decode("utf-8", "replace")
    return output.decode("utf-8", "replace")


def test_the_terminal_model_keeps_lines_that_scrolled_off() -> None:
    # Four lines on a 3-line screen, then "up 3 and erase": the first line stays.
    assert terminal_text("a\nb\nc\nd\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K", 10, 3) == [
        "a",
        "",
        "",
        "",
    ]


@pytest.mark.parametrize("height", [10, 40])
def test_the_final_table_takes_the_place_of_the_live_one(height: int) -> None:
    """The live table is taller than a 10-line terminal: a transient live display
    could not erase its lines that scrolled off, and they stayed above the final
    table. Now the final table is the live display's last frame."""
    output = run_on_terminal(
        ["run", WORD_COUNT, "--seconds", "1.5", "--refresh", "0.2", "--drain", "2"], 100, height
    )
    screen = terminal_text(output, 100, height)
    titles = [line.strip() for line in screen if "topology 'word_count'" in line]
    assert titles == ["topology 'word_count': final metrics"], "\n".join(screen)
    assert len([line for line in screen if line.startswith("│ count ")]) == 1
    assert [line for line in screen if line][-1] == "no errors"
