"""DRPC across processes: DRPCServer over HTTP (its client and invocations ports and
their tokens), DRPCClient, DRPCInvocationsClient and the ``squall drpc`` command.
The server's bounds (handler pools, body budget, read deadline) are in
test_drpc_server_limits.py."""

from __future__ import annotations

import errno
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
    DRPCLimits,
    DRPCServer,
    LocalDRPC,
    invocations_clients_from_conf,
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
    base_url: str,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    """One raw HTTP call to ``base_url`` (a server's ``url`` or ``invocations_url``):
    (status, body)."""
    return http_full(base_url, method, path, body, headers)[:2]  # type: ignore[return-value]


def http_full(
    base_url: str,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes, Any]:
    """One raw HTTP call: (status, body, headers)."""
    request = urllib.request.Request(base_url + path, data=body, method=method)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with NO_PROXY.open(request, timeout=5.0) as response:
            return response.status, response.read(), response.headers
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read(), exc.headers


def drpc_threads() -> set[str]:
    """Names of the live threads of DRPC servers."""
    return {t.name for t in threading.enumerate() if t.name.startswith("squall-drpc")}


@pytest.fixture
def server() -> Iterator[DRPCServer]:
    with DRPCServer(timeout_secs=5.0) as running:
        yield running


def test_round_trip_through_the_server(server: DRPCServer) -> None:
    invocations = DRPCInvocationsClient("127.0.0.1", server.invocations_port)
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
        "port": server.invocations_port,
        "request_id": request.request_id,
    }
    assert server.broker.outstanding_count() == 0


def test_results_return_through_return_info(server: DRPCServer) -> None:
    client = DRPCClient("127.0.0.1", server.port, timeout_secs=5.0)
    thread, outcome = in_thread(lambda: client.execute("f", "x"))
    wait_until(lambda: server.broker.pending_count("f") == 1)
    request = DRPCInvocationsClient("127.0.0.1", server.invocations_port).fetch_request("f")
    assert request is not None
    assert isinstance(invocations_for(request.return_info), DRPCInvocationsClient)
    return_result(request.return_info, "[[42]]")
    thread.join(5.0)
    assert outcome == {"value": "[[42]]"}


def test_failure_reaches_the_client_with_the_message(server: DRPCServer) -> None:
    invocations = DRPCInvocationsClient("127.0.0.1", server.invocations_port)
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
        status, body = http(server.url, "POST", "/drpc/nobody", b"a")
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
    invocations = DRPCInvocationsClient("127.0.0.1", server.invocations_port)
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
    assert drpc_threads() == set()


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
    calls, invocations = server.url, server.invocations_url
    assert http(invocations, "GET", "/fetch/f") == (204, b"")

    thread, outcome = in_thread(lambda: http(calls, "POST", "/drpc/f", "ä b".encode()))
    wait_until(lambda: server.broker.pending_count("f") == 1)
    status, body = http(invocations, "GET", "/fetch/f")
    assert status == 200
    fetched = json.loads(body)
    assert set(fetched) == {"request_id", "function", "args", "return_info"}
    assert (fetched["function"], fetched["args"]) == ("f", "ä b")
    request_id = fetched["request_id"]
    assert fetched["return_info"]["request_id"] == request_id
    result = http(invocations, "POST", f"/result/{request_id}", b"[[1]]")
    assert result == (200, b'{"accepted": true}')
    thread.join(5.0)
    assert outcome["value"] == (200, b"[[1]]")
    assert http(invocations, "POST", f"/result/{request_id}", b"[[2]]") == (
        200,
        b'{"accepted": false}',
    )

    thread, outcome = in_thread(lambda: http(calls, "GET", "/drpc/g/x%2Fy%20z"))
    wait_until(lambda: server.broker.pending_count("g") == 1)
    request = server.broker.fetch_request("g")
    assert request is not None and request.args == "x/y z"
    message = json.dumps({"message": "bad input"}).encode()
    assert http(invocations, "POST", f"/fail/{request.request_id}", message)[0] == 200
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

    assert http(invocations, "POST", "/fail/unknown", b"")[0] == 200
    assert http(invocations, "GET", "/nowhere/f")[0] == 404
    assert http(invocations, "GET", "/result/1")[0] == 405
    assert http(calls, "POST", "/drpc/f?timeout=soon", b"")[0] == 400
    assert http(invocations, "POST", "/fail/1", b"not json")[0] == 400
    status, body = http(calls, "POST", "/drpc/f?timeout=0.05", b"")
    assert status == 504 and "timed out after 0.05 s" in json.loads(body)["error"]


