"""What a Trident or transactional source's reader needs, written by the cluster next
to the spout log (driver) and loaded where the reader runs (the source's process and
executors)."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from squall.model.fields import Fields
from squall.runtime.context import TopologyContext
from squall.spark.control import storage
from squall.spark.plan.batch import Edge, SourceKind
from squall.spark.plan.tasks import TaskLayout
from squall.transactional.spouts import TransactionalSpout
from squall.trident.spouts import BatchSpout, OpaquePartitionedTridentSpout, PartitionedTridentSpout

if TYPE_CHECKING:
    from squall.spark.execute.taskstate import CoreSetup


@dataclass
class SourceSetup:
    """One source of a query's plan, as its reader sees it."""

    source_id: str
    #: The kind of source: it names the source's reader (see ``sources.batchreaders``).
    kind: SourceKind
    #: The Trident spout, a transactional topology's spout, or None (a DRPC stream).
    spout: (
        BatchSpout
        | PartitionedTridentSpout
        | OpaquePartitionedTridentSpout
        | TransactionalSpout
        | None
    )
    #: Where the source's tuples go.
    edges: list[Edge]
    #: The fields of the emitted tuples.
    fields: Fields
    conf: dict[str, Any]
    #: The topology's task ids and its tasks' contexts (the local engine's).
    layout: TaskLayout
    #: The component whose task plans the source's batches (its coordinator spout).
    coordinator_id: str
    drpc_function: str | None = None
    #: The emitter's tasks, the fields of each stream of a coordinated spout (without
    #: the attempt), and a coordinated spout's coordination store's folder.
    tasks: int = 1
    output_fields: dict[str, Fields] = field(default_factory=dict)
    store_dir: str = ""

    def coordinator_context(self) -> TopologyContext:
        """The context the local engine gives the source's coordinator (its
        coordinator spout's task), for the spout's coordinator."""
        return self.layout.context(self.coordinator_id, 0, self.conf)

    def emitter_context(self, task: int, coordination_store: Any = None) -> TopologyContext:
        """The context of the source's emitter task ``task`` (index), as on the local
        engine."""
        return self.layout.context(self.source_id, task, self.conf, coordination_store)

    def batch_spout(self) -> BatchSpout:
        """The batch spout of a batch spout's source.

        Raises:
            TypeError: the source is of another kind.
        """
        if not isinstance(self.spout, BatchSpout):
            raise TypeError(f"source {self.source_id!r} has no batch spout")
        return self.spout

    def partitioned_spout(self) -> PartitionedTridentSpout | OpaquePartitionedTridentSpout:
        """The spout of a partitioned spout's source.

        Raises:
            TypeError: the source is of another kind.
        """
        if not isinstance(self.spout, PartitionedTridentSpout | OpaquePartitionedTridentSpout):
            raise TypeError(f"source {self.source_id!r} has no partitioned spout")
        return self.spout

    def transactional_spout(self) -> TransactionalSpout:
        """The spout of a transactional topology's source.

        Raises:
            TypeError: the source is of another kind.
        """
        if not isinstance(self.spout, TransactionalSpout):
            raise TypeError(f"source {self.source_id!r} has no transactional spout")
        return self.spout


def read_setup(path: str) -> CoreSetup | SourceSetup:
    """The set-up the cluster wrote to ``path``: a core topology's (every spout's) or a
    Trident or transactional source's."""
    setup: CoreSetup | SourceSetup = pickle.loads(storage.read_bytes(path))
    return setup


def read_source_setup(path: str) -> SourceSetup:
    """The Trident or transactional source's set-up the cluster wrote to ``path``.

    Raises:
        TypeError: the file holds a core topology's set-up.
    """
    setup = read_setup(path)
    if not isinstance(setup, SourceSetup):
        raise TypeError(f"{path} holds no source set-up")
    return setup
