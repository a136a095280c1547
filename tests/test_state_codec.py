"""The state codec: every supported type comes back equal and of the same type (nested
too), and anything else is refused with a message naming the type."""

from __future__ import annotations

import datetime
import decimal
import math
from collections import OrderedDict, namedtuple
from typing import Any

import msgpack
import pytest

from squall.state.codec import StateSerializationError, decode, encode

SUPPORTED = ", ".join(
    ["None", "bool", "int", "float", "str", "bytes", "list", "tuple", "dict", "set", "frozenset"]
)

ROUND_TRIPS: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    2**63 - 1,
    -(2**63),
    2**64 - 1,
    2**64,
    -(2**63) - 1,
    10**40,
    -(10**40),
    0.0,
    -2.5,
    1e300,
    float("inf"),
    float("-inf"),
    "",
    "word",
    "héllo ✓",
    b"",
    b"\x00\xff bytes",
    [],
    [1, "a", None, [2.5, [b"x"]]],
    (),
    (1,),
    ("cow", 3, (True, None)),
    {},
    {"a": 1, "b": [1, 2]},
    {1: "one", 2.5: "float", b"k": "bytes", None: 0, False: "bool"},
    {("cow", 1): {"nested": (1, 2)}, frozenset({1, 2}): "frozen key"},
    set(),
    {1, 2, 3},
    {("a", 1), ("b", 2)},
    frozenset(),
    frozenset({"x", (1, 2), frozenset({3})}),
    [{"s": {1}}, ({"t": frozenset({b"z"})},), {(1, (2, 3)): [set(), ()]}],
]


def assert_identical(found: Any, expected: Any) -> None:
    """``found`` equals ``expected`` and has the same type, all the way down."""
    assert type(found) is type(expected), (found, expected)
    assert found == expected
    if isinstance(expected, (list, tuple)):
        for found_item, expected_item in zip(found, expected, strict=True):
            assert_identical(found_item, expected_item)
    elif isinstance(expected, dict):
        found_keys = {repr(key): key for key in found}
        for key, value in expected.items():
            assert_identical(found_keys[repr(key)], key)
            assert_identical(found[key], value)
    elif isinstance(expected, (set, frozenset)):
        assert sorted(map(repr, found)) == sorted(map(repr, expected))


@pytest.mark.parametrize(
    "value",
    ROUND_TRIPS,
    ids=[f"{index}-{type(value).__name__}" for index, value in enumerate(ROUND_TRIPS)],
)
def test_supported_values_come_back_identical(value: Any) -> None:
    encoded = encode(value)
    assert type(encoded) is bytes
    assert_identical(decode(encoded), value)


def test_nan_comes_back_a_float_nan() -> None:
    found = decode(encode(float("nan")))
    assert type(found) is float
    assert math.isnan(found)


def test_equal_values_encode_equal_and_types_stay_apart() -> None:
    assert encode(("cow", 1)) == encode(("cow", 1))
    assert len({encode(1), encode(1.0), encode(True), encode("1"), encode(b"1")}) == 5
    assert len({encode([1]), encode((1,)), encode({1}), encode(frozenset({1}))}) == 4


def test_the_empty_bytes_string_is_never_an_encoding() -> None:
    """The Redis store keeps its prepared txid at the empty field."""
    assert all(encode(value) != b"" for value in ROUND_TRIPS)


class Point:
    pass


Pair = namedtuple("Pair", "left right")

REFUSED: list[tuple[Any, str]] = [
    (datetime.datetime(2024, 1, 2), "datetime.datetime"),
    (decimal.Decimal("1.5"), "decimal.Decimal"),
    (Point(), "tests.test_state_codec.Point"),
    (Pair(1, 2), "tests.test_state_codec.Pair"),
    (OrderedDict(a=1), "collections.OrderedDict"),
    (1 + 2j, "builtins.complex"),
    ([1, (2, {datetime.date(2024, 1, 2)})], "datetime.date"),
    ({"key": Point()}, "tests.test_state_codec.Point"),
    ({Pair(1, 2): 1}, "tests.test_state_codec.Pair"),
]


@pytest.mark.parametrize(
    ("value", "type_name"), REFUSED, ids=[f"refused-{index}" for index in range(len(REFUSED))]
)
def test_unsupported_types_are_refused_naming_the_type(value: Any, type_name: str) -> None:
    with pytest.raises(StateSerializationError) as raised:
        encode(value)
    assert str(raised.value) == f"type {type_name} is not supported (supported: {SUPPORTED})"


@pytest.mark.parametrize(
    "value", [bytearray(b"ab"), memoryview(b"ab")], ids=["bytearray", "memoryview"]
)
def test_other_binary_buffers_are_stored_as_bytes(value: Any) -> None:
    """MessagePack packs any binary buffer as ``bin``: it comes back as ``bytes``."""
    assert_identical(decode(encode(value)), b"ab")


def test_refusal_is_a_value_error() -> None:
    assert issubclass(StateSerializationError, ValueError)


def test_data_that_is_not_an_encoding_is_refused() -> None:
    with pytest.raises(StateSerializationError) as raised:
        decode(encode(1) + encode(2))
    assert str(raised.value) == "stored data cannot be read: unpack(b) received extra data."
    with pytest.raises(StateSerializationError) as raised:
        decode(msgpack.packb(msgpack.ExtType(9, b"")))
    assert str(raised.value) == "stored data holds an unknown extension type 9"
    with pytest.raises(StateSerializationError) as raised:
        decode(b"\xc1")
    assert str(raised.value) == "stored data cannot be read: FormatError"
