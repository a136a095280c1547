"""``complete_topology``: run a topology until all its input is processed, capture output."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from squall.local.cluster import LocalCluster
from squall.model.errors import InvalidTopologyError, SquallError
from squall.model.hooks import Exhaustible, implements
from squall.model.topology import ComponentSpec, StormTopology
from squall.runtime.cluster import Cluster
from squall.testing.shared import SharedRecord
from squall.testing.spouts import FixedTupleSpout
from squall.transactional.ir import TransactionalIR

MockSource = Sequence[Sequence[Any]] | Mapping[str, Sequence[Sequence[Any]]]


class CompleteTopologyResult:
    """What ``complete_topology`` captured: every tuple each component emitted."""

    def __init__(self, emitted: dict[tuple[str, str], list[list[Any]]], info: Any) -> None:
        self._emitted = emitted
        #: The final metrics (:class:`~squall.runtime.metrics.TopologyInfo`).
        self.info = info

    def read_tuples(self, component_id: str, stream: str = "default") -> list[list[Any]]:
        """Values of every tuple ``component_id`` emitted on ``stream``, in emit order per
        task (tasks interleave as they ran)."""
        return [list(values) for values in self._emitted.get((component_id, stream), [])]

    def streams(self) -> list[tuple[str, str]]:
        """Every (component, stream) that emitted at least one tuple."""
        return sorted(self._emitted)


def _with_mocks(topology: StormTopology, mock_sources: Mapping[str, MockSource]) -> StormTopology:
    components: dict[str, ComponentSpec] = {}
    for spec in topology:
        copy = spec.copy()
        if spec.component_id in mock_sources:
            if not spec.is_spout:
                raise SquallError(
                    f"mock_sources names {spec.component_id!r}, which is a bolt, not a spout"
                )
            copy.component = FixedTupleSpout(
                mock_sources[spec.component_id],
                streams={sid: decl.fields for sid, decl in spec.streams.items()},
            )
        components[spec.component_id] = copy
    unknown = sorted(set(mock_sources) - set(components))
    if unknown:
        raise SquallError(f"mock_sources names unknown spout(s) {unknown}")
    return StormTopology(components)


class _RecordEmits:
    """An emit listener recording ``(component, stream, values)`` in a
    :class:`SharedRecord` (so it records from any process once pickled)."""

    def __init__(self, record: SharedRecord) -> None:
        self.record = record

    def __call__(
        self, component_id: str, stream: str, task: int, values: Sequence[Any], targets: list[int]
    ) -> None:
        self.record.append("emits", (component_id, stream, list(values)))


def complete_topology(
    topology: StormTopology,
    mock_sources: Mapping[str, MockSource] | None = None,
    conf: dict[str, Any] | None = None,
    cluster: Cluster | None = None,
    timeout_secs: float = 30.0,
) -> CompleteTopologyResult:
    """Run ``topology`` until every spout tuple is fully processed; return what was emitted.

    Spouts named in ``mock_sources`` are replaced by a :class:`FixedTupleSpout` emitting the
    given tuples (a list of value lists for the default stream, or a mapping stream id ->
    value lists). Every other spout must say when it is done with an ``is_exhausted()``
    method (``FixedTupleSpout`` and ``FeederSpout`` have one). The run ends once all spouts
    are exhausted and nothing is queued or pending; the topology is then killed.

    Runs on the caller's thread, through the :class:`~squall.runtime.cluster.Cluster`
    interface only: the topology is submitted afresh (``fresh=True``) with an emit
    listener recording every emit where its task runs (in a :class:`SharedRecord`),
    the cluster's ``wait_complete`` says when it is done, and its figures are read
    before it is killed. Core and transactional topologies only (not Trident). On a
    ``SparkCluster`` a micro-batch that Spark runs again
    (``topology.spark.batch.retries``) is recorded again.

    Args:
        topology: the topology to run.
        mock_sources: spout id -> tuples to emit instead of the spout.
        conf: topology configuration.
        cluster: run on this cluster (``LocalCluster``, ``SparkCluster``; default: a new
            ``LocalCluster``, shut down after).
        timeout_secs: give up after this long.

    Raises:
        SquallError: a spout cannot tell when it is exhausted, a mock source names an
            unknown spout, ``cluster`` is not a ``Cluster``, or the topology failed.
        InvalidTopologyError: a Trident topology, or one the cluster cannot run with an
            emit listener.
        TimeoutError: the topology did not complete within ``timeout_secs`` (the message
            says what was left).
    """
    if cluster is not None and not isinstance(cluster, Cluster):
        raise SquallError(
            f"complete_topology runs on a Cluster (LocalCluster, SparkCluster), not on "
            f"{type(cluster).__name__}"
        )
    if topology.batch_ir is not None and not isinstance(topology.batch_ir, TransactionalIR):
        raise InvalidTopologyError(
            "complete_topology runs core and transactional topologies, not Trident "
            "topologies (a Trident spout's coordinator cannot say when it is done)"
        )
    if mock_sources:
        topology = _with_mocks(topology, mock_sources)
    for spec in topology.spouts.values():
        if not implements(spec.component, Exhaustible):
            raise SquallError(
                f"complete_topology cannot tell when spout {spec.component_id!r} "
                f"({type(spec.component).__name__}) is done: give it an is_exhausted() "
                f"method or pass mock_sources={{{spec.component_id!r}: [...]}}"
            )
    record = SharedRecord()
    owned = cluster is None
    runner: Cluster = cluster if cluster is not None else LocalCluster()
    name = f"complete-topology-{uuid.uuid4().hex[:12]}"
    try:
        runner.submit_topology(
            name, dict(conf or {}), topology, fresh=True, emit_listener=_RecordEmits(record)
        )
        try:
            runner.wait_complete(name, timeout_secs)
            info = runner.get_topology_info(name)
        finally:
            runner.kill_topology(name, wait_secs=0)
    finally:
        if owned:
            runner.shutdown()
    emitted: dict[tuple[str, str], list[list[Any]]] = {}
    for component_id, stream, values in record.get("emits"):
        emitted.setdefault((component_id, stream), []).append(values)
    return CompleteTopologyResult(emitted, info)
