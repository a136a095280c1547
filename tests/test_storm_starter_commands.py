"""storm-starter's ports run with ``squall run`` exactly as their docstrings say, and
each run shows its results: the tuples its module's ``show`` names under the final
metrics, or what its topology prints or logs itself (as Storm's ``PrinterBolt`` and
its examples' loggers do).

Every documented ``squall run`` of ``examples/storm_starter/`` (but the DRPC recipes'
steps run in the background, ``... &``, which need a DRPC server and a client) starts at
once in the module's fixture; each test waits for its own command. A warning users may
ignore (RollingTopWords' window still filling up) is printed once at most.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from squall.testing import TestWordSpout
from tests.shown_results import Shown, check_shown
from tests.starter_loading import STORM_STARTER, load_starter
from tests.test_example_commands import Started, docstring_commands, start_commands

pytestmark = pytest.mark.xdist_group("storm-starter-commands")

COMMANDS = {
    command: path.stem
    for path in sorted(STORM_STARTER.glob("*.py"))
    for command in docstring_commands(path)
    if command.split()[:2] == ["squall", "run"] and not command.endswith("&")
}


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Started]]:
    yield from start_commands(list(COMMANDS), tmp_path_factory.mktemp("starter-commands"))


def _rolling_top_words(blocks: dict[tuple[str, str], Shown]) -> None:
    """The last ranking: the top words of TestWordSpout's, each with its count in the
    9-second window, highest first."""
    rankings = blocks[("finalRanker", "default")].lines
    ranked = re.findall(r"\[(\w+)\|(\d+)\|(\d+)\]", rankings[-1])
    assert 1 <= len(ranked) <= 5, rankings
    assert {word for word, _, _ in ranked} <= set(TestWordSpout.WORDS)
    counts = [int(count) for _, count, _ in ranked]
    assert counts == sorted(counts, reverse=True) and counts[-1] >= 1


def _exclamation(blocks: dict[tuple[str, str], Shown]) -> None:
    words = {f"{word}!!!!!!" for word in TestWordSpout.WORDS}
    assert all(value in words for (value,) in blocks[("exclaim2", "default")].values())


def _in_order(blocks: dict[tuple[str, str], Shown]) -> None:
    """Each of the 8 spout tasks' bases, with the count it reached."""
    last = blocks[("spout", "default")].values()
    assert sorted(base for base, _ in last) == list(range(8))
    assert all(count >= 0 for _, count in last)


def _transactional_global_count(blocks: dict[tuple[str, str], Shown]) -> None:
    sums = blocks[("sum", "default")].lines
    found = [re.fullmatch(r"\[TransactionAttempt\(txid=(\d+), .*\), (\d+)\]", s) for s in sums]
    assert all(found), sums
    totals = [int(match[2]) for match in found if match]
    assert totals == sorted(totals) and totals[-1] >= 1


def _transactional_words(blocks: dict[tuple[str, str], Shown]) -> None:
    counts = blocks[("count", "default")].lines
    assert all(
        re.fullmatch(r"\[TransactionAttempt\(.*\), '\w+', \d+, (\d+|None)\]", c) for c in counts
    )
    buckets = blocks[("buckets", "default")].lines
    assert all(re.fullmatch(r"\[TransactionAttempt\(.*\), \d+, \d+\]", b) for b in buckets)


def _trident_word_count(blocks: dict[tuple[str, str], Shown]) -> None:
    """What the state received last: words of the sentences, each with its latest count.
    The spout cycles, so the counts are not fixed, but a word of one sentence only is
    counted once per occurrence there each time that sentence is counted: its count is
    a multiple of its occurrences in it."""
    module = load_starter("trident_word_count")
    (block,) = [b for (c, _), b in blocks.items() if c == "b2-persistent_aggregate(Count)"]
    assert block.keyed and len(block.lines) == 10, block
    sentences = [sentence.split() for sentence in module.SENTENCES]
    words = {word for sentence in sentences for word in sentence}
    for word, count in block.values():
        assert word in words and count >= 1, (word, count)
        holding = [sentence for sentence in sentences if word in sentence]
        if len(holding) == 1:
            assert count % holding[0].count(word) == 0, (word, count)


CHECKS = {
    "rolling_top_words": _rolling_top_words,
    "exclamation_topology": _exclamation,
    "in_order_delivery_test": _in_order,
    "transactional_global_count": _transactional_global_count,
    "transactional_words": _transactional_words,
    "trident_word_count": _trident_word_count,
}


def printed_lines(output: str) -> list[str]:
    """What the topology printed: the lines between the starting line and the final
    metrics' title."""
    lines = output.splitlines()
    end = next(i for i, line in enumerate(lines) if "final metrics" in line)
    return [line for line in lines[1:end] if line.strip()]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_documented_run_shows_its_results(command: str, started: dict[str, Started]) -> None:
    code, out, err = started[command].finish()
    assert code == 0, f"{command} exited with {code}:\n{out}{err}"
    assert out.rstrip().splitlines()[-1] == "no errors", out
    ignorable = [line for line in err.splitlines() if "you can safely ignore" in line]
    assert len(ignorable) <= 1, err
    assert [line for line in err.splitlines() if line not in ignorable] == []
    name = COMMANDS[command]
    module = load_starter(name)
    if hasattr(module, "show"):
        blocks = check_shown(command, out, module)
        if name in CHECKS:
            CHECKS[name](blocks)
        elif name == "fast_word_count_topology":
            words = {word for sentence in module.CHOICES for word in sentence.split()}
            counted = blocks[("count", "default")].values()
            assert all(word in words and count >= 1 for word, count in counted), counted
        else:
            pytest.fail(f"no check of {name}'s results")
    else:
        printed = printed_lines(out)
        assert printed, f"{command} shows no results:\n{out}"
        if name == "trident_windowing":
            _trident_windowing(printed)


def _trident_windowing(printed: list[str]) -> None:
    """Its peek logs each window's count at INFO, as Storm's does, and squall run shows
    the file's own loggers: the sliding count window of 1000 words, every 100 words."""
    pattern = r".*INFO +Received tuple: \[TridentTuple\(\{'count': (\d+)\}\)\]"
    counts = [int(match[1]) for line in printed if (match := re.fullmatch(pattern, line.strip()))]
    assert len(counts) == len(printed), printed
    assert counts[:3] == [100, 200, 300]  # the window fills up, 100 words at a time
    assert all(count % 100 == 0 and count <= 1000 for count in counts)


def test_every_port_with_a_squall_run_command_is_tested() -> None:
    assert {path.stem for path in STORM_STARTER.glob("*.py")} - set(COMMANDS.values()) == {
        "basic_drpc_topology",  # a DRPC recipe: server, topology and client
        "manual_drpc",
        "reach_topology",
        "join_bolt",  # runs with python (its spouts are built in main)
        "single_join",
    }
