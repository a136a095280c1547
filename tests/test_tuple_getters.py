"""Storm's typed getters on ``Tuple`` (``get_integer``, ``get_string_by_field``...):
exact values, Storm's casts (bool is not an int, an int is not a double, None passes),
and errors naming the getter, position, field and type."""

from __future__ import annotations

from typing import Any

import pytest

from squall import Fields, Tuple
from squall.model.tuple import StreamInfo

NAMES = ("i", "f", "s", "b", "raw", "none")
VALUES: list[Any] = [7, 2.5, "cow", True, b"\x00\x01", None]


def make_tuple(values: list[Any] = VALUES, names: tuple[str, ...] = NAMES) -> Tuple:
    return Tuple(list(values), StreamInfo("split", "words", Fields(*names)), 7)


@pytest.mark.parametrize(
    ("getter", "position", "expected"),
    [
        ("get_integer", 0, 7),
        ("get_long", 0, 7),
        ("get_short", 0, 7),
        ("get_byte", 0, 7),
        ("get_float", 1, 2.5),
        ("get_double", 1, 2.5),
        ("get_string", 2, "cow"),
        ("get_boolean", 3, True),
        ("get_binary", 4, b"\x00\x01"),
    ],
)
def test_typed_getters_by_position_and_by_field(getter: str, position: int, expected: Any) -> None:
    tup = make_tuple()
    assert getattr(tup, getter)(position) == expected
    assert getattr(tup, f"{getter}_by_field")(NAMES[position]) == expected
    # None passes through every getter, as Storm's cast of null does.
    assert getattr(tup, getter)(5) is None
    assert getattr(tup, f"{getter}_by_field")("none") is None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda t: t.get_integer(2),
            "get_integer(2): the value at position 2 (field 's') of the tuple from "
            "'split' on stream 'words' is a str ('cow'), not an int",
        ),
        (
            lambda t: t.get_integer_by_field("b"),
            "get_integer_by_field('b'): the value at position 3 (field 'b') of the tuple "
            "from 'split' on stream 'words' is a bool (True), not an int",
        ),
        (
            lambda t: t.get_double(0),
            "get_double(0): the value at position 0 (field 'i') of the tuple from 'split' "
            "on stream 'words' is an int (7), not a float",
        ),
        (
            lambda t: t.get_boolean_by_field("i"),
            "get_boolean_by_field('i'): the value at position 0 (field 'i') of the tuple "
            "from 'split' on stream 'words' is an int (7), not a bool",
        ),
        (
            lambda t: t.get_binary(2),
            "get_binary(2): the value at position 2 (field 's') of the tuple from 'split' "
            "on stream 'words' is a str ('cow'), not bytes",
        ),
        (
            lambda t: t.get_string(4),
            "get_string(4): the value at position 4 (field 'raw') of the tuple from "
            "'split' on stream 'words' is a bytes (b'\\x00\\x01'), not a str",
        ),
    ],
)
def test_a_getter_of_the_wrong_type_names_getter_position_field_and_type(
    call: Any, message: str
) -> None:
    with pytest.raises(TypeError) as raised:
        call(make_tuple())
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("getter", "value", "java"),
    [
        ("get_byte", 128, "byte"),
        ("get_byte", -129, "byte"),
        ("get_short", 32_768, "short"),
        ("get_integer", 2**31, "int"),
        ("get_long", 2**63, "long"),
    ],
)
def test_an_int_out_of_the_java_type_range_is_refused(getter: str, value: int, java: str) -> None:
    tup = make_tuple([value], ("n",))
    with pytest.raises(TypeError, match=rf"is {value}, out of the range of a Java {java}"):
        getattr(tup, getter)(0)
    smaller = value - 1 if value > 0 else value + 1
    assert getattr(make_tuple([smaller], ("n",)), getter)(0) == smaller


def test_bytearray_is_binary_and_an_unknown_field_names_the_stream() -> None:
    tup = make_tuple([bytearray(b"ab")], ("raw",))
    assert tup.get_binary(0) == bytearray(b"ab")
    with pytest.raises(KeyError, match="has no field 'nope'; its fields are \\['raw'\\]"):
        tup.get_binary_by_field("nope")
    with pytest.raises(IndexError):
        tup.get_integer(3)


def test_storm_accessors_of_values_fields_and_source() -> None:
    tup = make_tuple()
    assert tup.get_values() == VALUES
    assert tup.get_fields() == Fields(*NAMES)
    assert tup.size() == 6
    assert tup.get_source_component() == "split"
    assert tup.get_source_stream_id() == "words"
    assert tup.get_source_task() == 7
    assert tup.get_source_global_stream_id() == ("split", "words")
