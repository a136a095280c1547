"""The XOR ledger the Spark engine settles core micro-batches with."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("numpy")

from squall.spark.execute.ledger import LedgerPart, unfinished_trees


def test_a_part_keeps_its_pairs() -> None:
    entries = {2**64 - 1: 7, 12: 0, 5: 2**63}
    assert LedgerPart.of(entries).as_dict() == entries
    assert LedgerPart.of({}).as_dict() == {}


def test_trees_whose_acks_cancel_their_init_values_are_complete() -> None:
    rng = random.Random(7)
    edges = {root: [rng.getrandbits(64) for _ in range(5)] for root in range(1, 1001)}
    inits = {root: _xor(tree) for root, tree in edges.items()}
    # Two tasks ack the edges between them; tree 13 misses one ack, tree 400 one more.
    first: dict[int, int] = {}
    second: dict[int, int] = {}
    for root, tree in edges.items():
        for position, edge in enumerate(tree):
            if (root, position) == (13, 2):
                continue
            part = first if position % 2 else second
            part[root] = part.get(root, 0) ^ edge
    second[400] ^= rng.getrandbits(64)
    acks = [LedgerPart.of(first), LedgerPart.of(second)]
    assert unfinished_trees([LedgerPart.of(inits)], acks) == {13, 400}


def test_explicit_fails_and_foreign_roots() -> None:
    inits = [LedgerPart.of({1: 5, 2: 6}), LedgerPart.of({3: 9})]
    acks = [LedgerPart.of({1: 5, 2: 6, 3: 9, 99: 4})]
    # Root 99 is another batch's: neither reported nor failed here.
    assert unfinished_trees(inits, acks) == set()
    assert unfinished_trees(inits, acks, [2, 99]) == {2}
    assert unfinished_trees([], acks, [2]) == set()
    assert unfinished_trees(inits, []) == {1, 2, 3}


def _xor(values: list[int]) -> int:
    result = 0
    for value in values:
        result ^= value
    return result
