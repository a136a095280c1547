"""Every documented command that runs an example finishes cleanly, exactly as written.

The commands are read from the documentation itself, so a test and its doc cannot drift:
from the docstring of each file in examples/ (the ``squall ...`` and ``python ...`` lines
of its ``Run it::`` block and its inline literals) and from README.md and docs/*.md (the
commands in code blocks and code spans that name a file under examples/). Each runs as a
subprocess from the repository's root with the venv's ``squall`` or ``python``.

A ``squall run`` takes its ``--seconds``, so the commands do not run one after another:
the module's fixture starts every selected command at once and each test waits (up to
:data:`TIMEOUT_SECS`) for its own. A ``squall run`` must exit with 0 after a clean stop:
no "still in flight" warning (its drain ended before ``--drain`` ran out), no tree
pending or tuple queued in the final table, every component of the topology in that
table with no error, and no error listing. Other commands must exit with 0 and write
nothing to stderr. Commands with ``--engine spark`` are marked ``spark``.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from squall import StormTopology
from tests.helpers import table_row
from tests.shown_results import Shown, check_shown
from tests.test_examples import load_example

#: One xdist worker runs them all: the module's fixture starts every selected command.
pytestmark = pytest.mark.xdist_group("example-commands")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: The longest a command may take, from the moment they are all started (under the
#: suite's 120 s per test, so a command that hangs fails here, with its name).
TIMEOUT_SECS = 100.0

_PROGRAMS = ("squall", "python")
_DOCSTRING_LITERAL = re.compile(r"^[ \t]+(\S.*)$", re.MULTILINE)
_INLINE_LITERAL = re.compile(r"``([^`]+)``")
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"`([^`\n]+(?:\n[^`\n]+)*)`")


def _as_command(text: str) -> str | None:
    """``text`` as a command (whitespace normalised, shell prompt dropped) if it runs a
    file of examples/ with ``squall`` or ``python``; else None."""
    words = text.split()
    if words[:1] == ["$"]:
        words = words[1:]
    if not words or words[0] not in _PROGRAMS:
        return None
    if not any(word.startswith("examples/") for word in words):
        return None
    return " ".join(words)


def docstring_commands(path: Path) -> list[str]:
    """The commands the module docstring of ``path`` gives for running an example."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    found = [*_DOCSTRING_LITERAL.findall(docstring), *_INLINE_LITERAL.findall(docstring)]
    return [command for text in found if (command := _as_command(text)) is not None]


def markdown_commands(path: Path) -> list[str]:
    """The commands in ``path``'s code blocks and code spans that run an example
    (``a && b`` counts as two commands)."""
    text = path.read_text(encoding="utf-8")
    pieces = [line for block in _FENCE.findall(text) for line in block.splitlines()]
    pieces += _CODE_SPAN.findall(_FENCE.sub("", text))
    parts = [part for piece in pieces for part in piece.split("&&")]
    return [command for part in parts if (command := _as_command(part)) is not None]


def documented_commands() -> dict[str, list[str]]:
    """Every documented command that runs an example, with where it is documented."""
    sources: dict[str, list[str]] = defaultdict(list)
    for path in sorted(EXAMPLES.glob("*.py")):
        for command in docstring_commands(path):
            sources[command].append(path.relative_to(ROOT).as_posix())
    for path in DOCUMENTS:
        for command in markdown_commands(path):
            sources[command].append(path.relative_to(ROOT).as_posix())
    return dict(sorted(sources.items()))


#: Examples whose commands their own test runs, in order: those needing servers (Redis,
#: PostgreSQL; tests/test_shop_activity.py starts them) and those whose commands build
#: on each other's files (tests/test_stateful_word_count.py, in a directory of its own).
NEEDS_SERVERS = ("examples/shop_activity", "examples/stateful_word_count")

COMMANDS = {
    command: where
    for command, where in documented_commands().items()
    if not any(name in command for name in NEEDS_SERVERS)
}


def _param(command: str) -> Any:
    marks = [pytest.mark.spark] if "--engine spark" in command else []
    return pytest.param(command, id=command, marks=marks)


def argv(command: str) -> list[str]:
    """``command``'s arguments, with this venv's ``squall`` script or interpreter."""
    words = shlex.split(command)
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    script = Path(sys.executable).with_name("squall")
    assert script.exists(), f"no squall script next to {sys.executable}: pip install -e ."
    return [str(script), *words[1:]]


@dataclass
class Started:
    """A command started by the fixture, its output going to files."""

    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path
    deadline: float

    def finish(self) -> tuple[int, str, str]:
        """Wait for the command (polling until its deadline): exit code, stdout, stderr.

        Fails the test, after killing the command, if it has not ended by the deadline.
        """
        while self.process.poll() is None:
            if time.monotonic() > self.deadline:
                self.process.kill()
                self.process.wait()
                pytest.fail(f"still running after {TIMEOUT_SECS:g} s")
            time.sleep(0.1)
        out = self.stdout.read_text(encoding="utf-8")
        err = self.stderr.read_text(encoding="utf-8")
        return self.process.returncode, out, err


