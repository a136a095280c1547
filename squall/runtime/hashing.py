"""A hash of tuple values that is the same in every process and every run.

Python's ``hash(str)`` is salted per process, so fields grouping cannot use it: the Spark
engine and restarted topologies must send a key to the same task index as before.
Values equal in Python hash equally here too (``1 == 1.0 == True``).
"""

from __future__ import annotations

import numbers
import struct
import zlib
from collections.abc import Sequence
from typing import Any

_MASK = (1 << 64) - 1


def _mix(value: int) -> int:
    """splitmix64 finaliser: spreads the bits of a 64-bit integer."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


def stable_hash(value: Any) -> int:
    """A non-negative 64-bit hash of ``value`` that does not depend on the process.

    Supports ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes`` and (nested)
    ``tuple``/``list``; any other value is hashed by its ``repr``, which must then be
    stable (true for dataclasses and enums, not for objects with the default repr).
    """
    cls = value.__class__
    if cls is str:
        return _mix(zlib.crc32(value.encode("utf-8", "surrogatepass")) ^ 0x5354)
    if cls is int or cls is bool:
        return _mix(value & _MASK)
    if cls is float:
        if value.is_integer():
            return _mix(int(value) & _MASK)
        return _mix(int.from_bytes(struct.pack("<d", value), "little"))
    if value is None:
        return _mix(0x4E6F6E65)
    if cls is bytes or cls is bytearray:
        return _mix(zlib.crc32(value) ^ 0x4259)
    if isinstance(value, tuple | list):
        return hash_values(value)
    if isinstance(value, str):
        return stable_hash(str(value))
    if isinstance(value, numbers.Number):
        return _number_hash(value)
    return _mix(zlib.crc32(repr(value).encode("utf-8", "surrogatepass")) ^ 0x5250)


def _number_hash(value: Any) -> int:
    """Numbers of other types (Decimal, Fraction, numpy scalars...) hash as the int or
    float they equal, so equal numbers of different types hash alike."""
    if isinstance(value, complex):
        if value.imag:
            return _mix(zlib.crc32(repr(value).encode()) ^ 0x4350)
        value = value.real
    try:
        if isinstance(value, numbers.Integral) or value == int(value):
            return stable_hash(int(value))
        return stable_hash(float(value))
    except (TypeError, ValueError, OverflowError):  # NaN, infinities, exotic types
        return _mix(zlib.crc32(repr(value).encode("utf-8", "surrogatepass")) ^ 0x5250)


def hash_values(values: Sequence[Any]) -> int:
    """Stable hash of a sequence of values (order matters)."""
    acc = 0x736571
    for item in values:
        acc = _mix(acc ^ stable_hash(item))
    return acc
