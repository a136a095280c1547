"""The XOR ledger of a core micro-batch: which tuple trees completed.

Each spout task logs the init value of every tree it started in a batch (the XOR of
the edge ids it sent); each bolt task reports, per root id, the XOR of its acks. A
tree completed when the XOR of its init value and of every ack for it is zero: the
acker's rule (see ``squall.runtime.acker``), applied once per micro-batch on the
driver instead of tuple by tuple.

Both sides travel as :class:`LedgerPart`: two arrays of unsigned 64-bit integers
(roots and values), cheap to pickle and to combine with numpy, which the driver does
for hundreds of thousands of trees per batch in milliseconds.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple


class LedgerPart(NamedTuple):
    """Root id -> XOR value pairs: ``roots[i]`` has ``values[i]`` (native-endian
    unsigned 64-bit integers)."""

    roots: bytes = b""
    values: bytes = b""

    @classmethod
    def of(cls, entries: Mapping[int, int]) -> LedgerPart:
        """The pairs of ``entries`` (root id -> XOR value)."""
        return cls(array("Q", entries.keys()).tobytes(), array("Q", entries.values()).tobytes())

    def as_dict(self) -> dict[int, int]:
        """The pairs as a dictionary (root id -> XOR value)."""
        roots, values = array("Q"), array("Q")
        roots.frombytes(self.roots)
        values.frombytes(self.values)
        return dict(zip(roots.tolist(), values.tolist(), strict=True))


def unfinished_trees(
    inits: Sequence[LedgerPart], acks: Sequence[LedgerPart], fails: Iterable[int] = ()
) -> set[int]:
    """The roots among ``inits`` whose trees did not complete (their init value XOR
    every ack for them is not zero) or were failed explicitly (``fails``). Acks for
    roots that are not in ``inits`` (trees of other batches) are ignored. Runs on the
    driver."""
    import numpy as np

    if not any(part.roots for part in inits):
        return set()
    init_roots = np.concatenate([np.frombuffer(part.roots, np.uint64) for part in inits])
    failed = set(fails)
    parts = [*inits, *acks]
    roots = np.concatenate([np.frombuffer(part.roots, np.uint64) for part in parts])
    values = np.concatenate([np.frombuffer(part.values, np.uint64) for part in parts])
    order = np.argsort(roots, kind="stable")
    roots, values = roots[order], values[order]
    starts = np.flatnonzero(np.concatenate(([True], roots[1:] != roots[:-1])))
    combined = np.bitwise_xor.reduceat(values, starts)
    keys = roots[starts]
    open_keys = keys[(combined != 0) & np.isin(keys, init_roots)]
    unfinished: set[int] = set(open_keys.tolist())
    if failed:
        unfinished |= failed.intersection(init_roots.tolist())
    return unfinished
