"""``FileSpout``: every record of every file once, exact tuples in the three formats,
acks, replays, finished files, new files, malformed records, several tasks; on both
engines (the ``engine`` fixture). Local only: restarts from the progress records,
incomplete lines, replaced and grown files, a directory that goes away, and a spout
restored from a pickled snapshot (what Spark does after every micro-batch).

Spouts and bolts record what they do in ``SharedRecord``s (on Spark the spout runs in
the source's process and bolts in Python workers).
"""

from __future__ import annotations

import json
import os
import pickle
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from squall import BasicBolt, Bolt, Config, FailedException, InvalidTopologyError, TopologyBuilder
from squall.connectors.files import PROGRESS_DIRECTORY, FileSpout, ProgressStore
from squall.connectors.files.listing import owner
from squall.model.clock import SYSTEM_CLOCK
from squall.testing import SharedRecord
from tests.conftest import Engine, Run

#: The spouts list the directory often, write progress often and move finished files
#: soon, so tests are quick.
FAST = {"scan_ms": 20, "progress_ms": 20, "settle_ms": 20}


class RecordingFileSpout(FileSpout):
    """A FileSpout that records every ack and fail (message ids) in ``record``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**FAST, **kwargs})
        self.record = SharedRecord()

    def ack(self, msg_id: Any) -> None:
        self.record.append("acked", tuple(msg_id))
        super().ack(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.record.append("failed", tuple(msg_id))
        super().fail(msg_id)


class Recorder(BasicBolt):
    """Records ``(component, stream, source task, values)`` of every tuple."""

    def __init__(self) -> None:
        self.record = SharedRecord()

    def execute(self, tup: Any, collector: Any) -> None:
        self.record.append(
            "tuples", (tup.source_component, tup.source_stream, tup.source_task, list(tup.values))
        )


class FailEvenLinesOnce(Bolt):
    """Fails each tuple whose text ends with an even number the first time it sees it;
    acks everything else (and the replays)."""

    def __init__(self) -> None:
        self.record = SharedRecord()

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.failed: set[str] = set()

    def execute(self, tup: Any) -> None:
        text = tup.values[0]
        self.record.append("seen", text)
        if int(text.rsplit("-", 1)[1]) % 2 == 0 and text not in self.failed:
            self.failed.add(text)
            self.collector.fail(tup)
            return
        self.collector.ack(tup)


def write(path: Path, text: str) -> None:
    """Write a file elsewhere, then rename it in (as producers should)."""
    temporary = path.parent / f".{path.name}.tmp"
    temporary.write_text(text)
    os.replace(temporary, path)


def tuples(record: SharedRecord, stream: str = "default") -> list[list[Any]]:
    return [values for _, s, _, values in record.get("tuples") if s == stream]


def finish(run: Run, condition: Any, timeout: float) -> None:
    run.wait_until(condition, timeout)
    run.wait_idle()


# --- on both engines ----------------------------------------------------------------------


def test_every_record_of_the_three_formats_is_emitted_and_acked_once(
    engine: Engine, tmp_path: Path
) -> None:
    """Exact tuples of several files in each format; malformed records on ``errors``
    with their file and line; every message id acked exactly once, none failed."""
    lines, jsonl, table = (tmp_path / name for name in ("lines", "jsonl", "csv"))
    for directory in (lines, jsonl, table):
        directory.mkdir()
    write(lines / "a.txt", "alpha\nbeta\n\ngamma\n")
    write(lines / "b.txt", "delta\r\nepsilon\n")
    write(jsonl / "1.jsonl", '{"user": "ann", "n": 1}\n{"n": 2, "user": "bob"}\n')
    write(jsonl / "2.jsonl", '{"user": "cy", "n": 3}\nnot json\n\n[1, 2]\n{"user": "di"}\n')
    write(table / "x.csv", "user,n,city\nann,1,Oslo\nbob,2,Rome\n")
    write(table / "y.csv", 'n,user\n3,"cy, jr"\n4\n5,di\n')
    builder = TopologyBuilder()
    spouts = {
        "lines": RecordingFileSpout(lines, "*.txt"),
        "jsonl": RecordingFileSpout(jsonl, "*.jsonl", "jsonl", fields=["user", "n"]),
        "csv": RecordingFileSpout(table, format="csv", fields=["user", "n"]),
    }
    recorder = Recorder()
    sink = builder.set_bolt("sink", recorder)
    for name, spout in spouts.items():
        builder.set_spout(name, spout)
        sink.shuffle_grouping(name).shuffle_grouping(name, "errors")
    expected_acks = {"lines": 6, "jsonl": 6, "csv": 5}
    with engine.running(builder.create_topology(), name="formats") as run:
        finish(
            run,
            lambda: all(
                len(spouts[n].record.get("acked")) >= count for n, count in expected_acks.items()
            ),
            engine.timeout,
        )
        assert run.errors() == {}
    got = recorder.record.get("tuples")
    by: dict[tuple[str, str], list[Any]] = {}
    for component, stream, _, values in got:
        by.setdefault((component, stream), []).append(values)
    by = {key: sorted(rows, key=repr) for key, rows in by.items()}
    assert by[("lines", "default")] == sorted(
        [["alpha"], ["beta"], [""], ["gamma"], ["delta"], ["epsilon"]], key=repr
    )
    assert by[("jsonl", "default")] == [["ann", 1], ["bob", 2], ["cy", 3]]
    assert by[("jsonl", "errors")] == [
        ["2.jsonl", 2, "not json", "invalid JSON: Expecting value: line 1 column 1 (char 0)"],
        ["2.jsonl", 4, "[1, 2]", "not a JSON object but list"],
        ["2.jsonl", 5, '{"user": "di"}', "missing field(s) ['n']"],
    ]
    assert by[("csv", "default")] == [["ann", "1"], ["bob", "2"], ["cy, jr", "3"], ["di", "5"]]
    assert by[("csv", "errors")] == [["y.csv", 3, "4", "1 columns, expected 2"]]
    assert ("lines", "errors") not in by
    assert sorted(spouts["lines"].record.get("acked")) == [
        ("a.txt", 1), ("a.txt", 2), ("a.txt", 3), ("a.txt", 4), ("b.txt", 1), ("b.txt", 2)
    ]  # fmt: skip
    # The blank line 3 of 2.jsonl and the CSV headers are consumed, not emitted.
    assert sorted(spouts["jsonl"].record.get("acked")) == [
        ("1.jsonl", 1), ("1.jsonl", 2), ("2.jsonl", 1), ("2.jsonl", 2), ("2.jsonl", 4),
        ("2.jsonl", 5),
    ]  # fmt: skip
    assert sorted(spouts["csv"].record.get("acked")) == [
        ("x.csv", 2), ("x.csv", 3), ("y.csv", 2), ("y.csv", 3), ("y.csv", 4)
    ]  # fmt: skip
    assert all(spout.record.get("failed") == [] for spout in spouts.values())


def test_failed_records_are_replayed_until_acked(engine: Engine, tmp_path: Path) -> None:
    """A bolt fails the even-numbered lines once: each is failed once, emitted again,
    and acked; every line is acked exactly once."""
    names = [f"f{n}-{i}" for n in range(2) for i in range(1, 11)]
    write(tmp_path / "f0.txt", "".join(f"{name}\n" for name in names[:10]))
    write(tmp_path / "f1.txt", "".join(f"{name}\n" for name in names[10:]))
    spout = RecordingFileSpout(tmp_path, batch=4)
    bolt = FailEvenLinesOnce()
    builder = TopologyBuilder()
    builder.set_spout("files", spout)
    builder.set_bolt("flaky", bolt).shuffle_grouping("files")
    with engine.running(builder.create_topology(), name="replays") as run:
        finish(run, lambda: len(spout.record.get("acked")) >= 20, engine.timeout)
    every_line = [(f"f{n}.txt", i) for n in range(2) for i in range(1, 11)]
    assert sorted(spout.record.get("acked")) == every_line
    assert sorted(spout.record.get("failed")) == [(f, i) for f, i in every_line if i % 2 == 0]
    seen = Counter(bolt.record.get("seen"))
    assert seen == {name: 2 if int(name.rsplit("-")[1]) % 2 == 0 else 1 for name in names}


def test_finished_files_move_to_the_done_directory_and_new_files_are_read(
    engine: Engine, tmp_path: Path
) -> None:
    """Files are moved once every line is acked; a file renamed in while the topology
    runs is read and moved too; the progress records of moved files are removed."""
    source, done = tmp_path / "in", tmp_path / "done"
    source.mkdir()
    write(source / "a.log", "a1\na2\n")
    write(source / "b.log", "b1\n")
    (source / "skipped.tmp").write_text("not matching\n")
    (source / ".hidden.log").write_text("hidden\n")
    spout = RecordingFileSpout(source, "*.log", done_directory=done)
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("files", spout)
    builder.set_bolt("sink", recorder).shuffle_grouping("files")
    with engine.running(builder.create_topology(), name="done") as run:
        run.wait_until(
            lambda: sorted(os.listdir(done)) == ["a.log", "b.log"] if done.exists() else False,
            engine.timeout,
        )
        write(source / "c.log", "c1\nc2\nc3\n")
        run.wait_until(lambda: "c.log" in os.listdir(done), engine.timeout)
        run.wait_idle()
        assert run.errors() == {}
    assert sorted(os.listdir(source)) == [".hidden.log", PROGRESS_DIRECTORY, "skipped.tmp"]
    assert sorted(os.listdir(done)) == ["a.log", "b.log", "c.log"]
    assert (done / "c.log").read_text() == "c1\nc2\nc3\n"
    assert ProgressStore(str(source)).read_all() == {}
    assert sorted(v[0] for v in tuples(recorder.record)) == ["a1", "a2", "b1", "c1", "c2", "c3"]
    assert sorted(spout.record.get("acked")) == [
        ("a.log", 1), ("a.log", 2), ("b.log", 1), ("c.log", 1), ("c.log", 2), ("c.log", 3)
    ]  # fmt: skip


def test_several_tasks_read_each_file_exactly_once(engine: Engine, tmp_path: Path) -> None:
    """Three spout tasks: each file is read by the task its name hashes to, and every
    line is emitted and acked once."""
    files = {f"part-{n}.txt": [f"p{n}-{i}" for i in range(5)] for n in range(8)}
    for name, rows in files.items():
        write(tmp_path / name, "".join(f"{row}\n" for row in rows))
    spout = RecordingFileSpout(tmp_path)
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("files", spout, 3)
    builder.set_bolt("sink", recorder).shuffle_grouping("files")
    topology = builder.create_topology()
    with engine.running(topology, name="tasks") as run:
        finish(run, lambda: len(spout.record.get("acked")) >= 40, engine.timeout)
        tasks = run.info().components["files"].tasks
    assert sorted(spout.record.get("acked")) == sorted(
        (name, i) for name in files for i in range(1, 6)
    )
    got = recorder.record.get("tuples")
    assert sorted(values[0] for *_, values in got) == sorted(
        r for rows in files.values() for r in rows
    )
    for _, _, task, values in got:
        name = f"part-{values[0][1:].split('-')[0]}.txt"
        assert task == tasks[owner(name, 3)]
    assert len({task for _, _, task, _ in got}) > 1


WRONG_OPTIONS = {
    "format": ({"format": "xml"}, "format must be one of 'lines', 'jsonl', 'csv', got 'xml'"),
    "missing": ({"directory": "missing"}, "directory '{tmp}/missing' does not exist"),
    "batch": ({"batch": 0}, "batch must be an int > 0, got 0"),
    "fields": ({"fields": ["a", "b"]}, "the lines format has one field, got ['a', 'b']"),
    "header": ({"format": "csv", "header": False}, "a CSV file without header needs fields"),
    "done": ({"done_directory": ""}, "done_directory must differ from directory"),
}


@pytest.mark.parametrize("case", list(WRONG_OPTIONS))
def test_wrong_options_fail_the_submission_naming_the_component(
    engine: Engine, tmp_path: Path, case: str
) -> None:
    options, message = WRONG_OPTIONS[case]
    arguments: dict[str, Any] = {"directory": str(tmp_path), **options}
    for key in ("directory", "done_directory"):
        if key in options:
            arguments[key] = os.path.join(tmp_path, options[key])
    builder = TopologyBuilder()
    builder.set_spout("my-files", FileSpout(**arguments))
    builder.set_bolt("sink", Recorder()).shuffle_grouping("my-files")
    cluster = engine.new_cluster()
    with pytest.raises(InvalidTopologyError) as caught:
        cluster.submit_topology("wrong", engine.conf(), builder.create_topology())
    assert str(caught.value).startswith("component 'my-files' (FileSpout): ")
    assert message.format(tmp=tmp_path) in str(caught.value)


# --- local engine ------------------------------------------------------------------------


class HoldLine(Bolt):
    """Never acks the tuple whose line is ``held`` (its tree stays pending); acks the
    rest."""

    def __init__(self, held: str) -> None:
        self.held = held

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        if tup.values[0] != self.held:
            self.collector.ack(tup)


def run_local(topology: Any, condition: Any, conf: dict[str, Any] | None = None) -> Run:
    from squall import LocalCluster

    with LocalCluster() as cluster:
        cluster.submit_topology("files", conf or {}, topology)
        run = Run(cluster, "files")
        run.wait_until(condition, 10.0)
        cluster.kill_topology("files")
    return run


def test_a_restart_resumes_after_the_acked_prefix(tmp_path: Path) -> None:
    """Line 3 is never acked while 4 and 5 are: the record keeps the prefix at line 2,
    and a restarted topology emits lines 3, 4 and 5 again, never 1 or 2."""
    write(tmp_path / "data.txt", "l1\nl2\nl3\nl4\nl5\n")
    first = RecordingFileSpout(tmp_path)
    builder = TopologyBuilder()
    builder.set_spout("files", first)
    builder.set_bolt("hold", HoldLine("l3")).shuffle_grouping("files")
    run_local(builder.create_topology(), lambda: len(first.record.get("acked")) == 4)
    record = ProgressStore(str(tmp_path)).read_all()["data.txt"]
    assert (record.line, record.offset, record.done) == (2, 6, False)

    second = RecordingFileSpout(tmp_path)
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("files", second)
    builder.set_bolt("sink", recorder).shuffle_grouping("files")
    run_local(builder.create_topology(), lambda: len(second.record.get("acked")) == 3)
    assert sorted(v[0] for v in tuples(recorder.record)) == ["l3", "l4", "l5"]
    assert sorted(second.record.get("acked")) == [("data.txt", 3), ("data.txt", 4), ("data.txt", 5)]
    record = ProgressStore(str(tmp_path)).read_all()["data.txt"]
    assert (record.line, record.offset, record.done) == (5, 15, True)


def test_an_incomplete_line_waits_and_grown_or_replaced_files_are_read(tmp_path: Path) -> None:
    """A trailing line without its line end is emitted once completed; a finished file
    (no done directory) that grows is read on; one replaced under its name is read from
    its start."""
    path = tmp_path / "grow.txt"
    path.write_text("one\ntw")
    spout = RecordingFileSpout(tmp_path)
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("files", spout)
    builder.set_bolt("sink", recorder).shuffle_grouping("files")

    def texts() -> list[str]:
        return [v[0] for v in tuples(recorder.record)]

    from squall import LocalCluster
    from tests.helpers import wait_until

    with LocalCluster() as cluster:
        cluster.submit_topology("grow", {}, builder.create_topology())
        wait_until(lambda: texts() == ["one"], 10.0)
        with path.open("a") as handle:
            handle.write("o\n")
        wait_until(lambda: texts() == ["one", "two"], 10.0)
        wait_until(lambda: ProgressStore(str(tmp_path)).read_all()["grow.txt"].done, 10.0)
        with path.open("a") as handle:
            handle.write("three\n")
        wait_until(lambda: texts() == ["one", "two", "three"], 10.0)
        write(path, "new\n")
        wait_until(lambda: texts() == ["one", "two", "three", "new"], 10.0)
        cluster.kill_topology("grow")
    assert Counter(spout.record.get("acked"))[("grow.txt", 1)] == 2  # "one", then "new"


def test_a_directory_that_goes_away_is_reported_and_reading_resumes(tmp_path: Path) -> None:
    """The directory vanishes mid-run: the spout reports an error naming itself and the
    directory, emits nothing meanwhile, and reads on once it is back; every line is
    emitted once."""
    from squall import LocalCluster
    from tests.helpers import wait_until

    directory, away = tmp_path / "in", tmp_path / "away"
    directory.mkdir()
    write(directory / "a.txt", "a1\na2\n")
    spout = RecordingFileSpout(directory)
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("files", spout)
    builder.set_bolt("sink", recorder).shuffle_grouping("files")
    with LocalCluster() as cluster:
        cluster.submit_topology("outage", {}, builder.create_topology())
        wait_until(lambda: len(spout.record.get("acked")) == 2, 10.0)
        os.rename(directory, away)
        wait_until(
            lambda: cluster.get_topology_info("outage").components["files"].errors_total >= 1
        )
        write(away / "b.txt", "b1\n")
        os.rename(away, directory)
        wait_until(lambda: len(spout.record.get("acked")) == 3, 10.0)
        errors = cluster.get_topology_info("outage").components["files"].errors
        cluster.kill_topology("outage")
    first = errors[0].error.strip().splitlines()[-1]
    assert "ConnectorUnavailableError: FileSpout 'files' cannot reach " + str(directory) in first
    assert "(attempt 1; retrying in 0.1 s)" in first
    assert sorted(v[0] for v in tuples(recorder.record)) == ["a1", "a2", "b1"]


class FakeContext:
    """What a FileSpout's ``open`` reads from its context."""

    component_id = "files"
    task_id = 1
    task_index = 0
    clock = SYSTEM_CLOCK

    def get_component_tasks(self, component_id: str) -> list[int]:
        return [1]