def test_each_port_answers_404_to_the_other_ports_paths(server: DRPCServer) -> None:
    """Execute only on the client port; fetch, result and fail only on the invocations
    port (as Storm's drpc.port and drpc.invocations.port)."""
    hint = " (fetch, result and fail are served on the invocations port)"
    for method, path, body in [
        ("GET", "/fetch/f", None),
        ("POST", "/result/0123", b"[[1]]"),
        ("POST", "/fail/0123", b""),
    ]:
        status, answer = http(server.url, method, path, body)
        assert (status, json.loads(answer)) == (
            404,
            {"error": f"no such path on the client port: {path}{hint}"},
        )
    for method, path, body in [("POST", "/drpc/f", b"a"), ("GET", "/drpc/f/a", None)]:
        status, answer = http(server.invocations_url, method, path, body)
        assert (status, json.loads(answer)) == (
            404,
            {
                "error": f"no such path on the invocations port: {path} "
                "(execute is served on the client port)"
            },
        )
    assert http(server.url, "GET", "/nowhere")[0] == 404
    assert server.broker.outstanding_count() == 0

    client = DRPCInvocationsClient("127.0.0.1", server.port)  # the wrong port
    with pytest.raises(DRPCError) as caught:
        client.fetch_request("f")
    assert str(caught.value) == (
        f"DRPC server 127.0.0.1:{server.port} answered HTTP 404 when fetching a request for "
        f"'f': no such path on the client port: /fetch/f{hint}"
    )


CLIENT_TOKEN = "client-secret-1"
INVOCATIONS_TOKEN = "topology-secret-2"


@pytest.fixture
def guarded() -> Iterator[DRPCServer]:
    with DRPCServer(
        timeout_secs=5.0, client_token=CLIENT_TOKEN, invocations_token=INVOCATIONS_TOKEN
    ) as running:
        yield running


def unauthorized(port: str, problem: str) -> dict[str, str]:
    return {
        "error": f"unauthorized: the {port} port of this DRPC server requires "
        f"'Authorization: Bearer <token>' and {problem}",
        "reason": "unauthorized",
    }


BAD_CREDENTIALS = [
    ({}, "no token was sent"),
    ({"Authorization": "Bearer"}, "no token was sent"),
    ({"Authorization": f"Basic {CLIENT_TOKEN}"}, "no token was sent"),
    ({"Authorization": "Bearer wrong"}, "the token is wrong"),
    ({"Authorization": f"Bearer {CLIENT_TOKEN}x"}, "the token is wrong"),
]


def test_execute_without_the_client_token_gets_401(guarded: DRPCServer) -> None:
    for headers, problem in [
        *BAD_CREDENTIALS,
        ({"Authorization": f"Bearer {INVOCATIONS_TOKEN}"}, "the token is wrong"),
    ]:
        status, body, answer_headers = http_full(guarded.url, "POST", "/drpc/f", b"a", headers)
        assert (status, json.loads(body)) == (401, unauthorized("client", problem))
        assert answer_headers["WWW-Authenticate"] == 'Bearer realm="squall-drpc"'
        assert http(guarded.url, "GET", "/drpc/f/a", None, headers)[0] == 401
    assert guarded.broker.outstanding_count() == 0  # none reached the broker

    with pytest.raises(DRPCExecutionError) as caught:
        DRPCClient("127.0.0.1", guarded.port, timeout_secs=5.0).execute("f", "a")
    assert caught.value.reason is DRPCErrorReason.UNAUTHORIZED
    assert caught.value.request_id is None
    assert str(caught.value) == (
        "DRPC request for function 'f' was refused: "
        + unauthorized("client", "no token was sent")["error"]
        + f" (DRPC server 127.0.0.1:{guarded.port})"
    )
    assert guarded.broker.outstanding_count() == 0


