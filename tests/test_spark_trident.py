"""Trident topologies on SparkCluster: exact results, exactly-once across a failed
micro-batch and a restart, clear errors. One SparkSession serves the whole run."""

from __future__ import annotations

import os
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from squall import Config, Fields, InvalidTopologyError
from squall.model.config import effective_config
from squall.runtime.plan import build_plan
from squall.runtime.system import system_topology
from squall.spark import SparkCluster
from squall.testing import SharedRecord
from squall.trident import Count, FixedBatchSpout, Function, TridentTopology
from squall.trident.state import MemoryMapState, SqliteMapState, StateType
from tests.conftest import Engine

SENTENCES = [
    ["the cow jumped over the moon"],
    ["the man went to the store"],
    ["four score and seven years ago"],
    ["the cow"],
    ["a b c d e f g"],
]
TRUE_COUNTS = Counter(word for [sentence] in SENTENCES for word in sentence.split())


class Split(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup[0].split():
            collector.emit([word])


class FailWhileFlagged(Function):
    """Raises for the word ``four`` while ``flag`` exists (a crash after the state of the
    batch was written: it runs on the new values of the state)."""

    def __init__(self, flag: str) -> None:
        self.flag = flag

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[0] == "four" and os.path.exists(self.flag):
            raise RuntimeError("injected failure after the state update")
        collector.emit([tup[0]])


def word_count(factory: Any, flag: str | None = None) -> TridentTopology:
    topology = TridentTopology()
    spout = FixedBatchSpout(Fields("sentence"), 2, *SENTENCES)
    state = (
        topology.new_stream("sentences", spout)
        .each(Fields("sentence"), Split(), Fields("word"))
        .parallelism_hint(2)
        .group_by(Fields("word"))
        .persistent_aggregate(factory, Count(), Fields("count"))
        .parallelism_hint(2)
    )
    if flag is not None:
        state.new_values_stream().each(Fields("word"), FailWhileFlagged(flag), Fields("seen"))
    return topology


def plan_of(cluster: SparkCluster, name: str) -> list[Any]:
    """The stages of a running topology's first query, in order."""
    return cluster._get(name).queries[0].plan.segments


def counts(factory: Any) -> dict[str, int]:
    contents = (
        MemoryMapState.contents(factory)
        if type(factory).__name__.startswith("Memory")
        else SqliteMapState.contents(factory)
    )
    return {key[0]: value for key, value in contents.items()}


@pytest.mark.parametrize("state_type", [StateType.TRANSACTIONAL, StateType.OPAQUE])
@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_word_count_is_exact(
    spark: Any, tmp_path: Path, backend: str, state_type: StateType
) -> None:
    if backend == "memory":
        factory: Any = MemoryMapState.factory(state_type)
    else:
        factory = SqliteMapState.factory(str(tmp_path / "counts.db"), state_type)
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path / "checkpoint"))
    try:
        cluster.submit_topology("wc", Config(), word_count(factory).build())
        assert cluster.wait_idle("wc")
        info = cluster.get_topology_info("wc")
        assert counts(factory) == dict(TRUE_COUNTS)
        assert info.extra["batches"] >= 3  # five sentences in batches of two
        assert info.components["sentences"].emitted == len(SENTENCES)
        split, count = (info.components[s.component_id] for s in plan_of(cluster, "wc"))
        assert split.executed == len(SENTENCES)  # each sentence once, in its batch
        assert count.executed == split.transferred  # the partial counts
        words_per_batch = [
            len(set(" ".join(s[0] for s in SENTENCES[i : i + 2]).split())) for i in (0, 2, 4)
        ]
        assert count.emitted == sum(words_per_batch)  # the new values: each batch's words
        assert count.executed <= sum(words_per_batch) * 2  # combined within each task
        for stage in (split, count):  # each tuple at its task's batch mean, all counted
            execute = stage.latency_histograms["execute"]
            assert execute.count == stage.executed
            # The busy time also counts the tasks that had no tuple in a micro-batch.
            assert 0 < execute.sum <= stage.execute_latency_ms * stage.executed * (1 + 1e-9)
            assert set(stage.execute_latency_percentiles) == {50.0, 90.0, 99.0, 99.9, 99.99}
    finally:
        cluster.shutdown()