class FakeCollector:
    def __init__(self) -> None:
        self.emitted: list[tuple[list[Any], Any, str]] = []
        self.errors: list[BaseException] = []

    def emit(self, values: list[Any], msg_id: Any = None, stream: str = "default") -> list[int]:
        self.emitted.append((values, msg_id, stream))
        return [2]

    def report_error(self, error: BaseException) -> None:
        self.errors.append(error)


def test_a_spout_restored_from_its_pickled_state_continues_where_it_stood(
    tmp_path: Path,
) -> None:
    """Spark snapshots a spout with pickle after each micro-batch and restores it after
    a restart: the restored spout has no open file, continues reading after the last
    line emitted, and replays and acks its pending lines."""
    from squall.spark.execute.snapshots import picklable_state, restore_state

    write(tmp_path / "a.csv", "k,v\n" + "".join(f"k{i},{i}\n" for i in range(1, 8)))
    collector, context = FakeCollector(), FakeContext()
    spout = FileSpout(tmp_path, format="csv", fields=["v"], batch=3, **FAST)
    spout.open({}, context, collector)  # type: ignore[arg-type]
    spout.next_tuple()  # 3 lines: the header, then 2 records
    assert [e[:2] for e in collector.emitted] == [(["1"], ("a.csv", 2)), (["2"], ("a.csv", 3))]
    spout.ack(("a.csv", 2))
    engine = {"collector": collector, "context": context}
    payload, skipped = picklable_state(spout, engine)
    assert skipped == []
    restored = restore_state(FileSpout(tmp_path), payload, engine)
    assert restored is not spout and restored._reader is None
    restored.fail(("a.csv", 3))
    collector.emitted.clear()
    restored.next_tuple()  # the replay, then 2 new lines (the columns were kept)
    assert [e[:2] for e in collector.emitted] == [
        (["2"], ("a.csv", 3)), (["3"], ("a.csv", 4)), (["4"], ("a.csv", 5)),
    ]  # fmt: skip
    for line in (3, 5, 4):
        restored.ack(("a.csv", line))
    restored.close()
    record = ProgressStore(str(tmp_path)).read_all()["a.csv"]
    assert (record.line, record.done) == (5, False)
    assert pickle.loads(pickle.dumps(FileSpout(tmp_path))).directory == str(tmp_path)


