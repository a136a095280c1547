"""``LocalCluster``: the embedded engine, running topologies on this machine in worker
processes or threads."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from squall.compiled import warn_if_interpreted
from squall.local import heap
from squall.local.rebalance import check_request
from squall.local.running import RunningTopology
from squall.local.scratch import owned_directory
from squall.local.supervisor import ProcessTopology
from squall.model.clock import SYSTEM_CLOCK, Clock
from squall.model.config import Config, warn_unknown_keys
from squall.model.errors import InvalidTopologyError, SquallError
from squall.model.hooks import Exhaustible, implements
from squall.model.topology import StormTopology
from squall.runtime.cluster import EmitListener
from squall.runtime.coordination import MemoryCoordinationStore
from squall.runtime.metrics import TopologyInfo
from squall.runtime.registry import TopologyRegistry

#: The kinds of worker ``topology.worker.kind`` names.
WORKER_KINDS = ("auto", "process", "thread")
#: The prefix of the directories of transactional coordination state that topologies in
#: worker processes share (one per cluster).
COORDINATION_PREFIX = "squall-coordination-"

Running = RunningTopology | ProcessTopology
"""What the local engine runs a topology as: threads of this process, or processes."""


class LocalCluster(TopologyRegistry[Running]):
    """Runs topologies on this machine: squall's default engine.

    Each topology gets ``topology.workers`` workers (``rebalance`` changes how many);
    a worker runs its tasks cooperatively (see :mod:`squall.local.worker`). What a
    worker is, ``topology.worker.kind`` says:

    * ``"process"``: a worker process of its own, as in Storm, supervised from this
      process (see :mod:`squall.local.supervisor`): the topology uses as many cores as
      it has workers. Tuples between workers travel in batches over Unix sockets.
    * ``"thread"``: a thread of this process (Storm's local mode). Tuples move through
      in-memory queues; nothing is serialized, and components share this process's
      memory; Python runs one thread at a time, so the topology uses one core.
    * ``"auto"`` (the default): processes when ``topology.workers`` is more than 1,
      the cluster runs on the system clock and no ``emit_listener`` is given; else a
      thread (one worker gains nothing from a process of its own; a manual clock and
      a listener live in this process).

    Args:
        clock: where time comes from (message timeouts, tick tuples); tests pass a
            :class:`~squall.model.clock.ManualClock`.

    Use it as a context manager, or call ``shutdown()``: both kill every topology.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__()
        self.clock = clock or SYSTEM_CLOCK
        #: Transactional coordination state (txids, spout metadata) of topologies run
        #: without ``topology.transactional.state.dir``: it lives as long as the cluster.
        self.coordination_store = MemoryCoordinationStore()
        self._coordination_dir: Path | None = None

    @property
    def engine(self) -> str:
        """``"local"``."""
        return "local"

    @property
    def resources(self) -> str:
        """This machine's cores, which the workers share: ``"this process, 8 cores"``."""
        return f"this process, {os.cpu_count()} cores"

    def submit_topology(
        self,
        name: str,
        conf: dict[str, Any] | None,
        topology: StormTopology,
        *,
        fresh: bool = False,
        emit_listener: EmitListener | None = None,
    ) -> None:
        """Start ``topology`` under ``name``. Returns once every task is open/prepared.

        ``fresh`` changes nothing here: the local engine keeps nothing from one run to
        the next, so every topology starts afresh.
        ``emit_listener(component_id, stream_id, task_id, values, targets)``, if given, is
        called on the emitting task's thread after every emit on a user stream (the
        topology then runs on worker threads).

        Each ``topology.*`` key of ``conf`` that squall does not know (a misspelling,
        mostly) gets a :class:`~squall.model.config.ConfigWarning` pointing at this call;
        the key still reaches the components.

        Raises:
            SquallError: a topology called ``name`` is running.
            InvalidTopologyError: the topology or configuration is invalid.
            ComponentError: a task's ``open``/``prepare`` raised (nothing keeps running).
        """
        if not isinstance(topology, StormTopology):
            raise InvalidTopologyError(
                f"submit_topology({name!r}) needs a StormTopology (from "
                f"TopologyBuilder.create_topology()), got {type(topology).__name__}"
            )
        if not isinstance(name, str) or not name:
            raise InvalidTopologyError("a topology name must be a non-empty string")
        conf = dict(conf or {})
        warn_unknown_keys(conf)
        _check_conf(conf)
        warn_if_interpreted()
        processes = self._runs_processes(name, conf, emit_listener)
        with self._lock:
            self._claim(name)
            running: Running
            if processes:
                running = ProcessTopology(name, conf, topology, self._process_coordination_dir())
            else:
                running = RunningTopology(
                    name, conf, topology, self.clock, emit_listener, self.coordination_store
                )
            self._register(name, running)
        try:
            running.start(active=True)
        except BaseException:
            with self._lock:
                self._release(name)
            raise

    def _runs_processes(
        self, name: str, conf: dict[str, Any], emit_listener: EmitListener | None
    ) -> bool:
        """Whether ``name`` runs in worker processes (see ``topology.worker.kind``).

        Raises:
            InvalidTopologyError: processes are asked for where they cannot run.
        """
        kind = conf.get(Config.TOPOLOGY_WORKER_KIND, "auto")
        real_clock = type(self.clock) is Clock
        if kind == "process":
            if not real_clock:
                raise InvalidTopologyError(
                    f"topology {name!r}: worker processes read the system clock, and this "
                    f"cluster runs on a {type(self.clock).__name__}; run its workers as "
                    'threads (topology.worker.kind = "thread")'
                )
            if emit_listener is not None:
                raise InvalidTopologyError(
                    f"topology {name!r}: an emit_listener runs in this process, so it "
                    'needs worker threads (topology.worker.kind = "thread")'
                )
            return True
        workers = int(conf.get(Config.TOPOLOGY_WORKERS) or 1)
        return kind == "auto" and workers > 1 and real_clock and emit_listener is None

    def _process_coordination_dir(self) -> Path:
        """Where topologies in worker processes keep transactional coordination state
        (the processes share it; it lives as long as the cluster, and the next cluster
        removes it if this process is killed before)."""
        if self._coordination_dir is None:
            self._coordination_dir = owned_directory(COORDINATION_PREFIX)
        return self._coordination_dir

    def kill_topology(self, name: str, wait_secs: float | None = None) -> None:
        """Deactivate ``name``, drain in-flight tuples, and shut it down.

        Spouts' ``deactivate`` then ``close``, bolts' ``cleanup`` run on their threads; the
        worker threads are joined before this returns. Draining waits until nothing is
        queued (tuples and acks), at most ``wait_secs`` (default: the message timeout,
        capped at 30 s).

        Raises:
            SquallError: no topology ``name`` is running.
        """
        running = self._get(name)
        if wait_secs is None:
            wait_secs = min(30.0, float(running.conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS]))
        try:
            running.kill(wait_secs)
        finally:
            with self._lock:
                self._release(name)

    def activate(self, name: str) -> None:
        """Resume ``next_tuple`` calls of ``name``'s spouts (``activate`` hooks run first)."""
        self._get(name).activate()

    def deactivate(self, name: str) -> None:
        """Stop ``next_tuple`` calls of ``name``'s spouts; returns once they have stopped.

        Bolts keep processing what is in flight; acks still reach the spouts.
        """
        self._get(name).deactivate()

    def rebalance(
        self,
        name: str,
        num_workers: int | None = None,
        executors: Mapping[str, int] | None = None,
        wait_secs: float = 0.0,
    ) -> None:
        """Storm's ``storm rebalance``: run ``name`` on ``num_workers`` worker threads,
        with ``executors[c]`` executors for each component ``c`` given.

        The spouts stop calling ``next_tuple`` (status ``REBALANCING``), the call waits
        ``wait_secs`` while bolts go on, the tasks are dealt to the new workers, and
        the topology goes back to the activation it had (a deactivated topology stays
        deactivated). Returns once the new workers run. Task ids never change, so a
        component runs in 1 to its task count executors; arguments left out keep what
        there is (neither: the same layout, dealt again).

        On thread workers every task keeps its component object, state, queue,
        pending tuple trees and counters (nothing is closed or opened again; see
        :mod:`squall.local.rebalance`). On worker processes, as in Storm, the workers
        stop (their tasks ``close``/``cleanup``) and the new ones start (``open``/
        ``prepare`` again); trees pending at the stop are replayed by reliable spouts.
        Afterwards ``get_topology_info(name).workers``,
        ``.local.executors`` (component id -> executors, system components
        included), ``get_topology_conf(name)["topology.workers"]`` and the parallelism
        hints of ``get_topology(name)`` report the new layout (the submitted topology
        object is not modified).

        The arguments are checked before anything changes: ``num_workers`` is an
        integer from 1 to the number of executors the topology has after the rebalance
        (``__acker`` executors included, as ``executorsTotal`` counts them: a worker
        without an executor would run nothing), each count in ``executors`` an integer
        from 1 to its component's task count. A refused rebalance leaves the topology
        as it was (its status, spouts and layout).

        Raises:
            SquallError: no topology ``name`` is running, or it was killed meanwhile.
            InvalidTopologyError: ``num_workers`` not an integer (``True`` is not one)
                from 1 to the topology's executors, an unknown component, an executor
                count that is not an integer from 1 to the component's task count, or
                ``wait_secs`` < 0. The message names the topology, the value (cut to
                its first 64 characters) and the allowed range.
        """
        running = self._get(name)
        running.rebalance(check_request(name, running.plan, num_workers, executors, wait_secs))

    def check_rebalance(
        self,
        name: str,
        num_workers: int | None = None,
        executors: Mapping[str, int] | None = None,
        wait_secs: float = 0.0,
    ) -> None:
        """Check the arguments of :meth:`rebalance` without changing anything (for a
        caller that rebalances later, on another thread).

        Raises:
            SquallError: no topology ``name`` is running.
            InvalidTopologyError: as :meth:`rebalance` would.
        """
        check_request(name, self._get(name).plan, num_workers, executors, wait_secs)

    def get_topology_info(self, name: str, window_secs: int | None = None) -> TopologyInfo:
        """Metrics of every component of ``name`` (see :class:`TopologyInfo`): since it
        started, or over its last ``window_secs`` seconds (one of
        :attr:`metric_windows`; see :mod:`squall.runtime.rolling`).

        Raises:
            SquallError: no topology ``name`` is running.
            ValueError: ``window_secs`` is not a window the cluster keeps.
        """
        return self.in_window(name, self._get(name).info(), window_secs)

    def get_topology(self, name: str) -> StormTopology:
        """The topology submitted as ``name``."""
        return self._get(name).user_topology

    def get_topology_conf(self, name: str) -> dict[str, Any]:
        """The configuration ``name`` runs with: the submitted one over squall's
        defaults (a copy)."""
        return dict(self._get(name).conf)

    def get_running(self, name: str) -> Running:
        """The engine's object for ``name`` (plan, tasks, workers): for tools and tests."""
        return self._get(name)

    def wait_idle(self, name: str, timeout_secs: float = 10.0) -> bool:
        """Wait until ``name`` has nothing queued and no tuple tree pending."""
        return self._get(name).wait_idle(timeout_secs)

    def wait_complete(self, name: str, timeout_secs: float) -> None:
        """Wait until every spout task of ``name`` (of the submitted topology: not the
        engine's own, such as a checkpoint spout) says ``is_exhausted()`` and nothing is
        queued or pending. Runs on the caller's thread, polling every few milliseconds;
        a spout's ``is_exhausted`` is called from this thread.

        Raises:
            SquallError: no topology ``name`` is running; it runs in worker processes
                (its spouts live there); or a spout has no ``is_exhausted()``.
            TimeoutError: not complete within ``timeout_secs`` (the message names the
                spouts not exhausted and gives the engine's figures).
        """
        running = self._get(name)
        if not isinstance(running, RunningTopology):
            raise SquallError(
                f"wait_complete({name!r}): the topology runs in worker processes, whose "
                "spouts this process cannot ask; run it on worker threads "
                '(topology.worker.kind = "thread")'
            )
        user_spouts = set(running.user_topology.spouts)
        spouts = [
            (runner.component_id, runner.component)
            for runner in running.runners.values()
            if runner.component_id in user_spouts
        ]
        for component_id, spout in spouts:
            if not implements(spout, Exhaustible):
                raise SquallError(
                    f"wait_complete({name!r}) cannot tell when spout {component_id!r} "
                    f"({type(spout).__name__}) is done: give it an is_exhausted() method"
                )
        deadline = time.monotonic() + timeout_secs
        while not (all(spout.is_exhausted() for _, spout in spouts) and running.wait_idle(0.05)):
            if time.monotonic() > deadline:
                waiting = sorted(cid for cid, spout in spouts if not spout.is_exhausted())
                raise TimeoutError(
                    f"topology did not complete in {timeout_secs} s: spouts not exhausted: "
                    f"{waiting or 'none'}; {running.info().local}"
                )
            time.sleep(0.002)

    def shutdown(self) -> None:
        """Kill every topology (without draining)."""
        for name in list(self._topologies):
            self.kill_topology(name, wait_secs=0)
        if self._coordination_dir is not None:
            shutil.rmtree(self._coordination_dir, ignore_errors=True)
            self._coordination_dir = None


