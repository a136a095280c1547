"""The intermediate representation Trident compiles to (``squall.trident.ir``), and the
``StormTopology`` lowered from it for the local engine."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from squall import Fields
from squall.drpc import LocalDRPC
from squall.model.builder import TopologyBuilder
from squall.model.grouping import GroupingKind
from squall.runtime.system import system_topology
from squall.testing import CapturingBolt, FixedTupleSpout
from squall.trident import (
    Count,
    FilterNull,
    FixedBatchSpout,
    Function,
    MapGet,
    Stream,
    Sum,
    TridentCollector,
    TridentTopology,
    TridentTuple,
)
from squall.trident.ir import (
    REGULAR_GROUP_KEY,
    DRPCEndpoint,
    EdgeIR,
    QueryGroupIR,
    SourceIR,
    SourceKind,
    StateAccess,
    StateBinding,
    TridentIR,
)
from squall.trident.state import (
    MapState,
    MemoryMapState,
    RedisMapStateFactory,
    SqliteMapStateFactory,
    StateFactory,
    StateLocality,
)
from tests.spark_spouts import ListSpout, OpaqueListSpout, partitions


class Split(Function):
    """One tuple per word of the first input value."""

    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        for word in tup[0].split():
            collector.emit([word])


SENTENCES = FixedBatchSpout(Fields("sentence", "source"), 2, ["the cow", "a"])
TRANSACTIONAL = ListSpout(partitions(2, 3), 2)
OPAQUE = OpaqueListSpout(partitions(2, 3), 2)
MEMORY = MemoryMapState.factory()
SQLITE = SqliteMapStateFactory("/var/lib/squall/counts.db")
REDIS = RedisMapStateFactory("redis://127.0.0.1:6379/0")
LENGTHS = MemoryMapState.static_factory({"the cow": 7})
DRPC = LocalDRPC()


def sentences(topology: TridentTopology, stream_id: str = "sentences") -> Stream:
    return topology.new_stream(stream_id, SENTENCES)


def per_tuple_operations() -> TridentTopology:
    """each, filter and project: one segment after the spout."""
    topology = TridentTopology()
    (
        sentences(topology)
        .each(Fields("sentence"), Split(), Fields("word"))
        .filter(FilterNull())
        .project(Fields("word"))
        .parallelism_hint(3)
    )
    return topology


def counts_in_memory_and_sqlite() -> TridentTopology:
    """Word counts in a SQLite file and in memory; the memory counts' new values are
    checked against the file and printed; the words are printed too."""
    topology = TridentTopology()
    words = sentences(topology).each(Fields("sentence"), Split(), Fields("word"))
    stored = words.group_by(Fields("word")).persistent_aggregate(SQLITE, Count(), Fields("count"))
    counts = (
        words.group_by(Fields("word"))
        .persistent_aggregate(MEMORY, Count(), Fields("count"))
        .parallelism_hint(2)
    )
    (
        counts.new_values_stream()
        .state_query(stored, Fields("word"), MapGet(), Fields("stored"))
        .name("recheck")
    )
    counts.new_values_stream().shuffle().peek(print)
    words.shuffle().peek(print)
    return topology


def counts_in_redis() -> TridentTopology:
    """A global sum into Redis of lengths looked up in a static state."""
    topology = TridentTopology()
    lengths = topology.new_static_state(LENGTHS)
    (
        sentences(topology)
        .state_query(lengths, Fields("sentence"), MapGet(), Fields("length"))
        .persistent_aggregate(REDIS, Fields("length"), Sum(), Fields("sum"))
    )
    return topology


def repartitions() -> TridentTopology:
    """partition_by, shuffle, broadcast and global_ between operations."""
    topology = TridentTopology()
    (
        sentences(topology)
        .partition_by(Fields("source"))
        .each(Fields("sentence"), Split(), Fields("word"))
        .parallelism_hint(4)
        .shuffle()
        .filter(FilterNull())
        .parallelism_hint(2)
        .broadcast()
        .project(Fields("word"))
        .global_()
        .peek(print)
    )
    return topology


def merge_and_join() -> TridentTopology:
    """Two spouts merged, and the merge joined with one of them."""
    topology = TridentTopology()
    first = sentences(topology, "first")
    second = sentences(topology, "second")
    merged = topology.merge(first, second).each(Fields("sentence"), Split(), Fields("word"))
    other = second.each(Fields("sentence"), Split(), Fields("token"))
    topology.join(
        merged,
        Fields("word"),
        other,
        Fields("token"),
        Fields("word", "sentence", "source", "sentence2", "source2"),
    ).peek(print)
    return topology


def drpc_queries() -> TridentTopology:
    """A DRPC stream summing word counts kept in memory by a regular stream."""
    topology = TridentTopology()
    counts = (
        sentences(topology)
        .each(Fields("sentence"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(MEMORY, Count(), Fields("count"))
    )
    (
        topology.new_drpc_stream("words", DRPC)
        .each(Fields("args"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .state_query(counts, Fields("word"), MapGet(), Fields("count"))
        .each(Fields("count"), FilterNull())
        .aggregate(Fields("count"), Sum(), Fields("sum"))
    )
    return topology


def three_spout_kinds() -> TridentTopology:
    """A batch, a transactional and an opaque spout side by side."""
    topology = TridentTopology()
    sentences(topology, "batch").peek(print)
    topology.new_stream("transactional", TRANSACTIONAL).parallelism_hint(2).peek(print)
    topology.new_stream("opaque", OPAQUE).peek(print)
    return topology


TOPOLOGIES = {
    "per_tuple_operations": per_tuple_operations,
    "counts_in_memory_and_sqlite": counts_in_memory_and_sqlite,
    "counts_in_redis": counts_in_redis,
    "repartitions": repartitions,
    "merge_and_join": merge_and_join,
    "drpc_queries": drpc_queries,
    "three_spout_kinds": three_spout_kinds,
}


def storm_shape(topology: TridentTopology) -> list[tuple[Any, ...]]:
    """Each component of the built topology: id, kind, what runs (the executor and the
    object it runs), the committer flag, parallelism, task count, its inputs with their
    groupings and its declared streams. Stream ids ``s<node id>`` are written
    ``s+<offset from the topology's first node id>`` (node ids count across topologies)."""
    built = topology.build()
    first = topology.nodes[0].id

    def stream(stream_id: str) -> str:
        found = re.fullmatch(r"s(\d+)", stream_id)
        return f"s+{int(found.group(1)) - first}" if found else stream_id

    shape = []
    for spec in built:
        component = spec.component
        inner = getattr(component, "bolt", None) or getattr(component, "spout", None)
        shape.append(
            (
                spec.component_id,
                spec.kind,
                type(component).__name__,
                type(inner).__name__,
                getattr(component, "committer", None),
                spec.parallelism,
                spec.num_tasks,
                [(s.source, stream(s.stream_id), s.grouping.describe()) for s in spec.inputs],
                {stream(sid): list(d.fields) for sid, d in spec.streams.items()},
            )
        )
    return shape