def test_progress_records_are_written_whole(tmp_path: Path) -> None:
    """A record is JSON in ``.squall-progress/``, replaced atomically (no temporary file
    left behind), one per file, names quoted."""
    from squall.connectors.files import ProgressRecord

    store = ProgressStore(str(tmp_path))
    store.write([ProgressRecord("a b/c.txt".replace("/", "_"), 7, 3, 12)])
    store.write([ProgressRecord("a b_c.txt", 7, 4, 20, True)])
    assert os.listdir(tmp_path / PROGRESS_DIRECTORY) == ["a%20b_c.txt.json"]
    content = json.loads((tmp_path / PROGRESS_DIRECTORY / "a%20b_c.txt.json").read_text())
    assert content == {"file": "a b_c.txt", "inode": 7, "line": 4, "offset": 20, "done": True}
    assert store.read_all() == {"a b_c.txt": ProgressRecord("a b_c.txt", 7, 4, 20, True)}
    store.remove("a b_c.txt")
    assert store.read_all() == {}


def test_acking_off_counts_each_line_as_acked_when_emitted(tmp_path: Path) -> None:
    """With no ackers, a line is acked as it is emitted (at-most-once): the failing
    bolt's tuples are not replayed, and the file is finished."""
    write(tmp_path / "a.txt", "x1\nx2\n")

    class Reject(BasicBolt):
        def execute(self, tup: Any, collector: Any) -> None:
            raise FailedException("no")

    spout = RecordingFileSpout(tmp_path)
    builder = TopologyBuilder()
    builder.set_spout("files", spout)
    builder.set_bolt("reject", Reject()).shuffle_grouping("files")
    run_local(
        builder.create_topology(),
        lambda: (
            ProgressStore(str(tmp_path)).read_all().get("a.txt") is not None
            and ProgressStore(str(tmp_path)).read_all()["a.txt"].done
        ),
        Config().set_num_ackers(0),
    )
    assert sorted(spout.record.get("acked")) == [("a.txt", 1), ("a.txt", 2)]
    assert spout.record.get("failed") == []


