"""Who the UI server answers: a token whenever it listens beyond loopback, the Host
check against DNS rebinding on every endpoint, and the Origin check on changes.

A server listening on a wildcard address is checked in this process through its ASGI
application (no socket is bound beyond loopback); the others are real servers on free
loopback ports."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from squall import BasicBolt, Fields, LocalCluster, SquallError, TopologyBuilder
from squall.cli.main import main
from squall.testing import FeederSpout
from squall.ui import UIServer
from squall.ui.app import make_app

EXAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "word_count.py")
GETS = [
    "/",
    "/topology/fed",
    "/api/v1/cluster/summary",
    "/api/v1/topology/summary",
    "/api/v1/topology/fed",
    "/api/v1/topology/fed/component/feed",
    "/api/v1/topology/fed/visualization",
    "/api/v1/openapi.json",
]
CHANGES = ["/api/v1/topology/fed/deactivate", "/api/v1/topology/fed/kill/0"]


class Sink(BasicBolt):
    def execute(self, tup: Any, collector: Any) -> None:
        pass


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    builder = TopologyBuilder()
    builder.set_spout("feed", FeederSpout(Fields("word")))
    builder.set_bolt("sink", Sink()).shuffle_grouping("feed")
    with LocalCluster() as running:
        running.submit_topology("fed", {}, builder.create_topology())
        yield running


def ask(app: Any, method: str, path: str, host: str, headers: dict[str, str]) -> httpx.Response:
    """One request to ``app`` in this process, with ``Host: host``."""

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as client:
            return await client.request(method, path, headers=headers)

    return asyncio.run(send())


def refused_host(host: str, answers: str) -> str:
    return (
        f"this server does not answer requests for host {host!r}; it answers {answers} "
        "(allowed_hosts, --ui-allowed-host add names)"
    )


def test_serving_beyond_loopback_needs_a_token_or_an_explicit_opt_out(
    cluster: LocalCluster,
) -> None:
    for host in ("0.0.0.0", "::", "192.0.2.7", "ui.example"):
        with pytest.raises(SquallError) as caught:
            UIServer(cluster, host=host, port=0)
        assert str(caught.value).startswith(
            f"the UI server would listen on {host}, beyond this machine, without a token"
        )
        assert "allow_unauthenticated_remote=True" in str(caught.value)
        UIServer(cluster, host=host, port=0, token="s3cret")  # built, not started
        UIServer(cluster, host=host, port=0, allow_unauthenticated_remote=True)
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1"):
        UIServer(cluster, host=host, port=0)
    with pytest.raises(ValueError, match="allowed_hosts: 'a:b' is not a host name or NAME:PORT"):
        UIServer(cluster, port=0, allowed_hosts=["a:b"])


def test_the_command_refuses_a_remote_ui_without_a_token() -> None:
    result = CliRunner().invoke(
        main,
        ["run", EXAMPLE, "--seconds", "1", "--ui", "--ui-host", "0.0.0.0"],
        env={"SQUALL_UI_TOKEN": ""},
    )
    assert result.exit_code == 1, result.output
    assert "the UI server would listen on 0.0.0.0, beyond this machine, without a token" in (
        result.output
    )
    assert "--ui-allow-unauthenticated-remote" in result.output


def test_a_wildcard_server_refuses_a_rebinding_name_even_with_a_token(
    cluster: LocalCluster,
) -> None:
    """Bound to 0.0.0.0: a page of evil.example whose name now resolves to this machine
    sends Host and Origin evil.example:PORT; every endpoint refuses it before any
    handler runs. The machine's own names and addresses are served."""
    app = make_app(cluster, "s3cret", "0.0.0.0", 8080)
    bearer = {"authorization": "Bearer s3cret"}
    evil = "evil.example:8080"
    answers = ", ".join(
        [
            *sorted(
                f"{name}:8080"
                for name in {
                    "127.0.0.1",
                    "localhost",
                    "[::1]",
                    socket.gethostname().lower(),
                    socket.getfqdn().lower(),
                }
            ),
            "any IP address of this machine with port 8080",
        ]
    )
    for path in GETS:
        answer = ask(app, "GET", path, evil, bearer)
        assert (answer.status_code, answer.json()) == (
            403,
            {"error": "Forbidden", "errorMessage": refused_host(evil, answers)},
        ), path
    for path in CHANGES:
        answer = ask(app, "POST", path, evil, {**bearer, "origin": f"http://{evil}"})
        assert answer.status_code == 403, path
    assert cluster.get_topology_info("fed").status == "ACTIVE"

    for host in ("127.0.0.1:8080", f"{socket.gethostname()}:8080", "192.0.2.7:8080"):
        assert ask(app, "GET", "/api/v1/topology/summary", host, bearer).status_code == 200
    assert ask(app, "GET", "/api/v1/topology/summary", "192.0.2.7:9", bearer).status_code == 403
    cross = ask(
        app,
        "POST",
        CHANGES[0],
        "192.0.2.7:8080",
        {**bearer, "origin": f"http://{evil}"},
    )
    assert (cross.status_code, cross.json()["errorMessage"]) == (
        403,
        f"requests from 'http://{evil}' may not change anything here",
    )
    assert cluster.get_topology_info("fed").status == "ACTIVE"


def test_allowed_hosts_name_the_server_for_a_real_deployment(cluster: LocalCluster) -> None:
    """A server behind the name ui.example (directly, or through a reverse proxy that
    forwards Host without a port) and proxy.example:443."""
    app = make_app(cluster, "s3cret", "0.0.0.0", 8080, ["ui.example", "proxy.example:443"])
    bearer = {"authorization": "Bearer s3cret"}
    for host in ("ui.example:8080", "ui.example", "UI.example:8080", "proxy.example:443"):
        assert ask(app, "GET", "/api/v1/topology/summary", host, bearer).status_code == 200, host
    for host in ("ui.example:9", "proxy.example", "proxy.example:8080", "evil.example:8080"):
        assert ask(app, "GET", "/api/v1/topology/summary", host, bearer).status_code == 403, host
    proxied = {**bearer, "origin": "https://proxy.example:443"}
    assert ask(app, "POST", CHANGES[0], "proxy.example:443", proxied).status_code == 200
    assert cluster.get_topology_info("fed").status == "INACTIVE"
    malformed = ask(
        app, "GET", "/api/v1/topology/summary", "ui.example", {**bearer, "host": "ui.example:x"}
    )
    assert (malformed.status_code, malformed.json()["errorMessage"]) == (
        400,
        "the Host header 'ui.example:x' is missing or malformed",
    )
    anything = make_app(cluster, "s3cret", "0.0.0.0", 8080, ["*"])
    assert ask(anything, "GET", "/api/v1/topology/summary", "any.example", bearer).status_code == (
        200
    )


def test_a_loopback_server_refuses_rebinding_names_on_every_endpoint(
    cluster: LocalCluster,
) -> None:
    with (
        UIServer(cluster, port=0, allowed_hosts=["ui.example"]) as ui,
        httpx.Client(base_url=ui.url, timeout=10.0) as client,
    ):
        evil = f"evil.example:{ui.port}"
        for path in GETS:
            assert client.get(path, headers={"host": evil}).status_code == 403, path
        for path in CHANGES:
            answer = client.post(path, headers={"host": evil, "origin": f"http://{evil}"})
            assert answer.status_code == 403, path
        assert cluster.get_topology_info("fed").status == "ACTIVE"
        named = client.get("/api/v1/topology/summary", headers={"host": f"ui.example:{ui.port}"})
        assert named.status_code == 200
        for path in GETS:
            assert client.get(path).status_code == 200, path