#: ``storm_shape`` of each topology as the compiler made it before it built an IR (and a
#: persistent aggregate's segment declaring the stream of its new values since).
LOWERED = {
    "per_tuple_operations": [
        (
            "sentences/coordinator",
            "spout",
            "TransactionalSpoutCoordinator",
            "SpoutGroupSource",
            None,
            1,
            1,
            [],
            {"$batch": ["attempt", "metadata", "committed"], "$commit": ["attempt"]},
        ),
        (
            "sentences",
            "bolt",
            "EmitterExecutor",
            "TridentSpoutAdapter",
            None,
            1,
            1,
            [("sentences/coordinator", "$batch", "all")],
            {"$coord": ["attempt", "count"], "default": ["$attempt", "sentence", "source"]},
        ),
        (
            "b1-each(Split)+filter(FilterNull)+1",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            3,
            3,
            [("sentences", "default", "local_or_shuffle"), ("sentences", "$coord", "direct")],
            {"$coord": ["attempt", "count"]},
        ),
    ],
    "counts_in_memory_and_sqlite": [
        (
            "sentences/coordinator",
            "spout",
            "TransactionalSpoutCoordinator",
            "SpoutGroupSource",
            None,
            1,
            1,
            [],
            {"$batch": ["attempt", "metadata", "committed"], "$commit": ["attempt"]},
        ),
        (
            "sentences",
            "bolt",
            "EmitterExecutor",
            "TridentSpoutAdapter",
            None,
            1,
            1,
            [("sentences/coordinator", "$batch", "all")],
            {"$coord": ["attempt", "count"], "default": ["$attempt", "sentence", "source"]},
        ),
        (
            "b1-each(Split)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [("sentences", "default", "local_or_shuffle"), ("sentences", "$coord", "direct")],
            {
                "$coord": ["attempt", "count"],
                "s+1": ["$attempt", "sentence", "source", "word"],
                "s+2": ["$attempt", "word", "$partial"],
                "s+5": ["$attempt", "word", "$partial"],
            },
        ),
        (
            "b2-persistent_aggregate(Count)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            True,
            1,
            1,
            [
                ("b1-each(Split)", "s+2", "fields(word)"),
                ("b1-each(Split)", "$coord", "direct"),
                ("sentences/coordinator", "$commit", "all"),
            ],
            {"s+4": ["$attempt", "word", "count"], "$coord": ["attempt", "count"]},
        ),
        (
            "b3-recheck",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            True,
            2,
            2,
            [
                ("b1-each(Split)", "s+5", "fields(word)"),
                ("b1-each(Split)", "$coord", "direct"),
                ("sentences/coordinator", "$commit", "all"),
            ],
            {"$coord": ["attempt", "count"], "s+7": ["$attempt", "word", "count"]},
        ),
        (
            "b4-peek(print)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [("b3-recheck", "s+7", "shuffle"), ("b3-recheck", "$coord", "direct")],
            {"$coord": ["attempt", "count"]},
        ),
        (
            "b5-peek(print)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [("b1-each(Split)", "s+1", "shuffle"), ("b1-each(Split)", "$coord", "direct")],
            {"$coord": ["attempt", "count"]},
        ),
    ],
    "counts_in_redis": [
        (
            "sentences/coordinator",
            "spout",
            "TransactionalSpoutCoordinator",
            "SpoutGroupSource",
            None,
            1,
            1,
            [],
            {"$batch": ["attempt", "metadata", "committed"], "$commit": ["attempt"]},
        ),
        (
            "sentences",
            "bolt",
            "EmitterExecutor",
            "TridentSpoutAdapter",
            None,
            1,
            1,
            [("sentences/coordinator", "$batch", "all")],
            {"$coord": ["attempt", "count"], "default": ["$attempt", "sentence", "source"]},
        ),
        (
            "b1-state_query(MapGet)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [("sentences", "default", "local_or_shuffle"), ("sentences", "$coord", "direct")],
            {"$coord": ["attempt", "count"], "s+2": ["$attempt", "$partial"]},
        ),
        (
            "b2-persistent_aggregate(Sum)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            True,
            1,
            1,
            [
                ("b1-state_query(MapGet)", "s+2", "global"),
                ("b1-state_query(MapGet)", "$coord", "direct"),
                ("sentences/coordinator", "$commit", "all"),
            ],
            {"s+4": ["$attempt", "sum"], "$coord": ["attempt", "count"]},
        ),
    ],
    "repartitions": [
        (
            "sentences/coordinator",
            "spout",
            "TransactionalSpoutCoordinator",
            "SpoutGroupSource",
            None,
            1,
            1,
            [],
            {"$batch": ["attempt", "metadata", "committed"], "$commit": ["attempt"]},
        ),
        (
            "sentences",
            "bolt",
            "EmitterExecutor",
            "TridentSpoutAdapter",
            None,
            1,
            1,
            [("sentences/coordinator", "$batch", "all")],
            {"$coord": ["attempt", "count"], "default": ["$attempt", "sentence", "source"]},
        ),
        (
            "b1-each(Split)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            4,
            4,
            [("sentences", "default", "fields(source)"), ("sentences", "$coord", "direct")],
            {"$coord": ["attempt", "count"], "s+2": ["$attempt", "sentence", "source", "word"]},
        ),
        (
            "b2-filter(FilterNull)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            2,
            2,
            [("b1-each(Split)", "s+2", "shuffle"), ("b1-each(Split)", "$coord", "direct")],
            {"$coord": ["attempt", "count"], "s+4": ["$attempt", "sentence", "source", "word"]},
        ),
        (
            "b3-project",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [
                ("b2-filter(FilterNull)", "s+4", "all"),
                ("b2-filter(FilterNull)", "$coord", "direct"),
            ],
            {"$coord": ["attempt", "count"], "s+6": ["$attempt", "word"]},
        ),
        (
            "b4-peek(print)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [("b3-project", "s+6", "global"), ("b3-project", "$coord", "direct")],
            {"$coord": ["attempt", "count"]},
        ),
    ],
    "merge_and_join": [
        (
            "first+second/coordinator",
            "spout",
            "TransactionalSpoutCoordinator",
            "SpoutGroupSource",
            None,
            1,
            1,
            [],
            {"$batch": ["attempt", "metadata", "committed"], "$commit": ["attempt"]},
        ),
        (
            "first",
            "bolt",
            "EmitterExecutor",
            "TridentSpoutAdapter",
            None,
            1,
            1,
            [("first+second/coordinator", "$batch", "all")],
            {"$coord": ["attempt", "count"], "default": ["$attempt", "sentence", "source"]},
        ),
        (
            "second",
            "bolt",
            "EmitterExecutor",
            "TridentSpoutAdapter",
            None,
            1,
            1,
            [("first+second/coordinator", "$batch", "all")],
            {"$coord": ["attempt", "count"], "default": ["$attempt", "sentence", "source"]},
        ),
        (
            "b1-merge+each(Split)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [
                ("first", "default", "local_or_shuffle"),
                ("second", "default", "local_or_shuffle"),
                ("first", "$coord", "direct"),
                ("second", "$coord", "direct"),
            ],
            {"$coord": ["attempt", "count"], "s+3": ["$attempt", "sentence", "source", "word"]},
        ),
        (
            "b2-each(Split)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [("second", "default", "local_or_shuffle"), ("second", "$coord", "direct")],
            {"$coord": ["attempt", "count"], "s+4": ["$attempt", "sentence", "source", "token"]},
        ),
        (
            "b3-join+peek(print)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [
                ("b1-merge+each(Split)", "s+3", "fields(word)"),
                ("b2-each(Split)", "s+4", "fields(token)"),
                ("b1-merge+each(Split)", "$coord", "direct"),
                ("b2-each(Split)", "$coord", "direct"),
            ],
            {"$coord": ["attempt", "count"]},
        ),
    ],
    "drpc_queries": [
        (
            "sentences/coordinator",
            "spout",
            "TransactionalSpoutCoordinator",
            "SpoutGroupSource",
            None,
            1,
            1,
            [],
            {"$batch": ["attempt", "metadata", "committed"], "$commit": ["attempt"]},
        ),
        (
            "sentences",
            "bolt",
            "EmitterExecutor",
            "TridentSpoutAdapter",
            None,
            1,
            1,
            [("sentences/coordinator", "$batch", "all")],
            {"$coord": ["attempt", "count"], "default": ["$attempt", "sentence", "source"]},
        ),
        (
            "drpc-words/coordinator",
            "spout",
            "TransactionalSpoutCoordinator",
            "DRPCSource",
            None,
            1,
            1,
            [],
            {"$batch": ["attempt", "metadata", "committed"], "$commit": ["attempt"]},
        ),
        (
            "drpc-words",
            "bolt",
            "EmitterExecutor",
            "DRPCSpoutAdapter",
            None,
            1,
            1,
            [("drpc-words/coordinator", "$batch", "all")],
            {"$coord": ["attempt", "count"], "default": ["$attempt", "args"]},
        ),
        (
            "b1-each(Split)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [("sentences", "default", "local_or_shuffle"), ("sentences", "$coord", "direct")],
            {"$coord": ["attempt", "count"], "s+2": ["$attempt", "word", "$partial"]},
        ),
        (
            "b2-persistent_aggregate(Count)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            True,
            1,
            1,
            [
                ("b1-each(Split)", "s+2", "fields(word)"),
                ("b1-each(Split)", "$coord", "direct"),
                ("sentences/coordinator", "$commit", "all"),
            ],
            {"s+4": ["$attempt", "word", "count"], "$coord": ["attempt", "count"]},
        ),
        (
            "b3-each(Split)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [("drpc-words", "default", "local_or_shuffle"), ("drpc-words", "$coord", "direct")],
            {"$coord": ["attempt", "count"], "s+6": ["$attempt", "args", "word"]},
        ),
        (
            "b4-state_query(MapGet)+filter(FilterNull)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [("b3-each(Split)", "s+6", "fields(word)"), ("b3-each(Split)", "$coord", "direct")],
            {"$coord": ["attempt", "count"], "s+10": ["$attempt", "$partial"]},
        ),
        (
            "b5-aggregate(Sum)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [
                ("b4-state_query(MapGet)+filter(FilterNull)", "s+10", "global"),
                ("b4-state_query(MapGet)+filter(FilterNull)", "$coord", "direct"),
            ],
            {"$coord": ["attempt", "count"], "s+12": ["$attempt", "sum"]},
        ),
        (
            "b6-return(words)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [("b5-aggregate(Sum)", "s+12", "global"), ("b5-aggregate(Sum)", "$coord", "direct")],
            {"$coord": ["attempt", "count"]},
        ),
    ],
    "three_spout_kinds": [
        (
            "batch+opaque+transactional/coordinator",
            "spout",
            "TransactionalSpoutCoordinator",
            "SpoutGroupSource",
            None,
            1,
            1,
            [],
            {"$batch": ["attempt", "metadata", "committed"], "$commit": ["attempt"]},
        ),
        (
            "batch",
            "bolt",
            "EmitterExecutor",
            "TridentSpoutAdapter",
            None,
            1,
            1,
            [("batch+opaque+transactional/coordinator", "$batch", "all")],
            {"$coord": ["attempt", "count"], "default": ["$attempt", "sentence", "source"]},
        ),
        (
            "transactional",
            "bolt",
            "EmitterExecutor",
            "TridentSpoutAdapter",
            None,
            2,
            2,
            [("batch+opaque+transactional/coordinator", "$batch", "all")],
            {"$coord": ["attempt", "count"], "default": ["$attempt", "id", "word"]},
        ),
        (
            "opaque",
            "bolt",
            "EmitterExecutor",
            "TridentSpoutAdapter",
            None,
            1,
            1,
            [("batch+opaque+transactional/coordinator", "$batch", "all")],
            {"$coord": ["attempt", "count"], "default": ["$attempt", "id", "word"]},
        ),
        (
            "b1-peek(print)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [("batch", "default", "local_or_shuffle"), ("batch", "$coord", "direct")],
            {"$coord": ["attempt", "count"]},
        ),
        (
            "b2-peek(print)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [
                ("transactional", "default", "local_or_shuffle"),
                ("transactional", "$coord", "direct"),
            ],
            {"$coord": ["attempt", "count"]},
        ),
        (
            "b3-peek(print)",
            "bolt",
            "BatchBoltExecutor",
            "TridentSegment",
            False,
            1,
            1,
            [("opaque", "default", "local_or_shuffle"), ("opaque", "$coord", "direct")],
            {"$coord": ["attempt", "count"]},
        ),
    ],
}


