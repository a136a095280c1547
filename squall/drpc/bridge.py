"""Reaching a ``LocalDRPC`` from another process: loopback bridges and the pickler that
puts them in place.

A ``LocalDRPC`` lives in one process. When an engine runs a topology's components in
other processes (the local engine's worker processes, the Spark engine's sources and
executors), it pickles them with :func:`dumps_bridged`: every ``LocalDRPC`` they hold
becomes, in the process that unpickles it, a client of a *bridge*, a loopback
``DRPCServer`` in front of the ``LocalDRPC``'s broker serving only its invocations side
behind a random token (so no other local user can fetch or answer its requests). The
client is also registered for the ``LocalDRPC``'s service id there, so results a
component returns to ``{"kind": "local", "service_id"}`` reach the same broker.
"""

from __future__ import annotations

import io
import secrets
from typing import Any

from squall.drpc.local import LocalDRPC, bridged_local_drpc
from squall.drpc.server import DRPCServer
from squall.runtime.codepickle import CodePickler


class LocalDRPCBridges:
    """The bridges of one running topology: one per ``LocalDRPC`` it holds, started on
    first use (on the thread that pickles), stopped by :meth:`stop` (when the topology
    ends; the ``LocalDRPC`` itself keeps running)."""

    def __init__(self) -> None:
        self._bridges: dict[str, tuple[DRPCServer, str]] = {}

    @property
    def servers(self) -> list[DRPCServer]:
        """The bridges started so far."""
        return [server for server, _ in self._bridges.values()]

    def reduce(self, drpc: LocalDRPC) -> tuple[Any, ...]:
        """How another process reaches ``drpc``: the unpickling call of a client of its
        bridge (started now if needed)."""
        bridge = self._bridges.get(drpc.service_id)
        if bridge is None:
            token = secrets.token_urlsafe(32)
            server = DRPCServer(
                "127.0.0.1", None, broker=drpc.broker, invocations_token=token
            ).start()
            bridge = self._bridges[drpc.service_id] = (server, token)
        server, token = bridge
        return (
            bridged_local_drpc,
            (drpc.service_id, "127.0.0.1", server.invocations_port, token),
        )

    def stop(self) -> None:
        """Stop every bridge (idempotent)."""
        bridges, self._bridges = self._bridges, {}
        for server, _ in bridges.values():
            server.stop()


class BridgingPickler(CodePickler):
    """squall's pickler for other processes, with every ``LocalDRPC`` written as a
    client of its bridge in ``bridges``."""

    def __init__(self, stream: io.BytesIO, bridges: LocalDRPCBridges) -> None:
        super().__init__(stream)
        self._bridges = bridges

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, LocalDRPC):
            return self._bridges.reduce(obj)
        return super().reducer_override(obj)


def dumps_bridged(value: object, bridges: LocalDRPCBridges) -> bytes:
    """Pickle ``value`` for another process (see :class:`BridgingPickler`).

    Raises:
        Exception: whatever pickling raises for a part that cannot be pickled.
    """
    stream = io.BytesIO()
    BridgingPickler(stream, bridges).dump(value)
    return stream.getvalue()
