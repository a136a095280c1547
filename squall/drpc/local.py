"""LocalDRPC: DRPC inside one process (Storm's ``LocalDRPC``).

A client thread calls ``execute``; a DRPC spout of a topology running in the same
process (LocalCluster's worker threads, or a Spark driver and executors sharing the
process) fetches requests and returns results through the same object.
"""

from __future__ import annotations

import random
import threading
import weakref
from typing import Any

from squall.drpc.broker import DRPCBroker
from squall.drpc.errors import DRPCError
from squall.drpc.request import DRPCInvocations, DRPCRequest
from squall.model.clock import SYSTEM_CLOCK, Clock

_registry: weakref.WeakValueDictionary[str, LocalDRPC] = weakref.WeakValueDictionary()
_registry_lock = threading.Lock()
#: Service id -> how this process reaches a LocalDRPC of another process (a worker
#: process of the local engine reaches its supervisor's through a bridge).
_bridges: dict[str, DRPCInvocations] = {}


class LocalDRPC:
    """An in-process DRPC service: ``execute`` for clients, invocations for topologies.

    Components that hold a ``LocalDRPC`` keep the very same instance when the engine
    copies them: ``copy.deepcopy`` returns the instance itself, and pickling stores only
    its process-wide service id, which unpickling in the same process resolves to the
    same instance. (A different process cannot resolve it: use
    :class:`~squall.drpc.DRPCServer` there.)

    Every method is thread-safe; ``execute`` blocks its caller, the others do not.

    Args:
        timeout_secs: How long ``execute`` waits for a result before raising.
        clock: Where deadlines are read (waits are real time).

    Example::

        drpc = LocalDRPC()
        topology.new_drpc_stream("words", drpc)  # ... submit the topology ...
        drpc.execute("words", "cow four")        # -> '[[2]]'
    """

    def __init__(self, timeout_secs: float = 30.0, clock: Clock = SYSTEM_CLOCK) -> None:
        with _registry_lock:
            service_id = f"local-drpc-{random.getrandbits(64):016x}"
            while service_id in _registry:
                service_id = f"local-drpc-{random.getrandbits(64):016x}"
            _registry[service_id] = self
        self._service_id = service_id
        self._broker = DRPCBroker(
            timeout_secs, return_info={"kind": "local", "service_id": service_id}, clock=clock
        )

    @property
    def service_id(self) -> str:
        """The id under which this instance is registered in the process."""
        return self._service_id

    @property
    def timeout_secs(self) -> float:
        """Default time ``execute`` waits for a result."""
        return self._broker.timeout_secs

    @property
    def broker(self) -> DRPCBroker:
        """The broker behind this service."""
        return self._broker

    @classmethod
    def lookup(cls, service_id: str) -> LocalDRPC:
        """The live instance registered as ``service_id`` in this process.

        Raises:
            DRPCError: No such instance: it was shut down, garbage collected, or created
                in another process.
        """
        with _registry_lock:
            found = _registry.get(service_id)
        if found is None:
            raise DRPCError(
                f"no LocalDRPC {service_id!r} in this process: it was shut down or created "
                "in another process (a LocalDRPC works within one process; use DRPCServer "
                "and DRPCClient across processes)"
            )
        return found

    @classmethod
    def invocations(cls, service_id: str) -> DRPCInvocations:
        """The invocations side of the LocalDRPC ``service_id``: the instance of this
        process, or the bridge this process reaches it through (see
        :func:`bridged_local_drpc`).

        Raises:
            DRPCError: neither is known here.
        """
        with _registry_lock:
            bridge = _bridges.get(service_id)
        return bridge if bridge is not None else cls.lookup(service_id)

    def execute(self, function: str, args: str, timeout_secs: float | None = None) -> str:
        """Call DRPC ``function`` with ``args`` and wait for the topology's result.

        Runs on the caller's thread, which blocks until the result, a failure or the
        timeout. Call it from a thread that is not one of the topology's own workers.

        Args:
            function: The DRPC function name.
            args: The argument string.
            timeout_secs: This call's timeout; the instance's ``timeout_secs`` if ``None``.

        Returns:
            The result text returned by the topology (JSON text of the result tuples).

        Raises:
            DRPCExecutionError: The request failed, timed out or the service shut down.
        """
        return self._broker.execute(function, args, timeout_secs)

    def fetch_request(self, function: str) -> DRPCRequest | None:
        """The oldest pending request for ``function``, or ``None`` (never blocks)."""
        return self._broker.fetch_request(function)

    def result(self, request_id: str, result: str) -> None:
        """Return ``result`` to the client of ``request_id`` (ignored if it ended)."""
        self._broker.result(request_id, result)

    def fail_request(self, request_id: str, message: str = "") -> None:
        """Fail ``request_id`` with ``message`` (ignored if it ended)."""
        self._broker.fail_request(request_id, message)

    def shutdown(self) -> None:
        """Fail every outstanding request with a shutdown error and unregister.

        Later ``execute`` calls raise DRPCExecutionError; later fetches return ``None``.
        Idempotent.
        """
        self._broker.shutdown()
        with _registry_lock:
            if _registry.get(self._service_id) is self:
                del _registry[self._service_id]

    def __enter__(self) -> LocalDRPC:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def __copy__(self) -> LocalDRPC:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> LocalDRPC:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_lookup_local_drpc, (self._service_id,))

    def __repr__(self) -> str:
        state = "shut down" if self._broker.is_shut_down else "running"
        return f"LocalDRPC({self._service_id}, {state})"


def _lookup_local_drpc(service_id: str) -> LocalDRPC:
    """Unpickling hook: the registered instance (see :meth:`LocalDRPC.lookup`)."""
    return LocalDRPC.lookup(service_id)


def bridged_local_drpc(service_id: str, host: str, port: int, token: str | None) -> DRPCInvocations:
    """Unpickling hook in another process: a client of the bridge (a ``DRPCServer``
    serving the LocalDRPC's broker on ``host:port``, invocations side only, behind
    ``token``), registered so results sent back to ``service_id`` go through it too.

    A DRPC stream's coordinator fetches requests from it, and the last step of the
    topology returns results to it, as they would to the LocalDRPC itself."""
    from squall.drpc.client import DRPCInvocationsClient

    client = DRPCInvocationsClient(host, port, token=token)
    with _registry_lock:
        _bridges[service_id] = client
    return client