def test_fetches_and_forged_results_without_the_invocations_token_get_401(
    guarded: DRPCServer,
) -> None:
    client = DRPCClient("127.0.0.1", guarded.port, timeout_secs=5.0, token=CLIENT_TOKEN)
    thread, outcome = in_thread(lambda: client.execute("f", "secret args"))
    wait_until(lambda: guarded.broker.pending_count("f") == 1)

    for headers, problem in [
        *BAD_CREDENTIALS,
        ({"Authorization": f"Bearer {CLIENT_TOKEN}"}, "the token is wrong"),
    ]:
        status, body = http(guarded.invocations_url, "GET", "/fetch/f", None, headers)
        assert (status, json.loads(body)) == (401, unauthorized("invocations", problem))
    assert guarded.broker.pending_count("f") == 1  # still not fetched

    topology = DRPCInvocationsClient("127.0.0.1", guarded.invocations_port, token=INVOCATIONS_TOKEN)
    request = topology.fetch_request("f")
    assert request is not None and request.args == "secret args"
    for headers, problem in BAD_CREDENTIALS:
        forged = http(
            guarded.invocations_url, "POST", f"/result/{request.request_id}", b"[[0]]", headers
        )
        assert (forged[0], json.loads(forged[1])) == (401, unauthorized("invocations", problem))
        failed = http(guarded.invocations_url, "POST", f"/fail/{request.request_id}", b"", headers)
        assert (failed[0], json.loads(failed[1])) == (401, unauthorized("invocations", problem))
    assert guarded.broker.outstanding_count() == 1  # the client still waits
    assert thread.is_alive()

    intruder = DRPCInvocationsClient("127.0.0.1", guarded.invocations_port, token="wrong")
    with pytest.raises(DRPCError) as caught:
        intruder.result(request.request_id, "[[0]]")
    assert str(caught.value) == (
        f"DRPC server 127.0.0.1:{guarded.invocations_port} answered HTTP 401 when returning "
        f"the result of {request.request_id}: "
        + unauthorized("invocations", "the token is wrong")["error"]
    )
    assert guarded.broker.outstanding_count() == 1

    topology.result(request.request_id, "[[42]]")
    thread.join(5.0)
    assert outcome == {"value": "[[42]]"}


def test_clients_from_the_configuration_send_the_invocations_token(guarded: DRPCServer) -> None:
    conf = {
        "drpc.servers": ["127.0.0.1"],
        "drpc.invocations.port": guarded.invocations_port,
        "drpc.invocations.authorization.token": INVOCATIONS_TOKEN,
    }
    (configured,) = invocations_clients_from_conf(conf)
    client = DRPCClient("127.0.0.1", guarded.port, timeout_secs=5.0, token=CLIENT_TOKEN)
    thread, outcome = in_thread(lambda: client.execute("f", "x"))
    wait_until(lambda: guarded.broker.pending_count("f") == 1)
    request = configured.fetch_request("f")
    assert request is not None
    with pytest.raises(DRPCError, match="HTTP 401"):
        return_result(request.return_info, "[[1]]")  # no configuration: no token
    return_result(request.return_info, "[[1]]", conf)
    thread.join(5.0)
    assert outcome == {"value": "[[1]]"}


