"""Unit tests of the process-independent hash used by fields groupings."""

from __future__ import annotations

import array
import collections
import datetime as dt
import enum
import itertools
import json
import os
import pickle
import subprocess
import sys
import types
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from squall.runtime.hashing import StableHashError, hash_values, stable_hash

KEYS = [
    "",
    "word",
    "the cow jumped over the moon",
    "ünïcödé ☃",
    0,
    1,
    -1,
    42,
    2**40 + 7,
    -(2**70),
    0.5,
    -2.25,
    3.0,
    None,
    b"",
    b"bytes",
    (),
    ("a", 1),
    ("nested", (1, 2.5, None), b"x"),
    ["list", 1],
]

_SCRIPT = """
import json, sys
from squall.runtime.hashing import stable_hash, hash_values
keys = {keys!r}
print(json.dumps({{
    "stable": [stable_hash(k) for k in keys],
    "values": hash_values(keys),
    "builtin": hash("word"),
}}))
"""


def _run_with_hash_seed(seed: str) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(keys=KEYS)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(result.stdout)


def test_same_in_processes_with_different_hash_seeds() -> None:
    first = _run_with_hash_seed("123")
    second = _run_with_hash_seed("456")
    # The seeds really change Python's own string hash, so agreement below is meaningful.
    assert first["builtin"] != second["builtin"]
    local = [stable_hash(key) for key in KEYS]
    assert first["stable"] == local
    assert second["stable"] == local
    assert first["values"] == second["values"] == hash_values(KEYS)


@pytest.mark.parametrize(
    "equal",
    [
        (1, 1.0, True),
        (0, 0.0, -0.0, False),
        (-7, -7.0),
        (2**40, float(2**40)),
        ((1, "a"), (1.0, "a"), (True, "a")),
        ([1, 2], [1.0, 2]),
    ],
)
def test_equal_values_hash_equally(equal: tuple) -> None:
    assert len({stable_hash(value) for value in equal}) == 1


def test_equal_sequences_hash_equally_with_hash_values() -> None:
    assert hash_values([1, "x", None]) == hash_values((True, "x", None))
    assert hash_values([2.0, b"b"]) == hash_values([2, b"b"])


def test_hash_is_non_negative_64_bit() -> None:
    for key in KEYS:
        assert 0 <= stable_hash(key) < 2**64
    assert 0 <= hash_values(KEYS) < 2**64


def test_distinct_typical_values_hash_differently() -> None:
    distinct = [
        "a",
        "b",
        "ab",
        "ba",
        "1",
        1,
        2,
        3,
        -1,
        1.5,
        2.5,
        None,
        b"a",
        b"1",
        ("a",),
        ("a", "b"),
        ("b", "a"),
        (1, 2),
        (2, 1),
        "",
        0,
        (),
    ]
    hashes = [stable_hash(value) for value in distinct]
    for (left, hl), (right, hr) in itertools.combinations(zip(distinct, hashes, strict=True), 2):
        assert hl != hr, f"{left!r} and {right!r} hash equally"


def test_many_words_hash_without_collisions() -> None:
    words = [f"word-{i}" for i in range(5000)]
    assert len({stable_hash(word) for word in words}) == len(words)
    numbers = range(-2500, 2500)
    assert len({stable_hash(number) for number in numbers}) == len(numbers)


def test_hash_values_is_order_sensitive() -> None:
    assert hash_values(["a", "b"]) != hash_values(["b", "a"])
    assert hash_values([1, 2, 3]) != hash_values([3, 2, 1])
    assert hash_values([1, 2]) != hash_values([1, 2, 2])
    assert hash_values([None, "x"]) != hash_values(["x", None])


def test_hash_values_matches_tuple_hash() -> None:
    assert stable_hash(("a", 1)) == hash_values(["a", 1])
    assert stable_hash(["a", 1]) == hash_values(("a", 1))


# --- every type a tuple may carry -------------------------------------------------------


class Colour(enum.Enum):
    RED = 1
    BLUE = 2


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Word(str, enum.Enum):
    COW = "cow"


class Name(str):
    """A str subclass whose ``str()`` differs from its characters."""

    def __str__(self) -> str:
        return f"Name({super().__str__()})"


@dataclass
class Point:
    x: float
    y: float
    label: str = field(default="", compare=False)


