"""How the worker processes of one topology reach each other: Unix stream sockets.

Each worker listens on ``w<index>.sock`` in the topology's directory; a worker that has
tuples for another connects to it on first use, announces its own index, then sends
length-prefixed frames (4 bytes, big-endian, then the frame) one way only. Measured
against a pipe (``bench/transport.py``), a socket costs the same per batch and lets one
``select`` watch every peer.

Nothing blocks a worker's loop: sends queue bytes and write what the socket takes,
reads take what has arrived. Two workers sending to each other can therefore never
wait for each other; what bounds the bytes queued is backpressure (the tuples a task
may send are limited by its targets' queues, in flight included, see
:mod:`squall.local.board`).

A peer that dies is noticed by the end of file on the connection to it (the socket
turns readable); the bytes queued for it are dropped, and its tuples' trees time out
and are replayed as in Storm. The next frame for it connects again (to its next
incarnation), at most every :data:`RECONNECT_SECS`; frames meanwhile are dropped.

Used by one thread of the worker process only.
"""

from __future__ import annotations

import contextlib
import errno
import select
import socket
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HEADER = struct.Struct("!I")
#: A peer that could not be reached is tried again after this long.
RECONNECT_SECS = 0.05
#: Bytes read from a socket at once.
READ_SIZE = 1 << 20
#: Kernel buffers asked for each connection (bounded by the system's limits).
SOCKET_BUFFER = 4 << 20


def socket_path(directory: Path, worker: int) -> Path:
    """Where worker ``worker`` listens."""
    return directory / f"w{worker}.sock"


@dataclass
class Inbound:
    """A connection from a peer (``sender``): bytes read but not yet framed."""

    sock: socket.socket
    sender: int = -1
    data: bytearray = field(default_factory=bytearray)
    #: Whether this is the newest connection from its sender (the one its counters
    #: on the board follow).
    newest: bool = True


@dataclass
class _Outbound:
    """The connection to a peer and the bytes it has not taken yet."""

    sock: socket.socket
    pending: bytearray = field(default_factory=bytearray)


