"""The bounds of the UI server: connections (a cap, idle ones closed, no lasting harm
from running out of file descriptors), request bodies (413 before reading them) and
the read deadline (408). Real servers on free loopback ports, raw sockets."""

from __future__ import annotations

import json
import resource
import selectors
import socket
import subprocess
import sys
import time
from http import HTTPStatus
from pathlib import Path
from typing import Any

import httpx
import pytest

from squall import LocalCluster
from squall.ui import UILimits, UIServer
from tests.helpers import closing_all, wait_until


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30.0)


def head(method: str, path: str, port: int, *extra: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def read_answer(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    """Read an answer up to the end of the stream: (status, JSON body)."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:  # closed with bytes of ours unread: keep what came
        pass
    top, _, body = data.partition(b"\r\n\r\n")
    assert top, "the server closed the connection without an answer"
    return int(top.split(b" ", 2)[1]), json.loads(body)


def error(status: int, message: str) -> dict[str, str]:
    return {"error": HTTPStatus(status).phrase, "errorMessage": message}


def test_a_body_over_the_limit_is_refused_before_it_is_read() -> None:
    limit = UILimits().max_body_bytes
    with LocalCluster() as cluster, UIServer(cluster, port=0) as ui:
        path = "/api/v1/topology/nothing/rebalance/0"
        with closing_all([connect(ui.port)]) as (announced,):
            announced.sendall(head("POST", path, ui.port, f"Content-Length: {10**12}"))
            assert read_answer(announced) == (
                413,
                error(
                    413,
                    f"the body is too large: {10**12} bytes, over the {limit} bytes a "
                    "request may send",
                ),
            )
        # A chunked body is counted as it comes: refused once it goes over.
        with closing_all([connect(ui.port)]) as (chunked,):
            chunked.sendall(head("POST", path, ui.port, "Transfer-Encoding: chunked"))
            sent = 0
            with selectors.DefaultSelector() as selector:
                selector.register(chunked, selectors.EVENT_READ)
                while not selector.select(timeout=0.01):
                    assert sent < 16 * limit, "the server kept reading a body over its limit"
                    try:
                        chunked.sendall(b"400\r\n" + b"x" * 1024 + b"\r\n")
                    except (BrokenPipeError, ConnectionResetError):
                        break
                    sent += 1024
            assert read_answer(chunked) == (
                413,
                error(413, f"the body is too large: over the {limit} bytes a request may send"),
            )
        # Small bodies still reach the handlers.
        with httpx.Client(base_url=ui.url, timeout=10.0) as client:
            answer = client.post(path.lstrip("/"), json={"rebalanceOptions": {"numWorkers": 2}})
            assert answer.status_code == 404
            assert answer.json()["errorMessage"] == "no topology named 'nothing' is running"


def test_slow_requests_are_answered_408_at_the_read_deadline() -> None:
    limits = UILimits(read_timeout_secs=1.0)
    late = error(408, "the request did not arrive whole within 1 s")
    with LocalCluster() as cluster, UIServer(cluster, port=0, limits=limits) as ui:
        half_heads = [connect(ui.port) for _ in range(20)]
        slow_body = connect(ui.port)
        with closing_all([*half_heads, slow_body]):
            started = time.monotonic()
            for sock in half_heads:
                sock.sendall(head("GET", "/api/v1/cluster/summary", ui.port)[:-2])
            slow_body.sendall(
                head("POST", "/api/v1/topology/x/rebalance/0", ui.port, "Content-Length: 100")
                + b"x" * 10
            )
            for sock in [*half_heads, slow_body]:
                assert read_answer(sock) == (408, late)
            assert time.monotonic() - started >= 1.0
        with httpx.Client(base_url=ui.url, timeout=10.0) as client:
            assert client.get("api/v1/cluster/summary").status_code == 200


def test_limits_must_be_positive() -> None:
    with pytest.raises(
        ValueError, match="UI server limits: max_connections must be a positive integer, not 0"
    ):
        UILimits(max_connections=0)
    with pytest.raises(
        ValueError,
        match="UI server limits: read_timeout_secs must be a positive number of seconds, not -1",
    ):
        UILimits(read_timeout_secs=-1)


def test_idle_connections_are_closed_and_connections_are_capped() -> None:
    limits = UILimits(max_connections=4, idle_timeout_secs=3.0)
    busy = error(503, "the UI server has 4 connections open, as many as it keeps; try again later")
    with LocalCluster() as cluster, UIServer(cluster, port=0, limits=limits) as ui:
        idle = [connect(ui.port) for _ in range(4)]
        with closing_all(idle):
            wait_until(lambda: ui.open_connections() == 4, timeout=30.0)
            with closing_all([connect(ui.port)]) as (fifth,):
                fifth.sendall(head("GET", "/api/v1/cluster/summary", ui.port))
                assert read_answer(fifth) == (503, busy)
            for sock in idle:  # closed by the server after the idle timeout
                assert sock.recv(1) == b""
        wait_until(lambda: ui.open_connections() == 0, timeout=30.0)
        with httpx.Client(base_url=ui.url, timeout=10.0) as client:
            assert client.get("api/v1/cluster/summary").status_code == 200
            wait_until(lambda: ui.open_connections() == 1, timeout=30.0)
            # Kept alive between requests, closed once idle for the timeout.
            wait_until(lambda: ui.open_connections() == 0, timeout=30.0)


SERVE = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from squall import LocalCluster
from squall.ui import UIServer
from squall.ui import UILimits
limits = UILimits(max_connections=int(sys.argv[1])) if len(sys.argv) > 1 else None
with LocalCluster() as cluster, UIServer(cluster, port=0, limits=limits) as ui:
    print(ui.port, flush=True)
    sys.stdin.read()
"""


@pytest.mark.parametrize("max_connections", [None, 4096], ids=["capped", "uncapped"])
def test_the_server_outlives_more_idle_connections_than_it_has_file_descriptors(
    max_connections: int | None, tmp_path: Path
) -> None:
    """A server process limited to 1,024 file descriptors, 1,100 idle connections: it
    keeps answering while they stay open, and after they are gone; with a connection
    cap over the limit too, where it runs out of descriptors for a while."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1500:
        pytest.skip(f"this test opens 1,100 sockets; the file limit is {hard}")
    if soft != resource.RLIM_INFINITY and soft < 1500:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1500, hard))
    arguments = [] if max_connections is None else [str(max_connections)]
    with (tmp_path / "server.log").open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-c", SERVE, *arguments],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,  # running out of descriptors is logged at length
            text=True,
        )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}/api/v1/cluster/summary"

        def answers() -> bool:
            try:
                return httpx.get(url, timeout=2.0).status_code == 200
            except httpx.HTTPError:
                return False

        assert answers()
        idle = [connect(port) for _ in range(1100)]
        with closing_all(idle):
            wait_until(answers, timeout=60.0, interval=0.5)
        wait_until(answers, timeout=60.0, interval=0.5)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        assert server.wait(30.0) == 0
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
