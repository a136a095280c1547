"""Unit tests of ``TopologyContext``: a task's identity and view of the topology."""

from __future__ import annotations

import pytest

from squall import Bolt, Config, Fields, Spout, TopologyBuilder, TopologyContext
from squall.model.grouping import GlobalStreamId, Grouping, GroupingKind
from squall.runtime.context import TaskContext
from squall.runtime.plan import build_plan


class SentenceSpout(Spout):
    outputs = {"default": ["sentence"], "meta": ["key", "value"]}


class SplitBolt(Bolt):
    outputs = ["word"]

    def execute(self, tup) -> None:
        pass


class CountBolt(Bolt):
    outputs = {"default": ["word", "count"], "totals": ["count"]}

    def execute(self, tup) -> None:
        pass


def topology_and_plan(conf: dict | None = None):
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(), 2)
    builder.set_bolt("split", SplitBolt(), 3).shuffle_grouping("sentences")
    (
        builder.set_bolt("count", CountBolt(), 2)
        .set_num_tasks(4)
        .fields_grouping("split", Fields("word"))
        .all_grouping("sentences", "meta")
    )
    builder.set_bolt("report", SplitBolt()).global_grouping("count", "totals")
    topology = builder.create_topology()
    # Tasks: count 1-4, report 5, sentences 6-7, split 8-10.
    return topology, build_plan(topology, conf or {})


def context(task_id: int, conf: dict | None = None) -> TopologyContext:
    topology, plan = topology_and_plan(conf)
    return TaskContext(topology, plan, task_id, topology_name="wc", conf=conf)


def test_identity_of_a_task() -> None:
    ctx = context(9)
    assert ctx.task_id == 9
    assert ctx.component_id == "split"
    assert ctx.task_index == 1
    assert ctx.get_this_task_id() == 9
    assert ctx.get_this_component_id() == "split"
    assert ctx.get_this_task_index() == 1
    assert ctx.topology_name == "wc"
    assert ctx.storm_id == "wc"


@pytest.mark.parametrize(
    ("task_id", "component", "index"),
    [(1, "count", 0), (4, "count", 3), (5, "report", 0), (6, "sentences", 0), (10, "split", 2)],
)
def test_task_index_is_position_among_component_tasks(
    task_id: int, component: str, index: int
) -> None:
    ctx = context(task_id)
    assert ctx.component_id == component
    assert ctx.task_index == index


def test_get_component_tasks() -> None:
    ctx = context(1)
    assert ctx.get_component_tasks("count") == [1, 2, 3, 4]
    assert ctx.get_component_tasks("report") == [5]
    assert ctx.get_component_tasks("sentences") == [6, 7]
    assert ctx.get_component_tasks("split") == [8, 9, 10]
    assert ctx.get_component_tasks("ghost") == []
    assert ctx.get_component_id(7) == "sentences"
    assert ctx.get_component_ids() == ["count", "report", "sentences", "split"]


def test_get_component_tasks_returns_a_copy() -> None:
    ctx = context(1)
    ctx.get_component_tasks("count").append(99)
    assert ctx.get_component_tasks("count") == [1, 2, 3, 4]


def test_get_component_output_fields() -> None:
    ctx = context(8)
    assert ctx.get_component_output_fields("sentences") == Fields("sentence")
    assert ctx.get_component_output_fields("sentences", "meta") == Fields("key", "value")
    assert ctx.get_component_output_fields("count", stream="totals") == Fields("count")
    assert ctx.get_this_output_fields() == Fields("word")
    assert ctx.get_this_streams() == ["default"]


def test_get_component_output_fields_of_unknown_stream_or_component() -> None:
    ctx = context(8)
    with pytest.raises(KeyError, match="'nope'"):
        ctx.get_component_output_fields("sentences", "nope")
    with pytest.raises(KeyError, match="'ghost'"):
        ctx.get_component_output_fields("ghost")


def test_get_this_sources() -> None:
    assert context(2).get_this_sources() == {
        GlobalStreamId("split", "default"): Grouping(GroupingKind.FIELDS, Fields("word")),
        GlobalStreamId("sentences", "meta"): Grouping(GroupingKind.ALL),
    }
    assert context(9).get_this_sources() == {
        GlobalStreamId("sentences", "default"): Grouping(GroupingKind.SHUFFLE)
    }
    assert context(6).get_this_sources() == {}


def test_get_this_targets() -> None:
    assert context(6).get_this_targets() == {
        "default": {"split": Grouping(GroupingKind.SHUFFLE)},
        "meta": {"count": Grouping(GroupingKind.ALL)},
    }
    assert context(3).get_this_targets() == {
        "default": {},
        "totals": {"report": Grouping(GroupingKind.GLOBAL)},
    }
    assert context(5).get_this_targets() == {"default": {}}


def test_get_this_worker_tasks_with_one_worker() -> None:
    assert context(5).get_this_worker_tasks() == list(range(1, 11))


def test_get_this_worker_tasks_with_two_workers() -> None:
    conf = {Config.TOPOLOGY_WORKERS: 2}
    # Executors in task order: count [1,2] [3,4], report [5], sentences [6] [7],
    # split [8] [9] [10], dealt to workers 0,1,0,1,0,1,0,1.
    ctx = context(5, conf)
    assert ctx.worker == 0
    assert ctx.get_this_worker_tasks() == [1, 2, 5, 7, 9]
    other = context(6, conf)
    assert other.worker == 1
    assert other.get_this_worker_tasks() == [3, 4, 6, 8, 10]


def test_conf_is_a_copy() -> None:
    conf = {"a": 1}
    ctx = context(1, conf)
    assert ctx.conf == {"a": 1}
    conf["a"] = 2
    assert ctx.conf == {"a": 1}
