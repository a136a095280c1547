"""The shape of a topology that a Spark checkpoint keeps (``squall.spark.control.shape``):
what counts as another topology, and what the refusal says. Without Spark running."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from squall import BasicBolt, Fields, TopologyBuilder
from squall.model.topology import StormTopology
from squall.spark.control.shape import (
    SHAPE_FILE,
    CheckpointMismatchError,
    check_shape,
    differences,
    shape_of,
)
from squall.testing import FixedTupleSpout
from squall.trident import FixedBatchSpout, Function, TridentTopology
from squall.trident.operations import Count as CountAggregator
from squall.trident.state import MemoryMapState
from squall.windowing import Count, WindowedBolt


class Double(BasicBolt):
    outputs = ["n"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([2 * tup["n"]])


class Triple(Double):
    pass


class Split(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup[0].split():
            collector.emit([word])


class Window(WindowedBolt):
    def execute(self, window: Any) -> None:
        pass


def topology(
    bolt: type[Double] = Double,
    tasks: int = 2,
    grouping: str = "shuffle",
    window: bool = False,
    spout: str = "numbers",
) -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout(spout, FixedTupleSpout([[1]], ["n"]))
    declarer = builder.set_bolt("double", bolt(), tasks)
    if grouping == "fields":
        declarer.fields_grouping(spout, ["n"])
    else:
        declarer.shuffle_grouping(spout)
    if window:
        builder.set_bolt("window", Window().with_window(Count(2))).global_grouping("double")
    return builder.create_topology()


def test_the_same_topology_built_again_has_the_same_shape() -> None:
    assert differences(shape_of(topology()), shape_of(topology())) == []
    assert differences(shape_of(topology(window=True)), shape_of(topology(window=True))) == []


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        (
            topology(bolt=Triple),
            "component 'double': class Triple, was Double",
        ),
        (topology(tasks=3), "component 'double': 3 tasks, was 2"),
        (
            topology(grouping="fields"),
            "component 'double': input numbers:default by fields(n), was shuffle",
        ),
        (
            topology(spout="values"),
            "component 'double': no input numbers:default, was by shuffle; new input "
            "values:default by shuffle; component 'numbers' is gone; component 'values' is new",
        ),
        (topology(window=True), "component 'window' is new"),
    ],
    ids=["class", "tasks", "grouping", "spout", "component"],
)
def test_what_differs_is_named(changed: StormTopology, expected: str) -> None:
    assert "; ".join(differences(shape_of(topology()), shape_of(changed))) == expected


def trident_word_count(tasks: int = 2) -> StormTopology:
    spout = FixedBatchSpout(Fields("sentence"), 2, ["the cow"], ["the moon"])
    topology = TridentTopology()
    (
        topology.new_stream("sentences", spout)
        .each(Fields("sentence"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(MemoryMapState.factory(), CountAggregator(), Fields("count"))
        .parallelism_hint(tasks)
    )
    return topology.build()


def test_a_trident_topology_built_again_has_the_same_shape() -> None:
    """The ids of the streams between segments are numbered over the process: the
    second build's differ, its shape does not."""
    first, second = trident_word_count(), trident_word_count()
    assert differences(shape_of(first), shape_of(second)) == []
    changed = differences(shape_of(first), shape_of(trident_word_count(tasks=3)))
    assert changed == ["component 'b2-persistent_aggregate(Count)': 3 tasks, was 2"]
    assert shape_of(first)["sentences"]["runs"] == "squall.trident.spouts.FixedBatchSpout"


def test_the_class_a_windowed_bolt_runs_is_part_of_its_shape() -> None:
    shape = shape_of(topology(window=True))
    assert shape["window"]["class"] == ("squall.windowing.executor.WindowedBoltExecutor(Window)")


def test_a_checkpoint_of_another_topology_is_refused_and_fresh_removes_it(
    tmp_path: Path,
) -> None:
    directory = str(tmp_path / "wc")
    check_shape(directory, "wc", topology(), fresh=False)  # a new checkpoint: recorded
    with open(os.path.join(directory, SHAPE_FILE), encoding="utf-8") as file:
        assert json.load(file)["components"] == shape_of(topology())
    (tmp_path / "wc" / "left-by-the-run").write_text("x")
    check_shape(directory, "wc", topology(), fresh=False)  # the same topology: resumes
    assert (tmp_path / "wc" / "left-by-the-run").exists()

    with pytest.raises(CheckpointMismatchError) as refused:
        check_shape(directory, "wc", topology(tasks=3), fresh=False)
    assert str(refused.value) == (
        f"topology 'wc' cannot resume from the checkpoint in {directory}: another topology "
        "wrote it (component 'double': 3 tasks, was 2). Submit it under another name or "
        "checkpoint directory, or with fresh=True (squall run --fresh) to discard that "
        "checkpoint and start afresh"
    )

    check_shape(directory, "wc", topology(tasks=3), fresh=True)
    assert sorted(os.listdir(directory)) == [SHAPE_FILE]  # the old checkpoint is gone
    check_shape(directory, "wc", topology(tasks=3), fresh=False)
