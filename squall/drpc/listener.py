"""One port of the DRPC server: an accepting thread and a bounded pool of handler threads.

The accepting thread hands each connection to the pool. The pool runs at most ``size``
handler threads (started as connections need them, kept until the pool stops) and lets
at most ``backlog`` more connections wait for one; a connection beyond that is answered
``503`` at once by the accepting thread, without blocking, so no connection ever costs
a thread of its own.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, cast

logger = logging.getLogger(__name__)

ConnectionHandler = Callable[[socket.socket, Any], None]
"""Serves one accepted connection on a handler thread; the pool closes it afterwards."""

_POLL_SECS = 0.05
_LISTEN_BACKLOG = 128
"""Connections the kernel holds until the accepting thread takes them (a burst buffer:
that thread never blocks, it queues or refuses each connection at once)."""
_ACCEPTS_PER_ROUND = 64
_LINGER_SECS = 1.0
"""How long a refused connection's input is discarded before it is closed."""
_MAX_LINGERING = 256
"""Refused connections lingering at once per port; more are closed at once."""


class BodyBudget:
    """Request-body bytes a port holds at once: reserved before a body is read,
    released when its request ends. Thread-safe.

    Args:
        total_bytes: The most bytes reserved at once.
    """

    def __init__(self, total_bytes: int) -> None:
        self.total_bytes = total_bytes
        self._in_use = 0
        self._lock = threading.Lock()

    def reserve(self, size: int) -> bool:
        """Reserve ``size`` bytes; ``False`` (nothing reserved) if that would go over."""
        with self._lock:
            if self._in_use + size > self.total_bytes:
                return False
            self._in_use += size
            return True

    def release(self, size: int) -> None:
        """Give back ``size`` bytes reserved earlier."""
        with self._lock:
            self._in_use -= size

    @property
    def in_use(self) -> int:
        """Bytes reserved now."""
        with self._lock:
            return self._in_use