class Links:
    """This worker's connections to its peers.

    Args:
        directory: where every worker of the topology listens.
        index: this worker.

    Raises:
        OSError: the listening socket cannot be made.
    """

    def __init__(self, directory: Path, index: int) -> None:
        self.directory = directory
        self.index = index
        path = socket_path(directory, index)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a previous incarnation's
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(64)
        self._listener.setblocking(False)
        self._inbound: dict[socket.socket, Inbound] = {}
        self._outbound: dict[int, _Outbound] = {}
        self._outbound_by_sock: dict[socket.socket, int] = {}
        self._unreachable_until: dict[int, float] = {}
        #: Peers whose connection ended since the last ``take_lost`` (they died).
        self._lost: list[int] = []
        #: Peers that announced a new connection since the last ``take_connected``.
        self._connected: list[int] = []

    # Sending ---------------------------------------------------------------------------

    def connect(self, peer: int) -> bool:
        """Whether there is a connection to ``peer`` (made now if needed). A peer that
        cannot be reached is tried again :data:`RECONNECT_SECS` later."""
        if peer in self._outbound:
            return True
        now = time.monotonic()
        if self._unreachable_until.get(peer, 0.0) > now:
            return False
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(1.0)
            sock.connect(str(socket_path(self.directory, peer)))
        except OSError:
            sock.close()
            self._unreachable_until[peer] = now + RECONNECT_SECS
            return False
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
        link = _Outbound(sock, bytearray(HEADER.pack(self.index)))
        self._outbound[peer] = link
        self._outbound_by_sock[sock] = peer
        return True

    def send(self, peer: int, frame: bytes) -> None:
        """Queue ``frame`` for ``peer`` (connected, see :meth:`connect`) and write what
        its socket takes now."""
        link = self._outbound[peer]
        link.pending += HEADER.pack(len(frame))
        link.pending += frame
        self._write(peer, link)

    def unsent(self) -> int:
        """Bytes queued for peers that their sockets have not taken yet."""
        return sum(len(link.pending) for link in self._outbound.values())

    def flush(self) -> None:
        """Write what the sockets take of the bytes queued."""
        for peer, link in list(self._outbound.items()):
            if link.pending:
                self._write(peer, link)

    def _write(self, peer: int, link: _Outbound) -> None:
        try:
            written = link.sock.send(link.pending)
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN):
                raise
            self._drop(peer)
            return
        del link.pending[:written]

    def _drop(self, peer: int) -> None:
        link = self._outbound.pop(peer, None)
        if link is None:
            return
        del self._outbound_by_sock[link.sock]
        link.sock.close()
        self._lost.append(peer)

    def take_lost(self) -> list[int]:
        """The peers whose connection ended since the last call."""
        lost, self._lost = self._lost, []
        return lost

    # Receiving -------------------------------------------------------------------------

    def wait(self, timeout: float, others: list[int] | None = None) -> bool:
        """Wait up to ``timeout`` seconds for something to read (or a peer to go);
        ``others``: more file descriptors to wake for. Returns whether anything woke."""
        watched: list[Any] = [self._listener, *self._inbound, *self._outbound_by_sock]
        if others:
            watched.extend(others)
        readable, _, _ = select.select(watched, [], [], timeout)
        return bool(readable)

    def receive(self) -> list[tuple[Inbound, bytes]]:
        """Accept new connections, then read every connection: the complete frames
        that arrived, as ``(connection, frame)`` in arrival order per connection
        (``connection.newest`` tells whether it is its sender's newest, rather than
        one of a previous incarnation of it). A connection that announces its sender
        is reported by :meth:`take_connected`."""
        watched: list[socket.socket] = [self._listener, *self._inbound, *self._outbound_by_sock]
        readable, _, _ = select.select(watched, [], [], 0)
        if not readable:
            return []
        frames: list[tuple[Inbound, bytes]] = []
        for sock in readable:
            if sock is self._listener:
                self._accept()
            elif sock in self._outbound_by_sock:
                self._check_outbound(sock)
            else:
                self._read(self._inbound[sock], frames)
        return frames

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except BlockingIOError:
                return
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
            self._inbound[sock] = Inbound(sock)

    def _check_outbound(self, sock: socket.socket) -> None:
        """An outbound connection turned readable: its peer closed it (peers never
        write back)."""
        try:
            data = sock.recv(1)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(self._outbound_by_sock[sock])

    def _read(self, link: Inbound, frames: list[tuple[Inbound, bytes]]) -> None:
        sock = link.sock
        while True:
            try:
                chunk = sock.recv(READ_SIZE)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                del self._inbound[sock]
                sock.close()
                return
            link.data += chunk
            if len(chunk) < READ_SIZE:
                break
        data = link.data
        at = 0
        if link.sender < 0:
            if len(data) < HEADER.size:
                return
            (link.sender,) = HEADER.unpack_from(data, 0)
            at = HEADER.size
            for other in self._inbound.values():
                if other is not link and other.sender == link.sender:
                    other.newest = False
            self._connected.append(link.sender)
        size = len(data)
        while size - at >= HEADER.size:
            (length,) = HEADER.unpack_from(data, at)
            end = at + HEADER.size + length
            if end > size:
                break
            frames.append((link, bytes(data[at + HEADER.size : end])))
            at = end
        if at:
            del data[:at]

    def take_connected(self) -> list[int]:
        """The peers that connected (and announced themselves) since the last call:
        each is a new incarnation of that peer, or its first."""
        connected, self._connected = self._connected, []
        return connected

    def close(self) -> None:
        """Close every connection and the listening socket (its path is left to the
        next incarnation, or to the directory's removal)."""
        for link in self._outbound.values():
            link.sock.close()
        for inbound in self._inbound.values():
            inbound.sock.close()
        self._outbound.clear()
        self._outbound_by_sock.clear()
        self._inbound.clear()
        self._listener.close()


__all__ = ["HEADER", "Inbound", "Links", "socket_path"]