def test_invalid_server_and_client_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="DRPCServer client_token: a DRPC token must be"):
        DRPCServer(client_token="two words")
    with pytest.raises(ValueError, match="DRPCServer invocations_token: a DRPC token must be"):
        DRPCServer(invocations_token="")
    with pytest.raises(ValueError, match="DRPCServer: invocations_port must be an integer"):
        DRPCServer(invocations_port=70000)
    with pytest.raises(ValueError, match="DRPCClient token: a DRPC token must be"):
        DRPCClient("127.0.0.1", token="line\nbreak")
    with pytest.raises(ValueError, match="DRPC server limits: handlers must be a positive"):
        DRPCLimits(handlers=0)
    with pytest.raises(ValueError, match="max_body_bytes \\(10\\) cannot be over body_budget"):
        DRPCLimits(max_body_bytes=10, body_budget_bytes=5)
    with pytest.raises(ValueError, match=r"configuration key 'drpc\.queue\.size' must be a pos"):
        DRPCServer.from_conf({"drpc.queue.size": -1})


def test_a_server_from_the_configuration() -> None:
    conf = {
        "drpc.port": 0,
        "drpc.invocations.port": 0,
        "drpc.request.timeout.secs": 7,
        "drpc.authorization.token": CLIENT_TOKEN,
        "drpc.invocations.authorization.token": INVOCATIONS_TOKEN,
        "drpc.worker.threads": 3,
        "drpc.request.read.timeout.secs": 4.5,
    }
    with DRPCServer.from_conf(conf) as server:
        assert server.timeout_secs == 7.0
        assert server.limits == DRPCLimits(handlers=3, read_timeout_secs=4.5)
        assert http(server.url, "GET", "/drpc/f/a")[0] == 401
        assert http(server.invocations_url, "GET", "/fetch/f")[0] == 401
        headers = {"Authorization": f"Bearer {INVOCATIONS_TOKEN}"}
        assert http(server.invocations_url, "GET", "/fetch/f", None, headers) == (204, b"")


def test_an_invocations_only_bridge_leaves_its_broker_to_its_owner() -> None:
    """The Spark engine's loopback bridge: no client port, a token, and stopping it does
    not shut down the LocalDRPC it serves."""
    with LocalDRPC(timeout_secs=5.0) as local:
        bridge = DRPCServer(port=None, broker=local.broker, invocations_token="t0k").start()
        with pytest.raises(RuntimeError, match="serves no client port"):
            _ = bridge.port
        assert drpc_threads() == {f"squall-drpc-invocations-{bridge.invocations_port}"}
        assert http(bridge.invocations_url, "GET", "/fetch/f") == (
            401,
            json.dumps(unauthorized("invocations", "no token was sent")).encode(),
        )
        invocations = DRPCInvocationsClient("127.0.0.1", bridge.invocations_port, token="t0k")
        with serving(invocations, "f", lambda request: f"[[{request.args!r}]]"):
            assert local.execute("f", "a") == "[['a']]"
        bridge.stop()
        assert drpc_threads() == set()
        assert not local.broker.is_shut_down
        thread, outcome = in_thread(lambda: local.execute("f", "b"))
        wait_until(lambda: local.broker.pending_count("f") == 1)
        request = local.fetch_request("f")
        assert request is not None
        local.result(request.request_id, "[[2]]")
        thread.join(5.0)
        assert outcome == {"value": "[[2]]"}


