"""``FileSpout`` when the files change under it: a file truncated or replaced while
some of its lines wait to be emitted again, a file or directory entry that cannot be
read, and lines appended to a file as it is finished and moved to the done directory.

The changes are made between calls of a spout driven by hand (``pump``), so that each
one happens at a known point; the appended-lines and unreadable-file cases also run in
a LocalCluster.
"""

from __future__ import annotations

import builtins
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from squall import InvalidTopologyError, LocalCluster, TopologyBuilder
from squall.connectors.files import FileSpout, ProgressStore, lines
from tests.helpers import wait_until
from tests.test_connectors_files_spout import (
    FAST,
    FakeCollector,
    FakeContext,
    Recorder,
    RecordingFileSpout,
    tuples,
    write,
)


def opened(directory: Path, **options: Any) -> tuple[FileSpout, FakeCollector]:
    """A spout of one task over ``directory``, opened with a collector that records."""
    collector = FakeCollector()
    spout = FileSpout(directory, **{**FAST, **options})
    spout.open({}, FakeContext(), collector)  # type: ignore[arg-type]
    return spout, collector


def pump(spout: FileSpout, condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Call ``next_tuple`` until ``condition`` holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            errors = getattr(spout.collector, "errors", [])
            raise AssertionError(f"condition not met within {timeout} s; errors: {errors}")
        spout.next_tuple()
        time.sleep(0.002)


def emitted(collector: FakeCollector) -> list[tuple[list[Any], Any]]:
    return [(values, msg_id) for values, msg_id, _ in collector.emitted]


def messages(collector: FakeCollector) -> list[str]:
    return [str(error) for error in collector.errors]


# --- a file truncated or replaced while lines wait to be emitted again -------------------


def test_a_file_truncated_while_lines_wait_for_a_replay_loses_them_and_reads_on(
    tmp_path: Path,
) -> None:
    """Lines 2 and 3 of a.txt failed; a.txt is then truncated (the same inode, fewer
    bytes) before the spout lists the directory again: the replay finds the file is not
    the one it read, counts both lines as lost with an error naming the file, and the
    spout reads b.txt on (it neither stalls nor reports the directory unreachable)."""
    write(tmp_path / "a.txt", "a1\na2\na3\n")
    write(tmp_path / "b.txt", "b1\n")
    spout, collector = opened(tmp_path, batch=3, scan_ms=3_600_000)
    spout.next_tuple()
    assert emitted(collector) == [
        (["a1"], ("a.txt", 1)), (["a2"], ("a.txt", 2)), (["a3"], ("a.txt", 3)),
    ]  # fmt: skip
    spout.ack(("a.txt", 1))
    spout.fail(("a.txt", 2))
    spout.fail(("a.txt", 3))
    with open(tmp_path / "a.txt", "w") as handle:  # truncated in place
        handle.write("z\n")
    collector.emitted.clear()
    pump(spout, lambda: len(collector.emitted) >= 1)
    assert emitted(collector) == [(["b1"], ("b.txt", 1))]
    assert spout.metrics()["lost"] == 2
    assert spout.metrics()["replayed"] == 0
    assert [m for m in messages(collector) if "cannot reach" in m] == []
    [error] = collector.errors
    assert str(error) == (
        f"FileSpout 'files': {tmp_path / 'a.txt'} was truncated to 2 bytes (9 were read); "
        "lines 2-3 waiting to be emitted again are lost; the file is read again from its "
        "start as a new file"
    )


def test_a_file_replaced_while_lines_are_pending_is_read_as_a_new_file(tmp_path: Path) -> None:
    """a.txt is replaced by rename while its line 2 waits for a replay and lines 3 and 4
    are in flight: line 2 is lost at once, line 3 when it fails, line 4 is acked; no
    byte of the new file is emitted under the old lines' ids, and once no old line is
    pending the new file is read from its start."""
    write(tmp_path / "a.txt", "a1\na2\na3\na4\n")
    write(tmp_path / "b.txt", "b1\n")
    spout, collector = opened(tmp_path)
    pump(spout, lambda: len(collector.emitted) == 5)
    old_inode = os.stat(tmp_path / "a.txt").st_ino
    for msg_id in (("a.txt", 1), ("b.txt", 1)):
        spout.ack(msg_id)
    spout.fail(("a.txt", 2))
    write(tmp_path / "a.txt", "new-1\nnew-2\n")
    new_inode = os.stat(tmp_path / "a.txt").st_ino
    collector.emitted.clear()
    pump(spout, lambda: spout.metrics()["lost"] == 1)
    time.sleep(0.05)
    for _ in range(20):  # lines 3 and 4 of the old file are still in flight
        spout.next_tuple()
    assert emitted(collector) == []
    spout.fail(("a.txt", 3))
    spout.ack(("a.txt", 4))
    pump(spout, lambda: len(collector.emitted) == 2)
    assert emitted(collector) == [(["new-1"], ("a.txt", 1)), (["new-2"], ("a.txt", 2))]
    assert spout.metrics()["lost"] == 2
    assert messages(collector) == [
        f"FileSpout 'files': {tmp_path / 'a.txt'} was replaced by another file (inode "
        f"{new_inode}, was {old_inode}); line 2 waiting to be emitted again is lost; lines "
        "3-4 in flight are lost if they fail; the file is read again from its start as a "
        "new file once none is pending",
        f"FileSpout 'files': line 3 of {tmp_path / 'a.txt'} failed after the file changed: "
        "it cannot be emitted again (lost)",
    ]
    spout.ack(("a.txt", 1))
    spout.ack(("a.txt", 2))
    store = ProgressStore(str(tmp_path))
    pump(spout, lambda: store.read_all()["a.txt"].done)
    record = store.read_all()["a.txt"]
    assert (record.inode, record.line, record.offset) == (new_inode, 2, 12)
    spout.close()


def test_a_replay_never_emits_another_file_s_bytes(tmp_path: Path) -> None:
    """A file replaced by rename before the spout lists the directory again: the replay
    checks the file's identity and emits nothing of the new file under the old id."""
    write(tmp_path / "a.txt", "line-1\nline-2\nline-3\n")
    spout, collector = opened(tmp_path, scan_ms=3_600_000)
    spout.next_tuple()
    assert len(collector.emitted) == 3
    spout.ack(("a.txt", 1))
    spout.ack(("a.txt", 3))
    spout.fail(("a.txt", 2))
    write(tmp_path / "a.txt", "other-8\nother-26\nother-30\n")
    collector.emitted.clear()
    pump(spout, lambda: spout.metrics()["lost"] == 1)
    for _ in range(5):
        spout.next_tuple()
    assert emitted(collector) == []
    [error] = messages(collector)
    assert f"{tmp_path / 'a.txt'} was replaced by another file" in error
    assert "; line 2 waiting to be emitted again is lost; " in error


# --- an entry that cannot be read ------------------------------------------------------


@pytest.fixture
def unreadable(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Makes a file unreadable and readable again: ``chmod`` for a user other than
    root; for root, who reads any file whatever its mode, the file connector's
    ``open`` refuses the path with the error a user without permission gets."""
    refused: set[str] = set()

    def refusing_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        if os.fspath(path) in refused:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return builtins.open(path, *args, **kwargs)

    if os.geteuid() == 0:
        monkeypatch.setattr(lines, "open", refusing_open, raising=False)

    class Switch:
        def deny(self, path: Path) -> None:
            if os.geteuid() == 0:
                refused.add(str(path))
            else:
                path.chmod(0)

        def allow(self, path: Path) -> None:
            refused.discard(str(path))
            path.chmod(0o644)

    return Switch()


def test_an_unreadable_file_is_reported_skipped_and_read_once_readable(
    tmp_path: Path, unreadable: Any
) -> None:
    """a.txt cannot be opened: the spout reports it by name, reads b.txt and c.txt, and
    reads a.txt once it is readable again; every line is acked once."""
    for name in ("a", "b", "c"):
        write(tmp_path / f"{name}.txt", f"{name}1\n{name}2\n")
    unreadable.deny(tmp_path / "a.txt")
    spout = RecordingFileSpout(tmp_path)
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("files", spout)
    builder.set_bolt("sink", recorder).shuffle_grouping("files")
    with LocalCluster() as cluster:
        cluster.submit_topology("unreadable", {}, builder.create_topology())
        wait_until(lambda: len(spout.record.get("acked")) == 4, 10.0)
        errors = cluster.get_topology_info("unreadable").components["files"].errors
        unreadable.allow(tmp_path / "a.txt")
        wait_until(lambda: len(spout.record.get("acked")) == 6, 10.0)
        cluster.kill_topology("unreadable")
    assert sorted(v[0] for v in tuples(recorder.record)) == ["a1", "a2", "b1", "b2", "c1", "c2"]
    assert sorted(spout.record.get("acked")) == sorted(
        (f"{n}.txt", i) for n in "abc" for i in (1, 2)
    )
    first = errors[0].error.strip().splitlines()[-1]
    assert (
        f"FileSpout 'files' cannot reach {tmp_path / 'a.txt'}: [Errno 13] Permission denied"
        in first
    )
    assert "(attempt 1; retrying in 0.1 s)" in first


def test_an_entry_that_cannot_be_listed_does_not_stop_the_others(tmp_path: Path) -> None:
    """a.txt is a symbolic link to itself (it cannot be resolved, for root too): the
    spout reports it by name, reads b.txt, and reads a.txt once it is a file."""
    os.symlink("a.txt", tmp_path / "a.txt")
    write(tmp_path / "b.txt", "b1\n")
    spout, collector = opened(tmp_path)
    pump(spout, lambda: len(collector.emitted) == 1)
    assert emitted(collector) == [(["b1"], ("b.txt", 1))]
    [error] = messages(collector)
    assert error.startswith(
        f"FileSpout 'files' cannot reach {tmp_path / 'a.txt'}: [Errno 40] Too many levels"
    )
    assert [m for m in messages(collector) if f"cannot reach {tmp_path}:" in m] == []
    os.remove(tmp_path / "a.txt")
    write(tmp_path / "a.txt", "a1\n")
    pump(spout, lambda: len(collector.emitted) == 2)
    assert emitted(collector)[1] == (["a1"], ("a.txt", 1))


def test_a_file_that_fails_on_a_replay_does_not_hold_up_the_others(
    tmp_path: Path, unreadable: Any
) -> None:
    """a.txt becomes unreadable while its line 1 waits for a replay: the replay waits
    (the file is reported by name), b.txt is read meanwhile, and the line is emitted
    again once the file is readable."""
    write(tmp_path / "a.txt", "a1\n")
    spout, collector = opened(tmp_path)
    spout.next_tuple()
    spout.fail(("a.txt", 1))
    unreadable.deny(tmp_path / "a.txt")
    write(tmp_path / "b.txt", "b1\n")
    collector.emitted.clear()
    pump(spout, lambda: len(collector.emitted) == 1)
    assert emitted(collector) == [(["b1"], ("b.txt", 1))]
    assert any(f"cannot reach {tmp_path / 'a.txt'}" in m for m in messages(collector))
    unreadable.allow(tmp_path / "a.txt")
    pump(spout, lambda: len(collector.emitted) == 2)
    assert emitted(collector)[1] == (["a1"], ("a.txt", 1))
    assert spout.metrics()["lost"] == 0


# --- lines appended as a file is finished (done_directory) -------------------------------


def test_lines_appended_before_a_file_is_moved_are_read(tmp_path: Path) -> None:
    """A writer appends 1,000 lines, and 6,000 more 0.2 s after the spout has acked the
    first 1,000 (the file read to its end and finished): the file is moved to the done
    directory only once it has stayed unchanged for ``settle_ms``, so every line is
    read."""
    source, done = tmp_path / "in", tmp_path / "done"
    source.mkdir()
    spout = RecordingFileSpout(source, "*.log", done_directory=done, batch=64, settle_ms=2000)
    builder = TopologyBuilder()
    builder.set_spout("files", spout)
    builder.set_bolt("sink", Recorder()).shuffle_grouping("files")
    with LocalCluster() as cluster, open(source / ".app.log", "w") as writer:
        writer.write("".join(f"line-{i}\n" for i in range(1, 1001)))
        writer.flush()
        os.rename(source / ".app.log", source / "app.log")
        cluster.submit_topology("append", {}, builder.create_topology())
        wait_until(lambda: len(spout.record.get("acked")) == 1000, 20.0)
        time.sleep(0.2)
        writer.write("".join(f"line-{i}\n" for i in range(1001, 7001)))
        writer.flush()
        wait_until(lambda: (done / "app.log").exists(), 20.0)
        info = cluster.get_topology_info("append").components["files"]
        cluster.kill_topology("append")
    assert sorted(spout.record.get("acked")) == [("app.log", i) for i in range(1, 7001)]
    assert info.custom["lost"] == 0
    assert info.errors_total == 0


def test_lines_appended_after_a_file_is_moved_are_counted_lost_and_reported(
    tmp_path: Path,
) -> None:
    """A writer holding the file open appends after the spout moved it: the spout
    notices the moved file grew, counts the complete lines appended as lost and reports
    them naming both paths."""
    source, done = tmp_path / "in", tmp_path / "done"
    source.mkdir()
    write(source / "app.log", "one\ntwo\n")
    spout, collector = opened(source, done_directory=done, settle_ms=10)
    with open(source / "app.log", "a") as writer:
        pump(spout, lambda: len(collector.emitted) == 2)
        spout.ack(("app.log", 1))
        spout.ack(("app.log", 2))
        pump(spout, lambda: (done / "app.log").exists())
        writer.write("three\nfour\nfive\nsix-without-end")
        writer.flush()
        pump(spout, lambda: spout.metrics()["lost"] == 3)
        writer.write("\n")
        writer.flush()
        pump(spout, lambda: spout.metrics()["lost"] == 4)
    assert spout.metrics()["files_finished"] == 1
    assert messages(collector) == [
        f"FileSpout 'files': lines 3-5 appended to {source / 'app.log'} after it was "
        f"finished and moved to {done / 'app.log'} are not read (counted as lost); a file "
        "must be complete when it appears in the directory",
        f"FileSpout 'files': line 6 appended to {source / 'app.log'} after it was "
        f"finished and moved to {done / 'app.log'} is not read (counted as lost); a file "
        "must be complete when it appears in the directory",
    ]
    spout.close()


def test_a_finished_file_that_grew_before_a_restart_is_read_on_before_it_is_moved(
    tmp_path: Path,
) -> None:
    """The record says a.txt is finished (a crash before it was moved); lines appended
    since are read before the file is moved."""
    from squall.connectors.files import ProgressRecord

    source, done = tmp_path / "in", tmp_path / "done"
    source.mkdir()
    write(source / "a.txt", "a1\na2\n")
    inode = os.stat(source / "a.txt").st_ino
    ProgressStore(str(source)).write([ProgressRecord("a.txt", inode, 2, 6, True)])
    with open(source / "a.txt", "a") as handle:
        handle.write("a3\n")
    spout, collector = opened(source, done_directory=done, settle_ms=10)
    pump(spout, lambda: len(collector.emitted) == 1)
    assert emitted(collector) == [(["a3"], ("a.txt", 3))]
    assert not (done / "a.txt").exists()
    spout.ack(("a.txt", 3))
    pump(spout, lambda: (done / "a.txt").exists())
    assert (done / "a.txt").read_text() == "a1\na2\na3\n"
    assert spout.metrics()["lost"] == 0
    spout.close()


def test_settle_ms_must_be_a_positive_number(tmp_path: Path) -> None:
    builder = TopologyBuilder()
    builder.set_spout("files", FileSpout(tmp_path, settle_ms=-1))
    builder.set_bolt("sink", Recorder()).shuffle_grouping("files")
    with LocalCluster() as cluster, pytest.raises(InvalidTopologyError) as caught:
        cluster.submit_topology("wrong", {}, builder.create_topology())
    assert str(caught.value) == (
        "component 'files' (FileSpout): settle_ms must be a number > 0, got -1"
    )