def test_a_failed_batch_resumes_after_restart_without_double_counting(
    spark: Any, tmp_path: Path
) -> None:
    flag = tmp_path / "fail"
    flag.touch()
    factory = SqliteMapState.factory(str(tmp_path / "counts.db"), StateType.TRANSACTIONAL)
    checkpoint = str(tmp_path / "checkpoint")
    conf = Config()
    conf["topology.spark.batch.retries"] = 1

    first = SparkCluster(spark=spark, checkpoint_dir=checkpoint)
    try:
        first.submit_topology("wc", conf, word_count(factory, str(flag)).build())
        assert not first.wait_idle("wc")  # the batch with "four" failed twice: the query stops
        info = first.get_topology_info("wc")
        assert info.status == "FAILED"
        # The bolt running the failing each (on the driver: its input is the SQLite
        # state's new values) reports each failed attempt once.
        failing = "b2-persistent_aggregate(Count)+1"
        reporting = {cid: s.errors for cid, s in info.components.items() if s.errors_total}
        assert list(reporting) == [failing]
        assert info.components[failing].errors_total == 2
        assert [e.error for e in reporting[failing]] == [
            "RuntimeError: injected failure after the state update"
        ] * 2
        assert all("in execute" in e.traceback for e in reporting[failing])
        partial = counts(factory)
        assert partial["four"] == 1  # the failing batch's state update was applied
    finally:
        first.shutdown()

    flag.unlink()
    second = SparkCluster(spark=spark, checkpoint_dir=checkpoint)
    try:
        second.submit_topology("wc", conf, word_count(factory, str(flag)).build())
        assert second.wait_idle("wc")
        assert counts(factory) == dict(TRUE_COUNTS)  # the replayed batch was not counted twice
    finally:
        second.shutdown()


class HoldsALock(Function):
    def __init__(self) -> None:
        self.lock = threading.Lock()

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0]])


def test_an_unpicklable_component_is_named(spark: Any, tmp_path: Path) -> None:
    topology = TridentTopology()
    topology.new_stream("s", FixedBatchSpout(Fields("x"), 1, [1])).each(
        Fields("x"), HoldsALock(), Fields("y")
    )
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path))
    try:
        with pytest.raises(InvalidTopologyError, match=r"cannot be pickled") as error:
            cluster.submit_topology("bad", {}, topology.build())
        assert "lock" in str(error.value) and "function" in str(error.value)
        assert cluster.topology_names() == []
    finally:
        cluster.shutdown()


