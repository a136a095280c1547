"""Routing results back: from a request's ``return_info`` to the broker that issued it.

The last step of a DRPC topology (Storm's ``ReturnResults`` bolt) holds a request's
``return_info`` and its result; :func:`invocations_for` gives it the invocations object
to call ``result`` / ``fail_request`` on, wherever the request came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squall.drpc.client import DRPCInvocationsClient
from squall.drpc.config import DRPC_INVOCATIONS_AUTHORIZATION_TOKEN, token_from_conf
from squall.drpc.errors import DRPCError
from squall.drpc.local import LocalDRPC
from squall.drpc.request import DRPCInvocations


def invocations_for(
    return_info: Mapping[str, Any], conf: Mapping[str, Any] | None = None
) -> DRPCInvocations:
    """The invocations interface of the broker named by ``return_info``.

    Args:
        return_info: A request's ``return_info``: ``{"kind": "local", "service_id"}``
            resolves to the :class:`LocalDRPC` of this process (or the bridge this
            process reaches it through, in a worker process), ``{"kind": "http",
            "host", "port"}`` to a :class:`DRPCInvocationsClient` of that server's
            invocations port.
        conf: The topology's configuration: a server's client sends its
            ``drpc.invocations.authorization.token`` (``return_info`` never carries
            a token).

    Raises:
        DRPCError: ``return_info`` names no broker, or a LocalDRPC that no longer exists
            in this process, or the configured token is invalid.
    """
    kind = return_info.get("kind")
    if kind == "local":
        return LocalDRPC.invocations(str(return_info.get("service_id")))
    if kind == "http":
        host, port = return_info.get("host"), return_info.get("port")
        if isinstance(host, str) and isinstance(port, int):
            try:
                token = token_from_conf(conf or {}, DRPC_INVOCATIONS_AUTHORIZATION_TOKEN)
            except ValueError as exc:
                raise DRPCError(str(exc)) from None
            return DRPCInvocationsClient(host, port, token=token)
    raise DRPCError(f"return_info names no DRPC broker: {dict(return_info)!r}")


def return_result(
    return_info: Mapping[str, Any], result: str, conf: Mapping[str, Any] | None = None
) -> None:
    """Send ``result`` for the request described by ``return_info`` to its broker
    (``conf`` as for :func:`invocations_for`)."""
    invocations_for(return_info, conf).result(_request_id(return_info), result)


def return_failure(
    return_info: Mapping[str, Any], message: str = "", conf: Mapping[str, Any] | None = None
) -> None:
    """Fail the request described by ``return_info`` at its broker (``conf`` as for
    :func:`invocations_for`)."""
    invocations_for(return_info, conf).fail_request(_request_id(return_info), message)


def _request_id(return_info: Mapping[str, Any]) -> str:
    request_id = return_info.get("request_id")
    if not isinstance(request_id, str):
        raise DRPCError(f"return_info has no request_id: {dict(return_info)!r}")
    return request_id
