"""The UI server's HTTP protocol: uvicorn's h11 protocol, with its connections bounded.

* At most ``max_connections`` connections are open at once: one more is answered
  ``503`` and closed at once, so clients never use up the process's file descriptors.
* A connection with no request under way (new, or kept alive after an answer) is
  closed after ``idle_timeout_secs``.
* A request must arrive whole, headers and body, within ``read_timeout_secs`` of its
  first byte; otherwise it is answered ``408`` and its connection closed.
* A connection closed while its client may still be sending (a refused or late
  request) first ends the server's side and discards what the client still sends for a
  moment, so the client reads the answer instead of a reset.

Everything here runs on the server's event loop. See :class:`~squall.ui.limits.UILimits`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from http import HTTPStatus
from typing import Any, ClassVar, cast

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from squall.runtime.http_limits import request_too_slow
from squall.ui.limits import UILimits

#: How long a connection closed while its client may still be sending lingers.
LINGER_SECS = 2.0


def raw_answer(status: int, message: str) -> bytes:
    """A whole HTTP answer with the UI server's JSON error body, closing the connection
    (for answers given outside a request's handling)."""
    phrase = HTTPStatus(status).phrase
    body = json.dumps({"error": phrase, "errorMessage": message}).encode("utf-8")
    head = (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class _Transport:
    """The connection's transport as uvicorn sees it: closing it goes through
    :meth:`BoundedH11Protocol.close_connection` (which may linger)."""

    def __init__(self, transport: asyncio.Transport, protocol: BoundedH11Protocol) -> None:
        self._transport = transport
        self._protocol = protocol

    def close(self) -> None:
        self._protocol.close_connection()

    def is_closing(self) -> bool:
        return self._protocol.closing or self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the bounds of :attr:`limits` (see the module).

    Made per server by :func:`protocol_class`, which sets :attr:`limits`.
    """

    limits: ClassVar[UILimits] = UILimits()
    #: Connections lingering now, of every connection of the server (one counter).
    lingering: ClassVar[list[int]] = [0]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._raw: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_kind: str | None = None
        self._refused = False
        self._lingers = False
        #: Closed, or lingering before it closes.
        self.closing = False

    # --- the protocol's events --------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._raw = cast(asyncio.Transport, transport)
        limit = self.limits.max_connections
        if len(self.connections) >= limit:
            self._refused = True
            self._raw.write(
                raw_answer(
                    503,
                    f"the UI server has {limit} connections open, as many as it keeps; "
                    "try again later",
                )
            )
            self.close_connection()
            return
        super().connection_made(cast(asyncio.Transport, _Transport(self._raw, self)))
        self._watch()

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return  # refused, or lingering: what the client still sends is discarded
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        if self._lingers:
            self._lingers = False
            self.lingering[0] -= 1
        if not self._refused:
            super().connection_lost(exc)

    # --- closing --------------------------------------------------------------------

    def close_connection(self) -> None:
        """Close the connection: at once, or, while the client may still be sending,
        after ending this side and discarding its input for up to ``LINGER_SECS``."""
        raw = self._raw
        if self.closing or raw is None or raw.is_closing():
            return
        self.closing = True
        self._cancel_timer()
        their_state = self.conn.their_state
        may_send = self._refused or their_state is h11.SEND_BODY or self._partial_request()
        if not may_send or self.lingering[0] >= self.limits.backlog or not raw.can_write_eof():
            raw.close()
            return
        self._lingers = True
        self.lingering[0] += 1
        raw.write_eof()
        raw.resume_reading()
        self._timer = self.loop.call_later(LINGER_SECS, raw.close)

    def _partial_request(self) -> bool:
        return self.conn.their_state is h11.IDLE and bool(self.conn.trailing_data[0])

    # --- the timers -------------------------------------------------------------------

    def _watch(self) -> None:
        """Arm the timer the connection's state calls for: idle (no request under way),
        read (a request arriving), or none (a request being answered)."""
        if self.closing:
            return
        their_state = self.conn.their_state
        kind: str | None = None
        if their_state is h11.SEND_BODY or self._partial_request():
            kind = "read"
        elif their_state is h11.IDLE:
            kind = "idle"
        if kind == self._timer_kind:
            return
        self._cancel_timer()
        if kind == "read":
            self._timer = self.loop.call_later(self.limits.read_timeout_secs, self._too_slow)
        elif kind == "idle":
            self._timer = self.loop.call_later(self.limits.idle_timeout_secs, self._idle)
        self._timer_kind = kind

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_kind = None

    def _idle(self) -> None:
        self._timer = self._timer_kind = None
        with contextlib.suppress(h11.LocalProtocolError):
            self.conn.send(h11.ConnectionClosed())
        self.close_connection()

    def _too_slow(self) -> None:
        """The read deadline passed: answer ``408``, unless the request was answered
        already (without reading its body): then only close."""
        self._timer = self._timer_kind = None
        cycle = self.cycle
        answering = self.conn.their_state is not h11.IDLE and (
            cycle is not None and cycle.response_started
        )
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the handler's answer, if any, is dropped
            cycle.message_event.set()
        if not answering and self._raw is not None:
            self._raw.write(raw_answer(408, request_too_slow(self.limits.read_timeout_secs)))
        self.close_connection()


def protocol_class(limits: UILimits) -> type[BoundedH11Protocol]:
    """The protocol of one server, with ``limits`` (given to uvicorn's ``http``)."""
    attributes = {"limits": limits, "lingering": [0]}
    return type("SquallH11Protocol", (BoundedH11Protocol,), attributes)


__all__ = ["LINGER_SECS", "BoundedH11Protocol", "protocol_class", "raw_answer"]