@pytest.mark.spark  # imports the Spark engine (pyspark)
def test_the_spark_bridge_requires_a_random_token(tmp_path: Path) -> None:
    """SparkCluster puts a loopback invocations server with a fresh random token in
    front of a DRPC stream's LocalDRPC, and hands the token to the reader's options."""
    from squall.spark.cluster import SparkCluster
    from squall.spark.plan.batch import SourcePlan

    cluster = SparkCluster.__new__(SparkCluster)  # no session: only the bridge is used
    bridges: list[DRPCServer] = []
    with LocalDRPC(timeout_secs=5.0) as local:
        source = SourcePlan(
            "drpc", "drpc", None, ("args",), [], "$drpc", drpc_function="f", drpc=local
        )
        host, port, token = cluster._drpc_address(source, {}, bridges)
        other_host, other_port, other_token = cluster._drpc_address(source, {}, bridges)
        try:
            assert (host, other_host) == ("127.0.0.1", "127.0.0.1")
            assert token is not None and other_token is not None
            assert len(token) >= 40 and token != other_token
            assert [bridge.invocations_port for bridge in bridges] == [port, other_port]
            base = f"http://127.0.0.1:{port}"
            assert http(base, "GET", "/fetch/f")[0] == 401
            thread, outcome = in_thread(lambda: local.execute("f", "x"))
            wait_until(lambda: local.broker.pending_count("f") == 1)
            assert http(base, "GET", "/fetch/f", None, {"Authorization": "Bearer x"})[0] == 401
            assert local.broker.pending_count("f") == 1
            fetched = DRPCInvocationsClient(host, port, token=token).fetch_request("f")
            assert fetched is not None and fetched.args == "x"
            local.result(fetched.request_id, "[[1]]")
            thread.join(5.0)
            assert outcome == {"value": "[[1]]"}
        finally:
            for bridge in bridges:
                bridge.stop()
        assert not local.broker.is_shut_down

    conf = {
        "drpc.servers": ["drpc-host"],
        "drpc.port": 1,
        "drpc.invocations.port": 2,
        "drpc.invocations.authorization.token": "conf-token",
    }
    configured = SourcePlan("drpc", "drpc", None, ("args",), [], "f", None)
    assert cluster._drpc_address(configured, conf, bridges) == ("drpc-host", 2, "conf-token")
    assert cluster._drpc_address(configured, {}, bridges) == ("127.0.0.1", 3773, None)


def test_server_lifecycle() -> None:
    server = DRPCServer()
    with pytest.raises(RuntimeError, match="not been started"):
        _ = server.port
    assert "not started" in repr(server)
    server.stop()  # nothing to stop
    with server:
        assert server.running and server.port > 0 and server.invocations_port > 0
        assert server.port != server.invocations_port
        assert server.url == f"http://127.0.0.1:{server.port}"
        assert server.invocations_url == f"http://127.0.0.1:{server.invocations_port}"
        assert drpc_threads() == {
            f"squall-drpc-server-{server.port}",
            f"squall-drpc-invocations-{server.invocations_port}",
        }
        assert repr(server) == (
            f"DRPCServer(127.0.0.1:{server.port}/{server.invocations_port}, running)"
        )
        with pytest.raises(RuntimeError, match="only once"):
            server.start()
    assert not server.running and "stopped" in repr(server)
    server.stop()  # idempotent
    with pytest.raises(RuntimeError, match="only once"):
        server.start()
    with pytest.raises(ValueError):
        DRPCServer(timeout_secs=0)


def test_a_port_in_use_is_named_and_nothing_stays_bound() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        free = closed_port()
        server = DRPCServer(port=free, invocations_port=port)
        with pytest.raises(OSError, match=f"the invocations port 127.0.0.1:{port}"):
            server.start()
        with socket.socket() as probe:  # the client port was released again
            probe.bind(("127.0.0.1", free))


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "200", **(env or {})})


def test_drpc_command_help() -> None:
    result = invoke("drpc", "--help")
    assert result.exit_code == 0
    for text in (
        "--host",
        "--port",
        "--invocations-port",
        "--timeout",
        "--client-token-file",
        "--invocations-token-file",
        "SQUALL_DRPC_CLIENT_TOKEN",
        "SQUALL_DRPC_INVOCATIONS_TOKEN",
        "--handlers",
        "--invocations-handlers",
        "--backlog",
        "--max-body",
        "--body-budget",
        "--read-timeout",
        "Ctrl-C",
        "DRPCClient",
        "[default: 3772",
        "[default: 3773",
    ):
        assert text in result.output
    assert "drpc" in invoke("--help").output


