"""Tuple batches encoded for another worker process keep every value and its type."""

from __future__ import annotations

import datetime
import threading
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from squall.local.codec import UnsendableValueError, decode, encode
from squall.model.fields import Fields


def round_trip(value: Any) -> Any:
    return decode(encode(value))


def test_plain_values_come_back_equal_and_of_their_type() -> None:
    batch = [
        [7, ["the", 3, 2.5, True, None, b"\x00raw"]],
        [8, [{"a": 1, 2: [3, 4]}, [], {}]],
        [9, ["", -(2**63), 2**64 - 1]],
    ]
    assert round_trip(batch) == batch
    assert [type(v) for v in round_trip(batch)[0][1]] == [str, int, float, bool, type(None), bytes]


@pytest.mark.parametrize(
    "value",
    [
        ("a", 1, ("nested", 2.0)),
        {1, 2, 3},
        frozenset({"x", "y"}),
        2**70,
        -(2**90),
        {("a", 1): frozenset({1})},
        datetime.datetime(2026, 11, 25, 4, 30, tzinfo=datetime.timezone.utc),
        Decimal("1.10"),
        Fraction(1, 3),
        Fields(["word", "count"]),
    ],
)
def test_other_values_come_back_equal_and_of_their_type(value: Any) -> None:
    back = round_trip([0, [value]])[1][0]
    assert back == value
    assert type(back) is type(value)


def test_a_value_that_cannot_be_pickled_is_refused_by_its_type() -> None:
    with pytest.raises(UnsendableValueError, match=r"a value of type _thread\.lock cannot be sent"):
        encode([0, ["fine", threading.Lock()]])
