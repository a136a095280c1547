"""``FileBolt``: exact file contents, ``fsync`` before ack, rotation by size and by age,
atomic renames, failed writes, leftovers of a crash, wrong options.

Unit tests drive one bolt task with a recording collector and a manual clock (exact
order of writes, syncs, acks and renames); topology tests run on both engines.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from squall import Config, Fields, InvalidTopologyError, ManualClock, Spout, TopologyBuilder
from squall.connectors.files import FileBolt
from squall.model.tuple import TICK_STREAM_INFO, StreamInfo, Tuple
from squall.testing import FixedTupleSpout, SharedRecord
from tests.conftest import Engine

# --- one task, driven directly ------------------------------------------------------------


def FakeTuple(
    values: list[Any],
    fields: tuple[str, ...] = ("user", "n"),
    component: str = "source",
    stream: str = "default",
) -> Tuple:
    """A tuple as an engine makes it."""
    return Tuple(values, StreamInfo(component, stream, Fields(list(fields))), 1)


def tick() -> Tuple:
    return Tuple([1], TICK_STREAM_INFO, -1)


class FakeContext:
    component_id = "sink"
    task_id = 7

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock


class Events:
    """The collector: records acks, fails and errors, each with what was on disk then."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.log: list[tuple[str, Any]] = []
        self.syncs = 0

    def on_disk(self) -> str:
        """Every line in the directory's files, final and in progress."""
        return "".join(
            (self.directory / name).read_text() for name in sorted(os.listdir(self.directory))
        )

    def ack(self, tup: Tuple) -> None:
        self.log.append(("ack", (tup.values, self.syncs, self.on_disk())))

    def fail(self, tup: Tuple) -> None:
        self.log.append(("fail", tup.values))

    def report_error(self, error: BaseException) -> None:
        self.log.append(("error", str(error)))


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts ``fsync`` calls on files written by FileBolt."""
    calls: list[int] = []
    real = os.fsync

    def counting(descriptor: int) -> None:
        calls.append(descriptor)
        real(descriptor)

    monkeypatch.setattr("squall.connectors.files.writer.os.fsync", counting)
    return calls


def task(directory: Path, clock: ManualClock, **options: Any) -> tuple[FileBolt, Events]:
    bolt = FileBolt(directory, **options)
    events = Events(directory)
    bolt.prepare({}, FakeContext(clock), events)
    return bolt, events


def test_tuples_are_acked_only_after_their_group_is_synced(
    tmp_path: Path, synced: list[int]
) -> None:
    """With ``batch=3``, the first two tuples wait; the third writes all three with one
    fsync, and only then are they acked, the lines on disk at each ack."""
    clock = ManualClock()
    bolt, events = task(tmp_path, clock, batch=3)
    original_ack = events.ack

    def ack(tup: Tuple) -> None:
        events.syncs = len(synced)
        original_ack(tup)

    events.ack = ack  # type: ignore[method-assign]
    bolt.execute(FakeTuple(["ann", 1]))
    bolt.execute(FakeTuple(["bob", 2]))
    assert events.log == [] and synced == []
    bolt.execute(FakeTuple(["cy", 3]))
    lines = '{"user":"ann","n":1}\n{"user":"bob","n":2}\n{"user":"cy","n":3}\n'
    assert events.log == [
        ("ack", (["ann", 1], 1, lines)),
        ("ack", (["bob", 2], 1, lines)),
        ("ack", (["cy", 3], 1, lines)),
    ]
    assert os.listdir(tmp_path) == [".part-7-000000.jsonl.inprogress"]
    bolt.cleanup()
    assert os.listdir(tmp_path) == ["part-7-000000.jsonl"]
    assert (tmp_path / "part-7-000000.jsonl").read_text() == lines


def test_a_waiting_tuple_is_written_after_flush_ms_or_at_a_tick(tmp_path: Path) -> None:
    clock = ManualClock()
    bolt, events = task(tmp_path, clock, flush_ms=100)
    assert bolt.get_component_configuration() == {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 0.1}
    bolt.execute(FakeTuple(["ann", 1]))
    clock.advance(99)
    bolt.execute(FakeTuple(["bob", 2]))
    assert events.log == []
    clock.advance(1)
    bolt.execute(FakeTuple(["cy", 3]))  # the oldest is 100 ms old
    assert [values for kind, (values, *_) in events.log] == [["ann", 1], ["bob", 2], ["cy", 3]]
    bolt.execute(FakeTuple(["di", 4]))
    bolt.execute(tick())
    assert [entry[1][0] for entry in events.log][-1] == ["di", 4]


def test_files_rotate_by_size_and_by_age_with_atomic_renames(tmp_path: Path) -> None:
    """A file is finished once it holds ``rotate_bytes`` or is ``rotate_secs`` old: its
    final name appears with the whole file, and only then; numbering goes on."""
    clock = ManualClock()
    bolt, _ = task(tmp_path, clock, format="lines", batch=1, rotate_bytes=10, rotate_secs=5)
    for word in ["aaaa", "bbbb"]:  # 5 bytes each: the second fills the first file
        bolt.execute(FakeTuple([word], ("word",)))
    assert sorted(os.listdir(tmp_path)) == ["part-7-000000.txt"]
    assert (tmp_path / "part-7-000000.txt").read_text() == "aaaa\nbbbb\n"
    bolt.execute(FakeTuple(["cc"], ("word",)))
    assert sorted(os.listdir(tmp_path)) == [".part-7-000001.txt.inprogress", "part-7-000000.txt"]
    assert not (tmp_path / "part-7-000001.txt").exists()  # no partial file under a final name
    clock.advance(4999)
    bolt.execute(tick())
    assert not (tmp_path / "part-7-000001.txt").exists()
    clock.advance(1)
    bolt.execute(tick())
    assert sorted(os.listdir(tmp_path)) == ["part-7-000000.txt", "part-7-000001.txt"]
    assert (tmp_path / "part-7-000001.txt").read_text() == "cc\n"
    bolt.execute(tick())  # nothing written: no empty file
    bolt.cleanup()
    assert sorted(os.listdir(tmp_path)) == ["part-7-000000.txt", "part-7-000001.txt"]


def test_csv_files_start_with_the_field_names_and_fields_are_chosen_by_name(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    bolt, _ = task(tmp_path, clock, format="csv", fields=["n", "user"], batch=2)
    bolt.execute(FakeTuple(["ann, jr", 1]))
    bolt.execute(FakeTuple(["bob", 2]))
    bolt.cleanup()
    assert (tmp_path / "part-7-000000.csv").read_text() == 'n,user\n1,"ann, jr"\n2,bob\n'


def test_values_that_cannot_be_written_fail_their_tuple_only(tmp_path: Path) -> None:
    clock = ManualClock()
    bolt, events = task(tmp_path, clock, format="lines", batch=1)
    bolt.execute(FakeTuple(["two\nlines"], ("word",)))
    bolt.execute(FakeTuple(["a", 1], component="other"))  # two fields
    bolt.execute(FakeTuple(["fine"], ("word",)))
    assert [(kind, detail if kind != "ack" else detail[0]) for kind, detail in events.log] == [
        ("error", "a value of the lines format cannot hold a line end"),
        ("fail", ["two\nlines"]),
        (
            "error",
            "the lines format writes one field, the tuple has ['user', 'n']: choose one "
            "with fields=[...]",
        ),
        ("fail", ["a", 1]),
        ("ack", ["fine"]),
    ]


def test_a_failed_write_fails_its_tuples_reports_and_backs_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sync of the second group fails: its tuples are failed, the error names the
    bolt and the directory, the file is cut back to the first group, and the next write
    (after the back-off) succeeds."""
    from squall.connectors.files import writer

    clock = ManualClock()
    bolt, events = task(tmp_path, clock, batch=1)
    bolt.execute(FakeTuple(["ann", 1]))
    real_sync = writer.PartFile.sync
    failures = iter([OSError(28, "No space left on device")])

    def failing_sync(self: writer.PartFile) -> None:
        error = next(failures, None)
        if error is not None:
            raise error
        real_sync(self)

    monkeypatch.setattr(writer.PartFile, "sync", failing_sync)
    bolt.execute(FakeTuple(["bob", 2]))
    bolt.execute(FakeTuple(["cy", 3]))
    bolt.cleanup()
    kinds = [(kind, detail[0] if kind == "ack" else detail) for kind, detail in events.log]
    assert kinds == [
        ("ack", ["ann", 1]),
        (
            "error",
            f"FileBolt 'sink' cannot reach {tmp_path}: [Errno 28] No space left on device "
            "(attempt 1; retrying in 0.1 s)",
        ),
        ("fail", ["bob", 2]),
        ("ack", ["cy", 3]),
    ]
    assert (tmp_path / "part-7-000000.jsonl").read_text() == (
        '{"user":"ann","n":1}\n{"user":"cy","n":3}\n'
    )
    assert bolt.metrics() == {"files_finished": 1, "tuples_written": 2, "write_failures": 1}


