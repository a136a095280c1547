"""Unit tests of the process-independent hash used by fields groupings."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest

from squall.runtime.hashing import hash_values, stable_hash

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
