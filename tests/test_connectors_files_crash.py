"""The file connectors across a crash: a child process running the topology is killed
with SIGKILL in the middle of its work, then the topology runs again (in the test's
process) on the same directories.

* ``FileSpout`` -> ``FileBolt``: every line ends up written at least once; the restart
  emits no line of a file's durable acked prefix (its progress record at the kill, or
  the whole file once moved to the done directory); the bolt's leftover in-progress
  file is finished.
* ``FileTridentSpout`` -> transactional SQLite counts with a durable coordination
  store: the counts are exact after the restart.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from squall import LocalCluster
from squall.connectors.files import ProgressStore
from squall.trident.state import SqliteMapState
from tests.connectors_files_topologies import (
    CORE_CONF,
    core_topology,
    counts_factory,
    trident_conf,
    trident_topology,
)
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parent.parent


def start_child(*arguments: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.connectors_files_topologies", *arguments],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def kill_when(child: subprocess.Popen[bytes], condition: Callable[[], bool]) -> None:
    """SIGKILL the child's process group as soon as ``condition`` holds."""
    try:
        wait_until(lambda: condition() or child.poll() is not None, timeout=60.0, interval=0.01)
        assert child.poll() is None, child.stderr.read().decode()[-3000:] if child.stderr else ""
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)


def written_lines(out: Path) -> list[dict[str, object]]:
    """The complete JSON lines of every file in ``out`` (final or in progress)."""
    records = []
    for name in sorted(os.listdir(out)) if out.exists() else []:
        data = (out / name).read_bytes()
        for line in data[: data.rfind(b"\n") + 1].splitlines():
            records.append(json.loads(line))
    return records


def test_a_killed_file_topology_resumes_after_the_acked_prefix(tmp_path: Path) -> None:
    data, out, done = (tmp_path / name for name in ("data", "out", "done"))
    data.mkdir()
    files = {f"f{n}.txt": [f"f{n}-{i:04d}" for i in range(1, 501)] for n in range(4)}
    for name, lines in files.items():
        (data / name).write_text("".join(f"{line}\n" for line in lines))
    child = start_child("core", str(data), str(out), str(done), "1")
    kill_when(child, lambda: len(written_lines(out)) >= 600)

    moved = set(os.listdir(done)) if done.exists() else set()
    records = ProgressStore(str(data)).read_all()
    prefix = {
        name: 500 if name in moved else records[name].line if name in records else 0
        for name in files
    }
    assert 0 < sum(prefix.values()) < 2000, prefix  # killed in the middle
    first_run = written_lines(out)
    assert {record["run"] for record in first_run} == {1}

    with LocalCluster() as cluster:
        cluster.submit_topology(
            "crash", CORE_CONF, core_topology(str(data), str(out), str(done), 2)
        )
        wait_until(
            lambda: done.exists() and sorted(os.listdir(done)) == sorted(files), timeout=30.0
        )
        cluster.kill_topology("crash")

    everything = written_lines(out)
    assert not [n for n in os.listdir(out) if n.endswith(".inprogress")]
    assert {record["line"] for record in everything} == {
        line for lines in files.values() for line in lines
    }
    second_run = [str(record["line"]) for record in everything if record["run"] == 2]
    assert second_run and max(Counter(second_run).values()) == 1
    for line in second_run:
        name, number = line.split("-")
        assert int(number) > prefix[f"{name}.txt"], (line, prefix)
    assert ProgressStore(str(data)).read_all() == {}


def test_a_killed_trident_file_topology_restarts_with_exact_counts(tmp_path: Path) -> None:
    data, coordination = tmp_path / "data", tmp_path / "coordination"
    data.mkdir()
    database = str(tmp_path / "counts.db")
    words = ["apple", "pear", "plum", "fig", "kiwi", "lime"]
    files = {f"w{n}.txt": [words[(n + i * 5) % 6] for i in range(300)] for n in range(3)}
    for name, lines in files.items():
        (data / name).write_text("".join(f"{line}\n" for line in lines))
    expected = {(w,): n for w, n in Counter(w for ls in files.values() for w in ls).items()}
    factory = counts_factory(database)

    def counted() -> int:
        if not os.path.exists(database):
            return 0
        try:
            return sum(SqliteMapState.contents(factory).values())
        except Exception:  # the table is not created yet
            return 0

    child = start_child("trident", str(data), database, str(coordination))
    kill_when(child, lambda: counted() >= 150)
    assert 0 < counted() < 900

    with LocalCluster() as cluster:
        topology = trident_topology(str(data), database).build()
        cluster.submit_topology("crash", trident_conf(str(coordination)), topology)
        wait_until(lambda: SqliteMapState.contents(factory) == expected, timeout=30.0)
        time.sleep(0.2)  # more (empty) transactions: nothing is counted again
        assert SqliteMapState.contents(factory) == expected
        cluster.kill_topology("crash")
