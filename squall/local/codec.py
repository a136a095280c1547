"""How tuple batches are encoded for another worker process: MessagePack, with every
value arriving as the type it was sent as.

Plain values (``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``list``,
``dict``) are MessagePack's own; ``tuple``, ``set``, ``frozenset`` and integers beyond
64 bits have extension types of their own; anything else (a ``datetime``, an object of
a user's class) is pickled inside the batch. Measured (``bench/transport.py``): a batch
of 100 word-count tuples costs 0.11-0.14 us per tuple from one process to another,
against 0.18-0.23 us pickled whole, and the exact types cost nothing measurable for
plain values.

Pure functions of their arguments: they run on a worker's thread, each call on its own
packer.
"""

from __future__ import annotations

import pickle
from typing import Any

import msgpack  # type: ignore[import-untyped]  # (msgpack ships no type hints)

#: MessagePack extension codes for the types it has no family of its own for.
_TUPLE, _SET, _FROZENSET, _BIG_INT, _PICKLED = 1, 2, 3, 4, 5


class UnsendableValueError(TypeError):
    """A value that cannot go to another worker process: it cannot be pickled."""


def _default(value: Any) -> msgpack.ExtType:
    kind = type(value)
    if kind is tuple:
        return msgpack.ExtType(_TUPLE, _pack(list(value)))
    if kind is set:
        return msgpack.ExtType(_SET, _pack(list(value)))
    if kind is frozenset:
        return msgpack.ExtType(_FROZENSET, _pack(list(value)))
    if kind is int:  # outside MessagePack's 64 bits
        return msgpack.ExtType(_BIG_INT, str(value).encode("ascii"))
    try:
        return msgpack.ExtType(_PICKLED, pickle.dumps(value, protocol=5))
    except Exception as exc:
        raise UnsendableValueError(
            f"a value of type {kind.__module__}.{kind.__qualname__} cannot be sent to "
            f"another worker process: {type(exc).__name__}: {exc}"
        ) from exc


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, default=_default, use_bin_type=True, strict_types=True)


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _TUPLE:
        return tuple(decode(data))
    if code == _SET:
        return set(decode(data))
    if code == _FROZENSET:
        return frozenset(decode(data))
    if code == _BIG_INT:
        return int(data.decode("ascii"))
    if code == _PICKLED:
        return pickle.loads(data)
    raise ValueError(f"a batch holds an unknown extension type {code}")


def encode(batch: Any) -> bytes:
    """The bytes of ``batch`` (a list of entries, each of plain or picklable values).

    Raises:
        UnsendableValueError: a value cannot be pickled (the message names its type).
    """
    return _pack(batch)


def decode(data: bytes) -> Any:
    """The batch :func:`encode` made ``data`` from: equal, every value of its type."""
    return msgpack.unpackb(data, ext_hook=_ext_hook, raw=False, strict_map_key=False)


__all__ = ["UnsendableValueError", "decode", "encode"]