def test_files_left_in_progress_by_a_crash_are_finished_at_the_next_write(
    tmp_path: Path,
) -> None:
    """A task's in-progress file from an earlier run is cut after its last complete line
    and renamed; the task's numbering continues after it; other tasks' files are left."""
    (tmp_path / ".part-7-000003.jsonl.inprogress").write_text('{"a":1}\n{"a":2}\n{"a":')
    (tmp_path / ".part-8-000009.jsonl.inprogress").write_text('{"b":1}\n')
    (tmp_path / "part-7-000001.jsonl").write_text('{"old":1}\n')
    clock = ManualClock()
    bolt, _ = task(tmp_path, clock, batch=1)
    bolt.execute(FakeTuple(["ann", 1]))
    bolt.cleanup()
    assert sorted(os.listdir(tmp_path)) == [
        ".part-8-000009.jsonl.inprogress",
        "part-7-000001.jsonl",
        "part-7-000003.jsonl",
        "part-7-000004.jsonl",
    ]
    assert (tmp_path / "part-7-000003.jsonl").read_text() == '{"a":1}\n{"a":2}\n'
    assert (tmp_path / "part-7-000004.jsonl").read_text() == '{"user":"ann","n":1}\n'


# --- topologies, on both engines --------------------------------------------------------


class AckRecordingSpout(FixedTupleSpout):
    """Records, at each ack, whether the acked tuple's line is already in a file of
    ``directory`` (final or in progress)."""

    def __init__(self, rows: list[list[Any]], directory: str) -> None:
        super().__init__(rows, ["user", "n"])
        self.directory = directory
        self.readable = SharedRecord()

    def ack(self, msg_id: Any) -> None:
        user, n = self.items[msg_id][1]
        line = json.dumps({"user": user, "n": n}, separators=(",", ":"))
        text = "".join(
            Path(self.directory, name).read_text() for name in os.listdir(self.directory)
        )
        self.readable.append("acks", (msg_id, line in text.splitlines()))
        super().ack(msg_id)


