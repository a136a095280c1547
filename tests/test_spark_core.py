"""Core (spout/bolt) topologies on SparkCluster: what only the Spark engine has to show.

The behaviour both engines share (groupings, acking, errors, windows) is tested by the
conformance suites, parametrized over the engines. Here: submit-time rejections, bolt
state kept warm and snapshotted (exactly once across a batch run again and across a
driver killed mid-batch), ``prepare`` once per task life, activation, and the batch
figures of ``get_topology_info``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from squall import BasicBolt, Bolt, Config, Fields, InvalidTopologyError, Spout, TopologyBuilder
from squall.spark import SparkCluster
from squall.testing import CapturingBolt, FixedTupleSpout, SharedRecord
from tests.spark_core import (
    CONF,
    CRASH_WORDS,
    counting_topology,
    read_lines,
    true_counts,
    word_list,
)


@pytest.fixture
def cluster(spark: Any, tmp_path: Path) -> Any:
    """A SparkCluster on the session's Spark, checkpoints under ``tmp_path``."""
    spark_cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path / "checkpoint"))
    yield spark_cluster
    spark_cluster.shutdown()


def count_lines(out: Path) -> list[tuple[str, int]]:
    """The sink's ``(word, count)`` lines."""
    pairs = []
    for line in read_lines(str(out / "counts")):
        word, count = line.split()
        pairs.append((word, int(count)))
    return pairs


def every_count_once(words: list[str]) -> Counter[tuple[str, int]]:
    """What an exactly-once running count emits: each ``(word, n)`` for n in 1..total."""
    return Counter(
        (word, n) for word, total in true_counts(words).items() for n in range(1, total + 1)
    )


# -- rejected at submit ------------------------------------------------------------------


class Relay(BasicBolt):
    outputs = ["n"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0]])


def test_a_cycle_is_rejected_naming_it_and_suggesting_local_cluster(cluster: Any) -> None:
    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[1]], ["n"]))
    builder.set_bolt("a", Relay()).shuffle_grouping("numbers").shuffle_grouping("b")
    builder.set_bolt("b", Relay()).shuffle_grouping("a")
    with pytest.raises(InvalidTopologyError) as raised:
        cluster.submit_topology("cyclic", {}, builder.create_topology())
    message = str(raised.value)
    assert "cycle" in message and "a -> b -> a" in message
    assert "LocalCluster" in message


class HoldsALock(BasicBolt):
    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()

    def execute(self, tup: Any, collector: Any) -> None:
        """Nothing."""


def test_a_component_that_cannot_be_pickled_is_rejected_naming_it(cluster: Any) -> None:
    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[1]], ["n"]))
    builder.set_bolt("locked", HoldsALock()).shuffle_grouping("numbers")
    with pytest.raises(InvalidTopologyError, match=r"'locked'.*locked\.lock"):
        cluster.submit_topology("unpicklable", {}, builder.create_topology())


# -- bolt state ---------------------------------------------------------------------------


class PrepareRecorder(Bolt):
    """Records ``(task id, process id)`` at each ``prepare`` and ``(task id, n, process
    id)`` for the n-th tuple of its task (its state)."""

    def __init__(self) -> None:
        self.record = SharedRecord()

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.task_id = context.task_id
        self.executed = 0
        self.record.append("prepared", (self.task_id, os.getpid()))

    def execute(self, tup: Any) -> None:
        self.executed += 1
        self.record.append("executed", (self.task_id, self.executed, os.getpid()))
        self.collector.ack(tup)