SHARED = StateLocality.SHARED
IN_PROCESS = StateLocality.IN_PROCESS
ONE_WRITER_FILE = StateLocality.ONE_WRITER_FILE
LOCAL = GroupingKind.LOCAL_OR_SHUFFLE


def compiled(topology: TridentTopology) -> TridentIR:
    """The IR the compiled topology carries."""
    ir = topology.build().batch_ir
    assert isinstance(ir, TridentIR)
    return ir


def stream(topology: TridentTopology, offset: int) -> str:
    """The id of the stream of the ``offset``-th node after the topology's first."""
    return f"s{topology.nodes[0].id + offset}"


def segment_rows(ir: TridentIR) -> list[tuple[Any, ...]]:
    """Each segment: id, tasks, committer flag, coordinator, state bindings, whether it
    returns DRPC results, and its processors' classes."""
    return [
        (
            s.component_id,
            s.tasks,
            s.committer,
            s.coordinator_id,
            s.states,
            s.returns_drpc_results,
            [type(p).__name__ for p in s.segment.processors],
        )
        for s in ir.segments
    ]


def test_per_tuple_operations_make_one_segment_after_the_spout() -> None:
    topology = per_tuple_operations()
    ir = compiled(topology)
    segment = "b1-each(Split)+filter(FilterNull)+1"
    coordinator = "sentences/coordinator"
    assert ir.sources == (
        SourceIR("sentences", SourceKind.BATCH, ("sentence", "source"), coordinator, 1, SENTENCES),
    )
    assert segment_rows(ir) == [
        (
            segment,
            3,
            False,
            coordinator,
            (),
            False,
            ["EachProcessor", "FilterProcessor", "ProjectProcessor"],
        )
    ]
    assert ir.edges == (EdgeIR("sentences", "default", segment, LOCAL),)
    assert ir.groups == (
        QueryGroupIR(REGULAR_GROUP_KEY, "sentences", coordinator, ("sentences",), (segment,)),
    )


