"""Stateful bolts across crashes: a child process running a stateful word count over
files is killed with SIGKILL at random points, again and again, then the topology runs
to the end; the committed counts are exact (state exactly-once)."""

from __future__ import annotations

import os
import random
import signal
from collections import Counter
from pathlib import Path

import pytest

from squall import LocalCluster
from squall.connectors.files import ProgressStore
from tests.crashing import kill_after_progress, start_child
from tests.helpers import wait_until
from tests.state_topologies import NAME, checkpoint_record, committed_counts, conf, topology

WORDS = [f"w{n:02d}" for n in range(40)]


def write_files(data: Path, rng: random.Random) -> Counter[str]:
    """Six files of 250 lines of 1-6 words; the words' counts."""
    data.mkdir()
    expected: Counter[str] = Counter()
    for number in range(6):
        lines = []
        for _ in range(250):
            words = [rng.choice(WORDS) for _ in range(rng.randint(1, 6))]
            expected.update(words)
            lines.append(" ".join(words) + "\n")
        (data / f"part-{number}.txt").write_text("".join(lines))
    return expected


def all_done(data: Path, files: int) -> bool:
    records = ProgressStore(str(data)).read_all()
    return len(records) == files and all(record.done for record in records.values())


def test_a_stateful_word_count_killed_again_and_again_ends_with_exact_counts(
    tmp_path: Path,
) -> None:
    rng = random.Random(1515)
    data, state = tmp_path / "data", tmp_path / "state"
    expected = write_files(data, rng)
    committed = 0
    for _ in range(4):
        child = start_child("tests.state_topologies", str(data), str(state))

        def progressed(before: int = committed) -> bool:
            return sum(committed_counts(str(state)).values()) > before or all_done(data, 6)

        # Kill once the run has committed something more, at a random point after.
        kill_after_progress(child, progressed, rng)
        committed = sum(committed_counts(str(state)).values())
        assert committed <= sum(expected.values())
    with LocalCluster() as cluster:
        cluster.submit_topology(NAME, conf(str(state)), topology(str(data)))
        wait_until(lambda: all_done(data, 6), timeout=60.0)
        cluster.kill_topology(NAME)
    assert committed_counts(str(state)) == dict(expected)


def run_to_the_end(data: Path, state: Path) -> None:
    with LocalCluster() as cluster:
        cluster.submit_topology(NAME, conf(str(state)), topology(str(data)))
        wait_until(lambda: all_done(data, 6), timeout=60.0)
        cluster.kill_topology(NAME)


@pytest.mark.parametrize(
    ("crash_at", "left"),
    [
        ("commit", [3, "COMMITTING"]),  # prepared everywhere: the restart commits it
        ("rollback", [3, "PREPARING"]),  # the prepare failed: the restart rolls it back
    ],
)
def test_a_crash_inside_the_protocol_is_settled_by_the_restart(
    tmp_path: Path, crash_at: str, left: list[object]
) -> None:
    data, state = tmp_path / "data", tmp_path / "state"
    expected = write_files(data, random.Random(crash_at))
    child = start_child("tests.state_topologies", str(data), str(state), crash_at)
    try:
        assert child.wait(timeout=60) == -signal.SIGKILL, child.stderr.read().decode()[-3000:]  # type: ignore[union-attr]
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert checkpoint_record(str(state)) == left
    run_to_the_end(data, state)
    assert committed_counts(str(state)) == dict(expected)
    txid, phase = checkpoint_record(str(state))  # type: ignore[misc]
    assert phase == "COMMITTED" and txid >= 3
