"""The bounds of DRPCServer: handler pools and their backlog, the request-body budget,
the read deadline, and what DRPCClient reports when the server does not answer."""

from __future__ import annotations

import json
import re
import selectors
import socket
import threading
import time
from typing import Any

import pytest

import squall.drpc.client as client_module
from squall.drpc import (
    DRPCClient,
    DRPCErrorReason,
    DRPCExecutionError,
    DRPCInvocationsClient,
    DRPCLimits,
    DRPCServer,
)
from tests.helpers import closing_all, wait_until
from tests.test_drpc import in_thread, serving
from tests.test_drpc_server import drpc_threads, http

MIB = 1024 * 1024


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30.0)


def read_answer(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    """Read a whole HTTP answer up to the end of the stream: (status, JSON body)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)


def request_head(method: str, path: str, length: int | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.0", "Host: 127.0.0.1"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def busy(port: str, handlers: int, backlog: int) -> dict[str, str]:
    return {
        "error": f"server busy: all {handlers} handlers of the {port} port are busy and "
        f"{backlog} connections are waiting; try again later",
        "reason": "busy",
    }


def test_300_idle_connections_cost_no_more_threads_than_the_pools() -> None:
    """Each port serves with at most its pool's threads; beyond them and the backlog a
    connection is answered 503 at once; nothing else costs a thread."""
    limits = DRPCLimits(handlers=4, invocations_handlers=2, backlog=8, read_timeout_secs=120.0)
    with DRPCServer(limits=limits) as server:
        threads_before = threading.active_count()
        assert drpc_threads() == {
            f"squall-drpc-server-{server.port}",
            f"squall-drpc-invocations-{server.invocations_port}",
        }
        to_client = [connect(server.port) for _ in range(150)]
        to_invocations = [connect(server.invocations_port) for _ in range(150)]
        with closing_all(to_client + to_invocations):
            answers: dict[socket.socket, tuple[int, dict[str, Any]]] = {}
            selector = selectors.DefaultSelector()
            for sock in to_client + to_invocations:
                selector.register(sock, selectors.EVENT_READ)

            def refused_ones_answered() -> bool:
                for key, _ in selector.select(timeout=0.05):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    selector.unregister(sock)
                    answers[sock] = read_answer(sock)
                return len(answers) == (150 - 4 - 8) + (150 - 2 - 8)

            wait_until(refused_ones_answered, timeout=60.0)
            assert [answers[s] for s in to_client if s in answers] == [
                (503, busy("client", 4, 8))
            ] * 138
            assert [answers[s] for s in to_invocations if s in answers] == [
                (503, busy("invocations", 2, 8))
            ] * 140
            assert threading.active_count() == threads_before + 6
            assert drpc_threads() == {
                f"squall-drpc-server-{server.port}",
                f"squall-drpc-invocations-{server.invocations_port}",
                *(f"squall-drpc-handler-{server.port}-{n}" for n in (1, 2, 3, 4)),
                *(f"squall-drpc-handler-{server.invocations_port}-{n}" for n in (1, 2)),
            }
            assert server.handler_threads() == 6
            assert selector.select(timeout=0) == []  # the others wait for their request
            selector.close()

        # Their clients gone, the handlers serve again; no thread was added.
        def fetch_served() -> bool:
            return http(server.invocations_url, "GET", "/fetch/f") == (204, b"")

        wait_until(fetch_served, timeout=30.0)
        invocations = DRPCInvocationsClient("127.0.0.1", server.invocations_port)
        with serving(invocations, "f", lambda request: f'[["{request.args}"]]'):
            assert DRPCClient("127.0.0.1", server.port, 10.0).execute("f", "a") == '[["a"]]'
        assert server.handler_threads() == 6


def test_topologies_answer_on_their_own_pool_while_every_client_handler_waits() -> None:
    """Execute calls hold client handlers for their whole length; the invocations port
    has its own pool, so topologies still fetch and answer, and a call beyond the client
    pool and backlog is refused with reason BUSY instead of waiting."""
    limits = DRPCLimits(handlers=2, invocations_handlers=1, backlog=1)
    with DRPCServer(timeout_secs=30.0, limits=limits) as server:
        client = DRPCClient("127.0.0.1", server.port, timeout_secs=30.0)
        calls = [in_thread(lambda n=n: client.execute("f", str(n))) for n in range(2)]
        wait_until(lambda: server.broker.pending_count("f") == 2)
        queued = in_thread(lambda: client.execute("f", "2"))
        wait_until(lambda: server.handler_threads() == 2 and _waiting(server) == 1)

        with pytest.raises(DRPCExecutionError) as caught:
            client.execute("f", "3")
        assert caught.value.reason is DRPCErrorReason.BUSY
        assert str(caught.value) == (
            "DRPC request for function 'f' was refused: "
            + busy("client", 2, 1)["error"]
            + f" (DRPC server 127.0.0.1:{server.port})"
        )

        invocations = DRPCInvocationsClient("127.0.0.1", server.invocations_port)
        with serving(invocations, "f", lambda request: f"[[{request.args}]]"):
            for thread, _ in [*calls, queued]:
                thread.join(10.0)
        assert [outcome for _, outcome in [*calls, queued]] == [
            {"value": "[[0]]"},
            {"value": "[[1]]"},
            {"value": "[[2]]"},
        ]
        assert server.handler_threads() == 3


def _waiting(server: DRPCServer) -> int:
    """Connections waiting for a handler of the client port."""
    pool = server._listeners["client"].pool
    assert pool is not None
    return pool.waiting


def test_bodies_beyond_the_budget_are_refused_without_being_read() -> None:
    limits = DRPCLimits(max_body_bytes=2 * MIB, body_budget_bytes=3 * MIB, read_timeout_secs=60)
    with DRPCServer(timeout_secs=10.0, limits=limits) as server:
        holder = connect(server.port)  # announces 2 MiB, sends 10 bytes, waits
        with closing_all([holder]):
            holder.sendall(request_head("POST", "/drpc/f", 2 * MIB) + b"x" * 10)
            wait_until(lambda: server.body_bytes_in_flight() == 2 * MIB, timeout=30.0)

            # Only headers are sent: the answers come before any body byte.
            over_budget = connect(server.port)
            with closing_all([over_budget]):
                over_budget.sendall(request_head("POST", "/drpc/f", 2 * MIB))
                assert read_answer(over_budget) == (
                    503,
                    {
                        "error": "server busy: a body of 2097152 bytes would exceed the "
                        "3145728 bytes of request bodies this port holds at once; try "
                        "again later",
                        "reason": "busy",
                    },
                )
            too_large = connect(server.port)
            with closing_all([too_large]):
                too_large.sendall(request_head("POST", "/drpc/f", 2 * MIB + 1))
                assert read_answer(too_large) == (
                    413,
                    {
                        "error": "the body is too large: 2097153 bytes, over the 2097152 "
                        "bytes a request may send",
                        "reason": "rejected",
                    },
                )
            assert server.body_bytes_in_flight() == 2 * MIB

            # DRPCClient sends its whole body: it still reads the refusal.
            client = DRPCClient("127.0.0.1", server.port, timeout_secs=10.0)
            with pytest.raises(DRPCExecutionError) as caught:
                client.execute("f", "y" * (2 * MIB))
            assert caught.value.reason is DRPCErrorReason.BUSY
            assert "server busy: a body of 2097152 bytes would exceed" in str(caught.value)

            # The invocations port has a budget of its own.
            status, body = http(server.invocations_url, "POST", "/result/0", b"r" * (2 * MIB))
            assert (status, body) == (200, b'{"accepted": false}')
            assert server.broker.outstanding_count() == 0
            # Released once its handler is done (just after the answer): the holder's stay.
            wait_until(lambda: server.body_bytes_in_flight() == 2 * MIB)
        wait_until(lambda: server.body_bytes_in_flight() == 0, timeout=30.0)

        invocations = DRPCInvocationsClient("127.0.0.1", server.invocations_port)
        with serving(invocations, "f", lambda request: f"[[{len(request.args)}]]"):
            assert client.execute("f", "y" * (2 * MIB)) == f"[[{2 * MIB}]]"
        # The result's POST is released when its handler finishes, just after answering.
        wait_until(lambda: server.body_bytes_in_flight() == 0, timeout=30.0)


def trickle(sock: socket.socket, first: bytes, give_up_secs: float) -> bytes:
    """Send ``first``, then one byte every 20 ms until the server answers or closes the
    connection; returns what the server sent (``b""`` if it only closed)."""
    sock.sendall(first)
    sock.setblocking(False)
    deadline = time.monotonic() + give_up_secs
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        while not selector.select(timeout=0.02):
            if time.monotonic() > deadline:
                raise AssertionError(f"the server kept a slow client for {give_up_secs} s")
            try:
                sock.send(b"a")
            except (BrokenPipeError, ConnectionResetError):
                break  # closed: what it answered before is still there to read
    sock.settimeout(5.0)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:  # it closed with our last bytes unread
        pass
    return received


def test_slow_requests_are_dropped_at_the_read_deadline() -> None:
    limits = DRPCLimits(handlers=2, invocations_handlers=1, backlog=1, read_timeout_secs=1.0)
    late = {"error": "the request did not arrive whole within 1 s", "reason": "rejected"}
    with DRPCServer(timeout_secs=10.0, limits=limits) as server:
        slow_head = connect(server.port)
        slow_body = connect(server.port)
        silent = connect(server.invocations_port)
        with closing_all([slow_head, slow_body, silent]):
            head_thread, head = in_thread(
                lambda: trickle(slow_head, b"POST /drpc/f HTTP/1.0\r\nX-Slow: ", 30.0)
            )
            body_thread, body = in_thread(
                lambda: trickle(slow_body, request_head("POST", "/drpc/f", 1000), 30.0)
            )
            wait_until(lambda: server.body_bytes_in_flight() == 1000, timeout=30.0)
            silent.settimeout(30.0)
            assert read_answer(silent) == (408, late)
            head_thread.join(40.0)
            body_thread.join(40.0)
            for outcome in (head, body):
                answer = outcome["value"]
                assert answer.startswith(b"HTTP/1.0 408 Request Timeout\r\n"), answer
                assert json.loads(answer.partition(b"\r\n\r\n")[2]) == late
        assert server.broker.outstanding_count() == 0  # neither request reached it
        wait_until(lambda: server.body_bytes_in_flight() == 0)

        invocations = DRPCInvocationsClient("127.0.0.1", server.invocations_port)
        with serving(invocations, "f", lambda request: "[[1]]"):
            assert DRPCClient("127.0.0.1", server.port, 10.0).execute("f", "a") == "[[1]]"
        assert server.handler_threads() == 3


def test_the_client_timeout_message_states_how_long_it_waited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that never answers: the client waits its timeout plus a grace period
    (shortened here) and says how long it really waited, not only its timeout."""
    monkeypatch.setattr(client_module, "_GRACE_SECS", 0.5)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        client = DRPCClient("127.0.0.1", port, timeout_secs=0.2)
        started = time.monotonic()
        with pytest.raises(DRPCExecutionError) as caught:
            client.execute("f", "a")
        elapsed = time.monotonic() - started
    assert caught.value.reason is DRPCErrorReason.TIMEOUT
    found = re.fullmatch(
        r"DRPC request for function 'f' timed out after waiting ([0-9.]+) s with no answer "
        r"from the server \(request timeout 0\.2 s, plus 0\.5 s for the answer\) "
        rf"\(DRPC server 127\.0\.0\.1:{port}\)",
        str(caught.value),
    )
    assert found, str(caught.value)
    assert 0.7 <= float(found.group(1)) <= elapsed + 0.005


def test_a_caller_that_hangs_up_frees_its_handler_and_its_request_is_dropped() -> None:
    """Four callers send a request to a server of four handlers and hang up: their
    handlers are free again at once, no topology is handed their requests, and the
    result of one a topology had already taken is discarded."""
    limits = DRPCLimits(handlers=4, invocations_handlers=2, backlog=1)
    with DRPCServer(timeout_secs=60.0, limits=limits) as server:
        pool = server._listeners["client"].pool
        assert pool is not None
        callers = [connect(server.port) for _ in range(4)]
        with closing_all(callers):
            for n, caller in enumerate(callers):
                caller.sendall(request_head("POST", "/drpc/f", 1) + str(n).encode())
            wait_until(lambda: server.broker.pending_count("f") == 4, timeout=30.0)
            assert pool.busy == 4
        wait_until(lambda: server.broker.outstanding_count() == 0, timeout=10.0)
        wait_until(lambda: pool.busy == 0, timeout=10.0)

        invocations = DRPCInvocationsClient("127.0.0.1", server.invocations_port)
        client = DRPCClient("127.0.0.1", server.port, timeout_secs=10.0)
        with serving(invocations, "f", lambda request: f'[["{request.args}"]]') as fetched:
            assert client.execute("f", "served") == '[["served"]]'
        assert [request.args for request in fetched] == ["served"]

        # Taken by the topology, then its caller hangs up: the late result is discarded.
        with closing_all([connect(server.port)]) as (caller,):
            caller.sendall(request_head("POST", "/drpc/f", 5) + b"taken")
            wait_until(lambda: server.broker.pending_count("f") == 1, timeout=30.0)
            request = invocations.fetch_request("f")
            assert request is not None and request.args == "taken"
        wait_until(lambda: server.broker.outstanding_count() == 0, timeout=10.0)
        assert http(server.invocations_url, "POST", f"/result/{request.request_id}", b"[[1]]") == (
            200,
            b'{"accepted": false}',
        )
        wait_until(lambda: pool.busy == 0, timeout=10.0)
