"""The UI server's REST API against a running LocalCluster: exact JSON, errors, control
and the guard."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from squall import BasicBolt, Fields, LocalCluster, SquallError, TopologyBuilder
from squall.testing import FeederSpout, FixedTupleSpout
from squall.ui import UIServer
from tests.helpers import wait_until

WORDS = ["apple", "boom", "cherry", "apple", "date", "boom"]
LATENCY = re.compile(r"^\d+\.\d{3}$")


class Upper(BasicBolt):
    outputs = ["word"]

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[0] == "boom":
            raise ValueError("boom is not a word")
        collector.emit([tup[0].upper()])


class Sink(BasicBolt):
    def execute(self, tup: Any, collector: Any) -> None:
        pass


def words_topology() -> Any:
    builder = TopologyBuilder()
    builder.set_spout("words", FixedTupleSpout([[w] for w in WORDS], Fields("word")))
    builder.set_bolt("upper", Upper(), 2).shuffle_grouping("words")
    builder.set_bolt("sink", Sink(), 1).set_num_tasks(2).fields_grouping("upper", Fields("word"))
    return builder.create_topology()


@pytest.fixture
def served() -> Iterator[tuple[LocalCluster, UIServer, httpx.Client]]:
    with LocalCluster() as cluster, UIServer(cluster, port=0) as ui:
        cluster.submit_topology("words", {}, words_topology())
        wait_until(lambda: cluster.get_topology_info("words").components["words"].failed == 2)
        cluster.wait_idle("words")
        with httpx.Client(base_url=ui.url, timeout=10.0) as client:
            yield cluster, ui, client


def timed(document: dict[str, Any], *names: str) -> dict[str, Any]:
    """``document`` without the fields that depend on timing (checked for form)."""
    rest = dict(document)
    for name in names:
        value = rest.pop(name)
        if name.endswith(("Latency", "capacity")):
            assert LATENCY.match(value), (name, value)
        elif name.endswith("LatencyPercentiles"):
            assert list(value) == ["50", "90", "99", "99.9", "99.99"], (name, value)
            assert all(LATENCY.match(ms) for ms in value.values()), (name, value)
        elif name == "uptime":
            assert re.match(r"^(\d+[dhm] )*\d+s$", value), value
        elif name == "resources":
            assert value == "this process, 2 cores" or value.startswith("this process"), value
        else:
            assert isinstance(value, int | float), (name, value)
    return rest


def test_the_cluster_and_topology_summaries(served: Any) -> None:
    _, _, client = served
    summary = client.get("api/v1/cluster/summary")
    assert summary.status_code == 200
    assert timed(summary.json(), "uptime", "uptimeSeconds", "resources") == {
        "squallVersion": "0.1.0",
        "engine": "local",
        "topologies": 1,
        "workersTotal": 1,
        "executorsTotal": 5,  # words 1, upper 2, sink 1, __acker 1
        "tasksTotal": 6,
    }
    topologies = client.get("api/v1/topology/summary").json()["topologies"]
    assert [timed(t, "uptime", "uptimeSeconds") for t in topologies] == [
        {
            "id": "words",
            "name": "words",
            "status": "ACTIVE",
            "tasksTotal": 6,
            "workersTotal": 1,
            "executorsTotal": 5,
        }
    ]


def test_the_topology_page_over_a_window(served: Any) -> None:
    cluster, _, client = served
    upper_tasks = cluster.get_topology_info("words").components["upper"].tasks
    page = client.get("api/v1/topology/words", params={"window": "600"}).json()
    assert (page["window"], page["windowHint"], page["msgTimeout"]) == ("600", "10m 0s", 30)
    assert page["status"] == "ACTIVE" and page["spark"] is None
    stats = [timed(s, "completeLatency") for s in page["topologyStats"]]
    figures = {"emitted": 6 + 4, "transferred": 6 + 4, "acked": 4, "failed": 2}
    assert stats == [
        {"window": "600", "windowPretty": "10m 0s", **figures},
        {"window": "10800", "windowPretty": "3h 0m 0s", **figures},
        {"window": "86400", "windowPretty": "1d 0h 0m 0s", **figures},
        {"window": ":all-time", "windowPretty": "All time", **figures},
    ]
    (spout,) = page["spouts"]
    assert timed(spout, "completeLatency", "completeLatencyPercentiles") == {
        "spoutId": "words",
        "executors": 1,
        "tasks": 1,
        "emitted": 6,
        "transferred": 6,
        "acked": 4,
        "failed": 2,
        "lastError": "",
        "errorTime": None,
        "errorLapsedSecs": None,
        "errorTask": None,
    }
    bolts = {bolt["boltId"]: bolt for bolt in page["bolts"]}
    upper, sink = bolts["upper"], bolts["sink"]
    upper_error = {k: upper.pop(k) for k in ("lastError", "errorTime", "errorLapsedSecs")}
    assert upper_error["lastError"] == "ValueError: boom is not a word"
    assert upper_error["errorLapsedSecs"] >= 0
    assert upper.pop("errorTask") in upper_tasks
    timing = (
        "capacity",
        "executeLatency",
        "processLatency",
        "executeLatencyPercentiles",
        "processLatencyPercentiles",
    )
    assert timed(upper, *timing) == {
        "boltId": "upper",
        "executors": 2,
        "tasks": 2,
        "emitted": 4,
        "transferred": 4,
        "executed": 6,
        "acked": 4,
        "failed": 2,
    }
    assert timed(sink, *timing) == {
        "boltId": "sink",
        "executors": 1,
        "tasks": 2,
        "emitted": 0,
        "transferred": 0,
        "executed": 4,
        "acked": 4,
        "failed": 0,
        "lastError": "",
        "errorTime": None,
        "errorLapsedSecs": None,
        "errorTask": None,
    }
    assert page["configuration"]["topology.name"] == "words"
    assert "__acker" not in {b["boltId"] for b in page["bolts"]}
    system = client.get("api/v1/topology/words", params={"sys": "true"}).json()
    assert sorted(b["boltId"] for b in system["bolts"]) == ["__acker", "sink", "upper"]


def test_the_component_page(served: Any) -> None:
    cluster, _, client = served
    tasks = cluster.get_topology_info("words").components["upper"].tasks
    page = client.get("api/v1/topology/words/component/upper").json()
    errors = page.pop("componentErrors")
    assert [e["error"] for e in errors] == ["ValueError: boom is not a word"] * 2
    assert all("raise ValueError" in e["traceback"] for e in errors)
    assert all(e["errorTask"] in tasks and e["errorTime"] > 10**12 for e in errors)
    stats = page.pop("boltStats")
    percentile_names = [f"{kind}LatencyPercentiles" for kind in ("complete", "execute", "process")]
    assert [timed(s, "executeLatency", "processLatency", *percentile_names) for s in stats] == [
        {
            "window": window,
            "windowPretty": pretty,
            "emitted": 4,
            "transferred": 4,
            "executed": 6,
            "acked": 4,
            "failed": 2,
            "completeLatency": "0.000",
        }
        for window, pretty in [
            ("600", "10m 0s"),
            ("10800", "3h 0m 0s"),
            ("86400", "1d 0h 0m 0s"),
            (":all-time", "All time"),
        ]
    ]
    executors = page.pop("executorStats")
    assert [e["id"] for e in executors] == [f"[{task}-{task}]" for task in tasks]
    assert sum(e["executed"] for e in executors) == 6
    assert sum(e["emitted"] for e in executors) == 4
    assert page == {
        "id": "upper",
        "name": "words",
        "topologyId": "words",
        "topologyStatus": "ACTIVE",
        "componentType": "bolt",
        "window": ":all-time",
        "windowHint": "All time",
        "executors": 2,
        "tasks": 2,
        "spoutSummary": None,
        "outputStats": [{"stream": "default", "emitted": 4, "transferred": 4}],
        "inputs": [{"component": "words", "stream": "default", "grouping": "shuffle"}],
        "custom": {},
    }


def test_latency_percentiles_are_those_of_the_cluster(served: Any) -> None:
    cluster, _, client = served
    components = cluster.get_topology_info("words").components
    page = client.get("api/v1/topology/words").json()
    (spout,) = page["spouts"]
    expected = components["words"].complete_latency_percentiles
    assert spout["completeLatencyPercentiles"] == {
        f"{p:g}": f"{ms:.3f}" for p, ms in expected.items()
    }
    assert components["words"].latency_histograms["complete"].count == 4
    (upper,) = [bolt for bolt in page["bolts"] if bolt["boltId"] == "upper"]
    expected = components["upper"].execute_latency_percentiles
    assert upper["executeLatencyPercentiles"] == {
        f"{p:g}": f"{ms:.3f}" for p, ms in expected.items()
    }
    assert components["upper"].latency_histograms["execute"].count == 6


def test_the_visualization(served: Any) -> None:
    _, _, client = served
    graph = client.get("api/v1/topology/words/visualization").json()
    for node in graph.values():
        assert isinstance(node.pop("capacity"), float) and isinstance(node.pop("latency"), float)
    assert graph == {
        "words": {
            "type": "spout",
            "transferred": 6,
            "link": "/topology/words/component/words",
            "queued": 0,
            "backpressure": False,
            "inputs": [],
        },
        "upper": {
            "type": "bolt",
            "transferred": 4,
            "link": "/topology/words/component/upper",
            "queued": 0,
            "backpressure": False,
            "inputs": [{"component": "words", "stream": "default", "grouping": "shuffle"}],
        },
        "sink": {
            "type": "bolt",
            "transferred": 0,
            "link": "/topology/words/component/sink",
            "queued": 0,
            "backpressure": False,
            "inputs": [{"component": "upper", "stream": "default", "grouping": "fields(word)"}],
        },
    }


def test_bad_requests_get_clear_4xx_answers(served: Any) -> None:
    _, _, client = served
    answers = {
        "api/v1/topology/nope": (404, "no topology named 'nope' is running"),
        "api/v1/topology/words/component/nope": (
            404,
            "topology 'words' has no component 'nope'",
        ),
        "api/v1/../../etc/passwd": (404, "no such path: /etc/passwd"),
        "static/../../squall/ui/app.py": (404, "no such path: /squall/ui/app.py"),
    }
    for path, (status, message) in answers.items():
        answer = client.get(path)
        assert (answer.status_code, answer.json()) == (
            status,
            {"error": "Not Found" if status == 404 else "Bad Request", "errorMessage": message},
        ), path
    bad_window = client.get("api/v1/topology/words", params={"window": "60"})
    assert bad_window.status_code == 422
    assert bad_window.json() == {
        "error": "Unprocessable Entity",
        "errorMessage": "query.window: Input should be ':all-time', '600', '10800' or '86400'",
    }
    not_json = client.post(
        "api/v1/topology/words/rebalance/0",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert not_json.status_code == 400 and "body" in not_json.json()["errorMessage"]
    negative = client.post("api/v1/topology/words/kill/-1")
    assert negative.status_code == 422 and "path.wait" in negative.json()["errorMessage"]
    assert client.post("api/v1/topology/nope/deactivate").status_code == 404
    assert client.get("api/v1/topology/words/activate").status_code == 405


def test_deactivate_activate_and_kill_steer_the_topology() -> None:
    spout = FeederSpout(Fields("word"))
    builder = TopologyBuilder()
    builder.set_spout("feed", spout)
    builder.set_bolt("sink", Sink()).shuffle_grouping("feed")
    with (
        LocalCluster() as cluster,
        UIServer(cluster, port=0) as ui,
        httpx.Client(base_url=ui.url, timeout=10.0) as client,
    ):
        cluster.submit_topology("fed", {}, builder.create_topology())

        def status() -> str:
            (entry,) = client.get("api/v1/topology/summary").json()["topologies"]
            return str(entry["status"])

        answer = client.post("api/v1/topology/fed/deactivate")
        assert answer.json() == {
            "topologyOperation": "deactivate",
            "topologyId": "fed",
            "status": "success",
        }
        assert status() == "INACTIVE"
        spout.feed(["held"], msg_id=1)
        assert cluster.get_topology_info("fed").components["feed"].emitted == 0
        assert client.post("api/v1/topology/fed/activate").json()["topologyOperation"] == (
            "activate"
        )
        wait_until(lambda: spout.acked == [1])
        assert status() == "ACTIVE"
        killed = client.post("api/v1/topology/fed/kill/1")
        assert killed.json()["topologyOperation"] == "kill"
        assert status() == "KILLED"  # deactivated, killed after its wait
        wait_until(lambda: cluster.topology_names() == [], timeout=10.0)
        assert client.get("api/v1/topology/summary").json() == {"topologies": []}


def test_a_token_guards_every_request() -> None:
    with (
        LocalCluster() as cluster,
        UIServer(cluster, port=0, token="s3cret") as ui,
        httpx.Client(base_url=ui.url, timeout=10.0) as client,
    ):
        refused = client.get("api/v1/cluster/summary")
        assert (refused.status_code, refused.json()) == (
            401,
            {
                "error": "Unauthorized",
                "errorMessage": "a token is needed: Authorization: Bearer <token>",
            },
        )
        wrong = client.get("api/v1/cluster/summary", headers={"authorization": "Bearer x"})
        assert wrong.status_code == 401
        assert client.get("api/v1/openapi.json").status_code == 401
        right = client.get("api/v1/cluster/summary", headers={"authorization": "Bearer s3cret"})
        assert right.status_code == 200
        opened = client.get("api/v1/topology/summary", params={"token": "s3cret"})
        assert opened.status_code == 303
        assert opened.headers["location"] == "/api/v1/topology/summary"
        assert "HttpOnly" in opened.headers["set-cookie"]
        assert client.get("api/v1/topology/summary").status_code == 200  # the cookie


def test_the_guard_refuses_other_hosts_and_cross_site_changes(served: Any) -> None:
    _, ui, client = served
    rebound = client.get("api/v1/cluster/summary", headers={"host": f"evil.example:{ui.port}"})
    assert rebound.status_code == 403
    cross_site = client.post(
        "api/v1/topology/words/deactivate", headers={"origin": "http://evil.example"}
    )
    assert cross_site.status_code == 403
    assert cross_site.json()["errorMessage"] == (
        "requests from 'http://evil.example' may not change anything here"
    )
    long_origin = "http://" + "e" * 10_000 + ".example"
    refused = client.post("api/v1/topology/words/deactivate", headers={"origin": long_origin})
    assert refused.status_code == 403
    assert refused.json()["errorMessage"] == (
        f"requests from {long_origin[:64]!r}... may not change anything here"
    )
    own = client.post("api/v1/topology/words/deactivate", headers={"origin": ui.url.rstrip("/")})
    assert own.status_code == 200
    local_name = client.get("api/v1/cluster/summary", headers={"host": f"localhost:{ui.port}"})
    assert local_name.status_code == 200


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with (
            LocalCluster() as cluster,
            pytest.raises(SquallError, match=f"cannot listen on 127.0.0.1:{port}"),
        ):
            UIServer(cluster, port=port).start()


def test_rebalance_changes_the_layout_or_says_what_is_wrong(served: Any) -> None:
    cluster, _, client = served

    def layout() -> tuple[int, dict[str, int]]:
        page = client.get("api/v1/topology/words").json()
        executors = {b["boltId"]: b["executors"] for b in page["bolts"]}
        return page["workersTotal"], executors

    assert layout() == (1, {"upper": 2, "sink": 1})
    body = {"rebalanceOptions": {"numWorkers": 2, "executors": {"upper": 1, "sink": 2}}}
    answer = client.post("api/v1/topology/words/rebalance/0", json=body)
    assert answer.json() == {
        "topologyOperation": "rebalance",
        "topologyId": "words",
        "status": "success",
    }
    assert layout() == (2, {"upper": 1, "sink": 2})
    too_many = client.post(
        "api/v1/topology/words/rebalance/0",
        json={"rebalanceOptions": {"executors": {"upper": 3}}},
    )
    assert too_many.status_code == 409  # the topology's layout does not allow it
    assert "upper" in too_many.json()["errorMessage"]
    unknown = client.post(
        "api/v1/topology/words/rebalance/0",
        json={"rebalanceOptions": {"executors": {"nope": 1}}},
    )
    assert unknown.status_code == 409 and "nope" in unknown.json()["errorMessage"]
    assert layout() == (2, {"upper": 1, "sink": 2})  # refused requests changed nothing
    later = client.post(
        "api/v1/topology/words/rebalance/1", json={"rebalanceOptions": {"numWorkers": 3}}
    )
    assert later.status_code == 200  # answered at once; carried out after the wait
    wait_until(lambda: layout()[0] == 3, timeout=30.0)
    wait_until(lambda: cluster.get_topology_info("words").status == "ACTIVE", timeout=30.0)


def test_rebalance_refuses_more_workers_than_executors_and_the_topology_runs_on() -> None:
    """feed 1 + sink 2 + __acker 1 = 4 executors: at most 4 workers; a refused rebalance
    leaves the topology as it was (active, its spout called), and a kill ends it."""
    spout = FeederSpout(Fields("word"))
    builder = TopologyBuilder()
    builder.set_spout("feed", spout)
    builder.set_bolt("sink", Sink(), 2).shuffle_grouping("feed")
    with (
        LocalCluster() as cluster,
        UIServer(cluster, port=0) as ui,
        httpx.Client(base_url=ui.url, timeout=10.0) as client,
    ):
        cluster.submit_topology("fed", {}, builder.create_topology())
        for asked in (5, 10**9):
            refused = client.post(
                "api/v1/topology/fed/rebalance/0", json={"rebalanceOptions": {"numWorkers": asked}}
            )
            assert (refused.status_code, refused.json()) == (
                409,
                {
                    "error": "Conflict",
                    "errorMessage": f"rebalance of topology 'fed': num_workers {asked} is more "
                    "than the 4 executors the topology would have (system executors such as "
                    "__acker included); a worker without an executor runs nothing, so "
                    "num_workers must be 1 to 4",
                },
            )
        (entry,) = client.get("api/v1/topology/summary").json()["topologies"]
        assert (entry["status"], entry["workersTotal"], entry["executorsTotal"]) == (
            "ACTIVE",
            1,
            4,
        )
        spout.feed(["after"], msg_id=1)
        wait_until(lambda: spout.acked == [1])
        assert client.post("api/v1/topology/fed/kill/0").status_code == 200
        wait_until(lambda: cluster.topology_names() == [], timeout=30.0)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"numWorkers": 2}, "body.numWorkers: unknown key"),
        ({"rebalanceOptions": {"numWorker": 2}}, "body.rebalanceOptions.numWorker: unknown key"),
        (
            {"rebalanceOptions": {"numWorkers": True}},
            "body.rebalanceOptions.numWorkers: Input should be a valid integer",
        ),
        (
            {"rebalanceOptions": {"numWorkers": "2"}},
            "body.rebalanceOptions.numWorkers: Input should be a valid integer",
        ),
        (
            {"rebalanceOptions": {"numWorkers": 2.5}},
            "body.rebalanceOptions.numWorkers: Input should be a valid integer",
        ),
        (
            {"rebalanceOptions": {"numWorkers": 0}},
            "body.rebalanceOptions.numWorkers: Input should be greater than or equal to 1",
        ),
        (
            {"rebalanceOptions": {"executors": {"sink": True}}},
            "body.rebalanceOptions.executors.sink: Input should be a valid integer",
        ),
        (
            {"rebalanceOptions": {"executors": {"sink": 2}}, "callback": "x"},
            "body.callback: unknown key",
        ),
        ([2], "body: Input should be a valid dictionary or object to extract fields from"),
        (
            {"rebalanceOptions": {"k" * 10_000: 2}},
            f"body.rebalanceOptions.{'k' * 64}...: unknown key",
        ),
    ],
)
def test_rebalance_bodies_of_the_wrong_shape_are_refused_naming_the_key(
    served: Any, body: Any, message: str
) -> None:
    cluster, _, client = served
    answer = client.post("api/v1/topology/words/rebalance/0", json=body)
    assert (answer.status_code, answer.json()) == (
        400,
        {"error": "Bad Request", "errorMessage": message},
    )
    assert cluster.get_topology_info("words").workers == 1
    assert cluster.get_topology_info("words").extra["executors"]["sink"] == 1


def test_what_a_request_names_is_echoed_cut_short(served: Any) -> None:
    _, _, client = served
    long_name = "n" * 500
    long_id = "c" * 10_000
    answers = {
        ("GET", f"api/v1/topology/{long_name}"): (
            404,
            f"no topology named '{'n' * 64}'... is running",
        ),
        ("POST", f"api/v1/topology/{long_name}/activate"): (
            404,
            f"no topology named '{'n' * 64}'... is running",
        ),
        ("GET", f"api/v1/topology/words/component/{'c' * 500}"): (
            404,
            f"topology 'words' has no component '{'c' * 64}'...",
        ),
        ("GET", f"api/v1/{'p' * 5000}"): (404, f"no such path: /api/v1/{'p' * 56}..."),
    }
    for (method, path), (status, message) in answers.items():
        answer = client.request(method, path)
        assert (answer.status_code, answer.json()["errorMessage"]) == (status, message), path
    unknown = client.post(
        "api/v1/topology/words/rebalance/0",
        json={"rebalanceOptions": {"executors": {long_id: 1}}},
    )
    assert unknown.status_code == 409
    assert unknown.json()["errorMessage"] == (
        f"rebalance of topology 'words': the topology has no component '{'c' * 64}'... "
        "(components: ['__acker', 'sink', 'upper', 'words'])"
    )
