"""The unit of data on a stream: Storm's ``Tuple``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

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
        ack_val: the XOR of the edge ids of the tuples emitted anchored to this one; an
            ack sends ``edge id ^ ack_val`` for each of its trees.
    """

    __slots__ = ("ack_val", "source_task", "stream_info", "tree_ids", "values")

    def __init__(
        self,
        values: Sequence[Any],
        info: StreamInfo,
        source_task: int,
        roots: tuple[int, ...] | None = None,
    ) -> None:
        self.values = values
        self.stream_info = info
        self.source_task = source_task
        self.tree_ids = roots
        self.ack_val = 0

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
        if key.__class__ is str:
            try:
                return self.values[self.stream_info.index[key]]
            except KeyError:
                raise self._unknown_field(key) from None
        return self.values[key]  # type: ignore[index]

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

    def get_string(self, position: int) -> str:
        """The value at ``position``, which must be a ``str``."""
        value = self.values[position]
        if not isinstance(value, str):
            raise TypeError(f"value {position} is {type(value).__name__}, not str")
        return value

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

    __hash__ = object.__hash__

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


TICK_STREAM_INFO = StreamInfo(SYSTEM_COMPONENT, TICK_STREAM, Fields("rate_secs"))


def is_tick_tuple(tup: Tuple) -> bool:
    """True for the system tick tuples sent at ``TOPOLOGY_TICK_TUPLE_FREQ_SECS``."""
    info = tup.stream_info
    return info.component_id == SYSTEM_COMPONENT and info.stream_id == TICK_STREAM