def test_persistent_aggregates_commit_and_bind_their_states_committers_last() -> None:
    topology = counts_in_memory_and_sqlite()
    ir = compiled(topology)
    coordinator = "sentences/coordinator"
    uncached = dataclasses.replace(SQLITE, cache_size=0)
    assert segment_rows(ir) == [
        (
            "b1-each(Split)",
            1,
            False,
            coordinator,
            (),
            False,
            ["EachProcessor", "CombinePartialProcessor", "CombinePartialProcessor"],
        ),
        (
            "b2-persistent_aggregate(Count)",
            1,
            True,
            coordinator,
            (StateBinding(1, StateAccess.UPDATE, SQLITE, ONE_WRITER_FILE),),
            False,
            ["Processor", "PersistProcessor"],
        ),
        (
            "b3-recheck",
            2,
            True,
            coordinator,
            (
                StateBinding(1, StateAccess.UPDATE, MEMORY, IN_PROCESS),
                # A query of a state the topology updates reads it without a cache.
                StateBinding(2, StateAccess.QUERY, uncached, ONE_WRITER_FILE),
            ),
            False,
            ["Processor", "PersistProcessor", "StateQueryProcessor"],
        ),
        ("b4-peek(print)", 1, False, coordinator, (), False, ["Processor", "PeekProcessor"]),
        ("b5-peek(print)", 1, False, coordinator, (), False, ["Processor", "PeekProcessor"]),
    ]
    assert ir.segment("b3-recheck").uses_in_process_state
    assert not ir.segment("b2-persistent_aggregate(Count)").uses_in_process_state
    assert ir.edges == (
        EdgeIR("sentences", "default", "b1-each(Split)", LOCAL),
        EdgeIR(
            "b1-each(Split)",
            stream(topology, 2),
            "b2-persistent_aggregate(Count)",
            GroupingKind.FIELDS,
            ("word",),
        ),
        EdgeIR("b1-each(Split)", stream(topology, 5), "b3-recheck", GroupingKind.FIELDS, ("word",)),
        EdgeIR("b3-recheck", stream(topology, 7), "b4-peek(print)", GroupingKind.SHUFFLE),
        EdgeIR("b1-each(Split)", stream(topology, 1), "b5-peek(print)", GroupingKind.SHUFFLE),
    )
    # The committers and what they feed come after the other segments.
    assert ir.groups == (
        QueryGroupIR(
            REGULAR_GROUP_KEY,
            "sentences",
            coordinator,
            ("sentences",),
            (
                "b1-each(Split)",
                "b5-peek(print)",
                "b2-persistent_aggregate(Count)",
                "b3-recheck",
                "b4-peek(print)",
            ),
        ),
    )


