"""``TridentTuple``: the values a Trident operation sees, with named fields."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from squall.model.fields import Fields


class TridentTuple(Sequence[Any]):
    """A tuple of a Trident stream, projected to the fields an operation asked for.

    Read values by position (``tup[0]``, ``get_value(0)``) or name
    (``tup["word"]``, ``get_value_by_field("word")``); ``values`` is the list.
    """

    __slots__ = ("_fields", "values")

    def __init__(self, values: Sequence[Any], fields: Fields) -> None:
        self.values = values
        self._fields = fields

    @property
    def fields(self) -> Fields:
        """The field names."""
        return self._fields

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return self.get_value_by_field(key)
        return self.values[key]

    def get_value(self, position: int) -> Any:
        """The value at ``position``."""
        return self.values[position]

    def get_value_by_field(self, name: str) -> Any:
        """The value of field ``name``.

        Raises:
            KeyError: no such field (the message lists the fields there are).
        """
        try:
            return self.values[self._fields.index(name)]
        except ValueError:
            raise KeyError(
                f"Trident tuple has no field {name!r}; its fields are {self._fields.to_list()}"
            ) from None

    def select(self, fields: Sequence[str]) -> list[Any]:
        """The values of ``fields``, in that order."""
        return [self.get_value_by_field(name) for name in fields]

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TridentTuple):
            return list(self.values) == list(other.values)
        if isinstance(other, list | tuple):
            return list(self.values) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TridentTuple({dict(zip(self._fields, self.values, strict=False))!r})"
