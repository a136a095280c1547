"""``complete_topology``: run a topology until all its input is processed, capture output."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from squall.local.cluster import LocalCluster
from squall.local.running import RunningTopology
from squall.model.errors import InvalidTopologyError, SquallError
from squall.model.hooks import Exhaustible, implements
from squall.model.topology import ComponentSpec, StormTopology
from squall.runtime.cluster import Cluster
from squall.testing.shared import SharedRecord
from squall.testing.spouts import FixedTupleSpout
from squall.transactional.ir import TransactionalIR

MockSource = Sequence[Sequence[Any]] | Mapping[str, Sequence[Sequence[Any]]]

_names = itertools.count(1)


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


def _complete_on_spark(
    cluster: Any, topology: StormTopology, conf: dict[str, Any], timeout_secs: float
) -> CompleteTopologyResult:
    """Run ``topology`` on the SparkCluster ``cluster`` until it is idle (every batch
    its spouts have is processed), recording every emit; then kill it."""
    record = SharedRecord()
    name = f"complete-topology-{uuid.uuid4().hex[:12]}"
    cluster.submit_topology(name, conf, topology, fresh=True, emit_listener=_RecordEmits(record))
    try:
        if not cluster.wait_idle(name, timeout_secs):
            info = cluster.get_topology_info(name)
            if info.status == "FAILED":
                errors = info.extra.get("errors", [])
                raise SquallError(
                    f"topology failed on SparkCluster: {errors[-1] if errors else info.status}"
                )
            raise TimeoutError(
                f"topology did not complete in {timeout_secs} s on SparkCluster (its spouts "
                "still had batches to process)"
            )
        info = cluster.get_topology_info(name)
    finally:
        cluster.kill_topology(name)
    emitted: dict[tuple[str, str], list[list[Any]]] = {}
    for component_id, stream, values in record.get("emits"):
        emitted.setdefault((component_id, stream), []).append(values)
    return CompleteTopologyResult(emitted, info)


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

    Args:
        topology: the topology to run.
        mock_sources: spout id -> tuples to emit instead of the spout.
        conf: topology configuration.
        cluster: run on this cluster: a ``LocalCluster`` (default: a new one, shut down
            after) or a ``SparkCluster`` (see below).
        timeout_secs: give up after this long.

    On a ``SparkCluster`` the run is over once the cluster's ``wait_idle`` says every
    batch the spouts have is processed; every emit is recorded where its task runs
    (in a :class:`SharedRecord`), so the same result comes back. A micro-batch that
    Spark runs again (``topology.spark.batch.retries``) is recorded again. Core and
    transactional topologies only (not Trident).

    Raises:
        SquallError: a spout cannot tell when it is exhausted, a mock source names an
            unknown spout, ``cluster`` is neither a ``LocalCluster`` nor a
            ``SparkCluster``, or the topology failed on Spark.
        InvalidTopologyError: a Trident topology on a ``SparkCluster``.
        TimeoutError: the topology did not complete within ``timeout_secs`` (the message
            says which spouts were not exhausted and how much was still pending).
    """
    spark = getattr(cluster, "engine", None) == "spark"
    if cluster is not None and not spark and not isinstance(cluster, LocalCluster):
        raise SquallError(
            f"complete_topology runs on LocalCluster or SparkCluster, not on "
            f"{type(cluster).__name__}"
        )
    if (
        spark
        and topology.batch_ir is not None
        and not isinstance(topology.batch_ir, TransactionalIR)
    ):
        raise InvalidTopologyError(
            "complete_topology on SparkCluster runs core and transactional topologies, "
            "not Trident topologies (run them on LocalCluster)"
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
    if spark:
        return _complete_on_spark(cluster, topology, dict(conf or {}), timeout_secs)
    assert cluster is None or isinstance(cluster, LocalCluster)
    emitted: dict[tuple[str, str], list[list[Any]]] = {}
    lock = threading.Lock()

    def capture(
        component_id: str, stream: str, task: int, values: Sequence[Any], targets: list[int]
    ) -> None:
        with lock:
            emitted.setdefault((component_id, stream), []).append(list(values))

    owned = cluster is None
    runner = cluster or LocalCluster()
    name = f"complete-topology-{next(_names)}"
    try:
        runner.submit_topology(name, conf or {}, topology, emit_listener=capture)
        running = runner.get_running(name)
        assert isinstance(running, RunningTopology)  # an emit listener runs on threads
        # The user's spouts (the engine adds system spouts, e.g. a checkpoint spout).
        user_spouts = set(topology.spouts)
        spouts = [r.component for r in running.runners.values() if r.component_id in user_spouts]
        deadline = time.monotonic() + timeout_secs
        while True:
            if all(s.is_exhausted() for s in spouts) and running.wait_idle(0.05):
                break
            if time.monotonic() > deadline:
                waiting = sorted(
                    running.runners[t].component_id
                    for t in running.runners
                    if running.runners[t].component_id in user_spouts
                    and not running.runners[t].component.is_exhausted()
                )
                raise TimeoutError(
                    f"topology did not complete in {timeout_secs} s: spouts not exhausted: "
                    f"{waiting or 'none'}; {running.info().local}"
                )
            time.sleep(0.002)
        info = running.info()
        runner.kill_topology(name, wait_secs=0)
    finally:
        if name in runner.topology_names():
            runner.kill_topology(name, wait_secs=0)
        if owned:
            runner.shutdown()
    with lock:
        return CompleteTopologyResult({k: list(v) for k, v in emitted.items()}, info)
