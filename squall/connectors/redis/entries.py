"""Stream entries as tuple values, for the Redis spouts.

An entry is an id (``1700000000000-0``) and a mapping of field -> value, both strings.
How it becomes a tuple depends on the spout's ``fields``:

* ``("id", "data")`` (the default): ``[entry id, {field: value, ...}]``, every field of
  the entry in the dict.
* any other list: one value per declared field, read from the entry by name; the field
  ``"id"`` is the entry id (an entry field called ``id`` is not read).

``decode`` converts values: ``{"ts": int}`` makes the ``ts`` value an int (in
``("id", "data")`` mode, the ``ts`` item of the dict, when the entry has one). An entry
lacking a declared field, or whose value a converter rejects, is *malformed*:
:meth:`EntryReader.values` raises :class:`MalformedEntryError` saying which field and
why, and the spouts route it aside (never dropping it silently).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from squall.connectors.errors import ConnectorError

#: The default fields: the entry id and the dict of the entry's fields.
DATA_FIELDS = ("id", "data")
#: The stream a core spout emits malformed entries on.
ERRORS_STREAM = "errors"
#: Its fields: the stream key, the entry id, the entry's fields (a dict of strings) and
#: what is wrong.
ERROR_FIELDS = ("stream", "id", "entry", "error")

Converter = Callable[[str], Any]


class MalformedEntryError(ConnectorError):
    """An entry lacks a declared field or a value cannot be converted."""


class EntryReader:
    """Turns entries into the values of tuples (see the module docstring).

    Picklable (its converters must be, as a component's attributes are); used where the
    spout runs.
    """

    def __init__(self, fields: Sequence[str], decode: Mapping[str, Converter] | None) -> None:
        self.fields = tuple(fields)
        self.decode = dict(decode or {})
        self.data_mode = self.fields == DATA_FIELDS

    def values(self, entry_id: str, entry: dict[str, str]) -> list[Any]:
        """The tuple values of the entry ``entry_id`` with fields ``entry``.

        Raises:
            MalformedEntryError: a declared field is missing or a converter failed.
        """
        if self.data_mode:
            if self.decode:
                entry = {name: self._convert(name, value) for name, value in entry.items()}
            return [entry_id, entry]
        values: list[Any] = []
        for name in self.fields:
            if name == "id":
                values.append(entry_id)
                continue
            try:
                value = entry[name]
            except KeyError:
                raise MalformedEntryError(f"the entry has no field {name!r}") from None
            values.append(self._convert(name, value) if name in self.decode else value)
        return values

    def _convert(self, name: str, value: str) -> Any:
        converter = self.decode.get(name)
        if converter is None:
            return value
        try:
            return converter(value)
        except Exception as error:
            label = getattr(converter, "__name__", type(converter).__name__)
            raise MalformedEntryError(
                f"field {name!r}: {label}({value!r}) raised {type(error).__name__}: {error}"
            ) from None


__all__ = [
    "DATA_FIELDS",
    "ERRORS_STREAM",
    "ERROR_FIELDS",
    "EntryReader",
    "MalformedEntryError",
]
