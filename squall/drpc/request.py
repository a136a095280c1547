"""A DRPC request as the topology side sees it, and the invocations interface.

The invocations interface (Storm's ``DistributedRPCInvocations``) is what a DRPC spout
uses to take requests from a broker and what the topology's last step uses to return
results. Three objects implement it: :class:`~squall.drpc.DRPCBroker` and
:class:`~squall.drpc.LocalDRPC` in the broker's process, and
:class:`~squall.drpc.DRPCInvocationsClient` over HTTP for topologies running elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class DRPCRequest:
    """One pending DRPC call, as fetched by the topology side.

    Attributes:
        request_id: Identifies the call at its broker; pass it to ``result`` or
            ``fail_request``.
        function: The DRPC function name the client called.
        args: The argument string the client passed.
        return_info: Where the result goes back to: a JSON-serialisable dict naming the
            broker that issued the request (``kind`` ``"local"`` with a ``service_id``,
            or ``kind`` ``"http"`` with ``host`` and ``port``) and the ``request_id``.
            Opaque to topologies: carry it with the request's tuples and hand it to
            :func:`squall.drpc.invocations_for` to reach that broker again.
    """

    request_id: str
    function: str
    args: str
    return_info: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The request as a JSON-serialisable dict (the ``/fetch`` answer of the server)."""
        return {
            "request_id": self.request_id,
            "function": self.function,
            "args": self.args,
            "return_info": dict(self.return_info),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], function: str | None = None) -> DRPCRequest:
        """Rebuild a request from :meth:`to_dict` output.

        Args:
            data: The dict; ``function`` may be absent if given as the argument.
            function: The function name to use when ``data`` has none.

        Raises:
            ValueError: A field is missing or of the wrong type.
        """
        request_id = data.get("request_id")
        name = data.get("function", function)
        args = data.get("args")
        return_info = data.get("return_info", {})
        if not isinstance(request_id, str) or not isinstance(name, str):
            raise ValueError(f"a DRPC request needs string request_id and function: {data!r}")
        if not isinstance(args, str) or not isinstance(return_info, Mapping):
            raise ValueError(f"a DRPC request needs string args and dict return_info: {data!r}")
        return cls(request_id, name, args, dict(return_info))


@runtime_checkable
class DRPCInvocations(Protocol):
    """The topology side of DRPC (Storm's ``DistributedRPCInvocations``).

    Implementations are thread-safe: spouts and bolts on any worker thread may call them.
    """

    def fetch_request(self, function: str) -> DRPCRequest | None:
        """The oldest pending request for ``function``, or ``None``. Never blocks long.

        A fetched request is no longer handed out; it stays outstanding until
        ``result`` or ``fail_request`` names it, or until its timeout expires.
        """
        ...

    def result(self, request_id: str, result: str) -> None:
        """Return ``result`` (JSON text of the result tuples) to the waiting client.

        A request that already timed out, failed or got a result is ignored.
        """
        ...

    def fail_request(self, request_id: str, message: str = "") -> None:
        """Fail the request: its client gets a DRPCExecutionError with ``message``.

        A request that already ended is ignored.
        """
        ...
