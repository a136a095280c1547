"""Component ids of compiled Trident topologies: ``b<N>-`` and the segment's ``.name()``
or operations; the spouts' emitters and coordinators keep their stream ids."""

from __future__ import annotations

import json
from typing import Any

from squall import Fields
from squall.drpc import LocalDRPC
from squall.trident import (
    Count,
    FilterNull,
    FixedBatchSpout,
    Function,
    MapGet,
    Sum,
    TridentCollector,
    TridentTopology,
    TridentTuple,
)
from squall.trident.compiler import describe
from squall.trident.state import MemoryMapState
from tests.conftest import Engine


class Split(Function):
    """One tuple per word of the first input value."""

    def execute(self, tup: TridentTuple, collector: TridentCollector) -> None:
        for word in tup[0].split():
            collector.emit([word])


def tokens(tup: TridentTuple) -> list[str]:
    return list(tup[0].split())


def sentences(topology: TridentTopology, stream_id: str = "sentences") -> Any:
    return topology.new_stream(
        stream_id, FixedBatchSpout(Fields("sentence"), 2, ["the cow"], ["the man"])
    )


def component_ids(topology: TridentTopology) -> list[str]:
    """The user components of the built topology (system components left out), sorted."""
    return sorted(spec.component_id for spec in topology.build() if not spec.system)


def word_counts(topology: TridentTopology) -> Any:
    return (
        sentences(topology)
        .each(Fields("sentence"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count"))
    )


def test_each_names_its_segment_after_the_function_class() -> None:
    topology = TridentTopology()
    sentences(topology).each(Fields("sentence"), Split(), Fields("word"))

    assert component_ids(topology) == ["b1-each(Split)", "sentences", "sentences/coordinator"]


def test_plain_callables_are_named_by_their_function_and_lambdas_as_lambda() -> None:
    topology = TridentTopology()
    sentences(topology, "a").each(Fields("sentence"), tokens, Fields("word"))
    sentences(topology, "b").map(lambda tup: [tup[0].upper()])

    assert component_ids(topology) == [
        "a",
        "a+b/coordinator",
        "b",
        "b1-each(tokens)",
        "b2-map(lambda)",
    ]


def test_group_by_and_persistent_aggregate_name_both_sides_of_the_repartition() -> None:
    topology = TridentTopology()
    word_counts(topology)

    assert [s["component"] for s in describe(topology)] == [
        "sentences",
        "b1-each(Split)",  # the map-side partial counts run here too
        "b2-persistent_aggregate(Count)",
    ]


def test_a_long_segment_shows_its_first_two_operations_and_how_many_more() -> None:
    topology = TridentTopology()
    (
        sentences(topology)
        .each(Fields("sentence"), Split(), Fields("word"))
        .each(Fields("word"), FilterNull())
        .map(lambda tup: [tup[0], tup[1].upper()])
        .project(Fields("word"))
        .shuffle()
        .each(Fields("word"), FilterNull())
        .aggregate(Fields("word"), Count(), Fields("n"))
    )

    assert [s["component"] for s in describe(topology)][1:] == [
        "b1-each(Split)+filter(FilterNull)+2",
        "b2-filter(FilterNull)",
        "b3-aggregate(Count)",
    ]


def test_a_segment_of_only_a_repartition_is_named_after_it() -> None:
    topology = TridentTopology()
    sentences(topology).each(Fields("sentence"), FilterNull()).partition_by(Fields("sentence"))

    assert [s["component"] for s in describe(topology)][1:] == [
        "b1-filter(FilterNull)",
        "b2-partition_by",
    ]


def test_a_drpc_stream_with_a_state_query_names_every_step() -> None:
    topology = TridentTopology()
    counts = word_counts(topology)
    with LocalDRPC() as drpc:
        (
            topology.new_drpc_stream("words", drpc)
            .each(Fields("args"), Split(), Fields("word"))
            .group_by(Fields("word"))
            .state_query(counts, Fields("word"), MapGet(), Fields("count"))
            .each(Fields("count"), FilterNull())
            .aggregate(Fields("count"), Sum(), Fields("sum"))
        )

        assert component_ids(topology) == [
            "b1-each(Split)",
            "b2-persistent_aggregate(Count)",
            "b3-each(Split)",
            "b4-state_query(MapGet)+filter(FilterNull)",
            "b5-aggregate(Sum)",
            "b6-return(words)",
            "drpc-words",
            "drpc-words/coordinator",
            "sentences",
            "sentences/coordinator",
        ]


def test_a_join_is_named_join() -> None:
    topology = TridentTopology()
    left = topology.new_stream("left", FixedBatchSpout(Fields("k", "a"), 2, [1, "x"]))
    right = topology.new_stream("right", FixedBatchSpout(Fields("k", "b"), 2, [1, "y"]))
    topology.join(left, Fields("k"), right, Fields("k"), Fields("k", "a", "b")).each(
        Fields("a"), FilterNull()
    )

    assert component_ids(topology) == [
        "b1-join+filter(FilterNull)",
        "left",
        "left+right/coordinator",
        "right",
    ]


def test_a_name_replaces_the_operations_and_is_made_file_name_safe() -> None:
    topology = TridentTopology()
    (
        sentences(topology)
        .each(Fields("sentence"), Split(), Fields("word"))
        .name("split words/v2")
        .each(Fields("word"), FilterNull())
        .name("ignored: the first name wins")
        .group_by(Fields("word"))
        .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count"))
    )

    assert [s["component"] for s in describe(topology)][1:] == [
        "b1-split_words_v2",
        "b2-persistent_aggregate(Count)",
    ]


def test_the_same_code_gives_the_same_ids() -> None:
    first, second = TridentTopology(), TridentTopology()
    word_counts(first)
    word_counts(second)

    assert component_ids(first) == component_ids(second)


def test_the_ids_are_what_the_engine_reports(engine: Engine) -> None:
    with LocalDRPC(timeout_secs=engine.timeout) as drpc:
        topology = TridentTopology()
        counts = word_counts(topology)
        topology.new_drpc_stream("count", drpc).each(
            Fields("args"), Split(), Fields("word")
        ).group_by(Fields("word")).state_query(counts, Fields("word"), MapGet(), Fields("n"))
        with engine.running(topology.build()) as run:
            run.drain()
            run.wait_until(
                lambda: json.loads(drpc.execute("count", "cow")) == [["cow", "cow", 1]],
                engine.timeout,
            )
            reported = set(run.info().components)

    assert {
        "b1-each(Split)",
        "b2-persistent_aggregate(Count)",
        "b3-each(Split)",
        "b4-state_query(MapGet)",
        "b5-return(count)",
        "drpc-count",
        "sentences",
    } <= reported