class HandlerPool:
    """At most ``size`` handler threads for one port, and ``backlog`` waiting connections.

    Threads are daemons named ``<name>-<n>``; each serves one connection at a time.
    ``offer`` runs on the accepting thread; ``stop`` on the thread stopping the server.

    Args:
        name: Prefix of the thread names.
        size: The most handler threads.
        backlog: The most connections waiting for a handler.
        handle: Serves one connection.
    """

    def __init__(self, name: str, size: int, backlog: int, handle: ConnectionHandler) -> None:
        self.name = name
        self.size = size
        self.backlog = backlog
        self._handle = handle
        self._queue: queue.SimpleQueue[tuple[socket.socket, Any] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._numbers = itertools.count(1)
        self._taken = 0  # connections offered and not yet finished
        self._waiting = 0  # connections queued and not yet taken by a thread
        self._idle = 0  # threads started and not serving a connection
        self._active: set[socket.socket] = set()
        self._stopped = False

    def offer(self, connection: socket.socket, address: Any) -> bool:
        """Queue ``connection`` for a handler; ``False`` when every handler is busy and
        the backlog is full (or the pool stopped): the caller must refuse it."""
        with self._lock:
            if self._stopped or self._taken >= self.size + self.backlog:
                return False
            self._taken += 1
            if self._waiting >= self._idle and len(self._threads) < self.size:
                thread = threading.Thread(
                    target=self._work, name=f"{self.name}-{next(self._numbers)}", daemon=True
                )
                self._threads.append(thread)
                self._idle += 1
                thread.start()
            self._waiting += 1
            self._queue.put((connection, address))
        return True

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            connection, address = item
            with self._lock:
                self._waiting -= 1
                self._idle -= 1
                self._active.add(connection)
            try:
                self._handle(connection, address)
            except Exception:
                logger.exception("error serving a DRPC connection from %s", address)
            finally:
                close_connection(connection)
                with self._lock:
                    self._active.discard(connection)
                    self._taken -= 1
                    self._idle += 1

    @property
    def thread_count(self) -> int:
        """Handler threads started (they run until the pool stops)."""
        with self._lock:
            return len(self._threads)

    @property
    def busy(self) -> int:
        """Connections being served now."""
        with self._lock:
            return len(self._active)

    @property
    def waiting(self) -> int:
        """Connections waiting for a handler."""
        with self._lock:
            return self._waiting

    def stop(self, grace_secs: float, join_secs: float) -> None:
        """Close waiting connections, let handlers finish for ``grace_secs``, then shut
        the connections still served (a stalled client) and join the threads for at
        most ``join_secs`` in all. A handler blocked in a call that has not ended (an
        ``execute`` on a broker the server does not own) is left to end with its call."""
        with self._lock:
            self._stopped = True
            threads = list(self._threads)
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                close_connection(item[0])
        for _ in threads:
            self._queue.put(None)
        deadline = time.monotonic() + grace_secs
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            stalled = list(self._active)
        for connection in stalled:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + join_secs
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class Listener:
    """A bound port whose accepting thread feeds a :class:`HandlerPool`.

    The accepting thread never blocks on a client: it queues each connection or, when
    the pool is full, answers it at once and keeps discarding what the client still
    sends for up to ``_LINGER_SECS`` (at most ``_MAX_LINGERING`` connections at a time)
    before closing, so a client still sending its request reads the answer instead of a
    reset.

    Args:
        address: ``(host, port)`` to bind; port 0 picks a free one.
        backlog: The pool's backlog.
        refusal: The whole HTTP answer sent to a connection the pool cannot take.

    Raises:
        OSError: The address cannot be bound.
    """

    def __init__(self, address: tuple[str, int], backlog: int, refusal: bytes) -> None:
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._socket.bind(address)
            self._socket.listen(_LISTEN_BACKLOG)
            self._socket.setblocking(False)
            self._port = int(self._socket.getsockname()[1])
        except OSError:
            self._socket.close()
            raise
        self._backlog = backlog
        self._refusal = refusal
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lingering: dict[socket.socket, float] = {}
        self.pool: HandlerPool | None = None

    @property
    def port(self) -> int:
        """The bound port."""
        return self._port

    def start(self, name: str, handlers: int, handle: ConnectionHandler) -> None:
        """Accept connections on a daemon thread named ``name``, served by a pool of at
        most ``handlers`` threads named ``squall-drpc-handler-<port>-<n>``."""
        self.pool = HandlerPool(f"squall-drpc-handler-{self.port}", handlers, self._backlog, handle)
        self._thread = threading.Thread(target=self._accept_loop, name=name, daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        """Runs on the accepting thread until ``stop``."""
        with selectors.DefaultSelector() as selector:
            selector.register(self._socket, selectors.EVENT_READ)
            try:
                while not self._stop.is_set():
                    for key, _ in selector.select(timeout=_POLL_SECS):
                        if key.fileobj is self._socket:
                            self._accept(selector)
                        else:
                            self._discard(selector, cast(socket.socket, key.fileobj))
                    self._expire(selector, time.monotonic())
            finally:
                self._expire(selector, math.inf)

    def _accept(self, selector: selectors.BaseSelector) -> None:
        for _ in range(_ACCEPTS_PER_ROUND):
            try:
                connection, address = self._socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. out of file descriptors: try again later
                logger.warning("DRPC server on port %d cannot accept: %s", self.port, exc)
                return
            if self.pool is not None and self.pool.offer(connection, address):
                continue
            self._refuse(selector, connection)

    def _refuse(self, selector: selectors.BaseSelector, connection: socket.socket) -> None:
        """Answer ``refusal`` without blocking, then linger (or close when too many do)."""
        try:
            connection.setblocking(False)
            connection.send(self._refusal)
            connection.shutdown(socket.SHUT_WR)
        except OSError as exc:
            logger.debug("could not refuse a DRPC connection: %s", exc)
            close_connection(connection)
            return
        if len(self._lingering) >= _MAX_LINGERING:
            close_connection(connection)
            return
        self._lingering[connection] = time.monotonic() + _LINGER_SECS
        selector.register(connection, selectors.EVENT_READ)

    def _discard(self, selector: selectors.BaseSelector, connection: socket.socket) -> None:
        """Drop what a refused client sent; close once it has finished."""
        try:
            if connection.recv(65536):
                return
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            pass
        selector.unregister(connection)
        del self._lingering[connection]
        close_connection(connection)

    def _expire(self, selector: selectors.BaseSelector, now: float) -> None:
        """Close refused connections whose lingering time is over."""
        for connection, deadline in list(self._lingering.items()):
            if deadline <= now:
                selector.unregister(connection)
                del self._lingering[connection]
                close_connection(connection)

    def stop(self, grace_secs: float, join_secs: float) -> None:
        """Stop accepting, close the socket, then stop the pool (see HandlerPool.stop)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(join_secs)
        self._socket.close()
        if self.pool is not None:
            self.pool.stop(grace_secs, join_secs)

    def close(self) -> None:
        """Close the socket of a listener that never started."""
        self._socket.close()


def close_connection(connection: socket.socket) -> None:
    """Close a connection, ignoring a client that already went away."""
    with contextlib.suppress(OSError):
        connection.close()
