"""storm-starter's DRPC examples run as written: BasicDRPCTopology, ReachTopology and
ManualDRPC (examples/storm_starter/), on every engine, against a LocalDRPC and (for
ManualDRPC and ReachTopology) against a DRPC server."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

import pytest

from squall.drpc import DRPCClient, DRPCServer, LocalDRPC
from tests.conftest import ENGINE_SETTINGS, Engine, EngineSettings, on_engines
from tests.starter_loading import load_starter


@pytest.fixture
def engine_settings() -> dict[str, EngineSettings]:
    """On Spark, the first request waits for the session's Python workers (half a
    minute on a busy machine) and each request is a micro-batch of every step."""
    return {**ENGINE_SETTINGS, "spark": ENGINE_SETTINGS["spark"].tuned(timeout=240.0)}


def example(name: str) -> ModuleType:
    """The example ``name``, imported from its file."""
    return load_starter(name)


def reach(url: str, tweeters: dict[str, list[str]], followers: dict[str, list[str]]) -> int:
    """The reach of ``url``: distinct followers of its tweeters (computed here)."""
    return len({f for t in tweeters.get(url, []) for f in followers.get(t, [])})


@pytest.mark.parametrize("engine", on_engines(spark=[]), indirect=True)
def test_basic_drpc_topology_exclaims_each_word(engine: Engine) -> None:
    basic = example("basic_drpc_topology")
    words = ["hello", "storm", "héllo wörld", ""]
    with (
        LocalDRPC(timeout_secs=engine.timeout) as drpc,
        engine.running(basic.build_topology(drpc), name="DRPCExample") as run,
        ThreadPoolExecutor(4) as pool,
    ):
        futures = [pool.submit(drpc.execute, "exclamation", w) for w in words]
        got = [run.result(f, engine.timeout) for f in futures]
    assert got == ["hello!", "storm!", "héllo wörld!", "!"]


@pytest.mark.timeout(300)  # Spark: a session's first micro-batches take long
@pytest.mark.parametrize("engine", on_engines(), indirect=True)
def test_reach_topology_computes_the_reach_of_each_url(engine: Engine) -> None:
    module = example("reach_topology")
    urls = [*module.TWEETERS_DB, "notaurl.com"]
    expected = [str(reach(u, module.TWEETERS_DB, module.FOLLOWERS_DB)) for u in urls]
    assert expected == ["16", "14", "7", "0"]  # the maps' own reach, by hand
    with (
        LocalDRPC(timeout_secs=engine.timeout) as drpc,
        engine.running(module.build_topology(drpc), name="reach-drpc") as run,
        ThreadPoolExecutor(len(urls)) as pool,
    ):
        # All at once: the requests' tuples interleave in every step.
        futures = [pool.submit(drpc.execute, "reach", url) for url in urls]
        assert [run.result(f, engine.timeout) for f in futures] == expected
        assert drpc.execute("reach", "foo.com/blog/1") == "16"
        assert run.errors() == {}


@pytest.mark.timeout(300)  # Spark: a session's first micro-batches take long
@pytest.mark.parametrize("engine", on_engines(), indirect=True)
def test_manual_drpc_returns_results_to_a_local_drpc(engine: Engine) -> None:
    manual = example("manual_drpc")
    with (
        LocalDRPC(timeout_secs=engine.timeout) as drpc,
        engine.running(manual.build_topology(drpc), name="exclaim") as run,
        ThreadPoolExecutor(2) as pool,
    ):
        aaa = pool.submit(drpc.execute, "exclamation", "aaa")
        bbb = pool.submit(drpc.execute, "exclamation", "bbb")
        assert run.result(aaa, engine.timeout) == "aaa!!!"
        assert run.result(bbb, engine.timeout) == "bbb!!!"


@pytest.mark.timeout(300)  # Spark: a session's first micro-batches take long
@pytest.mark.parametrize("engine", on_engines(), indirect=True)
def test_manual_drpc_runs_against_a_drpc_server(engine: Engine) -> None:
    manual = example("manual_drpc")
    with DRPCServer(timeout_secs=engine.timeout, invocations_token="topology-secret") as server:
        conf: dict[str, Any] = {
            **manual.conf,
            "drpc.invocations.port": server.invocations_port,
            "drpc.invocations.authorization.token": "topology-secret",
        }
        client = DRPCClient("127.0.0.1", server.port, timeout_secs=engine.timeout)
        with (
            engine.running(manual.build_topology(), conf, name="exclaim") as run,
            ThreadPoolExecutor(2) as pool,
        ):
            aaa = pool.submit(client.execute, "exclamation", "aaa")
            bbb = pool.submit(client.execute, "exclamation", "bbb")
            assert run.result(aaa, engine.timeout) == "aaa!!!"
            assert run.result(bbb, engine.timeout) == "bbb!!!"


@pytest.mark.parametrize("engine", on_engines(spark=[]), indirect=True)
def test_reach_topology_runs_against_a_drpc_server(engine: Engine) -> None:
    module = example("reach_topology")
    with DRPCServer(timeout_secs=engine.timeout) as server:
        conf = {**module.conf, "drpc.invocations.port": server.invocations_port}
        client = DRPCClient("127.0.0.1", server.port, timeout_secs=engine.timeout)
        url = "engineering.twitter.com/blog/5"
        with (
            engine.running(module.build_topology(), conf, name="reach-drpc") as run,
            ThreadPoolExecutor(1) as pool,
        ):
            future = pool.submit(client.execute, "reach", url)
            assert run.result(future, engine.timeout) == str(
                reach(url, module.TWEETERS_DB, module.FOLLOWERS_DB)
            )
