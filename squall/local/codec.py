"""How tuple batches are encoded for another worker process: MessagePack, with every
value arriving as the type it was sent as.

Plain values (``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``list``,
``dict``) are MessagePack's own; ``tuple``, ``set``, ``frozenset`` and integers beyond
64 bits have extension types of their own; anything else (a ``datetime``, an object of
a user's class) is pickled inside the batch: with plain pickle, or with cloudpickle
when plain pickle cannot write it. A worker process holds the user's code (classes of
``__main__`` or of a file run by ``squall run``) only as classes rebuilt by value, which
plain pickle cannot name by reference, so their objects travel with their classes as
the components did. Measured (``bench/transport.py``): a batch
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

from squall.runtime import codepickle
from squall.runtime.packing import ExactPacking

#: The extension code of a pickled value (after :mod:`squall.runtime.packing`'s).
_PICKLED = 5


class UnsendableValueError(TypeError):
    """A value that cannot go to another worker process: it cannot be pickled."""


def _pickled(value: Any) -> msgpack.ExtType:
    try:
        return msgpack.ExtType(_PICKLED, pickle.dumps(value, protocol=5))
    except Exception:  # a class rebuilt by value (user code), a lambda ...
        pass
    try:
        return msgpack.ExtType(_PICKLED, codepickle.dumps(value))
    except Exception as exc:
        kind = type(value)
        raise UnsendableValueError(
            f"a value of type {kind.__module__}.{kind.__qualname__} cannot be sent to "
            f"another worker process: {type(exc).__name__}: {exc}"
        ) from exc


def _unpickled(code: int, data: bytes) -> Any:
    if code == _PICKLED:
        return pickle.loads(data)
    raise ValueError(f"a batch holds an unknown extension type {code}")


_PACKING = ExactPacking(_pickled, _unpickled)


def encode(batch: Any) -> bytes:
    """The bytes of ``batch`` (a list of entries, each of plain or picklable values).

    Raises:
        UnsendableValueError: a value cannot be pickled (the message names its type).
    """
    return _PACKING.pack(batch)


def decode(data: bytes) -> Any:
    """The batch :func:`encode` made ``data`` from: equal, every value of its type."""
    return _PACKING.unpack(data)


__all__ = ["UnsendableValueError", "decode", "encode"]
