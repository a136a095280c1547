"""Declaring a component's output streams."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from squall.model.errors import InvalidTopologyError
from squall.model.fields import Fields, as_fields
from squall.model.tuple import DEFAULT_STREAM


@dataclass(frozen=True)
class StreamDeclaration:
    """One declared output stream of a component."""

    stream_id: str
    fields: Fields
    direct: bool = False


#: Storm's system stream: every component has it (the engines declare it on each spout
#: and bolt in the system topology), so a bolt may subscribe to ``(component,
#: "__system")``. Nothing is emitted on it (as in Storm 2.x); user code cannot declare
#: or emit on it.
SYSTEM_STREAM = "__system"
SYSTEM_STREAM_DECLARATION = StreamDeclaration(SYSTEM_STREAM, Fields("event"))

#: Streams every component has without declaring them, by id.
IMPLICIT_STREAMS: dict[str, StreamDeclaration] = {SYSTEM_STREAM: SYSTEM_STREAM_DECLARATION}


class OutputFieldsDeclarer:
    """Collects the streams a component declares in ``declare_output_fields``.

    Runs at topology build time (``create_topology``), once per component.
    """

    def __init__(self, component_id: str = "?") -> None:
        self._component_id = component_id
        self.streams: dict[str, StreamDeclaration] = {}

    def declare(self, fields: Fields | Iterable[str], direct: bool = False) -> None:
        """Declare the default stream with ``fields``; ``direct`` for ``emit_direct`` only."""
        self.declare_stream(DEFAULT_STREAM, fields, direct)

    def declare_stream(
        self, stream_id: str, fields: Fields | Iterable[str], direct: bool = False
    ) -> None:
        """Declare stream ``stream_id`` with ``fields``.

        Raises:
            InvalidTopologyError: the stream is declared twice, its id is empty or starts
                with ``"__"`` (reserved for system streams), or the fields are invalid.
        """
        where = f"component {self._component_id!r}"
        if not isinstance(stream_id, str) or not stream_id:
            raise InvalidTopologyError(f"{where}: stream ids must be non-empty strings")
        if stream_id.startswith("__"):
            raise InvalidTopologyError(
                f"{where}: stream id {stream_id!r} starts with '__', which is reserved "
                "for system streams"
            )
        if stream_id in self.streams:
            raise InvalidTopologyError(f"{where}: stream {stream_id!r} is declared twice")
        try:
            declared = as_fields(fields)
        except (TypeError, ValueError) as exc:
            raise InvalidTopologyError(f"{where}, stream {stream_id!r}: {exc}") from None
        self.streams[stream_id] = StreamDeclaration(stream_id, declared, bool(direct))
