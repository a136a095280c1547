"""``TransactionalTopologyBuilder``: a transactional topology, compiled onto the core model.

The transactional spout becomes a coordinator spout (one task, component
``<spout_id>/coordinator``) and an emitter bolt (component ``<spout_id>``, what batch
bolts subscribe to); every batch bolt runs in a :class:`BatchBoltExecutor` that also
subscribes to its sources' ``$coord`` streams, and committers to the coordinator's
``$commit`` stream. The compiled topology carries a
:class:`~squall.transactional.ir.TransactionalIR` of them as ``batch_ir``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from squall.model.builder import BoltDeclarer, TopologyBuilder
from squall.model.components import BasicBolt
from squall.model.config import Config
from squall.model.declarer import StreamDeclaration
from squall.model.errors import InvalidTopologyError
from squall.model.grouping import CustomStreamGrouping
from squall.model.hooks import Exhaustible, implements
from squall.model.topology import ComponentSpec, StormTopology
from squall.model.tuple import DEFAULT_STREAM
from squall.transactional.basic import BasicBoltBatchAdapter
from squall.transactional.batch import (
    BATCH_STREAM,
    COMMIT_STREAM,
    COORD_STREAM,
    BatchBolt,
    BatchBoltExecutor,
    Committer,
    EmitterExecutor,
)
from squall.transactional.coordinator import (
    ExhaustibleSpoutCoordinator,
    TransactionalSpoutCoordinator,
)
from squall.transactional.ir import BatchBoltIR, BatchEdgeIR, CoordinatedSpoutIR, TransactionalIR
from squall.transactional.spouts import (
    PartitionedSpoutAdapter,
    PartitionedTransactionalSpout,
    TransactionalSpout,
)

Subscribe = Callable[[BoltDeclarer], Any]


class BatchBoltDeclarer:
    """Returned by ``set_bolt``: the grouping methods of ``BoltDeclarer``, recorded and
    applied when the topology is built."""

    def __init__(self, component_id: str) -> None:
        self.component_id = component_id
        self.subscriptions: list[tuple[str, Subscribe]] = []
        self.configuration: dict[str, Any] = {}
        self.num_tasks: int | None = None

    def _add(self, source: str, subscribe: Subscribe) -> BatchBoltDeclarer:
        self.subscriptions.append((source, subscribe))
        return self

    def shuffle_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BatchBoltDeclarer:
        """Spread the stream's tuples evenly over this bolt's tasks."""
        return self._add(component, lambda d: d.shuffle_grouping(component, stream))

    def fields_grouping(
        self, component: str, fields: Any, stream: str = DEFAULT_STREAM
    ) -> BatchBoltDeclarer:
        """Equal values of ``fields`` go to the same task."""
        return self._add(component, lambda d: d.fields_grouping(component, fields, stream))

    def partial_key_grouping(
        self, component: str, fields: Any, stream: str = DEFAULT_STREAM
    ) -> BatchBoltDeclarer:
        """Each key to the less loaded of two tasks."""
        return self._add(component, lambda d: d.partial_key_grouping(component, fields, stream))

    def all_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BatchBoltDeclarer:
        """Every task gets every tuple."""
        return self._add(component, lambda d: d.all_grouping(component, stream))

    def global_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BatchBoltDeclarer:
        """Everything to the lowest task id."""
        return self._add(component, lambda d: d.global_grouping(component, stream))

    def none_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BatchBoltDeclarer:
        """No preference (shuffle)."""
        return self._add(component, lambda d: d.none_grouping(component, stream))

    def direct_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BatchBoltDeclarer:
        """The emitter picks the task (``emit_direct``)."""
        return self._add(component, lambda d: d.direct_grouping(component, stream))

    def local_or_shuffle_grouping(
        self, component: str, stream: str = DEFAULT_STREAM
    ) -> BatchBoltDeclarer:
        """Prefer tasks in the same worker."""
        return self._add(component, lambda d: d.local_or_shuffle_grouping(component, stream))

    def custom_grouping(
        self, component: str, grouping: CustomStreamGrouping, stream: str = DEFAULT_STREAM
    ) -> BatchBoltDeclarer:
        """Tuples go where ``grouping.choose_tasks`` says."""
        return self._add(component, lambda d: d.custom_grouping(component, grouping, stream))

    def set_num_tasks(self, num_tasks: int) -> BatchBoltDeclarer:
        """Number of tasks."""
        self.num_tasks = num_tasks
        return self

    def add_configuration(self, key: str, value: Any) -> BatchBoltDeclarer:
        """Component-level configuration."""
        self.configuration[key] = value
        return self


class TransactionalTopologyBuilder:
    """Builds a transactional topology (Storm's ``TransactionalTopologyBuilder``).

    Args:
        transactional_id: names the topology's transactions in the coordination store;
            a topology restarted with the same id (and state directory) continues them.
        spout_id: component id of the spout's emitter, what batch bolts subscribe to.
        spout: a :class:`TransactionalSpout` or :class:`PartitionedTransactionalSpout`.
        spout_parallelism: emitter tasks.
    """

    def __init__(
        self,
        transactional_id: str,
        spout_id: str,
        spout: TransactionalSpout | PartitionedTransactionalSpout,
        spout_parallelism: int = 1,
    ) -> None:
        #: The spout as given (the coordinator spout asks it ``is_exhausted``).
        self.source = spout
        if isinstance(spout, PartitionedTransactionalSpout):
            spout = PartitionedSpoutAdapter(spout, transactional_id)
        if not isinstance(spout, TransactionalSpout):
            raise InvalidTopologyError(
                f"transactional topology {transactional_id!r}: the spout must be a "
                f"TransactionalSpout or PartitionedTransactionalSpout, got {type(spout).__name__}"
            )
        self.transactional_id = transactional_id
        self.spout_id = spout_id
        self.spout = spout
        self.spout_parallelism = spout_parallelism
        self._bolts: list[tuple[str, BatchBolt, int, bool, BatchBoltDeclarer]] = []

    @property
    def coordinator_id(self) -> str:
        """Component id of the coordinator spout."""
        return f"{self.spout_id}/coordinator"

    def set_bolt(
        self, component_id: str, bolt: BatchBolt | BasicBolt, parallelism_hint: int = 1
    ) -> BatchBoltDeclarer:
        """Add a batch bolt (a committer if it subclasses ``Committer``), or a
        :class:`~squall.model.components.BasicBolt`: one object per task whose
        ``execute(tup, collector)`` gets every tuple of every batch, its emits anchored
        to the tuple and counted for the batch (Storm's ``setBolt(id, IBasicBolt)``)."""
        if isinstance(bolt, BasicBolt):
            return self._add(component_id, BasicBoltBatchAdapter(bolt), parallelism_hint, False)
        return self._add(component_id, bolt, parallelism_hint, isinstance(bolt, Committer))

    def set_committer_bolt(
        self, component_id: str, bolt: BatchBolt, parallelism_hint: int = 1
    ) -> BatchBoltDeclarer:
        """Add a batch bolt whose ``finish_batch`` runs in strict transaction order."""
        if isinstance(bolt, BasicBolt):
            raise InvalidTopologyError(
                f"bolt {component_id!r}: a BasicBolt ({type(bolt).__name__}) cannot be a "
                "committer (it has no finish_batch); add it with set_bolt, or write a "
                "BatchBolt"
            )
        return self._add(component_id, bolt, parallelism_hint, True)

    def _add(
        self, component_id: str, bolt: BatchBolt, parallelism: int, committer: bool
    ) -> BatchBoltDeclarer:
        if not isinstance(bolt, BatchBolt):
            raise InvalidTopologyError(
                f"bolt {component_id!r}: {type(bolt).__name__} is not a BatchBolt or BasicBolt"
            )
        declarer = BatchBoltDeclarer(component_id)
        self._bolts.append((component_id, bolt, parallelism, committer, declarer))
        return declarer

    def build_topology(self) -> StormTopology:
        """Compile to a :class:`StormTopology` (validated like any topology).

        Raises:
            InvalidTopologyError: as ``TopologyBuilder.create_topology`` does.
        """
        builder = TopologyBuilder()
        coordinator = (
            ExhaustibleSpoutCoordinator(self.spout, self.transactional_id, self.source)
            if implements(self.source, Exhaustible)
            else TransactionalSpoutCoordinator(self.spout, self.transactional_id)
        )
        builder.set_spout(self.coordinator_id, coordinator, 1).add_configuration(
            Config.TOPOLOGY_TRANSACTIONAL_ID, self.transactional_id
        )
        builder.set_bolt(
            self.spout_id, EmitterExecutor(self.spout), self.spout_parallelism
        ).all_grouping(self.coordinator_id, BATCH_STREAM)
        for component_id, bolt, parallelism, committer, declarer in self._bolts:
            bolt_declarer = builder.set_bolt(
                component_id, BatchBoltExecutor(bolt, committer), parallelism
            )
            sources = []
            for source, subscribe in declarer.subscriptions:
                subscribe(bolt_declarer)
                if source not in sources:
                    sources.append(source)
            for source in sources:
                bolt_declarer.direct_grouping(source, COORD_STREAM)
            if committer:
                bolt_declarer.all_grouping(self.coordinator_id, COMMIT_STREAM)
            if declarer.num_tasks is not None:
                bolt_declarer.set_num_tasks(declarer.num_tasks)
            bolt_declarer.add_configurations(declarer.configuration)
        topology = builder.create_topology()
        topology.batch_ir = self._describe(topology)
        return topology

    def _describe(self, topology: StormTopology) -> TransactionalIR:
        """The IR of ``topology``, compiled by :meth:`build_topology`: a bolt's first
        inputs are the subscriptions its declarer recorded, one each, in order."""
        emitter = topology.get_component(self.spout_id)
        spout = CoordinatedSpoutIR(
            self.spout_id, self.coordinator_id, self.spout, emitter.num_tasks, _user(emitter)
        )
        bolts = []
        edges = []
        for component_id, bolt, _, committer, declarer in self._bolts:
            spec = topology.get_component(component_id)
            bolts.append(BatchBoltIR(component_id, bolt, spec.num_tasks, committer, _user(spec)))
            for sub in spec.inputs[: len(declarer.subscriptions)]:
                edges.append(BatchEdgeIR(sub.source, sub.stream_id, component_id, sub.grouping))
        return TransactionalIR(self.transactional_id, spout, tuple(bolts), tuple(edges))


def _user(spec: ComponentSpec) -> dict[str, StreamDeclaration]:
    """The streams ``spec`` declares but the batch layer's coordination stream."""
    return {sid: declared for sid, declared in spec.streams.items() if sid != COORD_STREAM}
