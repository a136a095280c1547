"""Directories owned by a process: made with an owner file, and removed by the next
one made with their prefix once their owner is gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from squall.local.scratch import OWNER_FILE, owned_directory


def dead_pid() -> int:
    """The pid of a process that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_directory_names_its_owner(tmp_path: Path) -> None:
    directory = owned_directory("squall-test-", tmp_path)
    assert directory.parent == tmp_path and directory.name.startswith("squall-test-")
    assert (directory / OWNER_FILE).read_text() == str(os.getpid())


def test_directories_of_gone_owners_are_removed_and_the_others_kept(tmp_path: Path) -> None:
    abandoned = owned_directory("squall-test-", tmp_path)
    (abandoned / OWNER_FILE).write_text(str(dead_pid()))
    (abandoned / "state.db").write_bytes(b"left behind")
    alive = owned_directory("squall-test-", tmp_path)
    unowned = tmp_path / "squall-test-being-made"
    unowned.mkdir()
    other_prefix = owned_directory("squall-other-", tmp_path)
    (other_prefix / OWNER_FILE).write_text(str(dead_pid()))
    newest = owned_directory("squall-test-", tmp_path)
    assert not abandoned.exists()
    assert alive.exists() and unowned.exists() and other_prefix.exists() and newest.exists()
