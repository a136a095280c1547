"""Emit sinks: where a task's collectors deliver the tuples they routed.

The collectors (:mod:`squall.runtime.collectors`) run the one emit algorithm of every
engine: stream checks, target choice, counters, XOR anchoring, spout tracking, the emit
observer. What they produce, a tuple's values for a set of target tasks with the ids of
its trees, goes to the task's :class:`EmitSink`. :class:`OutboxSink` (the local engine's)
appends a :class:`~squall.model.tuple.Tuple` per target to the task outboxes; the Spark
engine's sink writes the values and ids into its packets' boxes without building
tuples (``squall.spark.execute.wire``).

A sink belongs to one task and is called on that task's thread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from random import getrandbits
from typing import Any

from mypy_extensions import mypyc_attr

from squall.model.tuple import StreamInfo, Tuple, tracked_tuple
from squall.runtime.acker import ID_BITS


@mypyc_attr(allow_interpreted_subclasses=True)  # the Spark engine's wire sink
class EmitSink(ABC):
    """Receives the tuples a task emits, already routed, in emit order."""

    __slots__ = ()

    @abstractmethod
    def send(
        self, info: StreamInfo, source: int, targets: list[int], values: Sequence[Any]
    ) -> None:
        """Deliver an untracked tuple of ``values`` on stream ``info``, from task
        ``source``, to each of ``targets``."""

    @abstractmethod
    def send_tree(
        self,
        info: StreamInfo,
        source: int,
        targets: list[int],
        values: Sequence[Any],
        root: int,
    ) -> int:
        """Deliver a tuple in the one tree ``root`` to each of ``targets``, each copy
        with a new random 64-bit edge id.

        Returns:
            The XOR of the edge ids given (what the emitter's anchor, or the spout's
            init, accounts for).
        """

    @abstractmethod
    def send_to(
        self,
        info: StreamInfo,
        source: int,
        target: int,
        values: Sequence[Any],
        tree_ids: tuple[int, ...] | None,
    ) -> None:
        """Deliver one tuple with ids ``tree_ids`` (``Tuple.tree_ids``; None:
        untracked) to task ``target``."""


class OutboxSink(EmitSink):
    """Appends :class:`~squall.model.tuple.Tuple` objects to the task outboxes.

    Args:
        outboxes: indexed by task id; ``outboxes[t].append(tup)`` delivers to task ``t``.
    """

    __slots__ = ("outboxes",)

    def __init__(self, outboxes: Sequence[Any]) -> None:
        self.outboxes = outboxes

    def send(
        self, info: StreamInfo, source: int, targets: list[int], values: Sequence[Any]
    ) -> None:
        """See :meth:`EmitSink.send`: one tuple, shared by the targets (read-only)."""
        tup = Tuple(values, info, source)
        outboxes = self.outboxes
        for target in targets:
            outboxes[target].append(tup)

    def send_tree(
        self,
        info: StreamInfo,
        source: int,
        targets: list[int],
        values: Sequence[Any],
        root: int,
    ) -> int:
        """See :meth:`EmitSink.send_tree`."""
        outboxes = self.outboxes
        ack_val = 0
        for target in targets:
            edge = getrandbits(ID_BITS)
            ack_val ^= edge
            outboxes[target].append(tracked_tuple(values, info, source, root, edge))
        return ack_val

    def send_to(
        self,
        info: StreamInfo,
        source: int,
        target: int,
        values: Sequence[Any],
        tree_ids: tuple[int, ...] | None,
    ) -> None:
        """See :meth:`EmitSink.send_to`."""
        self.outboxes[target].append(Tuple(values, info, source, tree_ids))


__all__ = ["EmitSink", "OutboxSink"]