def test_drpc_command_reports_a_port_in_use() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke("drpc", "--port", str(port), "--invocations-port", "0")
    assert result.exit_code == 1
    found = re.fullmatch(r"Error: cannot serve DRPC: \[Errno \d+\] (.+)\n", result.output)
    assert found, result.output
    assert found.group(1) == f"{os.strerror(errno.EADDRINUSE)} (the client port 127.0.0.1:{port})"


def test_drpc_command_refuses_bad_tokens_and_limits(tmp_path: Path) -> None:
    empty = tmp_path / "empty.token"
    empty.write_text("\n")
    result = invoke("drpc", "--client-token-file", str(empty))
    assert (result.exit_code, result.output.strip()) == (
        1,
        f"Error: the token file {empty} is empty",
    )
    result = invoke("drpc", "--port", "0", env={"SQUALL_DRPC_INVOCATIONS_TOKEN": "a b"})
    assert (result.exit_code, result.output.strip()) == (
        1,
        "Error: DRPCServer invocations_token: a DRPC token must be a non-empty string of "
        "visible ASCII characters (no spaces or control characters)",
    )
    result = invoke("drpc", "--max-body", "10", "--body-budget", "5")
    assert result.exit_code == 1
    assert "max_body_bytes (10) cannot be over body_budget_bytes (5)" in result.output


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_drpc_command_serves_until_interrupted(stop_signal: signal.Signals, tmp_path: Path) -> None:
    token_file = tmp_path / "client.token"
    token_file.write_text("  from-a-file\n")
    command = [sys.executable, "-c", "from squall.cli.main import main; main()"]
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "200",
        "SQUALL_DRPC_INVOCATIONS_TOKEN": "from-the-environment",
    }
    process = subprocess.Popen(
        [
            *command,
            "drpc",
            "--port",
            "0",
            "--invocations-port",
            "0",
            "--timeout",
            "5",
            "--client-token-file",
            str(token_file),
        ],
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
            r"listening on http://127\.0\.0\.1:(\d+) \(request timeout 5 s\), "
            r"invocations on http://127\.0\.0\.1:(\d+);",
            first_line,
        )
        assert found, first_line + (process.stderr.read() if process.stderr else "")
        port, invocations_port = int(found.group(1)), int(found.group(2))
        base = f"http://127.0.0.1:{invocations_port}"
        assert http(base, "GET", "/fetch/reverse")[0] == 401
        invocations = DRPCInvocationsClient(
            "127.0.0.1", invocations_port, token="from-the-environment"
        )
        client = DRPCClient("127.0.0.1", port, timeout_secs=5.0, token="from-a-file")
        with serving(invocations, "reverse", lambda request: json.dumps([[request.args[::-1]]])):
            assert client.execute("reverse", "abc") == '[["cba"]]'
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
    server = DRPCServer(timeout_secs=5.0)
    thread, outcome = in_thread(lambda: serve_drpc(server, console, stop))
    wait_until(lambda: "listening on" in output.getvalue())
    assert output.getvalue().splitlines()[0] == (
        f"DRPC server listening on {server.url} (request timeout 5 s), invocations on "
        f"{server.invocations_url}; press Ctrl-C to stop"
    )
    client = DRPCClient("127.0.0.1", server.port, timeout_secs=5.0)
    invocations = DRPCInvocationsClient("127.0.0.1", server.invocations_port)
    with serving(invocations, "id", lambda request: request.args):
        assert client.execute("id", "[[1]]") == "[[1]]"
    stop.set()
    thread.join(5.0)
    assert outcome == {"value": None}
    assert output.getvalue().rstrip().endswith("DRPC server stopped")
