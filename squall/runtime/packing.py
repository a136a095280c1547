"""MessagePack that gives every value back as its type: the packing under the stored
form of state (:mod:`squall.state.codec`) and the batches between worker processes
(:mod:`squall.local.codec`).

MessagePack's own families carry ``None``, ``bool``, ``int`` (64 bits), ``float``,
``str``, ``bytes``, ``list`` and ``dict``, each only as its exact type; ``tuple``,
``set``, ``frozenset`` and integers beyond 64 bits have extension types of their own
(codes 1 to 4, nested freely); any other value goes to the user of the packing, which
refuses it or packs it as an extension of its own.

Pure: an :class:`ExactPacking` keeps no state between calls and runs on any thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack  # type: ignore[import-untyped]  # (msgpack ships no type hints)

#: Extension codes of the types MessagePack has no family for.
TUPLE, SET, FROZENSET, BIG_INT = 1, 2, 3, 4


class ExactPacking:
    """Packs and unpacks values as MessagePack, keeping their types.

    Args:
        other: the extension a value of any other type becomes (it may raise to
            refuse the value).
        other_hook: the value an extension of another code stands for (it may raise).
    """

    def __init__(
        self,
        other: Callable[[Any], msgpack.ExtType],
        other_hook: Callable[[int, bytes], Any],
    ) -> None:
        self._other = other
        self._other_hook = other_hook

    def _default(self, value: Any) -> msgpack.ExtType:
        kind = type(value)
        if kind is tuple:
            return msgpack.ExtType(TUPLE, self.pack(list(value)))
        if kind is set:
            return msgpack.ExtType(SET, self.pack(list(value)))
        if kind is frozenset:
            return msgpack.ExtType(FROZENSET, self.pack(list(value)))
        if kind is int:  # outside MessagePack's 64 bits
            return msgpack.ExtType(BIG_INT, str(value).encode("ascii"))
        return self._other(value)

    def _ext_hook(self, code: int, data: bytes) -> Any:
        if code == TUPLE:
            return tuple(self.unpack(data))
        if code == SET:
            return set(self.unpack(data))
        if code == FROZENSET:
            return frozenset(self.unpack(data))
        if code == BIG_INT:
            return int(data.decode("ascii"))
        return self._other_hook(code, data)

    def pack(self, value: Any) -> bytes:
        """The MessagePack bytes of ``value``."""
        return msgpack.packb(value, default=self._default, use_bin_type=True, strict_types=True)

    def unpack(self, data: bytes) -> Any:
        """The value ``data`` was packed from."""
        return msgpack.unpackb(data, ext_hook=self._ext_hook, raw=False, strict_map_key=False)


__all__ = ["BIG_INT", "FROZENSET", "SET", "TUPLE", "ExactPacking"]