def test_prepare_runs_once_per_task_life_and_state_carries_over_batches(cluster: Any) -> None:
    """10 micro-batches of 4 tuples over 2 tasks: each task is prepared once in each
    Python worker that runs it (Spark keeps a few), not once per batch, and its count
    carries over from batch to batch and from worker to worker."""
    items = [[n] for n in range(40)]
    spout = FixedTupleSpout(items, ["n"])
    bolt = PrepareRecorder()
    builder = TopologyBuilder()
    builder.set_spout("numbers", spout)
    builder.set_bolt("recorder", bolt, 2).shuffle_grouping("numbers")
    conf = {**CONF, "topology.spark.batch.max.tuples": 4}
    cluster.submit_topology("warm", conf, builder.create_topology())
    assert cluster.wait_idle("warm")
    figures = cluster.get_topology_info("warm").spark
    assert figures is not None and figures.first.batches == 10
    prepared = bolt.record.get("prepared")
    assert len(prepared) == len(set(prepared))  # once per task and worker process
    assert len(prepared) < 2 * 10  # fewer than (task, batch) runs: warm workers reused
    executed = bolt.record.get("executed")
    assert {(task, pid) for task, _, pid in executed} == set(prepared)
    by_task: dict[int, list[int]] = {}
    for task, n, _ in executed:
        by_task.setdefault(task, []).append(n)
    # Each task's count runs 1, 2, 3... across batches and workers (state restored from
    # its snapshot when another worker runs it): 20 tuples each (shuffle).
    assert {task: sorted(ns) for task, ns in by_task.items()} == {
        task: list(range(1, 21)) for task in by_task
    }
    assert len(by_task) == 2
    assert sorted(spout.acked) == list(range(40))


def test_a_task_run_again_in_a_new_worker_starts_from_the_snapshot(
    cluster: Any, tmp_path: Path
) -> None:
    """A counting task's Python worker dies (SIGKILL) after updating its counts in the
    middle of a batch; Spark runs the task again in a new worker, which restores the
    task's snapshot from before the batch: every running count is emitted once."""
    out = tmp_path / "out"
    out.mkdir()
    kill = tmp_path / "kill"
    kill.write_text("1")
    words = word_list(30)
    cluster.submit_topology("rerun", CONF, counting_topology(words, str(out), count_kill=str(kill)))
    assert cluster.wait_idle("rerun")
    assert kill.read_text() == "0"
    assert Counter(count_lines(out)) == every_count_once(words)
    assert sorted(int(n) for n in read_lines(str(out / "acked"))) == list(range(30))


def test_a_batch_run_again_restores_tasks_that_had_finished_it(
    cluster: Any, tmp_path: Path
) -> None:
    """The sink's worker dies as often as Spark retries a task (4 times on the test
    session's ``local[2, 4]``), so the micro-batch fails after the counting tasks have
    finished it, warm in their workers; the batch is run again and the counting tasks
    start it again from their snapshots: every running count is emitted once."""
    out = tmp_path / "out"
    out.mkdir()
    kill = tmp_path / "kill"
    kill.write_text("4")
    words = word_list(30)
    topology = counting_topology(words, str(out), sink_kill=str(kill))
    cluster.submit_topology("retry", {**CONF, "topology.spark.batch.retries": 2}, topology)
    assert cluster.wait_idle("retry")
    assert kill.read_text() == "0"
    assert Counter(count_lines(out)) == every_count_once(words)
    info = cluster.get_topology_info("retry")
    assert info.extra["retries"] == 1
    assert sorted(int(n) for n in read_lines(str(out / "acked"))) == list(range(30))
    assert read_lines(str(out / "failed")) == []


