"""Unit tests of ``Tuple``: access by position and name, source, errors, tick tuples."""

from __future__ import annotations

import pytest

from squall import Fields, Tuple, is_tick_tuple
from squall.model.tuple import TICK_STREAM_INFO, StreamInfo


def make_tuple(
    values: list,
    names: tuple[str, ...] = ("word", "count"),
    component: str = "split",
    stream: str = "default",
    task: int = 7,
) -> Tuple:
    return Tuple(values, StreamInfo(component, stream, Fields(*names)), task)


def test_access_by_position() -> None:
    tup = make_tuple(["cow", 3])
    assert tup[0] == "cow"
    assert tup[1] == 3
    assert tup[-1] == 3
    assert tup.get_value(0) == "cow"
    assert tup.get_value(1) == 3


def test_access_by_name() -> None:
    tup = make_tuple(["cow", 3])
    assert tup["word"] == "cow"
    assert tup["count"] == 3
    assert tup.get_value_by_field("word") == "cow"
    assert tup.get_value_by_field("count") == 3


def test_select_len_and_iteration() -> None:
    tup = make_tuple(["a", 1, 2.5], names=("x", "y", "z"))
    assert tup.select(Fields("z", "x")) == [2.5, "a"]
    assert tup.select(["y"]) == [1]
    assert len(tup) == 3
    assert list(tup) == ["a", 1, 2.5]
    assert list(tup.values) == ["a", 1, 2.5]


def test_source_and_fields() -> None:
    tup = make_tuple(["cow", 3], component="split", stream="words", task=12)
    assert tup.source_component == "split"
    assert tup.source_stream == "words"
    assert tup.source_task == 12
    assert tup.fields == Fields("word", "count")
    assert tup.source_global_stream_id == ("split", "words")


def test_position_out_of_range_raises_index_error() -> None:
    tup = make_tuple(["cow", 3])
    with pytest.raises(IndexError):
        tup[2]
    with pytest.raises(IndexError):
        tup.get_value(5)


def _assert_names_component_stream_field(error: KeyError, field: str) -> None:
    message = error.args[0]
    assert "'split'" in message
    assert "'words'" in message
    assert repr(field) in message


@pytest.mark.parametrize(
    "access",
    [
        lambda t: t["nope"],
        lambda t: t.get_value_by_field("nope"),
        lambda t: t.select(["word", "nope"]),
        lambda t: t.field_index("nope"),
    ],
    ids=["getitem", "get_value_by_field", "select", "field_index"],
)
def test_unknown_field_raises_key_error_naming_component_stream_and_field(access) -> None:
    tup = make_tuple(["cow", 3], component="split", stream="words")
    with pytest.raises(KeyError) as info:
        access(tup)
    _assert_names_component_stream_field(info.value, "nope")


def test_contains_reports_declared_fields() -> None:
    tup = make_tuple(["cow", 3])
    assert tup.contains("word")
    assert not tup.contains("nope")


def test_equality_compares_values_and_source() -> None:
    assert make_tuple(["a", 1]) == make_tuple(["a", 1])
    assert make_tuple(["a", 1]) != make_tuple(["a", 2])
    assert make_tuple(["a", 1], task=1) != make_tuple(["a", 1], task=2)
    assert make_tuple(["a", 1], stream="s") != make_tuple(["a", 1], stream="t")


def test_is_tick_tuple_true_for_system_tick() -> None:
    assert is_tick_tuple(Tuple([30], TICK_STREAM_INFO, -1))
    assert is_tick_tuple(
        make_tuple([30], names=("rate_secs",), component="__system", stream="__tick")
    )


@pytest.mark.parametrize(
    ("component", "stream"),
    [
        ("__system", "default"),
        ("__system", "__metrics"),
        ("spout", "__tick"),
        ("spout", "default"),
        ("__acker", "__tick"),
    ],
)
def test_is_tick_tuple_false_otherwise(component: str, stream: str) -> None:
    assert not is_tick_tuple(make_tuple([1], names=("x",), component=component, stream=stream))
