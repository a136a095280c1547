"""``squall list|activate|deactivate|kill|rebalance`` against a UI server, and
``squall run --ui``."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from squall import Fields, LocalCluster, TopologyBuilder
from squall.cli.main import main
from squall.testing import FeederSpout
from squall.ui import UIServer
from tests.helpers import wait_until
from tests.test_ui_api import Sink

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fed() -> Iterator[tuple[LocalCluster, UIServer, FeederSpout]]:
    spout = FeederSpout(Fields("word"))
    builder = TopologyBuilder()
    builder.set_spout("feed", spout)
    builder.set_bolt("sink", Sink(), 2).shuffle_grouping("feed")
    with LocalCluster() as cluster, UIServer(cluster, port=0) as ui:
        cluster.submit_topology("fed", {}, builder.create_topology())
        yield cluster, ui, spout


def squall(*arguments: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(arguments), env=env)
    return result.exit_code, result.output


def test_list_shows_the_running_topologies(fed: tuple[LocalCluster, UIServer, FeederSpout]) -> None:
    _, ui, _ = fed
    code, output = squall("list", "--url", ui.url)
    assert code == 0, output
    row = next(line for line in output.splitlines() if "fed" in line)
    assert re.search(r"│ fed\s+│ ACTIVE │ 4\s+│ 1\s+│ 4\s+│ \d+s\s+│", row), output


def test_deactivate_activate_and_kill_steer_a_topology(
    fed: tuple[LocalCluster, UIServer, FeederSpout],
) -> None:
    cluster, ui, spout = fed
    assert squall("deactivate", "fed", "--url", ui.url) == (0, "Deactivated 'fed'.\n")
    assert cluster.get_topology_info("fed").status == "INACTIVE"
    assert squall("activate", "fed", "--url", ui.url) == (0, "Activated 'fed'.\n")
    spout.feed(["one"], msg_id=1)
    wait_until(lambda: spout.acked == [1])
    assert squall("kill", "fed", "-w", "0", "--url", ui.url) == (
        0,
        "Killing 'fed': deactivated, killed in 0 s.\n",
    )
    wait_until(lambda: cluster.topology_names() == [])
    code, output = squall("kill", "fed", "--url", ui.url)
    assert (code, output) == (1, "Error: 404 Not Found: no topology named 'fed' is running\n")


def test_a_token_comes_from_a_file_or_the_environment(tmp_path: Path) -> None:
    with LocalCluster() as cluster, UIServer(cluster, port=0, token="t0ken") as ui:
        code, output = squall("list", "--url", ui.url)
        assert (code, output) == (
            1,
            "Error: 401 Unauthorized: a token is needed: Authorization: Bearer <token>\n",
        )
        token_file = tmp_path / "ui.token"
        token_file.write_text("t0ken\n")
        assert squall("list", "--url", ui.url, "--token-file", str(token_file)) == (
            0,
            "No topologies running.\n",
        )
        assert squall("list", "--url", ui.url, env={"SQUALL_UI_TOKEN": "t0ken"}) == (
            0,
            "No topologies running.\n",
        )


def test_an_unreachable_server_is_one_line() -> None:
    code, output = squall("list", "--url", "http://127.0.0.1:9/")
    assert code == 1
    assert output.startswith("Error: cannot reach a squall UI server at http://127.0.0.1:9/ (")
    assert output.endswith("start one with `squall run FILE --ui`, or give --url\n")
    code, output = squall("rebalance", "x", "-e", "split", "--url", "http://127.0.0.1:9/")
    assert code == 2 and "'split' is not COMPONENT=N" in output


def test_squall_run_serves_the_ui_and_ends_when_the_topology_is_killed_there() -> None:
    command = [
        sys.executable,
        "-c",
        "from squall.cli.main import main; main()",
        "run",
        "examples/word_count.py",
        "--ui",
        "--ui-port",
        "0",
        "--seconds",
        "120",
        "--no-live",
    ]
    with subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as run:
        assert run.stdout is not None
        lines = []
        for line in run.stdout:
            lines.append(line)
            if line.startswith("Web UI and REST API at "):
                break
        url = lines[-1].split(" at ", 1)[1].strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), lines
        wait_until(lambda: "word_count" in squall("list", "--url", url)[1], timeout=30.0)
        assert squall("kill", "word_count", "-w", "0", "--url", url)[0] == 0
        rest = run.stdout.read()
        assert run.wait(timeout=60) == 0, rest
    assert "Topology 'word_count' was killed while it ran." in rest
    assert "sentences" in rest  # the summary's table


def test_rebalance_changes_workers_and_executors(
    fed: tuple[LocalCluster, UIServer, FeederSpout],
) -> None:
    cluster, ui, spout = fed
    code, output = squall("rebalance", "fed", "-w", "0", "-n", "2", "-e", "sink=1", "--url", ui.url)
    assert (code, output) == (0, "Rebalanced 'fed'.\n")
    info = cluster.get_topology_info("fed")
    assert (info.workers, info.extra["executors"]["sink"]) == (2, 1)
    spout.feed(["after"], msg_id=7)
    wait_until(lambda: spout.acked == [7])
    code, output = squall("rebalance", "fed", "-w", "0", "-e", "sink=9", "--url", ui.url)
    assert code == 1 and output.startswith("Error: 409 Conflict: ") and "sink" in output


def test_rebalance_to_more_workers_than_executors_is_refused_and_changes_nothing(
    fed: tuple[LocalCluster, UIServer, FeederSpout],
) -> None:
    """feed 1 + sink 2 + __acker 1 = 4 executors: -n 5 and more are refused."""
    cluster, ui, spout = fed
    for asked in ("5", "1000000000"):
        code, output = squall("rebalance", "fed", "-w", "0", "-n", asked, "--url", ui.url)
        assert (code, output) == (
            1,
            f"Error: 409 Conflict: rebalance of topology 'fed': num_workers {asked} is more "
            "than the 4 executors the topology would have (system executors such as __acker "
            "included); a worker without an executor runs nothing, so num_workers must be 1 "
            "to 4\n",
        )
    info = cluster.get_topology_info("fed")
    assert (info.status, info.workers) == ("ACTIVE", 1)
    spout.feed(["after"], msg_id=7)
    wait_until(lambda: spout.acked == [7])
    assert squall("kill", "fed", "-w", "0", "--url", ui.url)[0] == 0
    wait_until(lambda: cluster.topology_names() == [])


@pytest.mark.parametrize("count", ["²", "-1", "1.5", "two", ""])
def test_an_executor_count_that_is_not_a_number_is_a_usage_error(count: str) -> None:
    code, output = squall("rebalance", "x", "-e", f"sink={count}", "--url", "http://127.0.0.1:9/")
    assert code == 2 and f"'sink={count}' is not COMPONENT=N" in output