@pytest.fixture(scope="module")
def started(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Started]]:
    """Start every command whose test was selected, all at once; kill leftovers after."""
    selected = {
        str(item.callspec.params["command"])
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.module is request.module
        and item.originalname == "test_documented_command_finishes_cleanly"
    }
    yield from start_commands(sorted(selected), tmp_path_factory.mktemp("commands"))


def start_commands(commands: list[str], directory: Path) -> Iterator[dict[str, Started]]:
    """Start ``commands`` all at once from the repository's root, their output in files
    under ``directory`` and without terminal codes (the final tables 200 columns wide, to
    read back); yield them by command, then kill those still running."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("FORCE_COLOR", "TTY_COMPATIBLE")  # no terminal codes in the output
    }
    env["COLUMNS"] = "200"
    runs: dict[str, Started] = {}
    deadline = time.monotonic() + TIMEOUT_SECS
    for number, command in enumerate(commands):
        stdout, stderr = directory / f"{number}.out", directory / f"{number}.err"
        with stdout.open("wb") as out, stderr.open("wb") as err:
            process = subprocess.Popen(
                argv(command), cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
            )
        runs[command] = Started(process, stdout, stderr, deadline)
    yield runs
    for run in runs.values():
        if run.process.poll() is None:
            run.process.kill()
            run.process.wait()


def named_topology(output: str, pattern: str) -> StormTopology:
    """The topology that ``pattern`` (groups: the example's file stem and the name in it)
    finds in ``output``, built again in this process as the command built it (the same
    module attribute, called without arguments if it is a function)."""
    match = re.search(pattern, output, re.MULTILINE)
    assert match, f"{pattern!r} not found in:\n{output}"
    found = getattr(load_example(match[1]), match[2])
    topology = found() if callable(found) else found
    assert isinstance(topology, StormTopology)
    return topology


def check_clean_run(output: str) -> None:
    """A ``squall run``'s output: stopped cleanly, every component listed without error."""
    assert "still in flight" not in output
    assert "Most recent errors" not in output
    assert output.rstrip().splitlines()[-1] == "no errors"
    assert "final metrics" in output
    captions = re.findall(
        r"(\S+) tree\(s\) pending, (?:\S+ tuple\(s\) held by windows, )?(\S+) tuple\(s\) queued",
        output,
    )
    assert captions and captions[-1] == ("0", "0"), captions
    topology = named_topology(output, r"^Running (\w+)\.py:(\w+) as ")
    rows = {component: table_row(output, component) for component in topology.component_ids()}
    assert {component: row["errors"] for component, row in rows.items()} == dict.fromkeys(rows, "0")
    assert table_row(output, "__acker")["errors"] == "0"
    spouts_acked = [int(row["acked"]) for row in rows.values() if row["kind"] == "spout"]
    assert spouts_acked and max(spouts_acked) > 0  # it did process something


def _word_count(blocks: dict[tuple[str, str], Shown], module: ModuleType) -> None:
    words = {word for sentence in module.SENTENCES for word in sentence.split()}
    for key, block in blocks.items():
        if key == ("count", "default"):
            counted = block.values()
            assert all(word in words and count >= 1 for word, count in counted), counted
            assert len({word for word, _ in counted}) == len(counted)  # one line a word


def _exclamation(blocks: dict[tuple[str, str], Shown], module: ModuleType) -> None:
    exclaimed = {f"{word}!!!!!!" for word in module.WORDS}
    assert all(value in exclaimed for (value,) in blocks[("exclaim2", "default")].values())


def _multi_stream(blocks: dict[tuple[str, str], Shown], module: ModuleType) -> None:
    evens, odds = blocks[("evens", "default")], blocks[("odds", "default")]
    assert all(n % 2 == 0 and square == n**2 for n, square in evens.values())
    assert all(n % 2 == 1 and cube == n**3 for n, cube in odds.values())


def _reliable_spout(blocks: dict[tuple[str, str], Shown], module: ModuleType) -> None:
    flaky = blocks[("flaky", "default")]
    assert flaky.total == 10_000  # every message once, on its replay
    assert all(text == f"message-{i}" and 0 <= i < 10_000 for i, text in flaky.values())


def _windowing(blocks: dict[tuple[str, str], Shown], module: ModuleType) -> None:
    sensors = set(module.sensor_names(8))
    sliding = blocks[("sliding", "default")].values()
    assert all(end % 2_000 == 0 and sensor in sensors and n >= 1 for end, sensor, _, n in sliding)
    tumbling = blocks[("tumbling", "default")].values()
    assert all(end % 5_000 == 0 and sensor in sensors for end, sensor, _ in tumbling)
    for component in ("sliding", "tumbling"):
        late = blocks.get((component, "late"))
        assert late is None or all(reading[0] in sensors for (reading,) in late.values())


def _transactional_global_count(blocks: dict[tuple[str, str], Shown], module: ModuleType) -> None:
    """Each committed transaction adds its batch (50 words from each of 4 partitions)."""
    sums = blocks[("sum", "default")]
    pattern = r"\[TransactionAttempt\(txid=(\d+), attempt=0x[0-9a-f]+\), (\d+)\]"
    committed = [re.fullmatch(pattern, line) for line in sums.lines]
    assert all(committed), sums.lines
    pairs = [(int(match[1]), int(match[2])) for match in committed if match]
    assert pairs[-1][0] == sums.total  # one sum a transaction, in txid order
    assert pairs == [(txid, min(txid * 200, 20_000)) for txid, _ in pairs]


def _trident_word_count(blocks: dict[tuple[str, str], Shown], module: ModuleType) -> None:
    """The new values of the state named ``counts``: the spout emits the sentences once,
    in two batches (three sentences, then two), and each word's latest count is its
    count over all the sentences. The words the state received last are the second
    batch's (its commit follows the first one's at every task)."""
    ((_, _), block), *others = [
        (key, block) for key, block in blocks.items() if re.fullmatch(r"b\d+-counts", key[0])
    ]
    assert others == [], blocks
    words = " ".join(module.SENTENCES).split()
    batches = [module.SENTENCES[:3], module.SENTENCES[3:]]
    assert block.total == sum(len(set(" ".join(batch).split())) for batch in batches)
    assert block.keyed and len(block.lines) == 10, block
    second = set(" ".join(batches[1]).split())
    shown = block.values()
    assert {word for word, _ in shown} <= second, shown
    assert shown == [[word, words.count(word)] for word, _ in shown], shown


#: Per example (its file's stem), what its shown results must be, exactly where its
#: input is fixed.
RESULT_CHECKS: dict[str, Callable[[dict[tuple[str, str], Shown], ModuleType], None]] = {
    "word_count": _word_count,
    "exclamation": _exclamation,
    "multi_stream": _multi_stream,
    "reliable_spout": _reliable_spout,
    "windowing": _windowing,
    "transactional_global_count": _transactional_global_count,
    "trident_word_count": _trident_word_count,
}


def check_results(command: str, output: str) -> None:
    """A ``squall run``'s output shows the results its file's ``show`` (or its
    ``--show``) asks for, and they are what the example computes."""
    match = re.search(r"^Running (\w+)\.py:\w+ as ", output, re.MULTILINE)
    assert match, output
    module = load_example(match[1])
    blocks = check_shown(command, output, module)
    if "--show" not in command.split():  # the example's own show
        RESULT_CHECKS[match[1]](blocks, module)


def check_info(output: str) -> None:
    """A ``squall info``'s output: every component of the topology in the table."""
    topology = named_topology(output, r"^\s*(\w+)\.py:(\w+): \d+ worker")
    for component in [*topology.component_ids(), "__acker"]:
        table_row(output, component)


@pytest.mark.parametrize("command", [_param(command) for command in COMMANDS])
def test_documented_command_finishes_cleanly(command: str, started: dict[str, Started]) -> None:
    code, out, err = started[command].finish()
    where = ", ".join(COMMANDS[command])
    assert code == 0, f"{command} (documented in {where}) exited with {code}:\n{out}{err}"
    assert err == "", err
    words = command.split()
    if words[:2] == ["squall", "run"]:
        check_clean_run(out)
        if "--engine" not in words:  # --show is the local engine's
            check_results(command, out)
    elif words[:2] == ["squall", "info"]:
        check_info(out)
    else:
        assert out.strip(), f"{command} printed nothing"


def test_every_example_documents_how_to_run_it() -> None:
    undocumented = [path.name for path in EXAMPLES.glob("*.py") if not docstring_commands(path)]
    assert undocumented == []


def test_readme_quickstart_runs_an_example_as_its_docstring_says() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quickstart = readme.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    (block,) = _FENCE.findall(quickstart)
    runs = [
        command
        for line in block.splitlines()
        for part in line.split("&&")
        if (command := _as_command(part)) is not None
    ]
    assert runs == ["squall run examples/word_count.py --seconds 5"]
    assert "examples/word_count.py" in COMMANDS[runs[0]]  # tested above as documented there


STARTER = EXAMPLES / "storm_starter"


@pytest.mark.parametrize("path", sorted(STARTER.glob("*.py")), ids=lambda path: path.name)
def test_every_storm_starter_example_documents_commands_that_run_as_written(path: Path) -> None:
    """storm-starter's ports document how to run them; each command runs as written
    (no placeholders; a ``squall run`` in the foreground stops by itself). Their
    topologies run in their own tests; a command ending in ``&`` is one step of a
    recipe (a DRPC server first, then the topology, then a client)."""
    commands = docstring_commands(path)
    assert commands, f"{path.name} documents no command"
    for command in commands:
        words = command.split()
        assert not any(word.startswith("[") for word in words), command
        assert (ROOT / words[1 if words[0] == "python" else 2]).is_file(), command
        if words[:2] == ["squall", "run"] and words[-1] != "&":
            assert "--seconds" in words, f"{command}: runs until interrupted"
