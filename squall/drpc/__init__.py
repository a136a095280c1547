"""DRPC: distributed RPC computed by topologies (Storm's DRPC).

A client calls a function by name with a string argument and blocks; a topology whose
DRPC spout serves that function computes the answer and returns it as the JSON text of
its result tuples. :class:`LocalDRPC` does this within one process;
:class:`DRPCServer` with :class:`DRPCClient` (its client port) and
:class:`DRPCInvocationsClient` (its invocations port) across processes over HTTP.
"""

from squall.drpc.broker import DEFAULT_TIMEOUT_SECS, DRPCBroker
from squall.drpc.client import DRPCClient, DRPCInvocationsClient, invocations_clients_from_conf
from squall.drpc.components import DRPCSpout, ReturnResults
from squall.drpc.config import (
    DEFAULT_INVOCATIONS_PORT,
    DEFAULT_PORT,
    DRPC_AUTHORIZATION_TOKEN,
    DRPC_INVOCATIONS_AUTHORIZATION_TOKEN,
    DRPC_INVOCATIONS_PORT,
    DRPC_PORT,
    DRPC_SERVERS,
    DRPCLimits,
)
from squall.drpc.coordinated import CoordinatedBolt, FinishedCallback
from squall.drpc.errors import DRPCError, DRPCErrorReason, DRPCExecutionError
from squall.drpc.linear import LinearDRPCInputDeclarer, LinearDRPCTopologyBuilder
from squall.drpc.local import LocalDRPC
from squall.drpc.request import DRPCInvocations, DRPCRequest
from squall.drpc.returns import invocations_for, return_failure, return_result
from squall.drpc.server import DRPCServer

__all__ = [
    "DEFAULT_INVOCATIONS_PORT",
    "DEFAULT_PORT",
    "DEFAULT_TIMEOUT_SECS",
    "DRPC_AUTHORIZATION_TOKEN",
    "DRPC_INVOCATIONS_AUTHORIZATION_TOKEN",
    "DRPC_INVOCATIONS_PORT",
    "DRPC_PORT",
    "DRPC_SERVERS",
    "CoordinatedBolt",
    "DRPCBroker",
    "DRPCClient",
    "DRPCError",
    "DRPCErrorReason",
    "DRPCExecutionError",
    "DRPCInvocations",
    "DRPCInvocationsClient",
    "DRPCLimits",
    "DRPCRequest",
    "DRPCServer",
    "DRPCSpout",
    "FinishedCallback",
    "LinearDRPCInputDeclarer",
    "LinearDRPCTopologyBuilder",
    "LocalDRPC",
    "ReturnResults",
    "invocations_clients_from_conf",
    "invocations_for",
    "return_failure",
    "return_result",
]
