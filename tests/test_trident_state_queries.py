"""Trident state queries read the partition that holds each key, whichever worker holds
it: on thread workers, on worker processes (where a ``MemoryMapState`` lives in each
process) and on Spark; what cannot be read correctly is refused at submit."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from squall import Config, Fields, InvalidTopologyError, LocalCluster
from squall.drpc import LocalDRPC
from squall.runtime.plan import build_plan
from squall.runtime.system import system_topology
from squall.trident import Count as TridentCount
from squall.trident import (
    FilterNull,
    FixedBatchSpout,
    MapGet,
    StateUpdater,
    Sum,
    TridentTopology,
)
from squall.trident.compiler import describe
from squall.trident.state import MemoryMapState, SqliteMapState, StateType
from squall.trident.stream import Stream, TridentState
from tests.conftest import PROCESS_CONF, Engine, Run
from tests.test_trident_ops import execute

SENTENCES = [
    ["the cow jumped over the moon"],
    ["the man went to the store and bought some candy"],
    ["four score and seven years ago"],
    ["how many apples can you eat"],
]
COUNTS = Counter(word for [sentence] in SENTENCES for word in sentence.split())
WORDS = " ".join(sorted(COUNTS))  # every word once: the answer is the number of words


def split(tup: Any) -> list[list[str]]:
    return [[word] for word in tup[0].split()]


def counted(topology: TridentTopology, factory: Any, parallelism: int = 4) -> TridentState:
    """The word count of :data:`SENTENCES` in ``factory``, over ``parallelism`` tasks."""
    spout = FixedBatchSpout(Fields("sentence"), 3, *SENTENCES)
    return (
        topology.new_stream("sentences", spout)
        .flat_map(split, Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(factory, TridentCount(), Fields("count"))
        .parallelism_hint(parallelism)
    )


def words(topology: TridentTopology, function: str, drpc: LocalDRPC) -> Stream:
    return topology.new_drpc_stream(function, drpc).flat_map(split, Fields("word"))


def summed(stream: Stream) -> None:
    stream.each(Fields("count"), FilterNull()).aggregate(Fields("count"), Sum(), Fields("sum"))


def wait_for_answer(run: Run, drpc: LocalDRPC, timeout: float, call: tuple[str, str], want: str):
    """Ask ``call`` until it answers ``want`` (the spout's batches are counted)."""
    answers: list[str] = []

    def answered() -> bool:
        answers.extend(execute(run, drpc, timeout, call))
        return answers[-1] == want

    try:
        run.wait_until(answered, timeout)
    except AssertionError as error:
        raise AssertionError(f"{call} answered {sorted(set(answers))}, never {want}") from error


TWO_WORKERS = {Config.TOPOLOGY_WORKERS: 2}


def test_the_readme_word_count_answers_exactly_on_every_engine_and_worker_kind(
    engine: Engine,
) -> None:
    # The README's example with the state over 4 tasks: on two worker processes, each
    # process holds the MemoryMapState partitions of its tasks only.
    with LocalDRPC(timeout_secs=engine.timeout) as drpc:
        topology = TridentTopology()
        spout = FixedBatchSpout(Fields("sentence"), 3, ["the cow jumped"], ["four score"])
        counts = (
            topology.new_stream("sentences", spout)
            .flat_map(split, Fields("word"))
            .group_by(Fields("word"))
            .persistent_aggregate(MemoryMapState.factory(), TridentCount(), Fields("count"))
            .parallelism_hint(4)
        )
        summed(
            words(topology, "words", drpc)
            .group_by(Fields("word"))
            .state_query(counts, Fields("word"), MapGet(), Fields("count"))
        )
        with engine.running(topology, TWO_WORKERS) as run:
            wait_for_answer(
                run, drpc, engine.timeout, ("words", "the cow jumped four score"), "[[5]]"
            )
            assert execute(run, drpc, engine.timeout, ("words", "cow four")) == ["[[2]]"]
            for word in "the cow jumped four score".split():
                assert execute(run, drpc, engine.timeout, ("words", word)) == ["[[1]]"]
            assert execute(run, drpc, engine.timeout, ("words", "moon")) == ["[[0]]"]


@pytest.mark.parametrize("grouped", [True, False], ids=["grouped", "ungrouped"])
def test_every_key_is_read_from_its_partition_whatever_the_query_streams_parallelism(
    engine: Engine, grouped: bool
) -> None:
    # The query stream asks for 3 tasks, the state has 4; without group_by the query
    # stream is not partitioned by key at all.
    with LocalDRPC(timeout_secs=engine.timeout) as drpc:
        topology = TridentTopology()
        counts = counted(topology, MemoryMapState.factory(StateType.TRANSACTIONAL))
        stream = words(topology, "words", drpc)
        if grouped:
            queried = stream.group_by(Fields("word")).state_query(
                counts, Fields("word"), MapGet(), Fields("count")
            )
        else:
            queried = stream.state_query(counts, Fields("word"), MapGet(), Fields("count"))
        queried.parallelism_hint(3).project(Fields("word", "count"))
        with engine.running(topology, TWO_WORKERS) as run:

            def complete() -> bool:
                (answer,) = execute(run, drpc, engine.timeout, ("words", WORDS))
                return sorted(map(tuple, json.loads(answer))) == sorted(COUNTS.items())

            run.wait_until(complete, engine.timeout)
            (answer,) = execute(run, drpc, engine.timeout, ("words", "the cow zebra the"))
            assert sorted(json.loads(answer), key=str) == [
                ["cow", 1], ["the", 4], ["the", 4], ["zebra", None],
            ]  # fmt: skip


def test_a_global_aggregate_is_read_from_the_task_that_holds_it(engine: Engine) -> None:
    with LocalDRPC(timeout_secs=engine.timeout) as drpc:
        topology = TridentTopology()
        spout = FixedBatchSpout(Fields("sentence"), 3, *SENTENCES)
        total = (
            topology.new_stream("sentences", spout)
            .flat_map(split, Fields("word"))
            .persistent_aggregate(MemoryMapState.factory(), TridentCount(), Fields("count"))
            .parallelism_hint(3)
        )
        (
            topology.new_drpc_stream("total", drpc)
            .state_query(total, Fields(), MapGet(), Fields("count"))
            .project(Fields("count"))
        )
        with engine.running(topology, TWO_WORKERS) as run:
            wait_for_answer(run, drpc, engine.timeout, ("total", ""), f"[[{COUNTS.total()}]]")


def test_a_sqlite_state_is_read_from_any_worker(engine: Engine, tmp_path: Path) -> None:
    # A shared store: queries read it from any task, so their stream is not rerouted.
    factory = SqliteMapState.factory(tmp_path / "counts.db")
    with LocalDRPC(timeout_secs=engine.timeout) as drpc:
        topology = TridentTopology()
        counts = counted(topology, factory)
        summed(
            words(topology, "words", drpc).state_query(
                counts, Fields("word"), MapGet(), Fields("count")
            )
        )
        with engine.running(topology, TWO_WORKERS) as run:
            wait_for_answer(run, drpc, engine.timeout, ("words", WORDS), f"[[{COUNTS.total()}]]")
    assert [s["operations"] for s in describe(topology)][3:] == [
        ["drpc_spout"],
        ["flat_map", "state_query", "filter", "combine_partial"],
        ["partition", "combine_final"],
        ["partition", "drpc_return"],
    ]


def test_a_query_of_an_in_process_state_runs_with_the_tasks_of_its_partitions() -> None:
    topology = TridentTopology()
    drpc = LocalDRPC()
    counts = counted(topology, MemoryMapState.factory(), parallelism=4)
    (
        words(topology, "words", drpc)
        .parallelism_hint(2)
        .state_query(counts, Fields("word"), MapGet(), Fields("count"))
        .parallelism_hint(3)
        .project(Fields("count"))
    )
    built = topology.build()
    drpc.shutdown()

    # A repartition by the queried key is inserted before the query, whose tasks are
    # as many as the state's and run in the workers of the state's tasks.
    segments = {s["component"]: s for s in describe(topology)}
    assert [(s["operations"], s["parallelism"]) for s in segments.values()] == [
        (["spout"], 1),
        (["flat_map", "combine_partial"], 1),
        (["partition", "persist"], 4),
        (["drpc_spout"], 1),
        (["flat_map"], 2),
        (["partition", "state_query", "project"], 4),
        (["partition", "drpc_return"], 1),
    ]
    state, query = "b2-persistent_aggregate(Count)", "b4-state_query(MapGet)+project"
    assert set(segments) >= {state, query}
    assert built.get_component(query).colocated_with == state
    assert built.get_component(query).parallelism == 4
    assert built.get_component(state).colocated_with is None
    edge = next(e for e in built.batch_ir.edges if e.target == query)
    assert (edge.grouping.name, edge.fields) == ("FIELDS", ("word",))
    for workers in (1, 2, 3, 5):
        conf = {Config.TOPOLOGY_WORKERS: workers}
        plan = build_plan(system_topology(built, conf), conf)
        assert [plan.task_worker[t] for t in plan.component_tasks[query]] == [
            plan.task_worker[t] for t in plan.component_tasks[state]
        ]
        plan.change_layout(2, {state: 2})
        assert plan.component_executors()[query] == 2
        assert [plan.task_worker[t] for t in plan.component_tasks[query]] == [
            plan.task_worker[t] for t in plan.component_tasks[state]
        ]


class Remember(StateUpdater):
    """Stores each word's latest count, in the partition the word arrives in."""

    def update_state(self, state: Any, tuples: list[Any], collector: Any) -> None:
        state.multi_put([(t[0],) for t in tuples], [1 for _ in tuples])


def partition_persisted(topology: TridentTopology) -> TridentState:
    spout = FixedBatchSpout(Fields("sentence"), 3, *SENTENCES)
    return (
        topology.new_stream("sentences", spout)
        .flat_map(split, Fields("word"))
        .shuffle()
        .partition_persist(MemoryMapState.factory(), Fields("word"), Remember())
        .parallelism_hint(2)
    )


def static_memory(topology: TridentTopology) -> TridentState:
    return topology.new_static_state(MemoryMapState.factory())


def of_another_topology(topology: TridentTopology) -> TridentState:
    return counted(TridentTopology(), MemoryMapState.factory())


@pytest.mark.parametrize(
    ("make_state", "why"),
    [
        (partition_persisted, "partition_persist decides which partition holds a key"),
        (static_memory, "no stream of this topology updates it"),
        (of_another_topology, "no stream of this topology updates it"),
    ],
    ids=["partition_persist", "static", "another_topology"],
)
def test_a_query_worker_processes_cannot_answer_is_refused_at_submit(
    make_state: Any, why: str
) -> None:
    with LocalDRPC() as drpc:
        topology = TridentTopology()
        state = make_state(topology)
        words(topology, "words", drpc).state_query(state, Fields("word"), MapGet(), Fields("c"))
        built = topology.build()
        with LocalCluster() as cluster:
            with pytest.raises(InvalidTopologyError) as raised:
                cluster.submit_topology("refused", dict(PROCESS_CONF), built)
            # On thread workers every task shares this process's store: accepted.
            conf = {**PROCESS_CONF, Config.TOPOLOGY_WORKER_KIND: "thread"}
            cluster.submit_topology("threads", conf, built)
            cluster.kill_topology("threads")
    (query,) = [s.component_id for s in built.batch_ir.segments if s.states and s.tasks == 1]
    assert query.endswith("state_query(MapGet)")
    assert str(raised.value) == (
        f"topology 'refused' cannot run in worker processes: {query!r} queries a state "
        f"made by MemoryMapStateFactory, which each process keeps in its own memory, and "
        f"{why}, so its queries cannot be sent to the process holding each key: each would "
        "read only its own process's store. Run it on worker threads (topology.worker.kind "
        '= "thread") or keep the state in a store every process reaches (SqliteMapState, '
        "RedisMapState)"
    )


def test_a_rebalance_moves_a_query_with_its_state() -> None:
    from squall.local.rebalance import check_request

    with LocalDRPC() as drpc:
        topology = TridentTopology()
        counts = counted(topology, MemoryMapState.factory(), parallelism=4)
        words(topology, "words", drpc).group_by(Fields("word")).state_query(
            counts, Fields("word"), MapGet(), Fields("count")
        )
        built = topology.build()
    state, query = "b2-persistent_aggregate(Count)", "b4-state_query(MapGet)"
    conf = {Config.TOPOLOGY_WORKERS: 2}
    plan = build_plan(system_topology(built, conf), conf)
    request = check_request("wc", plan, 3, {state: 2}, 0)
    assert request.executors == {state: 2, query: 2}
    assert check_request("wc", plan, None, {query: 4}, 0).executors == {query: 4}
    with pytest.raises(InvalidTopologyError) as raised:
        check_request("wc", plan, None, {query: 2}, 0)
    assert str(raised.value) == (
        f"rebalance of topology 'wc': component {query!r} runs its tasks with those of "
        f"{state!r} (in the same workers), so it has as many executors as {state!r} (4); "
        f"got 2: change {state!r}'s instead"
    )


def test_a_query_hint_above_the_states_gives_both_its_task_count() -> None:
    # As in Storm, where a state and its queries share a bolt: the largest hint wins.
    topology = TridentTopology()
    with LocalDRPC() as drpc:
        counts = counted(topology, MemoryMapState.factory(), parallelism=2)
        words(topology, "words", drpc).group_by(Fields("word")).state_query(
            counts, Fields("word"), MapGet(), Fields("count")
        ).parallelism_hint(6)
        built = topology.build()
    tasks = {spec.component_id: spec.num_tasks for spec in built if not spec.system}
    assert tasks["b2-persistent_aggregate(Count)"] == tasks["b4-state_query(MapGet)"] == 6