def _session_processes(session: int) -> list[int]:
    """Process ids in session ``session`` (the child and everything it started)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session:
            found.append(int(entry))
    return found


def test_a_driver_killed_mid_batch_resumes_with_exact_bolt_state(
    spark: Any, tmp_path: Path
) -> None:
    """A driver (its JVM and Python workers with it) is killed with SIGKILL while a
    counting task is in the middle of a batch. A new SparkCluster on the same
    checkpoint directory replays that batch from the state before it: every running
    count is emitted exactly once, and every spout tuple is acked exactly once."""
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    out.mkdir()
    flag, reached = tmp_path / "stall", tmp_path / "reached"
    flag.touch()
    root = Path(__file__).resolve().parent.parent
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.spark_core",
            str(checkpoint),
            str(out),
            str(flag),
            str(reached),
        ],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 150
        while not reached.exists():
            assert child.poll() is None, (
                child.stderr.read().decode()[-3000:] if child.stderr else ""
            )
            assert time.monotonic() < deadline, "the child never reached the stall"
            time.sleep(0.1)
    finally:
        for pid in _session_processes(child.pid):
            with contextlib.suppress(ProcessLookupError):  # gone with one killed before
                os.kill(pid, signal.SIGKILL)
        child.wait()
    before = count_lines(out)
    assert before and Counter(before) != every_count_once(CRASH_WORDS)  # killed mid-run

    flag.unlink()
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(checkpoint))
    try:
        cluster.submit_topology("crash", CONF, counting_topology(CRASH_WORDS, str(out)))
        assert cluster.wait_idle("crash")
    finally:
        cluster.shutdown()
    assert Counter(count_lines(out)) == every_count_once(CRASH_WORDS)
    acked = [int(n) for n in read_lines(str(out / "acked"))]
    assert sorted(acked) == list(range(len(CRASH_WORDS)))


# -- spouts on the driver side -----------------------------------------------------------


class LifecycleSpout(Spout):
    """Emits ``total`` numbers; records its lifecycle calls."""

    outputs = ["n"]

    def __init__(self, total: int) -> None:
        self.total = total
        self.record = SharedRecord()

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.next = 0
        self.record.append("calls", "open")

    def activate(self) -> None:
        self.record.append("calls", "activate")

    def deactivate(self) -> None:
        self.record.append("calls", "deactivate")

    def next_tuple(self) -> None:
        if self.next < self.total:
            self.collector.emit([self.next], self.next)
            self.next += 1

    def ack(self, msg_id: Any) -> None:
        self.record.append("acked", msg_id)


def test_a_deactivated_topology_polls_no_spout_until_activated(cluster: Any) -> None:
    spout = LifecycleSpout(20)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("numbers", spout)
    builder.set_bolt("sink", sink).shuffle_grouping("numbers")
    cluster.submit_topology("switch", CONF, builder.create_topology())
    assert cluster.wait_idle("switch")
    assert sorted(spout.record.get("acked")) == list(range(20))
    cluster.deactivate("switch")
    assert cluster.wait_idle("switch")
    assert spout.record.get("calls") == ["open", "activate", "deactivate"]
    cluster.activate("switch")
    assert cluster.wait_idle("switch")
    assert spout.record.get("calls") == ["open", "activate", "deactivate", "activate"]
    assert sorted(v[0] for v in sink.values()) == list(range(20))


class ThreadRecordingSpout(Spout):
    """Emits ``total`` numbers, one per ``next_tuple``; records the thread of each of
    its calls and each emit."""

    outputs = ["n"]

    def __init__(self, total: int) -> None:
        self.total = total
        self.record = SharedRecord()

    def _called(self, method: str) -> None:
        self.record.append("threads", (method, threading.get_ident()))

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self._called("open")
        self.collector = collector
        self.next = 0

    def activate(self) -> None:
        self._called("activate")

    def next_tuple(self) -> None:
        self._called("next_tuple")
        if self.next < self.total:
            self.record.append("emitted", self.next)
            self.collector.emit([self.next], self.next)
            self.next += 1

    def ack(self, msg_id: Any) -> None:
        self._called("ack")
        self.record.append("acked", msg_id)


class AwaitsTheNextEmit(BasicBolt):
    """For each number but the last, waits (up to 30 s) until the spout has emitted
    the next one, and records whether it did while this tuple was being executed."""

    def __init__(self, record: SharedRecord, total: int) -> None:
        self.record = record
        self.total = total

    def execute(self, tup: Any, collector: Any) -> None:
        n = tup[0]
        if n < self.total - 1:
            deadline = time.monotonic() + 30
            while n + 1 not in self.record.get("emitted") and time.monotonic() < deadline:
                time.sleep(0.005)
            self.record.append("overlapped", (n, n + 1 in self.record.get("emitted")))


def test_the_spout_polls_its_next_batch_while_bolts_run_the_current_one(cluster: Any) -> None:
    total = 3
    spout = ThreadRecordingSpout(total)
    builder = TopologyBuilder()
    builder.set_spout("numbers", spout)
    builder.set_bolt("await", AwaitsTheNextEmit(spout.record, total)).shuffle_grouping("numbers")
    conf = {**CONF, "topology.spark.batch.max.tuples": 1}
    cluster.submit_topology("overlap", conf, builder.create_topology())
    assert cluster.wait_idle("overlap", timeout_secs=120)

    assert sorted(spout.record.get("acked")) == list(range(total))
    # Number n + 1 was emitted while the bolt ran the micro-batch of number n.
    assert sorted(spout.record.get("overlapped")) == [(n, True) for n in range(total - 1)]
    calls = spout.record.get("threads")
    assert {method for method, _ in calls} == {"open", "activate", "next_tuple", "ack"}
    assert len({thread for _, thread in calls}) == 1  # every call on the spout's thread


def test_topology_info_reports_components_and_batch_figures(cluster: Any) -> None:
    words = word_list(12)
    spout = FixedTupleSpout([[w] for w in words], ["word"])
    builder = TopologyBuilder()
    builder.set_spout("words", spout)
    builder.set_bolt("count", Relay(), 2).fields_grouping("words", Fields("word"))
    cluster.submit_topology(
        "figures", {**CONF, Config.TOPOLOGY_ACKER_EXECUTORS: 1}, builder.create_topology()
    )
    assert cluster.wait_idle("figures")
    info = cluster.get_topology_info("figures")
    spout_stats, bolt_stats = info.components["words"], info.components["count"]
    assert (spout_stats.emitted, spout_stats.acked, spout_stats.failed) == (12, 12, 0)
    assert (bolt_stats.executed, bolt_stats.acked, bolt_stats.emitted) == (12, 12, 12)
    assert sum(s["executed"] for s in bolt_stats.task_stats.values()) == 12
    assert info.extra["batches"] == 3  # 12 tuples, 5 per batch
    assert info.extra["rows_total"] == 12
    assert info.extra["last_batch_id"] == 2
    assert info.extra["last_batch_ms"] > 0


def test_squall_run_runs_the_word_count_example_on_spark(spark: Any) -> None:
    from click.testing import CliRunner

    from squall.cli.main import main

    example = Path(__file__).resolve().parent.parent / "examples" / "word_count.py"
    arguments = ["run", str(example), "--engine", "spark", "--seconds", "4", "--no-live"]
    arguments += ["--drain", "60", "--conf", "topology.spark.batch.interval.millis=50"]
    result = CliRunner().invoke(main, arguments, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "on SparkCluster" in result.output
    rows = {
        line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:]]
        for line in result.output.splitlines()
        if line.startswith("│") and line.split("│")[1].strip() in ("sentences", "split", "count")
    }
    assert set(rows) == {"sentences", "split", "count"}, result.output


class UnreachableSource(Spout):
    outputs = ["n"]

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        raise ConnectionError("queue host unreachable")

    def next_tuple(self) -> None:
        """Never called."""


class NoDatabase(BasicBolt):
    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        raise ConnectionError("database unreachable")

    def execute(self, tup: Any, collector: Any) -> None:
        """Never called."""


def test_open_or_prepare_that_raises_fails_the_topology_naming_the_component(
    cluster: Any,
) -> None:
    """On Spark, spouts open in the source's process and bolts prepare in the Python
    workers, after submit: the topology fails, and its errors name the component."""
    builder = TopologyBuilder()
    builder.set_spout("queue", UnreachableSource())
    builder.set_bolt("sink", CapturingBolt()).shuffle_grouping("queue")
    cluster.submit_topology("no-queue", CONF, builder.create_topology())
    assert not cluster.wait_idle("no-queue")
    info = cluster.get_topology_info("no-queue")
    assert info.status == "FAILED"
    assert (
        "spout 'queue' task 2: open raised ConnectionError: queue host unreachable"
        in (info.extra["errors"][-1])
    )

    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[1]], ["n"]))
    builder.set_bolt("store", NoDatabase()).shuffle_grouping("numbers")
    conf = {**CONF, "topology.spark.batch.retries": 0}
    cluster.submit_topology("no-database", conf, builder.create_topology())
    assert not cluster.wait_idle("no-database")
    info = cluster.get_topology_info("no-database")
    assert info.status == "FAILED"
    assert (
        "bolt 'store' task 3: prepare raised ConnectionError: database unreachable"
        in (info.extra["errors"][-1])
    )