@dataclass(eq=False)
class Handle:
    fd: int


Pair = collections.namedtuple("Pair", "left right")


class Opaque:
    """Equality and hash are the object's identity."""


class Money:
    """Its own equality, without the opt-in."""

    def __init__(self, cents: int) -> None:
        self.cents = cents

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and other.cents == self.cents

    def __hash__(self) -> int:
        return hash(self.cents)


class Sku:
    """Opts in: codes compare case-insensitively, and the key says so."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sku) and other.code.lower() == self.code.lower()

    def __hash__(self) -> int:
        return hash(self.code.lower())

    def stable_hash_key(self) -> str:
        return self.code.lower()


class Selfish:
    def stable_hash_key(self) -> Selfish:
        return self


UTC = dt.timezone.utc
PLUS_ONE = dt.timezone(dt.timedelta(hours=1))
MINUS_FIVE = dt.timezone(dt.timedelta(hours=-5))


def insertion_orders(items: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The dicts of ``items`` built in every insertion order."""
    return [dict(order) for order in itertools.permutations(items)]


def dict_keys(count: int) -> list[list[tuple[str, Any]]]:
    """``count`` distinct lists of 4 (key, value) items, with nested values."""
    return [
        [("user", f"u{i}"), ("region", ["eu", "us"][i % 2]), ("n", i), ("tags", {"a": i})]
        for i in range(count)
    ]


def test_dicts_hash_alike_in_every_insertion_order() -> None:
    hashes = []
    for items in dict_keys(20):
        orders = insertion_orders(items)
        assert len(orders) == 24
        assert {stable_hash(order) for order in orders} == {stable_hash(orders[0])}
        hashes.append(stable_hash(orders[0]))
    assert len(set(hashes)) == 20


EQUAL_GROUPS: list[tuple[Any, ...]] = [
    (1, 1.0, True, Decimal(1), Fraction(1), complex(1, 0), Level.LOW),
    (0, 0.0, -0.0, False, Decimal("-0"), Fraction(0), 0j),
    (0.5, Decimal("0.5"), Fraction(1, 2), complex(0.5, -0.0)),
    (Decimal("0.1"), Fraction(1, 10)),  # not 0.1, a float near it
    (Fraction(1, 3), Fraction(2, 6)),
    (2**70, float(2**70), Decimal(2**70), Fraction(2**70)),
    (10**400, Decimal("1e400"), Fraction(10**400)),
    (complex(1, 2), complex(1.0, 2.0)),
    ("cow", Name("cow"), Word.COW),
    (b"ab", bytearray(b"ab"), memoryview(b"ab"), memoryview(array.array("i", [97, 98]))),
    ({1, 2}, frozenset({2, 1}), {2: "x", 1: "y"}.keys()),
    ({"x", "y"}, frozenset(["y", "x"])),
    (
        {"a": [1, {"b": 2, "c": 3}], "d": 4},
        {"d": 4, "a": [1, {"c": 3, "b": 2}]},
        collections.OrderedDict([("d", 4), ("a", [1.0, {"c": 3, "b": 2}])]),
        types.MappingProxyType({"a": [True, {"b": 2, "c": 3}], "d": Decimal(4)}),
    ),
    ([{"x": 1, "y": 2}, {"z": [3]}], [{"y": 2, "x": 1}, {"z": [3.0]}]),
    ([{"s": {1, 2}}], [{"s": frozenset({2, 1})}]),
    ({"k": {"a": 1, "b": 2}}, {"k": collections.Counter(b=2, a=1)}),
    (collections.Counter(a=2), collections.Counter(a=2, b=0), {"a": 2}),
    (Pair(1, "a"), (1, "a"), (1.0, "a")),
    (Point(1, 2, "p"), Point(1.0, 2.0, "q")),
    (Colour.RED, Colour(1), Colour["RED"]),
    (
        dt.datetime(2024, 3, 1, 12, tzinfo=UTC),
        dt.datetime(2024, 3, 1, 13, tzinfo=PLUS_ONE),
        dt.datetime(2024, 3, 1, 7, tzinfo=MINUS_FIVE),
    ),
    (dt.datetime(2024, 3, 1, 12, 30), dt.datetime(2024, 3, 1, 12, 30, fold=1)),
    (dt.date(2024, 2, 29), dt.date.fromisoformat("2024-02-29")),
    (dt.time(12, 0, tzinfo=UTC), dt.time(13, 0, tzinfo=PLUS_ONE)),
    (dt.time(9, 15, 1, 5), dt.time(9, 15, 1, 5, fold=1)),
    (dt.timedelta(days=1), dt.timedelta(hours=24), dt.timedelta(seconds=86_400)),
    (uuid.UUID(int=42), uuid.UUID("00000000-0000-0000-0000-00000000002a")),
    (Sku("AB-1"), Sku("ab-1")),
    (float("nan"), Decimal("NaN"), float("-nan")),  # NaN equals nothing; all alike
]


