"""The unit of data on a stream: Storm's ``Tuple``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from mypy_extensions import mypyc_attr

from squall.model.fields import Fields

DEFAULT_STREAM = "default"
SYSTEM_COMPONENT = "__system"
TICK_STREAM = "__tick"
SYSTEM_TASK_ID = -1


class StreamInfo:
    """What every tuple of one (component, stream) shares: its names and field positions.

    Built once per declared stream by the engines; tuples point at it instead of
    carrying their own copies.
    """

    __slots__ = ("component_id", "fields", "index", "stream_id")

    def __init__(self, component_id: str, stream_id: str, fields: Fields) -> None:
        self.component_id = component_id
        self.stream_id = stream_id
        self.fields = fields
        self.index = fields.field_index()

    def __repr__(self) -> str:
        return f"StreamInfo({self.component_id!r}, {self.stream_id!r}, {self.fields!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its constructor's arguments (the compiled class has no ``__dict__``)."""
        return StreamInfo, (self.component_id, self.stream_id, self.fields)


@mypyc_attr(free_list_len=1)
class Tuple:
    """A list of values with named fields, received by a bolt's ``execute``.

    Values are read by position (``tup[0]``, ``get_value(0)``) or by field name
    (``tup["word"]``, ``get_value_by_field("word")``). A tuple also says where it comes
    from: ``source_component``, ``source_stream`` and ``source_task``.

    Tuples are created by the engine; user code never builds them.

    The engine-facing part (read and written by the engines' collectors, ackers and
    exchanges; not for components, whose acking goes through their collector):

    Attributes:
        stream_info: what every tuple of its (component, stream) shares (names, field
            positions).
        tree_ids: ``(root id, edge id, root id, edge id, ...)``: the tuple trees this
            copy belongs to and its edge id in each; None when the tuple is not
            tracked. An emit anchored to this tuple adds a new edge to each of its trees.
        root, edge: the ids of the one tree of a tuple that belongs to exactly one (the
            common case, kept as two machine integers in the compiled core, with no
            tuple object); ``root`` is -1 otherwise (ids are never negative).
        tree_list: the ids, as ``tree_ids`` gives them, when ``root`` is -1: None for
            a tuple not tracked. ``tree_ids`` reads and writes both forms; the hot paths
            read ``root`` and then ``tree_list``, which is a plain attribute.
        ack_val: the XOR of the edge ids of the tuples emitted anchored to this one; an
            ack sends ``edge id ^ ack_val`` for each of its trees.
    """

    __slots__ = ("ack_val", "edge", "root", "source_task", "stream_info", "tree_list", "values")

    def __init__(
        self,
        values: Sequence[Any],
        info: StreamInfo,
        source_task: int,
        roots: Sequence[int] | None = None,
    ) -> None:
        self.values = values
        self.stream_info = info
        self.source_task = source_task
        self.ack_val = 0
        if roots is not None and len(roots) == 2:
            self.root = roots[0]
            self.edge = roots[1]
            self.tree_list = None
        else:  # ``edge`` is read only when ``root`` holds a tree: left unset here
            self.root = -1
            #: A tuple, or a list where the ids came from another process.
            self.tree_list = roots

    @property
    def tree_ids(self) -> Sequence[int] | None:
        """``(root id, edge id, ...)`` for every tree of this copy; None: not tracked."""
        if self.root >= 0:
            return (self.root, self.edge)
        return self.tree_list

    @tree_ids.setter
    def tree_ids(self, roots: Sequence[int] | None) -> None:
        if roots is not None and len(roots) == 2:
            self.root = roots[0]
            self.edge = roots[1]
            self.tree_list = None
        else:
            self.root = -1
            self.tree_list = roots

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled whole, tree ids and ack value included (the compiled class has no
        ``__dict__``)."""
        return _rebuilt_tuple, (
            self.values,
            self.stream_info,
            self.source_task,
            self.tree_ids,
            self.ack_val,
        )

    @property
    def fields(self) -> Fields:
        """The field names of the stream this tuple was emitted on."""
        return self.stream_info.fields

    @property
    def source_component(self) -> str:
        """Id of the component that emitted this tuple."""
        return self.stream_info.component_id

    @property
    def source_stream(self) -> str:
        """Id of the stream this tuple was emitted on."""
        return self.stream_info.stream_id

    @property
    def source_global_stream_id(self) -> tuple[str, str]:
        """``(source_component, source_stream)``."""
        return (self.stream_info.component_id, self.stream_info.stream_id)

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            try:
                return self.values[self.stream_info.index[key]]
            except KeyError:
                raise self._unknown_field(key) from None
        return self.values[key]

    def get_value(self, position: int) -> Any:
        """The value at ``position``."""
        return self.values[position]

    def get_value_by_field(self, name: str) -> Any:
        """The value of field ``name``.

        Raises:
            KeyError: the stream has no such field (the message names the stream).
        """
        try:
            return self.values[self.stream_info.index[name]]
        except KeyError:
            raise self._unknown_field(name) from None

    def contains(self, name: str) -> bool:
        """Whether the stream declares field ``name``."""
        return name in self.stream_info.index

    def field_index(self, name: str) -> int:
        """Position of field ``name``."""
        try:
            return self.stream_info.index[name]
        except KeyError:
            raise self._unknown_field(name) from None

    def select(self, fields: Fields | Sequence[str]) -> list[Any]:
        """The values of ``fields``, in that order."""
        index = self.stream_info.index
        try:
            return [self.values[index[name]] for name in fields]
        except KeyError as missing:
            raise self._unknown_field(missing.args[0]) from None

    # --- Storm's typed getters (ITuple): each checks the value as Storm's cast would ---

    def get_values(self) -> list[Any]:
        """The tuple's values, in field order (a new list)."""
        return list(self.values)

    def get_fields(self) -> Fields:
        """The field names of the stream this tuple was emitted on."""
        return self.stream_info.fields

    def size(self) -> int:
        """The number of values."""
        return len(self.values)

    def get_source_component(self) -> str:
        """Id of the component that emitted this tuple."""
        return self.stream_info.component_id

    def get_source_stream_id(self) -> str:
        """Id of the stream this tuple was emitted on."""
        return self.stream_info.stream_id

    def get_source_task(self) -> int:
        """Id of the task that emitted this tuple."""
        return self.source_task

    def get_source_global_stream_id(self) -> tuple[str, str]:
        """``(source_component, source_stream)``."""
        return (self.stream_info.component_id, self.stream_info.stream_id)

    def get_string(self, position: int) -> str | None:
        """The ``str`` at ``position`` (None stays None).

        Raises:
            TypeError: the value is not a ``str``; the message names the position, field
                and type. The other typed getters check their types the same way.
        """
        return self._typed("get_string", position, position, _STR)

    def get_string_by_field(self, name: str) -> str | None:
        """The ``str`` of field ``name`` (None stays None)."""
        return self._typed(f"get_string_by_field({name!r})", None, name, _STR)

    def get_integer(self, position: int) -> int | None:
        """The int at ``position``: not a bool, within a Java int's range."""
        return self._typed("get_integer", position, position, _INT)

    def get_integer_by_field(self, name: str) -> int | None:
        """The int of field ``name`` (see :meth:`get_integer`)."""
        return self._typed(f"get_integer_by_field({name!r})", None, name, _INT)

    def get_long(self, position: int) -> int | None:
        """The int at ``position``: not a bool, within a Java long's range."""
        return self._typed("get_long", position, position, _LONG)

    def get_long_by_field(self, name: str) -> int | None:
        """The int of field ``name`` (see :meth:`get_long`)."""
        return self._typed(f"get_long_by_field({name!r})", None, name, _LONG)

    def get_short(self, position: int) -> int | None:
        """The int at ``position``: not a bool, within a Java short's range."""
        return self._typed("get_short", position, position, _SHORT)

    def get_short_by_field(self, name: str) -> int | None:
        """The int of field ``name`` (see :meth:`get_short`)."""
        return self._typed(f"get_short_by_field({name!r})", None, name, _SHORT)

    def get_byte(self, position: int) -> int | None:
        """The int at ``position``: not a bool, within a Java byte's range."""
        return self._typed("get_byte", position, position, _BYTE)

    def get_byte_by_field(self, name: str) -> int | None:
        """The int of field ``name`` (see :meth:`get_byte`)."""
        return self._typed(f"get_byte_by_field({name!r})", None, name, _BYTE)

    def get_double(self, position: int) -> float | None:
        """The ``float`` at ``position`` (an int is not one, as Storm's cast to Double)."""
        return self._typed("get_double", position, position, _FLOAT)

    def get_double_by_field(self, name: str) -> float | None:
        """The ``float`` of field ``name`` (see :meth:`get_double`)."""
        return self._typed(f"get_double_by_field({name!r})", None, name, _FLOAT)

    def get_float(self, position: int) -> float | None:
        """The ``float`` at ``position`` (Python has one float type: as get_double)."""
        return self._typed("get_float", position, position, _FLOAT)

    def get_float_by_field(self, name: str) -> float | None:
        """The ``float`` of field ``name`` (see :meth:`get_float`)."""
        return self._typed(f"get_float_by_field({name!r})", None, name, _FLOAT)

    def get_boolean(self, position: int) -> bool | None:
        """The ``bool`` at ``position``."""
        return self._typed("get_boolean", position, position, _BOOL)

    def get_boolean_by_field(self, name: str) -> bool | None:
        """The ``bool`` of field ``name``."""
        return self._typed(f"get_boolean_by_field({name!r})", None, name, _BOOL)

    def get_binary(self, position: int) -> bytes | bytearray | None:
        """The ``bytes`` (or ``bytearray``) at ``position``."""
        return self._typed("get_binary", position, position, _BINARY)

    def get_binary_by_field(self, name: str) -> bytes | bytearray | None:
        """The ``bytes`` (or ``bytearray``) of field ``name``."""
        return self._typed(f"get_binary_by_field({name!r})", None, name, _BINARY)

    def _typed(self, call: str, position: int | None, key: int | str, kind: _Kind) -> Any:
        """The value at ``key`` (a position, or a field name when ``position`` is None),
        checked against ``kind``; ``call`` names the getter in the error."""
        if position is None:
            position = self.field_index(key)  # type: ignore[arg-type]
            value = self.values[position]
        else:
            value = self.values[position]
            call = f"{call}({position})"
        if value is None:
            return None
        problem = kind.problem(value)
        if problem is None:
            return value
        names = self.stream_info.fields.to_list()
        field = f" (field {names[position]!r})" if -len(names) <= position < len(names) else ""
        info = self.stream_info
        raise TypeError(
            f"{call}: the value at position {position}{field} of the tuple from "
            f"{info.component_id!r} on stream {info.stream_id!r} {problem}"
        )

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tuple):
            return NotImplemented
        return (
            list(self.values) == list(other.values)
            and self.stream_info.component_id == other.stream_info.component_id
            and self.stream_info.stream_id == other.stream_info.stream_id
            and self.source_task == other.source_task
        )

    def __hash__(self) -> int:
        """By identity, as ``object``'s: equal tuples are still distinct deliveries.
        (A method, not ``__hash__ = object.__hash__``, which compiled would be an
        attribute set on every tuple.)"""
        return object.__hash__(self)

    def __repr__(self) -> str:
        info = self.stream_info
        return (
            f"Tuple(source={info.component_id}:{self.source_task}, "
            f"stream={info.stream_id!r}, values={list(self.values)!r})"
        )

    def _unknown_field(self, name: object) -> KeyError:
        info = self.stream_info
        return KeyError(
            f"tuple from component {info.component_id!r} on stream {info.stream_id!r} "
            f"has no field {name!r}; its fields are {info.fields.to_list()}"
        )