def written(directory: Path) -> list[str]:
    """The lines of every final file; fails if an in-progress file is left."""
    names = os.listdir(directory)
    assert not [n for n in names if n.endswith(".inprogress")], names
    return [line for name in sorted(names) for line in (directory / name).read_text().splitlines()]


def test_every_tuple_is_in_a_final_file_when_it_is_acked(engine: Engine, tmp_path: Path) -> None:
    """Two bolt tasks; each acked tuple's line is on disk at its ack; at the end every
    tuple is in exactly one final file of the task that wrote it."""
    rows = [[f"u{i}", i] for i in range(40)]
    out = tmp_path / "out"
    spout = AckRecordingSpout(rows, str(out))
    builder = TopologyBuilder()
    builder.set_spout("rows", spout)
    bolt = FileBolt(out, batch=8, flush_ms=engine.pick(50, None))
    builder.set_bolt("sink", bolt, 2).shuffle_grouping("rows")
    with engine.running(builder.create_topology(), name="sink") as run:
        run.wait_until(lambda: len(spout.acked) == 40, engine.timeout)
        run.wait_idle()
        assert run.errors() == {}
        tasks = run.info().components["sink"].tasks
    assert sorted(spout.readable.get("acks")) == [(i, True) for i in range(40)]
    lines = written(out)
    assert sorted(json.loads(line)["n"] for line in lines) == list(range(40))
    prefixes = {name.split("-")[1] for name in os.listdir(out)}
    assert prefixes == {str(task) for task in tasks}


class Endless(Spout):
    outputs = ["user", "n"]

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        if self.n < 5:
            self.collector.emit([f"u{self.n}", self.n], self.n)
            self.n += 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rotate_bytes": 0}, "rotate_bytes must be an int > 0, got 0"),
        ({"format": "xml"}, "format must be one of 'lines', 'jsonl', 'csv', got 'xml'"),
        ({"rotate_secs": -1}, "rotate_secs must be a number > 0, got -1"),
        ({"prefix": ".hidden"}, "prefix must be a plain name (no '/', no leading '.')"),
        ({"directory": "file.txt"}, "directory '{tmp}/file.txt' is not a directory"),
    ],
)
def test_wrong_options_fail_the_submission_naming_the_component(
    engine: Engine, tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    (tmp_path / "file.txt").write_text("x")
    arguments = {"directory": tmp_path / "out", **options}
    if "directory" in options:
        arguments["directory"] = tmp_path / options["directory"]
    builder = TopologyBuilder()
    builder.set_spout("rows", Endless())
    builder.set_bolt("my-sink", FileBolt(**arguments)).shuffle_grouping("rows")
    cluster = engine.new_cluster()
    with pytest.raises(InvalidTopologyError) as caught:
        cluster.submit_topology("wrong", engine.conf(), builder.create_topology())
    assert str(caught.value).startswith("component 'my-sink' (FileBolt): ")
    assert message.format(tmp=tmp_path) in str(caught.value)
