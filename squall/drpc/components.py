"""The core components of a DRPC topology: Storm's ``DRPCSpout`` and ``ReturnResults``.

A ``DRPCSpout`` takes the requests of one DRPC function from its broker and emits each
as a tuple ``(args, return-info)``; the topology computes a result string and a
``ReturnResults`` bolt, given ``(result, return-info)``, sends it back to the broker
named by the return info. The client receives that string as it is.
"""

from __future__ import annotations

import json
from typing import Any

from squall.drpc.client import invocations_clients_from_conf
from squall.drpc.config import (
    DRPC_INVOCATIONS_AUTHORIZATION_TOKEN,
    DRPC_SERVERS,
    token_from_conf,
)
from squall.drpc.errors import DRPCError
from squall.drpc.local import LocalDRPC
from squall.drpc.request import DRPCInvocations
from squall.drpc.returns import return_result
from squall.model.collectors import OutputCollector, SpoutOutputCollector
from squall.model.components import Bolt, Spout
from squall.model.context import TopologyContext
from squall.model.declarer import OutputFieldsDeclarer
from squall.model.errors import InvalidTopologyError
from squall.model.tuple import Tuple

#: How many times ``ReturnResults`` tries to return a result before failing its tuple.
RETURN_ATTEMPTS = 3


