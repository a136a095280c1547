"""``Cluster``: what every engine offers (``LocalCluster``, ``SparkCluster``), and what
the ``squall`` command and the web UI rely on.

An engine implements every abstract method; a subclass missing one cannot be
instantiated (``TypeError`` naming it). Methods run on the caller's thread unless they
say otherwise; the topologies run on the engine's own threads, processes or Spark
executors. :class:`~squall.runtime.registry.TopologyRegistry` implements the
bookkeeping every engine shares (topologies by name, the rolling windows of figures).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from squall.model.topology import StormTopology
from squall.runtime.metrics import TopologyInfo

SelfCluster = TypeVar("SelfCluster", bound="Cluster")

EmitListener = Callable[[str, str, int, Sequence[Any], list[int]], None]
"""Called as ``listener(component_id, stream_id, task_id, values, targets)`` for every
tuple a spout or bolt emits on a user stream (see :meth:`Cluster.submit_topology`)."""


class Cluster(ABC):
    """An engine running topologies: submit, watch, steer and stop them by name.

    Use it as a context manager (leaving the block calls :meth:`shutdown`), or call
    :meth:`shutdown`.
    """

    @property
    @abstractmethod
    def engine(self) -> str:
        """The engine's name: ``"local"`` (``LocalCluster``) or ``"spark"``
        (``SparkCluster``)."""

    @property
    @abstractmethod
    def resources(self) -> str:
        """What the cluster runs on, one short line (``"this process, 8 cores"``;
        on Spark ``"local[2, 4]: 2 cores"`` or the executors and their cores, ``""``
        once its session is stopped). Cheap enough to read on every UI request."""

    @abstractmethod
    def submit_topology(
        self,
        name: str,
        conf: dict[str, Any] | None,
        topology: StormTopology,
        *,
        fresh: bool = False,
        emit_listener: EmitListener | None = None,
    ) -> None:
        """Start ``topology`` under ``name``; returns once it runs.

        Args:
            name: the topology's name.
            conf: its configuration (over the engine's defaults).
            topology: what to run.
            fresh: start afresh, with nothing an earlier run under ``name`` left
                (``SparkCluster``: that run's checkpoint is discarded; the local engine
                keeps nothing between runs, so every submission there is fresh).
            emit_listener: called as ``emit_listener(component_id, stream_id, task_id,
                values, targets)`` after every tuple a spout or bolt emits on a user
                stream, in the process and on the thread of the emitting task:
                ``LocalCluster`` calls it in this process (the topology then runs on
                worker threads), ``SparkCluster`` in the Python process running the
                task (it is pickled, and sees again the emits of a micro-batch run
                again; core and transactional topologies only).

        Raises:
            SquallError: a topology called ``name`` is running.
            InvalidTopologyError: the topology or configuration is invalid, or uses
                something the engine cannot run (the message says what), such as an
                ``emit_listener`` where the engine cannot call one.
        """

    @abstractmethod
    def wait_complete(self, name: str, timeout_secs: float) -> None:
        """Wait until ``name`` has processed all its input: every spout has emitted
        everything it has (a spout says so with ``is_exhausted()``, see
        :class:`~squall.model.hooks.Exhaustible`) and nothing is in flight (no tuple
        queued, no tree pending, every batch processed). Runs on the caller's thread,
        polling; the topology keeps running afterwards.

        ``LocalCluster`` asks each spout task's ``is_exhausted()`` (worker threads
        only: spouts in worker processes cannot be asked); ``SparkCluster`` waits until
        the spouts' polls emit nothing more and every batch is processed.

        Raises:
            SquallError: no topology ``name`` is running, it failed (the message gives
                its last error), or the engine cannot tell for this topology (the
                message says why).
            TimeoutError: it was not complete within ``timeout_secs`` (the message says
                what was left).
        """

    @abstractmethod
    def wait_idle(self, name: str, timeout_secs: float = 10.0) -> bool:
        """Wait until ``name`` has no work in flight (nothing queued, no tuple tree
        pending, every batch processed), at most ``timeout_secs`` seconds (each
        engine has its own default: ``SparkCluster`` waits longer).

        Returns:
            True once idle; False if it was not idle in time (or, on Spark, a query
            stopped).

        Raises:
            SquallError: no topology ``name`` is running.
        """

    @abstractmethod
    def activate(self, name: str) -> None:
        """Resume ``name``'s spouts (status ``ACTIVE``).

        Raises:
            SquallError: no topology ``name`` is running.
        """

    @abstractmethod
    def deactivate(self, name: str) -> None:
        """Stop ``name``'s spouts (status ``INACTIVE``); what is in flight still
        completes.

        Raises:
            SquallError: no topology ``name`` is running.
        """

    @abstractmethod
    def kill_topology(self, name: str, wait_secs: float | None = None) -> None:
        """Stop ``name`` and forget it; returns once it has stopped.

        Args:
            name: the topology.
            wait_secs: how long in-flight tuples may drain first (None: the engine's
                default; an engine running micro-batches finishes the batches in
                progress).

        Raises:
            SquallError: no topology ``name`` is running.
        """

    @abstractmethod
    def rebalance(
        self,
        name: str,
        num_workers: int | None = None,
        executors: Mapping[str, int] | None = None,
        wait_secs: float = 0.0,
    ) -> None:
        """Run ``name`` on ``num_workers`` workers with ``executors[c]`` executors for
        each component ``c`` given, after ``wait_secs`` with its spouts stopped (Storm's
        rebalance); returns once the new layout runs.

        Raises:
            SquallError: no topology ``name`` is running, or the engine cannot
                rebalance (the message says why).
            InvalidTopologyError: an argument is out of range (the message names it).
        """

    @abstractmethod
    def check_rebalance(
        self,
        name: str,
        num_workers: int | None = None,
        executors: Mapping[str, int] | None = None,
        wait_secs: float = 0.0,
    ) -> None:
        """Raise what :meth:`rebalance` would raise for these arguments, changing
        nothing (for a caller that rebalances later, on another thread)."""

    @abstractmethod
    def get_topology_info(self, name: str, window_secs: int | None = None) -> TopologyInfo:
        """Figures of ``name`` and of every component: since it started, or over its
        last ``window_secs`` seconds (one of :attr:`metric_windows`). The engine's own
        figures are typed: ``TopologyInfo.local`` on the local engine,
        ``TopologyInfo.spark`` on Spark (see :mod:`squall.runtime.engine_figures`).

        Raises:
            SquallError: no topology ``name`` is running.
            ValueError: ``window_secs`` is not a window the cluster keeps.
        """

    @abstractmethod
    def get_topology(self, name: str) -> StormTopology:
        """The topology running as ``name`` (its current parallelism hints).

        Raises:
            SquallError: no topology ``name`` is running.
        """

    @abstractmethod
    def get_topology_conf(self, name: str) -> dict[str, Any]:
        """The configuration ``name`` runs with (a copy).

        Raises:
            SquallError: no topology ``name`` is running.
        """

    @abstractmethod
    def topology_names(self) -> list[str]:
        """Names of the running topologies, sorted (any thread)."""

    @property
    @abstractmethod
    def metric_windows(self) -> list[int]:
        """The rolling windows :meth:`get_topology_info` answers, in seconds."""

    @abstractmethod
    def in_window(self, name: str, info: TopologyInfo, window_secs: int | None) -> TopologyInfo:
        """``info`` (``name``'s figures now, from :meth:`get_topology_info`) over its
        last ``window_secs`` seconds (None: all time): one reading of the figures
        serves every window.

        Raises:
            ValueError: the window is not one the cluster keeps.
        """

    @abstractmethod
    def shutdown(self) -> None:
        """Stop every topology and release what the cluster holds (threads,
        processes, sessions, temporary directories)."""

    def __enter__(self: SelfCluster) -> SelfCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()


__all__ = ["Cluster", "EmitListener"]
