"""``FileTridentSpout``: files as the partitions of a transactional Trident spout.

On both engines: a failed transaction is replayed with exactly the lines of its first
attempt and the counts in transactional state are exact, also for files added while
the topology runs; malformed records arrive in the error field; wrong options fail the
submission naming the component. Directly: a partition's batch metadata replays the
same lines after its file grew, and partition numbers never change as files come.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from squall import Fields, InvalidTopologyError
from squall.connectors.files import FileTridentSpout
from squall.connectors.files.trident import PartitionRegistry
from squall.testing import SharedRecord
from squall.trident import Count as TridentCount
from squall.trident import StateUpdater, TridentCollector, TridentTopology, TridentTuple
from squall.trident.state import MemoryMapState, SqliteMapState, StateType
from tests.conftest import ENGINE_SETTINGS, SPARK_RETRIES, Engine, EngineSettings
from tests.helpers import wait_until


@pytest.fixture
def engine_settings() -> dict[str, EngineSettings]:
    """On Spark, one more run of a failed micro-batch (a test fails one attempt)."""
    return {
        "local": ENGINE_SETTINGS["local"].tuned(timeout=20.0),
        "spark": ENGINE_SETTINGS["spark"].tuned({SPARK_RETRIES: 1}),
    }


class RecordLines(StateUpdater):
    """Records ``(txid, sorted lines)`` of each batch it applies, and raises the first
    time it applies transaction ``fail_txid`` (the transaction fails at its commit and
    is replayed)."""

    def __init__(self, record: SharedRecord, fail_txid: int) -> None:
        self.record = record
        self.fail_txid = fail_txid

    def update_state(
        self, state: Any, tuples: list[TridentTuple], collector: TridentCollector
    ) -> None:
        txid = state.current_txid
        self.record.append("batches", (txid, sorted(tup[0] for tup in tuples)))
        if txid == self.fail_txid and [t for t, _ in self.record.get("batches")].count(txid) == 1:
            raise RuntimeError(f"injected failure of the first commit of batch {txid}")


def write(path: Path, lines: list[str]) -> None:
    temporary = path.parent / f".{path.name}.tmp"
    temporary.write_text("".join(f"{line}\n" for line in lines))
    os.replace(temporary, path)


WORDS = ["apple", "pear", "plum", "fig", "kiwi"]


def words(prefix: int, count: int) -> list[str]:
    return [WORDS[(prefix * 3 + i) % len(WORDS)] for i in range(count)]


def test_a_replayed_batch_holds_the_same_lines_and_counts_are_exact(
    engine: Engine, tmp_path: Path
) -> None:
    """Transaction 2 fails once, at its commit: its replay holds exactly its lines; the
    transactional counts equal the words of every file, including a file added while running."""
    data = tmp_path / "data"
    data.mkdir()
    files = {f"f{n}.txt": words(n, 7) for n in range(3)}
    for name, rows in files.items():
        write(data / name, rows)
    record = SharedRecord()
    factory = SqliteMapState.factory(tmp_path / "counts.db", StateType.TRANSACTIONAL)
    topology = TridentTopology()
    stream = topology.new_stream(
        "files", FileTridentSpout(data, "*.txt", batch_lines=3, scan_ms=20, error_field=None)
    ).parallelism_hint(2)
    stream.partition_persist(
        MemoryMapState.factory(StateType.TRANSACTIONAL), Fields("line"), RecordLines(record, 2)
    )
    stream.group_by(Fields("line")).persistent_aggregate(factory, TridentCount(), Fields("count"))

    def expected() -> dict[tuple[str], int]:
        return {(word,): n for word, n in Counter(w for r in files.values() for w in r).items()}

    with engine.running(topology, name="files") as run:
        run.wait_until(lambda: SqliteMapState.contents(factory) == expected(), engine.timeout)
        files["late.txt"] = words(9, 5)
        write(data / "late.txt", files["late.txt"])
        run.wait_until(lambda: SqliteMapState.contents(factory) == expected(), engine.timeout)
    second = [lines for txid, lines in record.get("batches") if txid == 2]
    assert len(second) == 2 and second[0] == second[1]
    assert len(second[0]) == 9  # 3 lines of each of the 3 files
    assert PartitionRegistry(str(data), "*.txt").names() == [
        "f0.txt",
        "f1.txt",
        "f2.txt",
        "late.txt",
    ]


def problem(tup: TridentTuple) -> list[Any]:
    """``[word, "file:line: error: text"]`` (a malformed record's word is None)."""
    error = tup["error"]
    if error is None:
        return [tup["word"], None]
    return [None, f"{error['file']}:{error['line']}: {error['error']}: {error['text']}"]


def test_malformed_records_arrive_in_the_error_field(engine: Engine, tmp_path: Path) -> None:
    """jsonl with fields: good records have error None; a malformed one has None fields
    and the error with its file and line."""
    write(tmp_path / "a.jsonl", ['{"word": "fig"}', "oops", '{"word": "kiwi"}', '{"w": 1}'])
    factory = MemoryMapState.factory(StateType.OPAQUE)
    topology = TridentTopology()
    (
        topology.new_stream(
            "records", FileTridentSpout(tmp_path, format="jsonl", fields=["word"], scan_ms=20)
        )
        .map(problem, Fields("w", "problem"))
        .group_by(Fields("w", "problem"))
        .persistent_aggregate(factory, TridentCount(), Fields("count"))
    )
    expected = {
        ("fig", None): 1,
        ("kiwi", None): 1,
        (None, "a.jsonl:2: invalid JSON: Expecting value: line 1 column 1 (char 0): oops"): 1,
        (None, "a.jsonl:4: missing field(s) ['word']: {\"w\": 1}"): 1,
    }
    with engine.running(topology, name="errors") as run:
        run.wait_until(lambda: MemoryMapState.contents(factory) == expected, engine.timeout)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"format": "xml"}, "format must be one of 'lines', 'jsonl', 'csv', got 'xml'"),
        ({"directory": "missing"}, "directory '{tmp}/missing' does not exist"),
        ({"batch_lines": 0}, "batch_lines must be an int > 0, got 0"),
        ({"error_field": "line"}, "error_field 'line' is also a record field"),
    ],
)
def test_wrong_options_fail_the_submission_naming_the_component(
    engine: Engine, tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    arguments = {"directory": tmp_path, **options}
    if "directory" in options:
        arguments["directory"] = tmp_path / options["directory"]
    topology = TridentTopology()
    topology.new_stream("my-files", FileTridentSpout(**arguments)).persistent_aggregate(
        MemoryMapState.factory(), TridentCount(), Fields("count")
    )
    cluster = engine.new_cluster()
    with pytest.raises(InvalidTopologyError) as caught:
        cluster.submit_topology("wrong", engine.conf(), topology.build())
    assert str(caught.value).startswith("component 'my-files' (FileTridentSpout): ")
    assert message.format(tmp=tmp_path) in str(caught.value)


class Rows:
    """A collector keeping what an emitter emits."""

    def __init__(self) -> None:
        self.rows: list[list[Any]] = []
        self.errors: list[str] = []

    def emit(self, values: list[Any]) -> None:
        self.rows.append(list(values))

    def report_error(self, error: BaseException | str) -> None:
        self.errors.append(str(error))


def test_batch_metadata_replays_the_same_lines_after_the_file_grew(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("n,word\n1,fig\n2,kiwi\n3,plum\n4,li")
    spout = FileTridentSpout(tmp_path, format="csv", fields=["word"], batch_lines=2)
    coordinator = spout.get_coordinator({}, None)
    assert coordinator.number_of_partitions() == 1
    emitter = spout.get_emitter({}, None)
    first, again, second, third = Rows(), Rows(), Rows(), Rows()
    meta = emitter.emit_partition_batch_new(None, first, 0, None)
    inode = path.stat().st_ino
    assert meta == {
        "file": "t.csv",
        "first_line": 1,
        "start": 0,
        "last_line": 2,
        "end": 13,
        "inode": inode,
    }
    assert first.rows == [["fig", None]]  # the header, then one record
    meta2 = emitter.emit_partition_batch_new(None, second, 0, meta)
    assert second.rows == [["kiwi", None], ["plum", None]]
    with path.open("a") as handle:
        handle.write("me\n5,date\n")
    emitter.emit_partition_batch(None, again, 0, meta2)
    assert again.rows == second.rows
    meta3 = (
        FileTridentSpout(tmp_path, format="csv", fields=["word"], batch_lines=5)
        .get_emitter({}, None)
        .emit_partition_batch_new(None, third, 0, meta2)
    )  # a new emitter reads the header again
    assert third.rows == [["lime", None], ["date", None]]
    assert meta3 == {
        "file": "t.csv",
        "first_line": 5,
        "start": 27,
        "last_line": 6,
        "end": 41,
        "inode": inode,
    }


def test_partition_numbers_never_change_as_files_come(tmp_path: Path) -> None:
    write(tmp_path / "m.txt", ["x"])
    spout = FileTridentSpout(tmp_path, "*.txt", scan_ms=1)
    coordinator = spout.get_coordinator({}, None)
    assert coordinator.number_of_partitions() == 1
    write(tmp_path / "a.txt", ["y"])
    write(tmp_path / "z.txt", ["z"])
    (tmp_path / ".hidden.txt").write_text("h\n")
    wait_until(lambda: coordinator.number_of_partitions() == 3)
    registry = PartitionRegistry(str(tmp_path), "*.txt")
    assert registry.names() == ["m.txt", "a.txt", "z.txt"]
    assert PartitionRegistry(str(tmp_path), "*.log").names() == []
    emitter = spout.get_emitter({}, None)
    rows = Rows()
    emitter.emit_partition_batch_new(None, rows, 1, None)
    assert rows.rows == [["y", None]]


def test_a_replay_of_a_replaced_file_fails_instead_of_emitting_the_new_file(
    tmp_path: Path,
) -> None:
    """A transactional replay must emit the lines of its first attempt: if the file now
    under the name is another one (or was truncated), the replay fails naming the file;
    it never emits the other file's bytes under the old batch."""
    path = tmp_path / "t.txt"
    write(path, ["alpha", "beta", "gamma"])
    emitter = emitter_of(FileTridentSpout(tmp_path, batch_lines=2))
    meta = emitter.emit_partition_batch_new(None, Rows(), 0, None)
    write(path, ["0123456789", "abcdefghij"])  # replaced by rename, longer than before
    replay = Rows()
    with pytest.raises(OSError, match=r"t\.txt was replaced by another file"):
        emitter.emit_partition_batch(None, replay, 0, meta)
    assert replay.rows == []
    meta = emitter.emit_partition_batch_new(None, Rows(), 0, None)  # the new file's first
    os.truncate(path, 3)  # the same file, truncated in place
    with pytest.raises(OSError, match=r"t\.txt was truncated to 3 bytes \(22 were read\)"):
        emitter.emit_partition_batch(None, Rows(), 0, meta)


def emitter_of(spout: FileTridentSpout) -> Any:
    """The spout's emitter, once its coordinator has registered the files."""
    spout.get_coordinator({}, None).number_of_partitions()
    return spout.get_emitter({}, None)


def test_a_file_replaced_between_batches_is_reported_and_read_as_a_new_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.txt"
    write(path, ["alpha", "beta", "gamma"])
    emitter = emitter_of(FileTridentSpout(tmp_path, batch_lines=2))
    first = Rows()
    meta = emitter.emit_partition_batch_new(None, first, 0, None)
    assert first.rows == [["alpha", None], ["beta", None]]
    write(path, ["one", "two"])  # "gamma" was never read
    second = Rows()
    meta2 = emitter.emit_partition_batch_new(None, second, 0, meta)
    assert second.rows == [["one", None], ["two", None]]
    assert meta2 == {
        "file": "t.txt",
        "first_line": 1,
        "start": 0,
        "last_line": 2,
        "end": 8,
        "inode": path.stat().st_ino,
    }
    assert len(second.errors) == 1
    assert f"{path} was replaced by another file" in second.errors[0]
    assert "whatever followed line 2 of the file read before" in second.errors[0]
    again = Rows()
    emitter.emit_partition_batch(None, again, 0, meta2)  # the new batch replays exactly
    assert again.rows == second.rows
    os.truncate(path, 0)  # truncated in place, then written again (copy-truncate)
    path.write_text("three\n")
    third = Rows()
    meta3 = emitter.emit_partition_batch_new(None, third, 0, meta2)
    assert third.rows == [["three", None]]
    assert meta3["first_line"] == 1 and meta3["start"] == 0
    assert f"{path} was truncated" in third.errors[0]