def test_a_static_state_query_and_a_redis_update_bind_shared_states() -> None:
    topology = counts_in_redis()
    ir = compiled(topology)
    coordinator = "sentences/coordinator"
    assert segment_rows(ir) == [
        (
            "b1-state_query(MapGet)",
            1,
            False,
            coordinator,
            (StateBinding(0, StateAccess.QUERY, LENGTHS, SHARED),),
            False,
            ["StateQueryProcessor", "CombinePartialProcessor"],
        ),
        (
            "b2-persistent_aggregate(Sum)",
            1,
            True,
            coordinator,
            (StateBinding(1, StateAccess.UPDATE, REDIS, SHARED),),
            False,
            ["Processor", "PersistProcessor"],
        ),
    ]
    assert ir.edges == (
        EdgeIR("sentences", "default", "b1-state_query(MapGet)", LOCAL),
        EdgeIR(
            "b1-state_query(MapGet)",
            stream(topology, 2),
            "b2-persistent_aggregate(Sum)",
            GroupingKind.GLOBAL,
        ),
    )
    assert ir.groups[0].segments == ("b1-state_query(MapGet)", "b2-persistent_aggregate(Sum)")


def test_repartitions_are_the_groupings_of_the_edges_between_segments() -> None:
    topology = repartitions()
    ir = compiled(topology)
    assert [(s.component_id, s.tasks, s.committer) for s in ir.segments] == [
        ("b1-each(Split)", 4, False),
        ("b2-filter(FilterNull)", 2, False),
        ("b3-project", 1, False),
        ("b4-peek(print)", 1, False),
    ]
    assert ir.edges == (
        EdgeIR("sentences", "default", "b1-each(Split)", GroupingKind.FIELDS, ("source",)),
        EdgeIR(
            "b1-each(Split)", stream(topology, 2), "b2-filter(FilterNull)", GroupingKind.SHUFFLE
        ),
        EdgeIR("b2-filter(FilterNull)", stream(topology, 4), "b3-project", GroupingKind.ALL),
        EdgeIR("b3-project", stream(topology, 6), "b4-peek(print)", GroupingKind.GLOBAL),
    )
    assert ir.groups[0].segments == tuple(s.component_id for s in ir.segments)