def test_squall_run_with_the_spark_engine(spark: Any, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from squall.cli.main import main
    from tests.helpers import table_row

    app = tmp_path / "app_on_spark.py"
    app.write_text(
        "from squall import Fields\n"
        "from squall.trident import TridentTopology, FixedBatchSpout, Count\n"
        "from squall.trident.state import MemoryMapState\n"
        "def build_topology():\n"
        "    t = TridentTopology()\n"
        "    spout = FixedBatchSpout(Fields('word'), 2, ['a'], ['b'], ['a'])\n"
        "    t.new_stream('words', spout).group_by(Fields('word'))"
        ".persistent_aggregate(MemoryMapState.factory(), Count(), Fields('n'))\n"
        "    return t.build()\n"
    )
    # Until the spout's two batches are processed, however long that takes (the test's
    # own timeout is the limit), and a wide table whatever the environment's width.
    arguments = ["run", str(app), "--engine", "spark", "--until-idle", "--seconds", "100"]
    result = CliRunner().invoke(main, [*arguments, "--no-live"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "on SparkCluster" in result.output
    assert table_row(result.output, "words")["emitted"] == "3"  # both batches


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from squall.spark.launch.session import SparkUnavailableError, check_java

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java anywhere
    with pytest.raises(SparkUnavailableError, match=r"needs a Java 17\+ runtime.*LocalCluster"):
        check_java()


class Endless(FixedBatchSpout):
    """Cycles through its tuples forever."""

    def __init__(self) -> None:
        super().__init__(Fields("word"), 2, ["a"], ["b"])
        self.set_cycle(True)


def test_deactivate_stops_polling_the_spout_until_activate(spark: Any, tmp_path: Path) -> None:
    from tests.helpers import wait_until

    factory = MemoryMapState.factory(StateType.TRANSACTIONAL)
    topology = TridentTopology()
    topology.new_stream("words", Endless()).group_by(Fields("word")).persistent_aggregate(
        factory, Count(), Fields("n")
    )
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path))
    try:
        cluster.submit_topology("endless", {}, topology.build())
        wait_until(lambda: cluster.get_topology_info("endless").extra["batches"] >= 2, timeout=60)
        # The spout always has data: wait_idle still returns within its timeout (it may
        # find the query idle between two polls, so either answer is possible).
        for _ in range(3):
            cluster.wait_idle("endless", timeout_secs=0.5)
        cluster.deactivate("endless")
        cluster.wait_idle("endless")  # batches already read from the spout still run
        paused = cluster.get_topology_info("endless")
        assert paused.status == "INACTIVE"
        assert cluster.wait_idle("endless")
        assert cluster.get_topology_info("endless").extra["batches"] == paused.extra["batches"]
        cluster.activate("endless")
        wait_until(
            lambda: cluster.get_topology_info("endless").extra["batches"] > paused.extra["batches"],
            timeout=60,
        )
        cluster.deactivate("endless")
        assert cluster.wait_idle("endless")
        batches = cluster.get_topology_info("endless").extra["batches"]
        # Every batch is exactly [a, b] (batches of two from a cycle of two), once each.
        assert MemoryMapState.contents(factory) == {("a",): batches, ("b",): batches}
    finally:
        cluster.shutdown()


class Words(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup[0].split():
            if word == "boom":
                raise ValueError("no boom allowed")
            collector.emit([word])


def test_drpc_queries_a_state_on_spark(spark: Any, tmp_path: Path) -> None:
    from squall.drpc import DRPCExecutionError, LocalDRPC
    from squall.trident import FilterNull, MapGet, Sum

    topology = TridentTopology()
    spout = FixedBatchSpout(Fields("sentence"), 3, ["the cow jumped"], ["four score"])
    counts = (
        topology.new_stream("spout1", spout)
        .each(Fields("sentence"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count"))
        .parallelism_hint(4)
    )
    conf = Config()
    conf["topology.spark.batch.retries"] = 0
    with LocalDRPC(timeout_secs=120) as drpc:
        (
            topology.new_drpc_stream("words", drpc)
            .each(Fields("args"), Words(), Fields("word"))
            .group_by(Fields("word"))
            .state_query(counts, Fields("word"), MapGet(), Fields("count"))
            .each(Fields("count"), FilterNull())
            .aggregate(Fields("count"), Sum(), Fields("sum"))
        )
        cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path))
        try:
            cluster.submit_topology("wc", conf, topology.build())
            assert cluster.wait_idle("wc")
            assert drpc.execute("words", "cow four") == "[[2]]"  # the README's example
            with pytest.raises(DRPCExecutionError) as failed:
                drpc.execute("words", "cow boom")
            # The client is told which component's code raised and what, in one line.
            assert re.search(
                r"component '[^']*Words[^']*' task \d+: ValueError: no boom allowed$",
                str(failed.value),
            ), str(failed.value)
            assert "Traceback" not in str(failed.value)
            assert drpc.execute("words", "the jumped score nothing") == "[[3]]"
        finally:
            cluster.shutdown()


class RecordTask(Function):
    """Appends ``task index, value`` lines to ``path`` (from any process)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.task = context.task_index

    def execute(self, tup: Any, collector: Any) -> None:
        with open(self.path, "a") as handle:
            handle.write(f"{self.task} {tup[0]}\n")
        collector.emit([tup[0]])


def test_a_shuffled_batch_reaches_tasks_in_even_shares_without_an_exchange(
    spark: Any, tmp_path: Path
) -> None:
    """A batch is spread evenly in emit order: contiguous thirds to tasks 0, 1, 2; the
    source's slice ``i`` is task ``i``'s input, with no shuffle stage."""
    record = tmp_path / "tasks"
    topology = TridentTopology()
    values = [[n * 10] for n in range(9)]
    topology.new_stream("numbers", FixedBatchSpout(Fields("n"), 9, *values)).shuffle().each(
        Fields("n"), RecordTask(str(record)), Fields("same")
    ).parallelism_hint(3)
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path / "checkpoint"))
    try:
        cluster.submit_topology(
            "rr", {"topology.spark.batch.interval.millis": 50}, topology.build()
        )
        assert cluster.wait_idle("rr")
        running = cluster._get("rr").queries[0]
        stage = running.plan.segments[0]
        assert running.driver.pipeline._aligned(stage, {"numbers": range(0, 1)})
    finally:
        cluster.shutdown()
    seen = sorted(tuple(map(int, line.split())) for line in record.read_text().splitlines())
    assert seen == sorted((j // 3, j * 10) for j in range(9))


class RecordContext(Function):
    """Records what its task's context says, and every value it gets (any process)."""

    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.task = context.task_id
        self.record.append(
            "context",
            (
                context.component_id,
                context.task_id,
                context.get_this_task_index(),
                tuple(context.get_component_tasks(context.component_id)),
                tuple(context.get_component_tasks("numbers")),
            ),
        )

    def execute(self, tup: Any, collector: Any) -> None:
        self.record.append("seen", (self.task, tup[0]))
        collector.emit([tup[0]])


def test_trident_operations_see_the_local_engines_task_ids(engine: Engine) -> None:
    """On both engines a Trident function's tasks have the local engine's task ids
    (``build_plan`` over the system topology), indexes and component tasks."""
    record = SharedRecord()
    topology = TridentTopology()
    values = [[n] for n in range(6)]
    topology.new_stream("numbers", FixedBatchSpout(Fields("n"), 3, *values)).shuffle().each(
        Fields("n"), RecordContext(record), Fields("same")
    ).parallelism_hint(3)
    built = topology.build()
    conf = effective_config(engine.conf())
    plan = build_plan(system_topology(built, conf), conf)
    (segment,) = built.batch_ir.segments
    tasks = plan.component_tasks[segment.component_id]
    with engine.running(built) as run:
        run.wait_until(lambda: len(record.get("seen")) >= 6, engine.timeout)
        run.drain()
    assert sorted(n for _, n in record.get("seen")) == list(range(6))
    assert {task for task, _ in record.get("seen")} <= set(tasks)
    assert set(record.get("context")) == {
        (segment.component_id, task, index, tuple(tasks), tuple(plan.component_tasks["numbers"]))
        for index, task in enumerate(tasks)
    }


def test_an_unreachable_state_backend_is_named(spark: Any, tmp_path: Path) -> None:
    from squall.trident.state import RedisMapState

    factory = RedisMapState.factory("redis://127.0.0.1:1/0", StateType.TRANSACTIONAL)
    conf = {"topology.spark.batch.retries": 0, "topology.spark.batch.interval.millis": 50}
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path))
    try:
        cluster.submit_topology("wc", conf, word_count(factory).build())
        assert not cluster.wait_idle("wc")
        info = cluster.get_topology_info("wc")
        assert info.status == "FAILED"
        updating = "b2-persistent_aggregate(Count)"  # the bolt updating the state
        reporting = {cid: s.errors for cid, s in info.components.items() if s.errors_total}
        assert list(reporting) == [updating]
        errors = [e.error for e in reporting[updating]]
        assert any("RedisMapState cannot reach redis://127.0.0.1:1/0" in e for e in errors)
    finally:
        cluster.shutdown()