class DRPCSpout(Spout):
    """Emits the requests of DRPC function ``function``: one tuple ``(args,
    return-info)`` per request, ``return-info`` being the JSON text of the request's
    ``return_info`` (Storm's ``DRPCSpout``).

    Reliable: each tuple's message id names its request. When a request's tuple tree
    fails (a step raised or failed a tuple) or times out, the spout fails the request at
    its broker, so the client gets a ``DRPCExecutionError`` at once. A completed tree
    needs nothing: the result went back through ``ReturnResults``.

    Args:
        function: the DRPC function it serves.
        drpc: a :class:`LocalDRPC` to take requests from; ``None`` for the DRPC servers
            of the topology's configuration: ``drpc.servers`` (required then) on
            ``drpc.invocations.port`` with ``drpc.invocations.authorization.token``. As
            in Storm, a spout with fewer tasks than servers polls every server; otherwise
            task ``i`` polls server ``i`` modulo their number.

    Raises:
        ValueError: ``function`` is not a non-empty string.
    """

    outputs = ["args", "return-info"]

    def __init__(self, function: str, drpc: LocalDRPC | None = None) -> None:
        if not isinstance(function, str) or not function:
            raise ValueError(
                f"DRPCSpout: the function must be a non-empty string, not {function!r}"
            )
        self.function = function
        self.drpc = drpc

    def get_function(self) -> str:
        """The DRPC function this spout serves."""
        return self.function

    def validate_submission(self, component_id: str, conf: dict[str, Any]) -> None:
        """Without a ``LocalDRPC``, the configuration must name DRPC servers (and a valid
        invocations token, if any). Runs where the topology is submitted.

        Raises:
            InvalidTopologyError: naming the spout and the key to set.
        """
        if self.drpc is not None:
            return
        label = f"DRPCSpout {component_id!r} ({self.function!r})"
        if not conf.get(DRPC_SERVERS):
            raise InvalidTopologyError(_no_servers(label))
        try:
            token_from_conf(conf, DRPC_INVOCATIONS_AUTHORIZATION_TOKEN)
        except ValueError as exc:
            raise InvalidTopologyError(f"{label}: {exc}") from None

    def open(
        self, conf: dict[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        """Connect to the broker(s). Runs on the spout task's thread.

        Raises:
            DRPCError: no ``LocalDRPC`` was given and ``drpc.servers`` names no server.
        """
        self.collector = collector
        self._label = f"DRPCSpout {context.get_this_component_id()!r} ({self.function!r})"
        self._clients: list[DRPCInvocations]
        if self.drpc is not None:
            self._clients = [self.drpc]
        else:
            servers = list(conf.get(DRPC_SERVERS) or [])
            if not servers:
                raise DRPCError(_no_servers(self._label))
            tasks = len(context.get_component_tasks(context.get_this_component_id()))
            if tasks >= len(servers):
                servers = [servers[context.get_this_task_index() % len(servers)]]
            self._clients = list(invocations_clients_from_conf({**conf, DRPC_SERVERS: servers}))
        #: Clients whose last call failed (reported once until they answer again).
        self._down: set[int] = set()

    def next_tuple(self) -> None:
        """Fetch one request (from the first client that has one) and emit it."""
        for index, client in enumerate(self._clients):
            try:
                request = client.fetch_request(self.function)
            except DRPCError as exc:
                self._unreachable(index, exc)
                continue
            self._down.discard(index)
            if request is not None:
                return_info = json.dumps(dict(request.return_info), sort_keys=True)
                self.collector.emit([request.args, return_info], msg_id=(request.request_id, index))
                return

    def ack(self, msg_id: Any) -> None:
        """Nothing to do: the result went back through ``ReturnResults``."""

    def fail(self, msg_id: Any) -> None:
        """Fail the request at its broker (its client gets a ``DRPCExecutionError``)."""
        request_id, index = msg_id
        try:
            self._clients[index].fail_request(
                request_id,
                f"the topology failed the request: its tuple tree failed or timed out "
                f"({self._label})",
            )
        except DRPCError as exc:
            self._unreachable(index, exc)

    def _unreachable(self, index: int, exc: DRPCError) -> None:
        if index not in self._down:
            self._down.add(index)
            self.collector.report_error(f"{self._label}: {exc}")


def _no_servers(label: str) -> str:
    return (
        f"{label}: no DRPC servers configured for the topology: set {DRPC_SERVERS!r} (and "
        "'drpc.invocations.port'), or give the spout a LocalDRPC"
    )


class ReturnResults(Bolt):
    """Returns each result to its client (Storm's ``ReturnResults``).

    Input: ``(result, return-info)``, the result a string and ``return-info`` the JSON
    text a :class:`DRPCSpout` emitted. The result goes to the broker the return info
    names (a ``LocalDRPC`` of this process, or a DRPC server's invocations port with the
    configuration's ``drpc.invocations.authorization.token``), and the client's
    ``execute`` returns it as it is. A tuple whose result is not a string or whose
    return info names no broker is failed with an error naming the problem (so the
    request fails); a broker that cannot be reached is tried three times before the
    tuple fails. Declares no output.
    """

    def prepare(
        self, conf: dict[str, Any], context: TopologyContext, collector: OutputCollector
    ) -> None:
        """Keep the configuration (tokens) and collector. Runs on the task's thread."""
        self.conf = conf
        self.collector = collector
        self._label = f"ReturnResults {context.get_this_component_id()!r}"

    def execute(self, tup: Tuple) -> None:
        """Send ``tup``'s result to its broker; ack, or fail with a reported error."""
        result, text = tup.values[0], tup.values[1]
        try:
            if not isinstance(result, str):
                raise DRPCError(
                    f"the result must be a string, got {type(result).__name__} {result!r}"
                )
            info = json.loads(text) if isinstance(text, str) else None
            if not isinstance(info, dict):
                raise DRPCError(
                    f"the return-info must be the JSON text of a DRPC return info, got {text!r}"
                )
        except (DRPCError, ValueError) as exc:
            self._give_up(tup, f"tuple from {tup.source_component!r}: {exc}")
            return
        error: DRPCError | None = None
        for _ in range(RETURN_ATTEMPTS):
            try:
                return_result(info, result, self.conf)
            except DRPCError as exc:
                error = exc
                continue
            self.collector.ack(tup)
            return
        self._give_up(tup, f"cannot return a result: {error}")

    def _give_up(self, tup: Tuple, message: str) -> None:
        self.collector.report_error(f"{self._label}: {message}")
        self.collector.fail(tup)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """No output."""
