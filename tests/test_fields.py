"""Unit tests of ``Fields``: construction, sequence behaviour, selection, pickling."""

from __future__ import annotations

import copy
import pickle

import pytest

from squall import BasicBolt, Fields, TopologyBuilder, Values
from squall.testing import FixedTupleSpout, complete_topology


def test_varargs_and_list_forms_are_equal() -> None:
    assert Fields("a", "b", "c") == Fields(["a", "b", "c"])
    assert Fields("a", "b") == Fields(("a", "b"))
    assert Fields("word") == Fields(["word"])
    assert hash(Fields("a", "b")) == hash(Fields(["a", "b"]))


def test_equality_depends_on_names_and_order() -> None:
    assert Fields("a", "b") != Fields("b", "a")
    assert Fields("a", "b") != Fields("a")
    assert Fields("a") != ["a"]
    assert Fields("a") != "a"


def test_len_and_iteration_keep_declaration_order() -> None:
    fields = Fields("word", "count", "ts")
    assert len(fields) == 3
    assert list(fields) == ["word", "count", "ts"]
    assert fields[0] == "word"
    assert fields[-1] == "ts"
    assert fields.to_list() == ["word", "count", "ts"]


def test_index_and_contains() -> None:
    fields = Fields("word", "count", "ts")
    assert fields.index("word") == 0
    assert fields.index("count") == 1
    assert fields.index("ts") == 2
    assert "count" in fields
    assert "missing" not in fields
    assert 0 not in fields


def test_index_of_unknown_name_raises_value_error_naming_it() -> None:
    fields = Fields("word", "count")
    with pytest.raises(ValueError, match="'missing'") as info:
        fields.index("missing")
    assert "word" in str(info.value)


def test_select_returns_values_in_selector_order() -> None:
    fields = Fields("a", "b", "c")
    values = [1, 2, 3]
    assert fields.select(Fields("c", "a"), values) == [3, 1]
    assert fields.select(Fields("b"), values) == [2]
    assert fields.select(Fields("a", "b", "c"), values) == [1, 2, 3]


def test_field_index_is_a_copy() -> None:
    fields = Fields("a", "b")
    mapping = fields.field_index()
    assert mapping == {"a": 0, "b": 1}
    mapping["c"] = 2
    assert "c" not in fields


@pytest.mark.parametrize(
    "names",
    [("a", "a"), (["x", "y", "x"],)],
    ids=["varargs", "list"],
)
def test_duplicate_names_raise(names: tuple) -> None:
    with pytest.raises(ValueError, match="duplicate"):
        Fields(*names)


@pytest.mark.parametrize(
    "names",
    [("",), ("a", ""), ([""],), (["a", None],), (["a", 3],)],
    ids=["empty", "empty-second", "empty-in-list", "none-in-list", "int-in-list"],
)
def test_empty_or_non_string_names_raise(names: tuple) -> None:
    with pytest.raises(ValueError, match="non-empty strings"):
        Fields(*names)


def test_pickle_round_trip() -> None:
    fields = Fields("word", "count")
    restored = pickle.loads(pickle.dumps(fields))
    assert restored == fields
    assert list(restored) == ["word", "count"]
    assert restored.index("count") == 1
    assert "word" in restored
    assert restored.select(Fields("count"), ["w", 7]) == [7]


def test_pickle_round_trip_of_empty_fields() -> None:
    restored = pickle.loads(pickle.dumps(Fields()))
    assert restored == Fields([])
    assert len(restored) == 0
    assert "a" not in restored


def test_deepcopy_keeps_the_index() -> None:
    fields = Fields("a", "b")
    clone = copy.deepcopy(fields)
    assert clone == fields
    assert clone.index("b") == 1


def test_values_builds_the_plain_list_a_collector_emits() -> None:
    values = Values("cow", 3)
    assert values == ["cow", 3] and type(values) is list
    assert Values() == []


def test_values_emitted_by_a_ported_bolt_arrive_as_the_tuple_values() -> None:
    class Exclaim(BasicBolt):
        def execute(self, tup, collector):  # type: ignore[no-untyped-def]
            collector.emit(Values(tup.get_string(0) + "!!!", len(tup.get_string(0))))

        def declare_output_fields(self, declarer):  # type: ignore[no-untyped-def]
            declarer.declare(Fields("word", "length"))

    builder = TopologyBuilder()
    builder.set_spout("words", FixedTupleSpout([["cow"], ["moon"]], fields=Fields("word")))
    builder.set_bolt("exclaim", Exclaim()).shuffle_grouping("words")
    result = complete_topology(builder.create_topology())
    assert sorted(result.read_tuples("exclaim")) == [["cow!!!", 3], ["moon!!!", 4]]
