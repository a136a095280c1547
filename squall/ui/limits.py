"""The bounds of the UI server (:class:`UILimits`) and the ASGI middleware that refuses
request bodies over the limit (:class:`BodyLimit`).

The connection bounds (how many, idle ones, the read deadline) are kept by the
server's HTTP protocol, :mod:`squall.ui.connections`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from squall.runtime.http_limits import body_too_large, check_count, check_seconds
from squall.ui.guard import error_answer

ASGIApp = Any
Scope = dict[str, Any]
Message = dict[str, Any]


@dataclass(frozen=True)
class UILimits:
    """The bounds of a :class:`~squall.ui.UIServer`.

    * ``max_connections``: connections open at once. One more is answered ``503`` at
      once and closed, so the server never runs out of file descriptors however many
      clients connect (a browser keeps about six per tab).
    * ``backlog``: connections the system holds until the server takes them, and the
      most it takes at a time.
    * ``idle_timeout_secs``: a connection with no request under way (new, or kept
      alive after an answer) is closed after this long.
    * ``read_timeout_secs``: a request must arrive whole, headers and body, within this
      long of its first byte (``408`` after it, then the connection is closed).
    * ``max_body_bytes``: the largest request body: a larger ``Content-Length`` is
      answered ``413`` before any of the body is read, and a chunked body is refused
      as soon as it goes over.

    Raises:
        ValueError: A limit is not a positive number; the message names it.
    """

    max_connections: int = 256
    backlog: int = 128
    idle_timeout_secs: float = 5.0
    read_timeout_secs: float = 10.0
    max_body_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        for name in ("max_connections", "backlog", "max_body_bytes"):
            check_count(getattr(self, name), f"UI server limits: {name}")
        for name in ("idle_timeout_secs", "read_timeout_secs"):
            check_seconds(getattr(self, name), f"UI server limits: {name}")


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value)  # the HTTP parser let only digits through
    return None


class BodyLimit:
    """ASGI middleware: request bodies of at most ``max_body_bytes``, else ``413``.

    A ``Content-Length`` over the limit is answered at once, before the application
    runs or a byte of the body is read. A body without one (chunked) is counted as
    the application reads it: once over the limit, the client is answered ``413``, the
    application is told the client went away, and whatever it answers is dropped. The
    answer closes the connection. Runs on the server's event loop.

    Args:
        app: The application behind it.
        max_body_bytes: The largest body a request may send.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    def _refusal(self, length: int | None) -> Any:
        message = body_too_large(length, self.max_body_bytes)
        return error_answer(413, message, headers={"connection": "close"})

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = _content_length(scope)
        if length is not None and length > self.max_body_bytes:
            await self._refusal(length)(scope, receive, send)
            return
        received = 0
        refused = False
        started = False

        async def counted_receive() -> Message:
            nonlocal received, refused
            message: Message = await receive()
            if message["type"] != "http.request" or refused:
                return message
            received += len(message.get("body", b""))
            if received <= self.max_body_bytes:
                return message
            refused = True
            if not started:
                await self._refusal(None)(scope, receive, send)
            return {"type": "http.disconnect"}

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if refused:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except Exception:
            if not refused:
                raise  # the application's own error (the body it was refused ends here)


__all__ = ["BodyLimit", "UILimits"]