class _Kind:
    """What a typed getter accepts: instances of ``types`` (never a bool unless
    ``types`` is bool's), ints within ``bounds``."""

    __slots__ = ("bounds", "java", "name", "types")

    def __init__(
        self,
        name: str,
        types: type | tuple[type, ...],
        java: str = "",
        bits: int = 0,
    ) -> None:
        self.name = name
        self.types = types
        self.java = java
        self.bounds = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if bits else None

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not of this kind, or None if it is."""
        if isinstance(value, self.types) and (self.types is bool or value.__class__ is not bool):
            if self.bounds is not None and not self.bounds[0] <= value <= self.bounds[1]:
                return f"is {value}, out of the range of a Java {self.java}"
            return None
        kind = type(value).__name__
        article = "an" if kind[:1] in "aeiou" else "a"
        return f"is {article} {kind} ({value!r:.60}), not {self.name}"


_STR = _Kind("a str", str)
_INT = _Kind("an int", int, "int", 32)
_LONG = _Kind("an int", int, "long", 64)
_SHORT = _Kind("an int", int, "short", 16)
_BYTE = _Kind("an int", int, "byte", 8)
_FLOAT = _Kind("a float", float)
_BOOL = _Kind("a bool", bool)
_BINARY = _Kind("bytes", (bytes, bytearray))


def _rebuilt_tuple(
    values: Sequence[Any],
    info: StreamInfo,
    source_task: int,
    roots: Sequence[int] | None,
    ack_val: int,
) -> Tuple:
    """A pickled :class:`Tuple` as it was."""
    tup = Tuple(values, info, source_task, roots)
    tup.ack_val = ack_val
    return tup


def tracked_tuple(
    values: Sequence[Any], info: StreamInfo, source_task: int, root: int, edge: int
) -> Tuple:
    """A tuple of the one tree ``root`` with edge id ``edge`` (the engines' emits:
    no ids tuple made)."""
    tup = Tuple(values, info, source_task)
    tup.root = root
    tup.edge = edge
    return tup


TICK_STREAM_INFO = StreamInfo(SYSTEM_COMPONENT, TICK_STREAM, Fields("rate_secs"))


def is_tick_tuple(tup: Tuple) -> bool:
    """True for the system tick tuples sent at ``TOPOLOGY_TICK_TUPLE_FREQ_SECS``."""
    info = tup.stream_info
    return info.component_id == SYSTEM_COMPONENT and info.stream_id == TICK_STREAM
