"""How stateful bolts' keys and values are stored: MessagePack, the same for every
provider.

Supported types, which come back as they went in (equal and of the same type):
``None``, ``bool``, ``int`` (any size), ``float``, ``str``, ``bytes``, ``list``,
``tuple``, ``dict`` (keys of any supported hashable type), ``set`` and ``frozenset``,
nested freely. Anything else (a ``datetime``, an object of a class of one's own) is
refused with :class:`StateSerializationError`: store its fields instead. Keys must be
hashable: a ``str``, ``int``, ``bytes`` or a tuple of those is usual.

Equal keys encode to equal bytes only within one type: ``1``, ``1.0`` and ``True`` are
one key to a ``dict`` but three keys to a store, so use one type per key.

Pure functions: they run wherever a state is read or written.
"""

from __future__ import annotations

from typing import Any

import msgpack  # type: ignore[import-untyped]  # (msgpack ships no type hints)

from squall.runtime.packing import ExactPacking


class StateSerializationError(ValueError):
    """A key or value of a type the state cannot store; the message says which."""


def _refuse(value: Any) -> msgpack.ExtType:
    kind = type(value)
    raise StateSerializationError(
        f"type {kind.__module__}.{kind.__qualname__} is not supported (supported: None, "
        "bool, int, float, str, bytes, list, tuple, dict, set, frozenset)"
    )


def _unknown(code: int, data: bytes) -> Any:
    raise StateSerializationError(f"stored data holds an unknown extension type {code}")


_PACKING = ExactPacking(_refuse, _unknown)


def encode(value: Any) -> bytes:
    """The stored form of ``value``.

    Raises:
        StateSerializationError: ``value`` holds a type that is not supported.
    """
    try:
        return _PACKING.pack(value)
    except StateSerializationError:
        raise
    except (TypeError, ValueError, OverflowError) as error:
        raise StateSerializationError(str(error)) from None


def decode(data: bytes) -> Any:
    """The value whose stored form is ``data``.

    Raises:
        StateSerializationError: ``data`` is not a stored value.
    """
    try:
        return _PACKING.unpack(data)
    except StateSerializationError:
        raise
    except Exception as error:  # msgpack raises several kinds of errors on bad input
        raise StateSerializationError(
            f"stored data cannot be read: {str(error) or type(error).__name__}"
        ) from None
