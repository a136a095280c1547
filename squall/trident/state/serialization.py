"""JSON serialisation of state keys and stored values (Storm's default
``JSON*Serializer`` formats), used by the durable backends.

Formats: a key is the JSON array of its group-by values (``["cow"]``, ``[]`` for a
global aggregate); a transactional value is ``[txid, value]``, an opaque value
``[txid, curr, prev]``, a non-transactional value the value itself.

Values must be JSON-serialisable: ``None``, ``bool``, ``int``, ``float``, ``str``, lists,
tuples and dicts with string keys. JSON has no tuples, so tuples come back as lists
(a key's outer tuple is restored, and tuples nested in keys come back as tuples so keys
stay hashable).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

from squall.runtime.state_errors import StateError
from squall.trident.state.base import OpaqueValue, StateType, TransactionalValue

_SEPARATORS = (",", ":")


def serialize_key(key: tuple[Any, ...]) -> str:
    """The JSON text of a key: a compact array, the same for equal keys of JSON types.

    Raises:
        StateError: a group-by value is not JSON-serialisable.
    """
    try:
        return json.dumps(list(key), separators=_SEPARATORS, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise StateError(f"state key {key!r} is not JSON-serialisable: {error}") from error


def deserialize_key(text: str | bytes) -> tuple[Any, ...]:
    """The key whose JSON text is ``text`` (arrays become tuples, at every depth)."""
    value = _tuples(json.loads(text))
    if not isinstance(value, tuple):
        raise StateError(f"stored state key {text!r} is not a JSON array")
    return value


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    return value


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, separators=_SEPARATORS, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise StateError(
            f"state value {value!r} is not JSON-serialisable ({error}); values of durable "
            "states must be JSON types (None, bool, int, float, str, list, dict with str keys)"
        ) from error


class ValueSerializer(ABC):
    """Turns stored values into text and back. Picklable, stateless."""

    @abstractmethod
    def serialize(self, stored: Any) -> str:
        """The JSON text of ``stored``.

        Raises:
            StateError: the value is not JSON-serialisable.
        """

    @abstractmethod
    def deserialize(self, text: str | bytes) -> Any:
        """The stored value whose JSON text is ``text``.

        Raises:
            StateError: the text is not in this serializer's format (for example a table
                written by a state of another type).
        """


class JsonNonTransactionalSerializer(ValueSerializer):
    """Plain values as JSON."""

    def serialize(self, stored: Any) -> str:
        return _dumps(stored)

    def deserialize(self, text: str | bytes) -> Any:
        return json.loads(text)


class JsonTransactionalSerializer(ValueSerializer):
    """:class:`TransactionalValue` as ``[txid, value]``."""

    def serialize(self, stored: Any) -> str:
        if not isinstance(stored, TransactionalValue):
            raise StateError(f"a transactional state stores TransactionalValue, got {stored!r}")
        return _dumps([stored.txid, stored.value])

    def deserialize(self, text: str | bytes) -> Any:
        data = json.loads(text)
        if not (isinstance(data, list) and len(data) == 2 and isinstance(data[0], int)):
            raise StateError(
                f"stored value {_shorten(text)} is not a transactional value [txid, value] "
                "(was it written by a state of another type?)"
            )
        return TransactionalValue(data[0], data[1])


class JsonOpaqueSerializer(ValueSerializer):
    """:class:`OpaqueValue` as ``[txid, curr, prev]``."""

    def serialize(self, stored: Any) -> str:
        if not isinstance(stored, OpaqueValue):
            raise StateError(f"an opaque state stores OpaqueValue, got {stored!r}")
        return _dumps([stored.txid, stored.curr, stored.prev])

    def deserialize(self, text: str | bytes) -> Any:
        data = json.loads(text)
        if not (isinstance(data, list) and len(data) == 3 and isinstance(data[0], int)):
            raise StateError(
                f"stored value {_shorten(text)} is not an opaque value [txid, curr, prev] "
                "(was it written by a state of another type?)"
            )
        return OpaqueValue(data[0], data[1], data[2])


def serializer_for(state_type: StateType) -> ValueSerializer:
    """The JSON serializer of the values a state of ``state_type`` stores."""
    if state_type is StateType.TRANSACTIONAL:
        return JsonTransactionalSerializer()
    if state_type is StateType.OPAQUE:
        return JsonOpaqueSerializer()
    if state_type is StateType.NON_TRANSACTIONAL:
        return JsonNonTransactionalSerializer()
    raise TypeError(f"state_type must be a StateType, got {state_type!r}")


def _shorten(text: str | bytes, limit: int = 80) -> str:
    shown = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return repr(shown if len(shown) <= limit else shown[:limit] + "...")
