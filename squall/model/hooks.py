"""Hooks: the optional methods and attributes that engines and builders look for on
components, task contexts and state factories.

Each hook is a ``runtime_checkable`` Protocol. An object implements a hook by defining
its method (or attribute); squall's own implementations inherit the Protocol to say so,
so mypy checks their signatures. Callers test for a hook with :func:`implements`, never
by name, and do it once per task, batch or call, not once per tuple.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, TypeVar, cast, runtime_checkable

from squall.model.components import BasicBolt, Bolt
from squall.model.fields import Fields

if TYPE_CHECKING:
    from squall.model.context import TopologyContext
    from squall.model.coordination import CoordinationStore

HookT = TypeVar("HookT")


@runtime_checkable
class AdaptsToBolt(Protocol):
    """A component declared as a bolt that runs through a bolt of its own making (a
    ``WindowedBolt``).

    Called by ``TopologyBuilder.create_topology()``, in the process building the
    topology, once for each declared bolt that is neither a ``Bolt`` nor a ``BasicBolt``.
    The bolt returned replaces the component in the topology, so engines never see the
    adapter. An ``InvalidTopologyError``, ``ValueError`` or ``TypeError`` it raises is
    reported as an ``InvalidTopologyError`` naming the bolt.
    """

    def to_bolt(self) -> Bolt | BasicBolt:
        """The bolt that runs this component."""
        ...


@runtime_checkable
class ChecksInputs(Protocol):
    """A bolt that checks the streams it subscribes to against their declared fields (a
    ``JoinBolt``: its join and select fields must be fields of its inputs).

    Called by ``TopologyBuilder.create_topology()``, in the process building the
    topology, once for each bolt that implements it (after ``AdaptsToBolt``: on the
    bolt that runs), once every bolt's subscriptions are known to name declared
    streams. An ``InvalidTopologyError`` or ``ValueError`` it raises is reported as an
    ``InvalidTopologyError`` naming the bolt.
    """

    def check_inputs(self, inputs: Mapping[tuple[str, str], Fields]) -> None:
        """Check the bolt's inputs: ``(component id, stream id)`` of each stream it
        subscribes to (system streams included), in subscription order, with the
        stream's declared fields."""
        ...


