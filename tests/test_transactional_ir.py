"""The description of a transactional topology its builder attaches to the compiled
topology (``squall.transactional.ir``)."""

from __future__ import annotations

from typing import Any

import pytest

from examples.transactional_global_count import (
    BatchCount,
    Database,
    MemoryPartitionedSpout,
    UpdateGlobalCount,
)
from squall import Fields, Tuple
from squall.model.declarer import StreamDeclaration
from squall.model.grouping import CustomStreamGrouping, Grouping, GroupingKind
from squall.runtime.system import system_topology
from squall.transactional import BatchBolt, TransactionalTopologyBuilder
from squall.transactional.ir import (
    BatchBoltIR,
    BatchEdgeIR,
    CoordinatedSpoutIR,
    TransactionalIR,
)
from squall.transactional.spouts import PartitionedSpoutAdapter


class Router(BatchBolt):
    """Words of even length on "even"; the others straight to the first task of
    ``sum`` on "odd"."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream("even", ["attempt", "word"])
        declarer.declare_stream("odd", ["attempt", "word"], direct=True)

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any, id: Any) -> None:
        self.collector = collector
        self.attempt = id
        self.target = context.get_component_tasks("sum")[0]

    def execute(self, tup: Tuple) -> None:
        word = tup["word"]
        if len(word) % 2 == 0:
            self.collector.emit([self.attempt, word], "even")
        else:
            self.collector.emit_direct(self.target, [self.attempt, word], "odd")


class EveryTask(CustomStreamGrouping):
    """Every tuple to every task."""

    def prepare(self, context: Any, stream: Any, target_tasks: list[int]) -> None:
        self.targets = target_tasks

    def choose_tasks(self, task_id: int, values: list[Any]) -> list[int]:
        return self.targets


def test_the_builder_describes_spout_bolts_and_every_user_subscription() -> None:
    spout = MemoryPartitionedSpout([["a", "bb"], ["ccc"]], 1)
    router, count, committer = Router(), BatchCount(), UpdateGlobalCount(Database())
    every = EveryTask()
    builder = TransactionalTopologyBuilder("words", "spout", spout, 2)
    builder.set_bolt("router", router, 2).shuffle_grouping("spout")
    builder.set_bolt("count", count, 2).set_num_tasks(4).custom_grouping(
        "spout", every
    ).partial_key_grouping("router", ["word"], "even")
    builder.set_committer_bolt("sum", committer).global_grouping("count").direct_grouping(
        "router", "odd"
    )
    built = builder.build_topology()
    ir = built.batch_ir
    assert isinstance(ir, TransactionalIR)

    adapter = built.get_component("spout").component.spout
    assert isinstance(adapter, PartitionedSpoutAdapter) and adapter.spout is spout

    def streams(*declared: str, direct: str = "") -> dict[str, StreamDeclaration]:
        """``"stream:field,field"`` declarations (``direct`` names a direct stream)."""
        found = {}
        for declaration in declared:
            stream_id, fields = declaration.split(":")
            found[stream_id] = StreamDeclaration(
                stream_id, Fields(fields.split(",")), stream_id == direct
            )
        return found

    assert ir == TransactionalIR(
        "words",
        CoordinatedSpoutIR(
            "spout",
            "spout/coordinator",
            adapter,
            2,
            streams("default:attempt,word"),
        ),
        (
            BatchBoltIR(
                "router",
                router,
                2,
                False,
                streams("even:attempt,word", "odd:attempt,word", direct="odd"),
            ),
            BatchBoltIR("count", count, 4, False, streams("default:attempt,count")),
            BatchBoltIR("sum", committer, 1, True, streams("default:attempt,sum")),
        ),
        (
            BatchEdgeIR("spout", "default", "router", Grouping(GroupingKind.SHUFFLE)),
            BatchEdgeIR("spout", "default", "count", Grouping(GroupingKind.CUSTOM, custom=every)),
            BatchEdgeIR(
                "router", "even", "count", Grouping(GroupingKind.PARTIAL_KEY, Fields("word"))
            ),
            BatchEdgeIR("count", "default", "sum", Grouping(GroupingKind.GLOBAL)),
            BatchEdgeIR("router", "odd", "sum", Grouping(GroupingKind.DIRECT)),
        ),
    )
    assert ir.bolt("count").bolt is built.get_component("count").component.bolt
    assert ir.edges_into("sum") == list(ir.edges[3:])
    assert ir.edges_from("router") == [ir.edges[2], ir.edges[4]]
    with pytest.raises(KeyError, match="no batch bolt 'spout'"):
        ir.bolt("spout")


def test_the_system_topology_keeps_the_description() -> None:
    builder = TransactionalTopologyBuilder("words", "spout", MemoryPartitionedSpout([["a"]], 1))
    builder.set_bolt("count", BatchCount()).none_grouping("spout")
    built = builder.build_topology()
    assert isinstance(built.batch_ir, TransactionalIR)
    assert system_topology(built, {}).batch_ir is built.batch_ir


def test_the_description_names_the_users_spout_and_batch_bolts_and_numbers_no_stream() -> None:
    spout = MemoryPartitionedSpout([["a"]], 1)
    count, committer = BatchCount(), UpdateGlobalCount(Database())
    builder = TransactionalTopologyBuilder("words", "spout", spout, 2)
    builder.set_bolt("count", count).none_grouping("spout")
    builder.set_committer_bolt("sum", committer).global_grouping("count")
    ir = builder.build_topology().batch_ir
    assert isinstance(ir, TransactionalIR)

    found = ir.user_components()
    assert list(found) == ["spout", "count", "sum"]
    assert isinstance(found["spout"], PartitionedSpoutAdapter)
    assert found["spout"].spout is spout
    assert found["count"] is count and found["sum"] is committer
    assert ir.numbered_streams is False
    ir.check_worker_processes("words")  # nothing to refuse