def test_a_resumed_csv_file_reads_its_header_again(tmp_path: Path) -> None:
    """A new spout task (a restart) resumes a CSV file after its recorded prefix and
    maps the columns of the file's first line."""
    write(tmp_path / "t.csv", "id,word\n1,fig\n2,kiwi\n3,plum\n")
    first_collector = FakeCollector()
    first = FileSpout(tmp_path, format="csv", fields=["word", "id"], batch=2, **FAST)
    first.open({}, FakeContext(), first_collector)  # type: ignore[arg-type]
    first.next_tuple()
    assert [e[:2] for e in first_collector.emitted] == [(["fig", "1"], ("t.csv", 2))]
    first.ack(("t.csv", 2))
    first.close()
    collector = FakeCollector()
    second = FileSpout(tmp_path, format="csv", fields=["word", "id"], **FAST)
    second.open({}, FakeContext(), collector)  # type: ignore[arg-type]
    second.next_tuple()
    assert [e[:2] for e in collector.emitted] == [
        (["kiwi", "2"], ("t.csv", 3)), (["plum", "3"], ("t.csv", 4)),
    ]  # fmt: skip


@pytest.mark.parametrize("engine", ["spark"], indirect=True)
def test_a_spark_query_restarted_on_its_checkpoint_resumes_the_files(
    engine: Engine, tmp_path: Path
) -> None:
    """A Spark query is stopped while reading, then started again on its checkpoint: the
    spout is restored from its last snapshot, emits no line of the recorded acked
    prefix again, and every line is processed."""
    data = tmp_path / "data"
    data.mkdir()
    lines = {f"f{n}.txt": [f"f{n}-{i}" for i in range(1, 31)] for n in range(2)}
    for name, rows in lines.items():
        write(data / name, "".join(f"{row}\n" for row in rows))
    recorder = Recorder()

    def topology() -> Any:
        builder = TopologyBuilder()
        builder.set_spout("files", FileSpout(data, batch=4, **FAST)).set_max_spout_pending(8)
        builder.set_bolt("sink", recorder).shuffle_grouping("files")
        return builder.create_topology()

    with engine.running(topology(), name="resume", checkpoint="ck") as run:
        run.wait_until(lambda: len(tuples(recorder.record)) >= 16, engine.timeout)
    records = ProgressStore(str(data)).read_all()
    prefix = {name: records[name].line if name in records else 0 for name in lines}
    assert sum(prefix.values()) < 60
    before = len(tuples(recorder.record))
    with engine.running(topology(), name="resume", checkpoint="ck") as run:
        run.wait_until(
            lambda: (
                all(r.done for r in ProgressStore(str(data)).read_all().values())
                and len(ProgressStore(str(data)).read_all()) == 2
            ),
            engine.timeout,
        )
    seen = [values[0] for values in tuples(recorder.record)]
    assert set(seen) == {row for rows in lines.values() for row in rows}
    for text in seen[before:]:
        name, number = text.split("-")
        assert int(number) > prefix[f"{name}.txt"], (text, prefix)


def test_without_fields_a_record_is_the_object_or_the_row(tmp_path: Path) -> None:
    write(tmp_path / "a.jsonl", '{"user": "ann", "n": 1}\n')
    write(tmp_path / "b.csv", "user,n\nbob,2\n")
    collector = FakeCollector()
    for pattern, format_name in (("*.jsonl", "jsonl"), ("*.csv", "csv")):
        spout = FileSpout(tmp_path, pattern, format_name, **FAST)
        spout.open({}, FakeContext(), collector)  # type: ignore[arg-type]
        spout.next_tuple()
        spout.close()
    assert collector.emitted == [
        ([{"user": "ann", "n": 1}], ("a.jsonl", 1), "default"),
        ([{"user": "bob", "n": "2"}], ("b.csv", 2), "default"),
    ]
    declared = FileSpout(tmp_path, format="jsonl")
    from squall.model.declarer import OutputFieldsDeclarer

    declarer = OutputFieldsDeclarer()
    declared.declare_output_fields(declarer)
    assert {s: list(d.fields) for s, d in declarer.streams.items()} == {
        "default": ["record"],
        "errors": ["file", "line", "text", "error"],
    }