def test_a_group_by_value_without_a_stable_hash_is_named(spark: Any, tmp_path: Path) -> None:
    topology = TridentTopology()
    (
        topology.new_stream("numbers", FixedBatchSpout(Fields("n"), 2, [1], [2]))
        # A plain object() compares by identity: it has no stable hash.
        .map(lambda tup: [tup["n"], object()], Fields("n", "thing"))
        .group_by(Fields("thing"))
        .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count"))
    )
    conf = {"topology.spark.batch.retries": 0, "topology.spark.batch.interval.millis": 50}
    cluster = SparkCluster(spark=spark, checkpoint_dir=str(tmp_path))
    try:
        cluster.submit_topology("things", conf, topology.build())
        assert not cluster.wait_idle("things")
        info = cluster.get_topology_info("things")
        assert info.status == "FAILED"
        routing = "b1-map(lambda)"  # the bolt routing the map's output
        reporting = {cid: s.errors for cid, s in info.components.items() if s.errors_total}
        assert list(reporting) == [routing]
        errors = [e.error for e in reporting[routing]]
        assert any(
            "groups stream" in e
            and "by field 'thing'" in e
            and "value of type object" in e
            and "cannot be hashed stably" in e
            for e in errors
        ), errors
    finally:
        cluster.shutdown()