def test_a_merge_and_a_join_receive_every_input_stream() -> None:
    topology = merge_and_join()
    ir = compiled(topology)
    coordinator = "first+second/coordinator"
    fields = ("sentence", "source")
    assert ir.sources == (
        SourceIR("first", SourceKind.BATCH, fields, coordinator, 1, SENTENCES),
        SourceIR("second", SourceKind.BATCH, fields, coordinator, 1, SENTENCES),
    )
    merge, each, join = "b1-merge+each(Split)", "b2-each(Split)", "b3-join+peek(print)"
    assert ir.edges == (
        EdgeIR("first", "default", merge, LOCAL),
        EdgeIR("second", "default", merge, LOCAL),
        EdgeIR("second", "default", each, LOCAL),
        EdgeIR(merge, stream(topology, 3), join, GroupingKind.FIELDS, ("word",)),
        EdgeIR(each, stream(topology, 4), join, GroupingKind.FIELDS, ("token",)),
    )
    assert ir.edges_into(join) == list(ir.edges[3:])
    assert ir.edges_from("second") == [ir.edges[1], ir.edges[2]]
    assert ir.groups == (
        QueryGroupIR(
            REGULAR_GROUP_KEY, "first+second", coordinator, ("first", "second"), (merge, each, join)
        ),
    )