def _check_conf(conf: dict[str, Any]) -> None:
    positive_ints = (
        Config.TOPOLOGY_WORKERS,
        Config.TOPOLOGY_MAX_SPOUT_PENDING,
        Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE,
        Config.TOPOLOGY_MAX_TASK_PARALLELISM,
    )
    for key in positive_ints:
        value = conf.get(key)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            raise InvalidTopologyError(
                f"configuration {key!r} must be an integer >= 1, got {value!r}"
            )
    heap.freeze_wanted(conf, in_process_worker=False)  # raises for a value not a bool
    heap.young_threshold_wanted(conf)  # raises for a value not an integer >= 0
    kind = conf.get(Config.TOPOLOGY_WORKER_KIND)
    if kind is not None and kind not in WORKER_KINDS:
        raise InvalidTopologyError(
            f"configuration {Config.TOPOLOGY_WORKER_KIND!r} must be one of "
            f"{', '.join(map(repr, WORKER_KINDS))}, got {kind!r}"
        )
    ackers = conf.get(Config.TOPOLOGY_ACKER_EXECUTORS)
    if ackers is not None and (
        not isinstance(ackers, int) or isinstance(ackers, bool) or ackers < 0
    ):
        raise InvalidTopologyError(
            f"configuration {Config.TOPOLOGY_ACKER_EXECUTORS!r} must be an integer >= 0, "
            f"got {ackers!r}"
        )
    for key in (Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS, Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS):
        value = conf.get(key)
        if value is not None and (not isinstance(value, int | float) or value <= 0):
            raise InvalidTopologyError(f"configuration {key!r} must be a number > 0, got {value!r}")
