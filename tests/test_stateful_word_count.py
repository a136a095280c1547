"""The stateful word count example end to end: its documented commands, run as written
in a directory of their own, commit exactly the counts of the input files; a second run
after more files were added goes on from the committed counts."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.test_example_commands import docstring_commands
from tests.test_examples import EXAMPLES

TIMEOUT_SECS = 120.0


def run(command: str, cwd: Path) -> str:
    words = command.split()
    program = {"squall": [str(Path(sys.executable).parent / "squall")], "python": [sys.executable]}
    arguments = [
        str(EXAMPLES.parent / word) if word.startswith("examples/") else word for word in words[1:]
    ]
    completed = subprocess.run(
        [*program[words[0]], *arguments],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECS,
        check=False,
    )
    assert completed.returncode == 0, f"{command}\n{completed.stdout}\n{completed.stderr}"
    return completed.stdout


def printed_counts(output: str) -> dict[str, int]:
    counts = {}
    for line in output.splitlines():
        count, word = line.split()
        counts[word] = int(count)
    return counts


def words_of(directory: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for path in directory.glob("*.txt"):
        counts.update(word.lower() for word in path.read_text().split())
    return counts


def test_the_documented_commands_count_exactly_and_go_on_after_a_restart(tmp_path: Path) -> None:
    run_command, show_command = docstring_commands(EXAMPLES / "stateful_word_count.py")
    assert run_command.startswith("squall run") and show_command.startswith("python")
    run(run_command, tmp_path)
    inputs = tmp_path / "words-input"
    assert sorted(path.name for path in inputs.glob("*.txt")) == [
        "sample-1.txt",
        "sample-2.txt",
        "sample-3.txt",
    ]
    assert printed_counts(run(show_command, tmp_path)) == dict(words_of(inputs))
    (inputs / "more.txt").write_text("the cow jumped again\nthe end\n")
    run(run_command, tmp_path)
    assert printed_counts(run(show_command, tmp_path)) == dict(words_of(inputs))
    assert printed_counts(run(show_command, tmp_path))["the"] == 9