def test_a_drpc_stream_is_a_source_with_its_own_group() -> None:
    topology = drpc_queries()
    ir = compiled(topology)
    assert ir.sources == (
        SourceIR(
            "sentences",
            SourceKind.BATCH,
            ("sentence", "source"),
            "sentences/coordinator",
            1,
            SENTENCES,
        ),
        SourceIR(
            "drpc-words",
            SourceKind.DRPC,
            ("args",),
            "drpc-words/coordinator",
            1,
            drpc=DRPCEndpoint("words", DRPC),
        ),
    )
    query = "b4-state_query(MapGet)+filter(FilterNull)"
    assert [row[:6] for row in segment_rows(ir)] == [
        ("b1-each(Split)", 1, False, "sentences/coordinator", (), False),
        (
            "b2-persistent_aggregate(Count)",
            1,
            True,
            "sentences/coordinator",
            (StateBinding(1, StateAccess.UPDATE, MEMORY, IN_PROCESS),),
            False,
        ),
        ("b3-each(Split)", 1, False, "drpc-words/coordinator", (), False),
        (
            query,
            1,
            False,
            "drpc-words/coordinator",
            # Read where its partitions are: with the tasks of the state's segment.
            (
                StateBinding(
                    1, StateAccess.QUERY, MEMORY, IN_PROCESS, "b2-persistent_aggregate(Count)"
                ),
            ),
            False,
        ),
        ("b5-aggregate(Sum)", 1, False, "drpc-words/coordinator", (), False),
        ("b6-return(words)", 1, False, "drpc-words/coordinator", (), True),
    ]
    assert [s.colocated_with for s in ir.segments] == [
        None, None, None, "b2-persistent_aggregate(Count)", None, None,
    ]  # fmt: skip
    assert ir.edges[2:] == (
        EdgeIR("drpc-words", "default", "b3-each(Split)", LOCAL),
        EdgeIR("b3-each(Split)", stream(topology, 6), query, GroupingKind.FIELDS, ("word",)),
        EdgeIR(query, stream(topology, 10), "b5-aggregate(Sum)", GroupingKind.GLOBAL),
        EdgeIR("b5-aggregate(Sum)", stream(topology, 12), "b6-return(words)", GroupingKind.GLOBAL),
    )
    assert ir.groups == (
        QueryGroupIR(
            REGULAR_GROUP_KEY,
            "sentences",
            "sentences/coordinator",
            ("sentences",),
            ("b1-each(Split)", "b2-persistent_aggregate(Count)"),
        ),
        QueryGroupIR(
            "drpc-words",
            "drpc-words",
            "drpc-words/coordinator",
            ("drpc-words",),
            ("b3-each(Split)", query, "b5-aggregate(Sum)", "b6-return(words)"),
        ),
    )


def test_a_drpc_only_topology_has_no_regular_group() -> None:
    topology = TridentTopology()
    topology.new_drpc_stream("echo", DRPC).peek(print)
    ir = compiled(topology)
    assert [(g.key, g.sources, g.segments) for g in ir.groups] == [
        ("drpc-echo", ("drpc-echo",), ("b1-peek(print)", "b2-return(echo)"))
    ]


def test_spouts_of_every_kind_share_the_regular_group() -> None:
    ir = compiled(three_spout_kinds())
    coordinator = "batch+opaque+transactional/coordinator"
    assert ir.sources == (
        SourceIR("batch", SourceKind.BATCH, ("sentence", "source"), coordinator, 1, SENTENCES),
        SourceIR(
            "transactional", SourceKind.TRANSACTIONAL, ("id", "word"), coordinator, 2, TRANSACTIONAL
        ),
        SourceIR("opaque", SourceKind.OPAQUE, ("id", "word"), coordinator, 1, OPAQUE),
    )
    assert ir.edges == (
        EdgeIR("batch", "default", "b1-peek(print)", LOCAL),
        EdgeIR("transactional", "default", "b2-peek(print)", LOCAL),
        EdgeIR("opaque", "default", "b3-peek(print)", LOCAL),
    )
    assert ir.groups == (
        QueryGroupIR(
            REGULAR_GROUP_KEY,
            "batch+opaque+transactional",
            coordinator,
            ("batch", "transactional", "opaque"),
            ("b1-peek(print)", "b2-peek(print)", "b3-peek(print)"),
        ),
    )


