"""The shop examples run from a fresh machine with the commands their docstrings give:
``examples/shop_activity_servers.py`` (started as documented, on free ports) starts the
servers and prints their addresses as ``export`` lines; with those settings, the
example's feed and ``squall run`` commands fill the table with exact counts."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import free_port
from tests.test_example_commands import ROOT, docstring_commands
from tests.test_examples import load_example
from tests.test_shop_activity import (
    ACTIONS,
    EXAMPLES,
    _check_windows,
    _commands,
    _json_lines,
    _malformed,
    _run,
)

SERVERS = EXAMPLES / "shop_activity_servers.py"


@pytest.fixture
def example_modules(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return load_example("shop_activity"), load_example("shop_activity_feed")


def servers_command(example: str) -> list[str]:
    """The servers command ``example``'s docstring gives, its ports made free ones."""
    (command,) = [c for c in docstring_commands(EXAMPLES / example) if SERVERS.name in c]
    words = shlex.split(command)
    assert words[:2] == ["python", "examples/shop_activity_servers.py"], command
    for index, word in enumerate(words):
        if word in ("--kafka", "--postgres", "--redis"):
            words[index + 1] = str(free_port())
    return [sys.executable, *words[1:]]


@pytest.fixture
def servers(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """Run the servers command of the example ``request.param``; the settings it
    prints."""
    process = subprocess.Popen(
        servers_command(request.param),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        settings: dict[str, str] = {}
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("export "):
                for assignment in shlex.split(line)[1:]:
                    name, value = assignment.split("=", 1)
                    settings[name] = value
            if line.startswith("servers up"):
                break
        else:
            pytest.fail(f"the servers did not start: {process.stderr.read()}")  # type: ignore[union-attr]
        yield settings
    finally:
        process.send_signal(signal.SIGINT)
        try:
            out, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
    assert process.returncode == 0
    assert "servers stopped" in out


@pytest.mark.parametrize("servers", ["shop_activity_kafka.py"], indirect=True)
def test_the_kafka_example_runs_with_the_servers_its_docstring_starts(
    servers: dict[str, str],
    example_modules: tuple[Any, Any],
    tmp_path: Path,
) -> None:
    shop, feed = example_modules
    assert set(servers) == {
        "SHOP_KAFKA_BOOTSTRAP",
        "KAFKA_BOOTSTRAP",
        "SHOP_POSTGRES_DSN",
        "POSTGRES_DSN",
    }
    feed_command, run_command = _commands("shop_activity_kafka.py", "local")
    assert f"--actions {ACTIONS}" in feed_command
    output = tmp_path / "output"
    env = {**os.environ, **servers, "SHOP_OUTPUT_DIR": str(output)}
    _run(feed_command, env)
    _run(run_command, env)
    _check_windows(shop, feed, servers["SHOP_POSTGRES_DSN"], output)
    assert len(_json_lines(output, "errors")) == len(_malformed(feed))


@pytest.mark.parametrize("servers", ["shop_activity.py"], indirect=True)
def test_the_redis_example_runs_with_the_servers_its_docstring_starts(
    servers: dict[str, str],
    example_modules: tuple[Any, Any],
    tmp_path: Path,
) -> None:
    shop, feed = example_modules
    assert set(servers) == {"SHOP_REDIS_URL", "REDIS_URL", "SHOP_POSTGRES_DSN", "POSTGRES_DSN"}
    feed_command, run_command = _commands("shop_activity.py", "local")
    output = tmp_path / "output"
    env = {**os.environ, **servers, "SHOP_OUTPUT_DIR": str(output)}
    _run(feed_command, env)
    _run(run_command, env)
    _check_windows(shop, feed, servers["SHOP_POSTGRES_DSN"], output)
    assert len(_json_lines(output, "errors")) == len(_malformed(feed))
