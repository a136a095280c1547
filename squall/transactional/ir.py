"""What a transactional topology is made of, as its builder declared it.

``TransactionalTopologyBuilder.build_topology`` compiles a transactional topology onto
the core model (a coordinator spout, an emitter bolt, a ``BatchBoltExecutor`` per batch
bolt) and describes it in a :class:`TransactionalIR`, which the compiled
``StormTopology`` carries as ``batch_ir``: an engine can run the spout and the batch
bolts from it without taking the components apart.

Everything refers to components by their component ids in the compiled topology. Only
the user's streams are described (the batch layer's ``$batch``/``$coord``/``$commit``
streams are the builder's business).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from squall.model.batch_ir import BatchIR
from squall.model.declarer import StreamDeclaration
from squall.model.grouping import Grouping
from squall.transactional.batch import BatchBolt
from squall.transactional.spouts import TransactionalSpout


@dataclass(frozen=True)
class CoordinatedSpoutIR:
    """The transactional spout: its coordinator plans each batch, its emitter tasks emit it.

    Attributes:
        component_id: the emitter's component id (``spout_id``), what bolts subscribe to.
        coordinator_id: the coordinator spout's component id (``<spout_id>/coordinator``).
        spout: the spout (a partitioned spout wrapped in its ``PartitionedSpoutAdapter``).
        tasks: the emitter's task count.
        streams: the streams the spout declares, by id; the first field of each carries
            the batch's ``TransactionAttempt``.
    """

    component_id: str
    coordinator_id: str
    spout: TransactionalSpout
    tasks: int
    streams: Mapping[str, StreamDeclaration]


@dataclass(frozen=True)
class BatchBoltIR:
    """One batch bolt.

    Attributes:
        component_id: its component id.
        bolt: the user's batch bolt (its ``BatchBoltExecutor`` makes one per batch).
        tasks: its task count.
        committer: whether its ``finish_batch`` runs at the batch's commit, in
            transaction order.
        streams: the streams it declares, by id; the first field of each carries the
            batch's ``TransactionAttempt``.
    """

    component_id: str
    bolt: BatchBolt
    tasks: int
    committer: bool
    streams: Mapping[str, StreamDeclaration]


@dataclass(frozen=True)
class BatchEdgeIR:
    """Tuples of stream ``stream`` of ``source`` go to bolt ``target`` by ``grouping``.

    Attributes:
        source: the component id of the spout's emitter or of a batch bolt.
        stream: a stream ``source`` declares.
        target: the receiving bolt's component id.
        grouping: the grouping the user declared (any kind, custom included).
    """

    source: str
    stream: str
    target: str
    grouping: Grouping


@dataclass(frozen=True)
class TransactionalIR(BatchIR):
    """A compiled transactional topology.

    Attributes:
        transactional_id: names the topology's transactions in the coordination store.
        spout: the transactional spout.
        bolts: the batch bolts in declaration order (not necessarily a topological order:
            their streams may form cycles).
        edges: every subscription of a batch bolt: the bolts in order, each one's in the
            order it declared them.
    """

    transactional_id: str
    spout: CoordinatedSpoutIR
    bolts: tuple[BatchBoltIR, ...]
    edges: tuple[BatchEdgeIR, ...]

    def user_components(self) -> dict[str, object]:
        """The transactional spout (by its emitter's component id) and the batch
        bolts."""
        found: dict[str, object] = {self.spout.component_id: self.spout.spout}
        found.update((bolt.component_id, bolt.bolt) for bolt in self.bolts)
        return found

    def bolt(self, component_id: str) -> BatchBoltIR:
        """The batch bolt ``component_id``.

        Raises:
            KeyError: no such bolt.
        """
        for bolt in self.bolts:
            if bolt.component_id == component_id:
                return bolt
        raise KeyError(f"no batch bolt {component_id!r}")

    def edges_into(self, component_id: str) -> list[BatchEdgeIR]:
        """The streams bolt ``component_id`` receives, in declaration order."""
        return [edge for edge in self.edges if edge.target == component_id]

    def edges_from(self, component_id: str) -> list[BatchEdgeIR]:
        """The edges leaving the emitter or bolt ``component_id``, in ``edges`` order."""
        return [edge for edge in self.edges if edge.source == component_id]
