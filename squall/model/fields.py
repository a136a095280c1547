"""Ordered field names of a stream: Storm's ``Fields``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload


class Fields(Sequence[str]):
    """An ordered, immutable list of field names.

    ``Fields("a", "b")`` and ``Fields(["a", "b"])`` are the same. Field names are unique
    strings. ``Fields`` are picklable and compare equal to other ``Fields`` with the same
    names in the same order.

    Raises:
        ValueError: a name is not a non-empty string, or appears twice.
    """

    __slots__ = ("_index", "_names")

    def __init__(self, *names: str | Iterable[str]) -> None:
        single = len(names) == 1 and not isinstance(names[0], str)
        flat: list[str] = list(names[0]) if single else list(names)  # type: ignore[arg-type]
        index: dict[str, int] = {}
        for position, name in enumerate(flat):
            if not isinstance(name, str) or not name:
                raise ValueError(f"field names must be non-empty strings, got {name!r}")
            if name in index:
                raise ValueError(f"duplicate field name {name!r} in {flat!r}")
            index[name] = position
        self._names: tuple[str, ...] = tuple(flat)
        self._index: dict[str, int] = index

    @overload
    def __getitem__(self, position: int) -> str: ...

    @overload
    def __getitem__(self, position: slice) -> Sequence[str]: ...

    def __getitem__(self, position: int | slice) -> Any:
        return self._names[position]

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def index(self, name: Any, start: int = 0, stop: int | None = None) -> int:
        """Position of ``name``.

        Raises:
            ValueError: ``name`` is not one of these fields.
        """
        try:
            return self._index[name]
        except KeyError:
            raise ValueError(f"unknown field {name!r}; fields are {list(self._names)}") from None

    def field_index(self) -> dict[str, int]:
        """A mapping from field name to position (a copy)."""
        return dict(self._index)

    def to_list(self) -> list[str]:
        """The names as a list."""
        return list(self._names)

    def select(self, selector: Fields, values: Sequence[Any]) -> list[Any]:
        """The ``values`` of the fields named by ``selector``, in ``selector``'s order."""
        index = self._index
        return [values[index[name]] for name in selector]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Fields):
            return self._names == other._names
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._names)

    def __repr__(self) -> str:
        return f"Fields({', '.join(repr(n) for n in self._names)})"

    def __getstate__(self) -> tuple[str, ...]:
        return self._names

    def __setstate__(self, state: tuple[str, ...]) -> None:
        self._names = state
        self._index = {name: i for i, name in enumerate(state)}


def as_fields(value: Fields | Iterable[str] | str) -> Fields:
    """Accept ``Fields``, a list of names or a single name; return ``Fields``."""
    if isinstance(value, Fields):
        return value
    if isinstance(value, str):
        return Fields(value)
    return Fields(list(value))


def Values(*values: Any) -> list[Any]:
    """Storm's ``Values``: ``Values(word, count)`` is the list ``[word, count]``.

    Ported code that writes ``collector.emit(Values(word, count))`` emits a plain list, so
    nothing on the emit path changes: squall's collectors take any sequence of values.
    Runs wherever it is called; it only builds the list.
    """
    return list(values)