@pytest.mark.parametrize("equal", EQUAL_GROUPS, ids=lambda group: type(group[0]).__name__)
def test_values_equal_in_python_hash_alike(equal: tuple[Any, ...]) -> None:
    first = equal[0]
    if first == first:  # the group is really equal (NaN aside)
        assert all(first == other for other in equal[1:])
    assert {stable_hash(value) for value in equal} == {stable_hash(first)}


UNEQUAL: list[Any] = [
    "a",
    "b",
    "1",
    1,
    2,
    -1,
    0,
    0.25,
    Fraction(1, 3),
    Decimal("0.1"),
    0.1,
    complex(0, 1),
    None,
    b"a",
    (),
    ("a",),
    ("a", "b"),
    ("b", "a"),
    {},
    {"a": 1},
    {"a": 2},
    {"b": 1},
    {1: "a"},
    {"a": 1, "b": 2},
    {"a": 2, "b": 1},
    {"a": {"b": 1}},
    {"a": ["b", 1]},
    set(),
    {"a"},
    {"a", "b"},
    {"a", "c"},
    {1, 2},
    {1, 3},
    frozenset({("a", 1)}),
    [{"a": 1}, {"b": 2}],
    [{"b": 2}, {"a": 1}],
    Colour.RED,
    Colour.BLUE,
    Point(1, 2),
    Point(2, 1),
    dt.datetime(2024, 3, 1, 12),
    dt.datetime(2024, 3, 1, 12, tzinfo=UTC),
    dt.date(2024, 3, 1),
    dt.date(2024, 3, 2),
    dt.time(12),
    dt.time(12, tzinfo=UTC),
    dt.timedelta(seconds=1),
    dt.timedelta(seconds=2),
    uuid.UUID(int=1),
    uuid.UUID(int=2),
    Sku("AB-1"),  # hashes as its key, "ab-1"
    float("nan"),
]


def test_unequal_values_hash_differently() -> None:
    hashes = [stable_hash(value) for value in UNEQUAL]
    for (left, hl), (right, hr) in itertools.combinations(zip(UNEQUAL, hashes, strict=True), 2):
        assert left != right, "the list holds unequal values only"
        assert hl != hr, f"{left!r} and {right!r} hash equally"


def test_many_structured_values_hash_without_collisions() -> None:
    records = [{"id": i, "name": f"n{i % 97}", "tags": {i % 7, i % 11}} for i in range(3000)]
    assert len({stable_hash(record) for record in records}) == 3000
    sets = [frozenset({f"w{i}", f"w{i + 1}", i}) for i in range(3000)]
    assert len({stable_hash(members) for members in sets}) == 3000
    pairs = [{"x": i, "y": j} for i in range(60) for j in range(60)]
    assert len({stable_hash(pair) for pair in pairs}) == 3600


def portable_values() -> list[Any]:
    """Values whose hash the subprocess test compares across hash seeds."""
    return [
        {"user": "ann", "tags": {"red", "green", "blue"}, "n": 1},
        {"blue", "green", "red", "cyan", "magenta"},
        frozenset({"x", b"y", 3, 4.5, None}),
        [{"k": {"nested", "set"}}, ("t", frozenset({"a", "b"}))],
        Decimal("0.1"),
        Fraction(1, 3),
        complex(1, 2),
        Colour.BLUE,
        Level.HIGH,
        Word.COW,
        Point(1.5, 2, "ignored"),
        Pair("l", "r"),
        dt.datetime(2024, 3, 1, 13, tzinfo=PLUS_ONE),
        dt.datetime(2024, 3, 1, 12, 30),
        dt.date(2024, 2, 29),
        dt.time(13, 0, tzinfo=PLUS_ONE),
        dt.timedelta(days=1, microseconds=5),
        uuid.UUID(int=2**100 + 7),
        Sku("AB-1"),
    ]


