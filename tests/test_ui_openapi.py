"""The REST API's OpenAPI description, validated against the running server with
schemathesis (its command line, ``st run``): every operation, with generated valid and
invalid parameters and bodies, answers as the description says (status codes, content
types, response schemas, no server error)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from squall import LocalCluster
from squall.ui import UIServer
from tests.test_ui_api import words_topology

SCHEMATHESIS = Path(sys.executable).with_name("st")


def test_the_server_answers_as_its_description_says(tmp_path: Path) -> None:
    with LocalCluster() as cluster, UIServer(cluster, port=0) as ui:
        cluster.submit_topology("words", {}, words_topology())
        described = httpx.get(f"{ui.url}api/v1/openapi.json", timeout=10.0).json()
        assert sorted(described["paths"]) == [
            "/api/v1/cluster/summary",
            "/api/v1/topology/summary",
            "/api/v1/topology/{name}",
            "/api/v1/topology/{name}/activate",
            "/api/v1/topology/{name}/component/{component}",
            "/api/v1/topology/{name}/component/{component}/series",
            "/api/v1/topology/{name}/deactivate",
            "/api/v1/topology/{name}/kill/{wait}",
            "/api/v1/topology/{name}/rebalance/{wait}",
            "/api/v1/topology/{name}/series",
            "/api/v1/topology/{name}/visualization",
        ]
        done = subprocess.run(
            [
                str(SCHEMATHESIS),
                "run",
                f"{ui.url}api/v1/openapi.json",
                "--checks",
                "all",
                "--max-examples",
                "15",
                "--seed",
                "1",
                "--no-color",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            env={**os.environ, "SCHEMATHESIS_HOOKS": ""},
        )
        assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
