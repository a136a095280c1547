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

#: MessagePack extension codes of the types MessagePack has no family for.
_TUPLE, _SET, _FROZENSET, _BIG_INT = 1, 2, 3, 4
_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1


class StateSerializationError(ValueError):
    """A key or value of a type the state cannot store; the message says which."""


def _default(value: Any) -> msgpack.ExtType:
    kind = type(value)
    if kind is tuple:
        return msgpack.ExtType(_TUPLE, _pack_list(list(value)))
    if kind is set:
        return msgpack.ExtType(_SET, _pack_list(list(value)))
    if kind is frozenset:
        return msgpack.ExtType(_FROZENSET, _pack_list(list(value)))
    if kind is int:  # outside MessagePack's 64 bits
        return msgpack.ExtType(_BIG_INT, str(value).encode("ascii"))
    raise StateSerializationError(
        f"type {kind.__module__}.{kind.__qualname__} is not supported (supported: None, "
        "bool, int, float, str, bytes, list, tuple, dict, set, frozenset)"
    )


def _pack_list(items: list[Any]) -> bytes:
    return msgpack.packb(items, default=_default, use_bin_type=True, strict_types=True)


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _TUPLE:
        return tuple(_unpack(data))
    if code == _SET:
        return set(_unpack(data))
    if code == _FROZENSET:
        return frozenset(_unpack(data))
    if code == _BIG_INT:
        return int(data.decode("ascii"))
    raise StateSerializationError(f"stored data holds an unknown extension type {code}")


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_ext_hook, raw=False, strict_map_key=False)


def encode(value: Any) -> bytes:
    """The stored form of ``value``.

    Raises:
        StateSerializationError: ``value`` holds a type that is not supported.
    """
    try:
        return msgpack.packb(value, default=_default, use_bin_type=True, strict_types=True)
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
        return _unpack(data)
    except StateSerializationError:
        raise
    except Exception as error:  # msgpack raises several kinds of errors on bad input
        raise StateSerializationError(
            f"stored data cannot be read: {str(error) or type(error).__name__}"
        ) from None