_PORTABLE_SCRIPT = """
import json
from squall.runtime.hashing import stable_hash
from tests.test_hashing import portable_values
print(json.dumps([stable_hash(value) for value in portable_values()] + [hash("word")]))
"""


def _portable_hashes(seed: str) -> list[int]:
    result = subprocess.run(
        [sys.executable, "-c", _PORTABLE_SCRIPT],
        env=dict(os.environ, PYTHONHASHSEED=seed),
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return list(json.loads(result.stdout))


def test_structured_values_hash_alike_with_other_hash_seeds() -> None:
    first, second = _portable_hashes("1"), _portable_hashes("2")
    assert first[-1] != second[-1]  # the seeds change Python's own str hash
    local = [stable_hash(value) for value in portable_values()]
    assert first[:-1] == local
    assert second[:-1] == local


# --- values that cannot be hashed stably ------------------------------------------------

IDENTITY = (
    "it compares by identity, which differs in every process; group by a field that "
    "identifies it, or give the class a stable_hash_key() method returning a supported "
    "value that identifies it"
)
NOT_SUPPORTED = (
    "its type is not supported; give the class a stable_hash_key() method returning a "
    "supported value that equal objects share"
)


UNSUPPORTED: list[tuple[Any, str]] = [
    (Opaque(), f"value of type Opaque cannot be hashed stably ({IDENTITY})"),
    (object(), f"value of type object cannot be hashed stably ({IDENTITY})"),
    (Handle(3), f"value of type Handle cannot be hashed stably ({IDENTITY})"),
    (Money(5), f"value of type Money cannot be hashed stably ({NOT_SUPPORTED})"),
    (
        len,
        "value of type builtin_function_or_method cannot be hashed stably "
        "(its type is not supported)",
    ),
    (
        {"a": [1, Opaque()]},
        f"value of type Opaque at ['a'][1] cannot be hashed stably ({IDENTITY})",
    ),
    (
        [{"s": {Opaque()}}],
        f"value of type Opaque at [0]['s']{{...}} cannot be hashed stably ({IDENTITY})",
    ),
    ({Opaque(): 1}, f"value of type Opaque at {{...}} cannot be hashed stably ({IDENTITY})"),
    (
        Point(Money(1), 2),  # type: ignore[arg-type]
        f"value of type Money at .x cannot be hashed stably ({NOT_SUPPORTED})",
    ),
    (
        Selfish(),
        "value of type Selfish cannot be hashed stably (its stable_hash_key() returned a "
        "value of its own class; return a value of a supported type, such as a tuple of "
        "the fields its equality compares)",
    ),
]


@pytest.mark.parametrize(
    ("value", "message"), UNSUPPORTED, ids=[type(value).__name__ for value, _ in UNSUPPORTED]
)
def test_values_that_cannot_be_hashed_stably_raise(value: Any, message: str) -> None:
    with pytest.raises(StableHashError) as raised:
        stable_hash(value)
    assert str(raised.value) == message
    assert isinstance(raised.value, TypeError)
    with pytest.raises(StableHashError) as again:
        hash_values(["fine", value])
    assert str(again.value) == message


def test_a_value_that_contains_itself_raises() -> None:
    looped: list[Any] = [1]
    looped.append({"again": looped})
    with pytest.raises(StableHashError) as raised:
        stable_hash(looped)
    assert str(raised.value) == (
        "value of type list cannot be hashed stably (it is nested too deeply, or contains itself)"
    )


def test_the_error_pickles_with_its_path_and_context() -> None:
    with pytest.raises(StableHashError) as raised:
        stable_hash({"a": [Opaque()]})
    raised.value.context = "bolt 'b' groups stream 'default' of 's' by field 'k'"
    copy = pickle.loads(pickle.dumps(raised.value))
    assert type(copy) is StableHashError
    assert (
        str(copy)
        == str(raised.value)
        == (
            "bolt 'b' groups stream 'default' of 's' by field 'k': value of type Opaque at "
            f"['a'][0] cannot be hashed stably ({IDENTITY})"
        )
    )
