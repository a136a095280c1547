"""Unit tests of the task plan: task ids, executors, workers, parallelism caps."""

from __future__ import annotations

from squall import Bolt, Config, Spout, TopologyBuilder
from squall.runtime.plan import build_plan, split_evenly
from squall.runtime.system import system_topology


class WordSpout(Spout):
    outputs = ["word"]


class PassBolt(Bolt):
    outputs = ["word"]

    def execute(self, tup) -> None:
        pass


def three_components(split_tasks: int = 8, split_parallelism: int = 3):
    builder = TopologyBuilder()
    builder.set_spout("sentences", WordSpout(), 2)
    (
        builder.set_bolt("split", PassBolt(), split_parallelism)
        .set_num_tasks(split_tasks)
        .shuffle_grouping("sentences")
    )
    builder.set_bolt("count", PassBolt(), 2).shuffle_grouping("split")
    return builder.create_topology()


def test_task_ids_start_at_one_over_components_sorted_by_id() -> None:
    plan = build_plan(three_components(), {})
    assert plan.component_tasks == {
        "count": [1, 2],
        "sentences": [3, 4],
        "split": [5, 6, 7, 8, 9, 10, 11, 12],
    }
    assert plan.task_component[1] == "count"
    assert plan.task_component[4] == "sentences"
    assert plan.task_component[12] == "split"
    assert sorted(plan.task_component) == list(range(1, 13))
    assert plan.max_task_id == 12
    assert plan.task_index(7) == 2
    assert plan.task_index(3) == 0


def test_system_components_get_task_ids_in_sorted_order() -> None:
    topology = three_components()
    conf = {Config.TOPOLOGY_ACKER_EXECUTORS: 2}
    plan = build_plan(system_topology(topology, conf), conf)
    # "__acker" sorts before the lowercase user ids.
    assert plan.component_tasks == {
        "__acker": [1, 2],
        "count": [3, 4],
        "sentences": [5, 6],
        "split": [7, 8, 9, 10, 11, 12, 13, 14],
    }


def test_no_acker_tasks_when_acking_is_off() -> None:
    conf = {Config.TOPOLOGY_ACKER_EXECUTORS: 0}
    plan = build_plan(system_topology(three_components(), conf), conf)
    assert "__acker" not in plan.component_tasks
    assert plan.component_tasks["count"] == [1, 2]


def test_one_acker_per_worker_by_default() -> None:
    conf = {Config.TOPOLOGY_WORKERS: 3}
    plan = build_plan(system_topology(three_components(), conf), conf)
    assert plan.component_tasks["__acker"] == [1, 2, 3]


def test_tasks_split_into_contiguous_executors() -> None:
    plan = build_plan(three_components(split_tasks=8, split_parallelism=3), {})
    split = [ex.tasks for ex in plan.executors if ex.component_id == "split"]
    assert split == [(5, 6, 7), (8, 9, 10), (11, 12)]
    assert [len(tasks) for tasks in split] == [3, 3, 2]
    count = [ex.tasks for ex in plan.executors if ex.component_id == "count"]
    assert count == [(1,), (2,)]


def test_more_executors_than_tasks_gives_one_task_per_executor() -> None:
    plan = build_plan(three_components(split_tasks=2, split_parallelism=5), {})
    split = [ex.tasks for ex in plan.executors if ex.component_id == "split"]
    assert split == [(5,), (6,)]


def test_executors_are_in_task_order() -> None:
    plan = build_plan(three_components(), {})
    firsts = [ex.tasks[0] for ex in plan.executors]
    assert firsts == sorted(firsts)
    covered = [task for ex in plan.executors for task in ex.tasks]
    assert covered == list(range(1, 13))


def test_split_evenly() -> None:
    assert split_evenly(list(range(1, 9)), 3) == [[1, 2, 3], [4, 5, 6], [7, 8]]
    assert split_evenly([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]
    assert split_evenly([1, 2, 3], 1) == [[1, 2, 3]]
    assert split_evenly(list(range(10)), 4) == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]


def test_single_worker_hosts_everything() -> None:
    plan = build_plan(three_components(), {})
    assert plan.num_workers == 1
    assert {ex.worker for ex in plan.executors} == {0}
    assert set(plan.task_worker.values()) == {0}
    assert sorted(plan.task_worker) == list(range(1, 13))


def test_workers_are_dealt_executors_round_robin() -> None:
    plan = build_plan(three_components(), {Config.TOPOLOGY_WORKERS: 2})
    assert plan.num_workers == 2
    layout = [(ex.component_id, ex.tasks, ex.worker) for ex in plan.executors]
    assert layout == [
        ("count", (1,), 0),
        ("count", (2,), 1),
        ("sentences", (3,), 0),
        ("sentences", (4,), 1),
        ("split", (5, 6, 7), 0),
        ("split", (8, 9, 10), 1),
        ("split", (11, 12), 0),
    ]
    assert plan.task_worker == {
        1: 0,
        2: 1,
        3: 0,
        4: 1,
        5: 0,
        6: 0,
        7: 0,
        8: 1,
        9: 1,
        10: 1,
        11: 0,
        12: 0,
    }


def test_three_workers_round_robin() -> None:
    plan = build_plan(three_components(), {Config.TOPOLOGY_WORKERS: 3})
    assert [ex.worker for ex in plan.executors] == [0, 1, 2, 0, 1, 2, 0]


def test_topology_max_task_parallelism_caps_tasks_and_executors() -> None:
    plan = build_plan(three_components(), {Config.TOPOLOGY_MAX_TASK_PARALLELISM: 2})
    assert plan.component_tasks == {
        "count": [1, 2],
        "sentences": [3, 4],
        "split": [5, 6],
    }
    assert [ex.tasks for ex in plan.executors if ex.component_id == "split"] == [(5,), (6,)]


def test_component_max_task_parallelism_caps_only_that_component() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", WordSpout(), 4)
    (
        builder.set_bolt("b", PassBolt(), 4)
        .add_configuration(Config.TOPOLOGY_MAX_TASK_PARALLELISM, 1)
        .shuffle_grouping("s")
    )
    plan = build_plan(builder.create_topology(), {})
    assert plan.component_tasks == {"b": [1], "s": [2, 3, 4, 5]}


def test_plan_is_deterministic() -> None:
    topology = three_components()
    conf = {Config.TOPOLOGY_WORKERS: 2}
    first = build_plan(system_topology(topology, conf), conf)
    second = build_plan(system_topology(topology, conf), conf)
    assert first == second
    assert first.executors == second.executors
    assert first.task_worker == second.task_worker