class ProcessLocalFactory(StateFactory):
    """A user's factory whose states live in the process that makes them."""

    locality = StateLocality.IN_PROCESS

    def make_state(
        self, conf: dict[str, Any], context: Any, partition_index: int, num_partitions: int
    ) -> MapState:
        return MEMORY.make_state(conf, context, partition_index, num_partitions)


class DuckFactory:
    """A factory that is not a ``StateFactory``."""

    def make_state(
        self, conf: dict[str, Any], context: Any, partition_index: int, num_partitions: int
    ) -> MapState:
        return MEMORY.make_state(conf, context, partition_index, num_partitions)


def test_a_state_binding_has_the_locality_its_factory_declares() -> None:
    local, duck = ProcessLocalFactory(), DuckFactory()
    topology = TridentTopology()
    words = sentences(topology).each(Fields("sentence"), Split(), Fields("word"))
    words.group_by(Fields("word")).persistent_aggregate(local, Count(), Fields("count"))
    words.group_by(Fields("word")).persistent_aggregate(duck, Count(), Fields("count"))
    ir = compiled(topology)
    assert [s.states for s in ir.segments[1:]] == [
        (StateBinding(1, StateAccess.UPDATE, local, IN_PROCESS),),
        (StateBinding(1, StateAccess.UPDATE, duck, SHARED),),
    ]


def test_lookups_name_a_missing_component() -> None:
    ir = compiled(per_tuple_operations())
    assert ir.source("sentences") is ir.sources[0]
    assert ir.segment("b1-each(Split)+filter(FilterNull)+1") is ir.segments[0]
    with pytest.raises(KeyError, match="no Trident source 'b1"):
        ir.source("b1-each(Split)+filter(FilterNull)+1")
    with pytest.raises(KeyError, match="no Trident segment 'sentences'"):
        ir.segment("sentences")


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_lowering_gives_the_topology_the_compiler_gave_before_the_ir(name: str) -> None:
    assert storm_shape(TOPOLOGIES[name]()) == LOWERED[name]


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_the_lowered_components_run_the_objects_of_the_ir(name: str) -> None:
    built = TOPOLOGIES[name]().build()
    ir = built.batch_ir
    assert isinstance(ir, TridentIR)
    for segment in ir.segments:
        assert built.get_component(segment.component_id).component.bolt is segment.segment
    for source in ir.sources:
        adapter = built.get_component(source.component_id).component.spout
        assert getattr(adapter, "spout", None) is source.spout
    for group in ir.groups:
        coordinator = built.get_component(group.coordinator_id).component
        assert coordinator.transactional_id == group.namespace
        sources = coordinator.spout
        if group.key == REGULAR_GROUP_KEY:
            assert sources.spouts == {cid: ir.source(cid).spout for cid in group.sources}
        else:
            endpoint = ir.source(group.sources[0]).drpc
            assert (sources.function, sources.drpc) == (endpoint.function, endpoint.drpc)


def test_the_system_topology_carries_the_ir_and_core_topologies_have_none() -> None:
    built = drpc_queries().build()
    assert system_topology(built, {}).batch_ir is built.batch_ir
    assert system_topology(built, {"topology.acker.executors": 0}).batch_ir is built.batch_ir
    builder = TopologyBuilder()
    builder.set_spout("spout", FixedTupleSpout([["a"]], Fields("word")), 1)
    builder.set_bolt("bolt", CapturingBolt(), 1).shuffle_grouping("spout")
    assert builder.create_topology().batch_ir is None


def test_the_ir_names_the_users_spouts_and_numbers_its_streams() -> None:
    topology = three_spout_kinds()
    topology.new_drpc_stream("words", LocalDRPC()).peek(print)
    ir = compiled(topology)
    assert [source.component_id for source in ir.sources][-1] == "drpc-words"
    found = ir.user_components()
    assert list(found) == ["batch", "transactional", "opaque"]  # no DRPC stream
    assert found["batch"] is SENTENCES
    assert found["transactional"] is TRANSACTIONAL and found["opaque"] is OPAQUE
    assert ir.numbered_streams is True