@runtime_checkable
class ValidatesSubmission(Protocol):
    """A component with submit-time checks that need the configuration.

    Called by every engine when a topology is submitted (through
    ``squall.runtime.system.validate_submission``), in the submitting process (the
    driver on Spark), once per component and before any task starts. A Trident or
    transactional spout may implement it too: it is called with its emitter's component
    id (a Trident spout's stream id), on both engines.
    """

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Check the component against ``conf``, the configuration its tasks will see
        (the topology's, overridden by the component's).

        Raises:
            InvalidTopologyError: the component cannot run with this configuration; the
                submission is refused.
        """
        ...


@runtime_checkable
class HandlesFailedTransaction(Protocol):
    """A transactional coordinator (what a transactional spout's ``get_coordinator``
    returns) that wants to know when a transaction fails.

    Called by the coordinator spout's task (``TransactionalSpoutCoordinator``, on its
    worker thread of the local engine) each time an attempt of transaction ``txid``
    fails, after the transaction and every later one were dropped and before any replay.
    """

    def transaction_failed(self, txid: int, metadata: Any) -> Any:
        """Replacement metadata for the replay of ``txid`` (stored in the coordination
        store in place of ``metadata``, the transaction's stored metadata or None), or
        None to replay the transaction with the same metadata."""
        ...


@runtime_checkable
class PreparesTask(Protocol):
    """A batch bolt with task-level resources, prepared once per task rather than once
    per batch.

    Called before the task's first batch, with the task's configuration and context:
    on the local engine by ``BatchBoltExecutor.prepare`` (the task's worker thread); on
    Spark in each executor process that runs a partition of the bolt's stage, once per
    process and partition, with the ``TopologyContext`` the local engine gives that task
    (same task id, index and component tasks).
    """

    def prepare_task(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Prepare the task's resources."""
        ...


@runtime_checkable
class MakesBatchInstances(Protocol):
    """A batch bolt that makes the instance of each batch itself, e.g. to share its
    task-level resources; without this hook each batch gets a deep copy of the declared
    bolt.

    Called where the batch runs (the task's worker thread on the local engine, the
    stage's executor process on Spark) when a task starts a batch (a transaction
    attempt), after ``prepare_task`` if the bolt has it.
    """

    def for_batch(self) -> Any:
        """A fresh batch bolt for one batch: it gets ``prepare(conf, context, collector,
        attempt)``, ``execute`` for each of the batch's tuples, then ``finish_batch``."""
        ...


@runtime_checkable
class CleansUpTask(Protocol):
    """A batch bolt whose task-level resources must be released.

    Called at most once per prepared task, when the engine stops it: on the local engine
    by ``BatchBoltExecutor.cleanup`` (the task's worker thread); on Spark when the
    topology is killed, for the tasks prepared in the driver's process (committers run
    there). A Spark executor process may end without calling it.
    """

    def cleanup_task(self) -> None:
        """Release what ``prepare_task`` acquired; no batch runs afterwards."""
        ...


@runtime_checkable
class CarriesCoordinationStore(Protocol):
    """A task context that carries its engine's coordination store.

    Read by ``squall.runtime.coordination.open_store`` when a transactional or Trident
    component opens the store in its task and no ``topology.transactional.state.dir``
    is configured. ``LocalCluster``'s contexts carry the cluster's in-memory store;
    Spark's emitter tasks get the SQLite store of their run.
    """

    coordination_store: CoordinationStore | None


@runtime_checkable
class SettlesBatch(Protocol):
    """A core bolt that holds tuples across batches (a windowed bolt).

    Called by the Spark engine only, in the executor process, at the end of each
    micro-batch of a core topology: after the task has executed the batch's tuples and
    before its state is snapshotted, so what it settles completes with the batch.
    """

    def settle_batch(self) -> None:
        """Settle (ack) the tuples still held, so their trees complete with this
        micro-batch."""
        ...


@runtime_checkable
class BeginsBatch(Protocol):
    """A core bolt that needs to know the micro-batch it is about to run (a stateful
    bolt whose transactions are the batches).

    Called by the Spark engine only, in the executor process, before the task executes
    a micro-batch's tuples (after a replayed batch's restore).
    """

    def begin_batch(self, batch_id: int, query: str) -> None:
        """Batch ``batch_id`` of the streaming query ``query`` (an identifier that stays
        the same across restarts of that query: its checkpoint location) is about to run
        on this task."""
        ...


@runtime_checkable
class ReportsMetrics(Protocol):
    """A component with counters of its own, reported with the topology's metrics.

    Called for a metrics snapshot: by ``LocalCluster.get_topology_info`` on the caller's
    thread, while the task runs on its own (so it must only read); by the Spark engine
    after each micro-batch of a core bolt task, in the executor process. Each task's
    values are added up per name into the component's ``custom`` metrics.
    """

    def metrics(self) -> Mapping[str, float]:
        """The task's counters by name."""
        ...


@runtime_checkable
class FlagsCommitter(Protocol):
    """A batch component that tells whether it is a committer (its batches finish in
    strict transaction order, once processing is complete).

    Read by the Spark engine's planner, on the driver, when it orders a transactional or
    Trident topology's stages: committers, and what they feed, run last.
    """

    committer: bool


@runtime_checkable
class CachesState(Protocol):
    """A Trident state factory with a cache in front of its states.

    Read by Trident's ``state_query`` when the topology is compiled (in the process
    building it): a query on a state this topology writes gets a copy of the factory
    (``dataclasses.replace``) with ``cache_size=0``, so it never reads values older than
    the last commit.
    """

    cache_size: int


@runtime_checkable
class Exhaustible(Protocol):
    """A spout that can tell when it has nothing more to emit.

    Called by ``squall.testing.complete_topology``: its presence is checked for every
    spout not mocked before the topology is submitted; then the method is polled from
    the test's thread while the task runs on its own (so it must only read).
    """

    def is_exhausted(self) -> bool:
        """Whether this task has emitted all its tuples and none is pending."""
        ...


@runtime_checkable
class CommitsAcks(Protocol):
    """A reliable spout whose acks become durable some time after ``ack`` returns (a
    progress file written now and then, acknowledgements sent in batches).

    Called in a topology with stateful bolts, on the spout task's thread, at each
    checkpoint's prepare before the spout's trees in flight are recorded: so a message
    acked before the checkpoint is never replayed after a restart, and the states hold
    its effect exactly once. A spout without it must make each ack durable before
    ``ack`` returns for that guarantee.
    """

    def commit_acks(self) -> None:
        """Make every ack received so far durable (raise if that failed: the checkpoint
        is then rolled back and tried again)."""
        ...


@runtime_checkable
class SettlesBeforeCheckpoint(Protocol):
    """A bolt that holds tuples it can settle on demand (a sink buffering writes).

    Called in a topology with stateful bolts, on the task's thread, at each checkpoint's
    prepare once every earlier tuple has arrived: it writes (and acks or fails) what it
    holds, so those tuples' trees are not left straddling the checkpoint.
    """

    def settle_before_checkpoint(self) -> None:
        """Write out and ack (or fail) the tuples held."""
        ...


def implements(obj: object, hook: Callable[..., HookT]) -> TypeGuard[HookT]:
    """Whether ``obj`` implements ``hook``, one of this module's Protocols: it has the
    hook's attributes, and its methods are callable.

    ``isinstance`` alone only checks that the names exist, so an attribute that happens
    to share a method hook's name (a bolt's ``self.metrics = {}``) would pass for it.
    ``hook`` is typed as what makes a ``HookT`` because mypy accepts no Protocol class
    where ``type[HookT]`` is expected.
    """
    return isinstance(obj, cast(type, hook)) and all(
        callable(getattr(obj, name)) for name in _methods(hook)
    )


@functools.cache
def _methods(hook: Callable[..., Any]) -> tuple[str, ...]:
    """The names of the methods ``hook`` declares."""
    return tuple(
        name
        for name, value in vars(hook).items()
        if inspect.isfunction(value) and not name.startswith("_")
    )


__all__ = [
    "AdaptsToBolt",
    "BeginsBatch",
    "CachesState",
    "CarriesCoordinationStore",
    "ChecksInputs",
    "CleansUpTask",
    "CommitsAcks",
    "Exhaustible",
    "FlagsCommitter",
    "HandlesFailedTransaction",
    "MakesBatchInstances",
    "PreparesTask",
    "ReportsMetrics",
    "SettlesBatch",
    "SettlesBeforeCheckpoint",
    "ValidatesSubmission",
    "implements",
]
