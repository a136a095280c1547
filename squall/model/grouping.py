"""Stream groupings as declarations: which tasks of a subscriber receive a tuple."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from squall.model.fields import Fields

if TYPE_CHECKING:
    from squall.model.context import TopologyContext


class GroupingKind(enum.Enum):
    """Storm's stream groupings."""

    SHUFFLE = "shuffle"
    FIELDS = "fields"
    PARTIAL_KEY = "partial_key"
    ALL = "all"
    GLOBAL = "global"
    NONE = "none"
    DIRECT = "direct"
    LOCAL_OR_SHUFFLE = "local_or_shuffle"
    CUSTOM = "custom"


@dataclass(frozen=True)
class Grouping:
    """How one subscriber receives one stream.

    ``fields`` is set for fields and partial-key groupings, ``custom`` for custom ones.
    """

    kind: GroupingKind
    fields: Fields | None = None
    custom: CustomStreamGrouping | None = None

    def describe(self) -> str:
        """Human-readable form, used in messages and metrics."""
        if self.fields is not None:
            return f"{self.kind.value}({', '.join(self.fields)})"
        if self.custom is not None:
            return f"custom({type(self.custom).__name__})"
        return self.kind.value


@dataclass(frozen=True)
class GlobalStreamId:
    """A stream named by its component and stream ids."""

    component_id: str
    stream_id: str


class CustomStreamGrouping:
    """A user-defined grouping: a strategy object choosing target tasks per tuple.

    Each emitting task gets its own copy, prepared once before the first emit; both
    methods run on the emitting task's thread.
    """

    def prepare(
        self, context: TopologyContext, stream: GlobalStreamId, target_tasks: list[int]
    ) -> None:
        """Called once per emitting task with the subscriber's task ids (ascending)."""

    def choose_tasks(self, task_id: int, values: list[Any]) -> list[int]:
        """Return the target task ids for a tuple with ``values`` emitted by ``task_id``.

        Every returned id must be one of the ``target_tasks`` given to ``prepare``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement choose_tasks")
