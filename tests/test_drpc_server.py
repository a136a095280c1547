"""DRPC across processes: DRPCServer over HTTP, DRPCClient, DRPCInvocationsClient and
the ``squall drpc`` command."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from squall.cli.drpc import serve_drpc
from squall.cli.main import main
from squall.drpc import (
    DRPCClient,
    DRPCError,
    DRPCErrorReason,
    DRPCExecutionError,
    DRPCInvocationsClient,
    DRPCServer,
    invocations_for,
    return_result,
)
from tests.helpers import wait_until
from tests.test_drpc import in_thread, serving

ROOT = Path(__file__).resolve().parent.parent
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def closed_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def http(
    server: DRPCServer, method: str, path: str, body: bytes | None = None
) -> tuple[int, bytes]:
    """One raw HTTP call to ``server``: (status, body)."""
    request = urllib.request.Request(server.url + path, data=body, method=method)
    try:
        with NO_PROXY.open(request, timeout=5.0) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read()


@pytest.fixture
def server() -> Iterator[DRPCServer]:
    with DRPCServer(timeout_secs=5.0) as running:
        yield running


def test_round_trip_through_the_server(server: DRPCServer) -> None:
    invocations = DRPCInvocationsClient("127.0.0.1", server.port)
    client = DRPCClient("127.0.0.1", server.port, timeout_secs=5.0)

    def answer(request: Any) -> str:
        return json.dumps([[request.args.upper(), len(request.args)]])

    with serving(invocations, "shout", answer) as fetched:
        assert client.execute("shout", "héllo wörld") == '[["H\\u00c9LLO W\\u00d6RLD", 11]]'
        assert client.execute("shout", "") == '[["", 0]]'
        assert client.execute("shout", "a/b?c=d&e") == '[["A/B?C=D&E", 9]]'

    request = fetched[0]
    assert (request.function, request.args) == ("shout", "héllo wörld")
    assert request.return_info == {
        "kind": "http",
        "host": "127.0.0.1",
        "port": server.port,
        "request_id": request.request_id,
    }
    assert server.broker.outstanding_count() == 0


def test_results_return_through_return_info(server: DRPCServer) -> None:
    client = DRPCClient("127.0.0.1", server.port, timeout_secs=5.0)
    thread, outcome = in_thread(lambda: client.execute("f", "x"))
    wait_until(lambda: server.broker.pending_count("f") == 1)
    request = DRPCInvocationsClient("127.0.0.1", server.port).fetch_request("f")
    assert request is not None
    assert isinstance(invocations_for(request.return_info), DRPCInvocationsClient)
    return_result(request.return_info, "[[42]]")
    thread.join(5.0)
    assert outcome == {"value": "[[42]]"}


def test_failure_reaches_the_client_with_the_message(server: DRPCServer) -> None:
    invocations = DRPCInvocationsClient("127.0.0.1", server.port)
    client = DRPCClient("127.0.0.1", server.port, timeout_secs=5.0)
    with (
        serving(invocations, "parse", lambda request: ValueError("unknown word 'zzz'")),
        pytest.raises(DRPCExecutionError) as caught,
    ):
        client.execute("parse", "zzz")

    error = caught.value
    assert error.reason is DRPCErrorReason.FAILED
    assert error.request_id is not None
    assert error.server == f"127.0.0.1:{server.port}"
    assert str(error) == (
        f"DRPC request {error.request_id} for function 'parse' failed: unknown word 'zzz' "
        f"(DRPC server 127.0.0.1:{server.port})"
    )


def test_server_timeout_is_reported_as_a_timeout() -> None:
    with DRPCServer(timeout_secs=0.2) as server:
        client = DRPCClient("127.0.0.1", server.port, timeout_secs=30.0)
        start = time.monotonic()
        with pytest.raises(DRPCExecutionError) as caught:
            client.execute("nobody", "a")
        assert time.monotonic() - start < 2.0
        assert caught.value.reason is DRPCErrorReason.TIMEOUT
        assert re.search(r"timed out after 0\.2 s .*never fetched \(DRPC server", str(caught.value))
        status, body = http(server, "POST", "/drpc/nobody", b"a")
        assert status == 504 and json.loads(body)["reason"] == "timeout"


def test_client_timeout_shortens_the_server_timeout(server: DRPCServer) -> None:
    client = DRPCClient("127.0.0.1", server.port, timeout_secs=0.2)
    start = time.monotonic()
    with pytest.raises(DRPCExecutionError) as caught:
        client.execute("nobody", "a")
    assert time.monotonic() - start < 2.0
    assert caught.value.reason is DRPCErrorReason.TIMEOUT
    assert server.broker.outstanding_count() == 0


def test_concurrent_clients_each_get_their_own_result(server: DRPCServer) -> None:
    invocations = DRPCInvocationsClient("127.0.0.1", server.port)
    client = DRPCClient("127.0.0.1", server.port, timeout_secs=5.0)
    with serving(invocations, "double", lambda request: f"[[{int(request.args) * 2}]]"):
        calls = [in_thread(lambda n=n: client.execute("double", str(n))) for n in range(16)]
        for thread, _ in calls:
            thread.join(5.0)
    assert [outcome.get("value") for _, outcome in calls] == [f"[[{2 * n}]]" for n in range(16)]


def test_stopping_the_server_fails_waiting_clients() -> None:
    server = DRPCServer(timeout_secs=5.0).start()
    client = DRPCClient("127.0.0.1", server.port, timeout_secs=5.0)
    thread, outcome = in_thread(lambda: client.execute("f", "a"))
    wait_until(lambda: server.broker.pending_count("f") == 1)
    server.stop()
    thread.join(5.0)
    error = outcome["error"]
    assert isinstance(error, DRPCExecutionError)
    assert error.reason is DRPCErrorReason.SHUTDOWN
    assert not any(t.name.startswith("squall-drpc") for t in threading.enumerate())


def test_unreachable_server() -> None:
    port = closed_port()
    with pytest.raises(DRPCExecutionError) as caught:
        DRPCClient("127.0.0.1", port, timeout_secs=1.0).execute("f", "a")
    error = caught.value
    assert error.reason is DRPCErrorReason.UNREACHABLE
    assert error.request_id is None
    assert f"DRPC server 127.0.0.1:{port} is unreachable" in str(error)

    invocations = DRPCInvocationsClient("127.0.0.1", port, timeout_secs=1.0)
    for call in (
        lambda: invocations.fetch_request("f"),
        lambda: invocations.result("0", "[]"),
        lambda: invocations.fail_request("0", "no"),
    ):
        with pytest.raises(DRPCError, match=f"DRPC server 127.0.0.1:{port} is unreachable"):
            call()


def test_http_protocol(server: DRPCServer) -> None:
    assert http(server, "GET", "/fetch/f") == (204, b"")

    thread, outcome = in_thread(lambda: http(server, "POST", "/drpc/f", "ä b".encode()))
    wait_until(lambda: server.broker.pending_count("f") == 1)
    status, body = http(server, "GET", "/fetch/f")
    assert status == 200
    fetched = json.loads(body)
    assert set(fetched) == {"request_id", "function", "args", "return_info"}
    assert (fetched["function"], fetched["args"]) == ("f", "ä b")
    request_id = fetched["request_id"]
    assert fetched["return_info"]["request_id"] == request_id
    result = http(server, "POST", f"/result/{request_id}", b"[[1]]")
    assert result == (200, b'{"accepted": true}')
    thread.join(5.0)
    assert outcome["value"] == (200, b"[[1]]")
    assert http(server, "POST", f"/result/{request_id}", b"[[2]]") == (
        200,
        b'{"accepted": false}',
    )

    thread, outcome = in_thread(lambda: http(server, "GET", "/drpc/g/x%2Fy%20z"))
    wait_until(lambda: server.broker.pending_count("g") == 1)
    request = server.broker.fetch_request("g")
    assert request is not None and request.args == "x/y z"
    message = json.dumps({"message": "bad input"}).encode()
    assert http(server, "POST", f"/fail/{request.request_id}", message)[0] == 200
    thread.join(5.0)
    status, body = outcome["value"]
    error = json.loads(body)
    assert status == 500
    assert (error["reason"], error["function"], error["request_id"]) == (
        "failed",
        "g",
        request.request_id,
    )
    assert error["error"].endswith("failed: bad input")

    assert http(server, "POST", "/fail/unknown", b"")[0] == 200
    assert http(server, "GET", "/nowhere/f")[0] == 404
    assert http(server, "GET", "/result/1")[0] == 405
    assert http(server, "POST", "/drpc/f?timeout=soon", b"")[0] == 400
    assert http(server, "POST", "/fail/1", b"not json")[0] == 400
    status, body = http(server, "POST", "/drpc/f?timeout=0.05", b"")
    assert status == 504 and "timed out after 0.05 s" in json.loads(body)["error"]


def test_server_lifecycle() -> None:
    server = DRPCServer()
    with pytest.raises(RuntimeError, match="not been started"):
        _ = server.port
    assert "not started" in repr(server)
    server.stop()  # nothing to stop
    with server:
        assert server.running and server.port > 0
        assert server.url == f"http://127.0.0.1:{server.port}"
        assert any(t.name == f"squall-drpc-server-{server.port}" for t in threading.enumerate())
        with pytest.raises(RuntimeError, match="only once"):
            server.start()
    assert not server.running and "stopped" in repr(server)
    server.stop()  # idempotent
    with pytest.raises(RuntimeError, match="only once"):
        server.start()
    with pytest.raises(ValueError):
        DRPCServer(timeout_secs=0)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "200"})


def test_drpc_command_help() -> None:
    result = invoke("drpc", "--help")
    assert result.exit_code == 0
    for text in ("--host", "--port", "--timeout", "Ctrl-C", "DRPCClient", "[default: 3772"):
        assert text in result.output
    assert "drpc" in invoke("--help").output


def test_drpc_command_reports_a_port_in_use() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke("drpc", "--port", str(port))
    assert result.exit_code == 1
    assert f"cannot serve DRPC on 127.0.0.1:{port}" in result.output


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_drpc_command_serves_until_interrupted(stop_signal: signal.Signals) -> None:
    command = [sys.executable, "-c", "from squall.cli.main import main; main()"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    process = subprocess.Popen(
        [*command, "drpc", "--port", "0", "--timeout", "5"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first_line = process.stdout.readline()
        found = re.search(
            r"listening on http://127\.0\.0\.1:(\d+) \(request timeout 5 s\)", first_line
        )
        assert found, first_line + (process.stderr.read() if process.stderr else "")
        port = int(found.group(1))
        invocations = DRPCInvocationsClient("127.0.0.1", port)
        with serving(invocations, "reverse", lambda request: json.dumps([[request.args[::-1]]])):
            assert DRPCClient("127.0.0.1", port, timeout_secs=5.0).execute("reverse", "abc") == (
                '[["cba"]]'
            )
        process.send_signal(stop_signal)
        output, errors = process.communicate(timeout=10.0)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, errors
    assert "DRPC server stopped" in output


def test_serve_drpc_runs_until_stopped() -> None:
    """The function behind ``squall drpc``, in process: serves, then stops on the event."""
    output = StringIO()
    stop = threading.Event()
    console = Console(file=output, width=200)
    thread, outcome = in_thread(lambda: serve_drpc("127.0.0.1", 0, 5.0, console, stop))
    wait_until(lambda: "listening on" in output.getvalue())
    found = re.search(r"http://127\.0\.0\.1:(\d+)", output.getvalue())
    assert found
    port = int(found.group(1))
    client = DRPCClient("127.0.0.1", port, timeout_secs=5.0)
    with serving(DRPCInvocationsClient("127.0.0.1", port), "id", lambda request: request.args):
        assert client.execute("id", "[[1]]") == "[[1]]"
    stop.set()
    thread.join(5.0)
    assert outcome == {"value": None}
    assert output.getvalue().rstrip().endswith("DRPC server stopped")
