"""DRPC in one process: the broker, LocalDRPC, and routing results by return_info."""

from __future__ import annotations

import copy
import pickle
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from squall import ManualClock, SquallError
from squall.drpc import (
    DRPCBroker,
    DRPCError,
    DRPCErrorReason,
    DRPCExecutionError,
    DRPCInvocations,
    DRPCInvocationsClient,
    DRPCRequest,
    LocalDRPC,
    invocations_clients_from_conf,
    invocations_for,
    return_failure,
    return_result,
)
from squall.trident.sources import resolve_drpc
from tests.helpers import wait_until

Answer = Callable[[DRPCRequest], "str | Exception"]


@contextmanager
def serving(invocations: Any, function: str, answer: Answer) -> Iterator[list[DRPCRequest]]:
    """A thread acting as a topology: fetch requests for ``function``, answer each with
    ``answer(request)`` (a result text, or an exception whose text fails the request).
    Yields the list of requests fetched so far."""
    fetched: list[DRPCRequest] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            request = invocations.fetch_request(function)
            if request is None:
                stop.wait(0.002)
                continue
            fetched.append(request)
            outcome = answer(request)
            if isinstance(outcome, Exception):
                invocations.fail_request(request.request_id, str(outcome))
            else:
                invocations.result(request.request_id, outcome)

    thread = threading.Thread(target=loop, name=f"test-topology-{function}")
    thread.start()
    try:
        yield fetched
    finally:
        stop.set()
        thread.join(5.0)
        assert not thread.is_alive()


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``call`` on a new thread; its return value or exception lands in the dict."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except Exception as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="test-drpc-client")
    thread.start()
    return thread, outcome


@pytest.fixture
def drpc() -> Iterator[LocalDRPC]:
    with LocalDRPC(timeout_secs=5.0) as local:
        yield local


def test_execute_returns_exactly_the_result_text(drpc: LocalDRPC) -> None:
    def count_words(request: DRPCRequest) -> str:
        return f"[[{len(request.args.split())}]]"

    with serving(drpc, "words", count_words) as fetched:
        assert drpc.execute("words", "cow four") == "[[2]]"
        assert drpc.execute("words", "the cow jumped") == "[[3]]"
        assert drpc.execute("words", "") == "[[0]]"

    assert [request.args for request in fetched] == ["cow four", "the cow jumped", ""]
    request = fetched[0]
    assert request.function == "words"
    assert re.fullmatch(r"[0-9a-f]{16}", request.request_id)
    assert request.return_info == {
        "kind": "local",
        "service_id": drpc.service_id,
        "request_id": request.request_id,
    }
    assert len({r.request_id for r in fetched}) == 3


def test_result_text_is_passed_through_untouched(drpc: LocalDRPC) -> None:
    text = '[["h\\u00e9llo", 1.5, null], ["日本", {"k": [1, 2]}]]\n'
    with serving(drpc, "echo", lambda request: request.args):
        assert drpc.execute("echo", text) == text


def test_failed_request_raises_with_the_topology_message(drpc: LocalDRPC) -> None:
    with (
        serving(drpc, "parse", lambda request: ValueError(f"cannot parse {request.args!r}")),
        pytest.raises(DRPCExecutionError) as caught,
    ):
        drpc.execute("parse", "x=?")

    error = caught.value
    assert isinstance(error, DRPCError) and isinstance(error, SquallError)
    assert error.reason is DRPCErrorReason.FAILED
    assert error.function == "parse"
    assert error.request_id is not None and error.server is None
    assert str(error) == (
        f"DRPC request {error.request_id} for function 'parse' failed: cannot parse 'x=?'"
    )


def test_fail_without_message_names_the_topology(drpc: LocalDRPC) -> None:
    with serving(drpc, "f", lambda request: Exception()), pytest.raises(DRPCExecutionError) as c:
        drpc.execute("f", "a")
    assert "failed: the topology failed the request" in str(c.value)


def test_unserved_request_times_out_quickly_and_is_forgotten() -> None:
    with LocalDRPC(timeout_secs=0.2) as drpc:
        start = time.monotonic()
        with pytest.raises(DRPCExecutionError) as caught:
            drpc.execute("nobody", "args")
        elapsed = time.monotonic() - start

        assert 0.2 <= elapsed < 1.5
        error = caught.value
        assert error.reason is DRPCErrorReason.TIMEOUT
        assert str(error) == (
            f"DRPC request {error.request_id} for function 'nobody' timed out after 0.2 s "
            "with no result; it was never fetched"
        )
        assert drpc.broker.pending_count() == 0
        assert drpc.broker.outstanding_count() == 0
        assert drpc.fetch_request("nobody") is None


def test_fetched_request_not_answered_in_time_times_out_and_late_result_is_ignored() -> None:
    clock = ManualClock(start_ms=0.0)
    with LocalDRPC(timeout_secs=0.2, clock=clock) as drpc:
        thread, outcome = in_thread(lambda: drpc.execute("slow", "a"))
        wait_until(lambda: drpc.broker.pending_count("slow") == 1)
        request = drpc.fetch_request("slow")
        assert request is not None
        clock.advance_secs(0.2)
        thread.join(2.0)

        error = outcome["error"]
        assert isinstance(error, DRPCExecutionError)
        assert error.reason is DRPCErrorReason.TIMEOUT
        assert error.request_id == request.request_id
        assert "fetched but not answered" in str(error)
        drpc.result(request.request_id, "[[1]]")  # late: ignored, no error
        drpc.fail_request(request.request_id, "late")
        assert not drpc.broker.complete(request.request_id, result="[[1]]")
        assert drpc.broker.outstanding_count() == 0

        # The late result reaches nobody: the next request gets its own answer.
        with serving(drpc, "slow", lambda r: f'["{r.args}"]'):
            assert drpc.execute("slow", "b") == '["b"]'


def test_per_call_timeout_overrides_the_default(drpc: LocalDRPC) -> None:
    start = time.monotonic()
    with pytest.raises(DRPCExecutionError, match=r"timed out after 0\.1 s"):
        drpc.execute("nobody", "x", timeout_secs=0.1)
    assert time.monotonic() - start < 1.5


def test_requests_are_fetched_in_order_per_function() -> None:
    broker = DRPCBroker(timeout_secs=5.0)
    threads = []
    for function, args in [("a", "1"), ("b", "x"), ("a", "2"), ("a", "3")]:
        thread, _ = in_thread(lambda f=function, a=args: broker.execute(f, a))
        threads.append(thread)
        count = len(threads)
        wait_until(lambda n=count: broker.outstanding_count() == n)  # keeps the order

    assert broker.pending_count("a") == 3 and broker.pending_count() == 4
    fetched_a = [broker.fetch_request("a") for _ in range(4)]
    assert [r.args if r else None for r in fetched_a] == ["1", "2", "3", None]
    fetched_b = broker.fetch_request("b")
    assert fetched_b is not None and fetched_b.args == "x"
    assert broker.pending_count() == 0 and broker.outstanding_count() == 4
    for request in [*fetched_a[:3], fetched_b]:
        assert request is not None
        broker.result(request.request_id, request.args)
    for thread in threads:
        thread.join(2.0)
    assert broker.outstanding_count() == 0


def test_concurrent_requests_each_get_their_own_result(drpc: LocalDRPC) -> None:
    """Requests answered out of order still reach their own callers (by request id)."""
    clients = 40
    held: list[DRPCRequest] = []
    stop = threading.Event()

    def topology() -> None:
        while not stop.is_set():
            request = drpc.fetch_request("square")
            if request is not None:
                held.append(request)
            if len(held) >= 8 or (held and request is None):
                for waiting in reversed(held):  # answer newest first
                    number = int(waiting.args)
                    drpc.result(waiting.request_id, f"[[{number}, {number * number}]]")
                held.clear()
            if request is None:
                stop.wait(0.002)

    server = threading.Thread(target=topology, name="test-topology-square")
    server.start()
    calls = [in_thread(lambda n=n: drpc.execute("square", str(n))) for n in range(clients)]
    for thread, _ in calls:
        thread.join(5.0)
    stop.set()
    server.join(5.0)

    results = [outcome.get("value") for _, outcome in calls]
    assert results == [f"[[{n}, {n * n}]]" for n in range(clients)]
    assert drpc.broker.outstanding_count() == 0


class DRPCSpoutLike:
    """A component holding a LocalDRPC, as a DRPC spout does."""

    def __init__(self, local: LocalDRPC) -> None:
        self.drpc = local
        self.function = "words"


def test_deepcopy_and_pickle_resolve_to_the_same_instance(drpc: LocalDRPC) -> None:
    component = DRPCSpoutLike(drpc)
    assert copy.deepcopy(drpc) is drpc
    assert copy.copy(drpc) is drpc
    assert copy.deepcopy(component).drpc is drpc
    assert pickle.loads(pickle.dumps(drpc)) is drpc
    assert pickle.loads(pickle.dumps(component)).drpc is drpc
    assert LocalDRPC.lookup(drpc.service_id) is drpc

    copied = copy.deepcopy(component)
    with serving(copied.drpc, "words", lambda request: "[[7]]"):
        assert drpc.execute("words", "a") == "[[7]]"


def test_a_shut_down_local_drpc_cannot_be_resolved() -> None:
    drpc = LocalDRPC()
    data = pickle.dumps(drpc)
    drpc.shutdown()
    drpc.shutdown()  # idempotent
    with pytest.raises(DRPCError, match=r"no LocalDRPC 'local-drpc-[0-9a-f]{16}' in this proc"):
        pickle.loads(data)
    with pytest.raises(DRPCError):
        LocalDRPC.lookup("local-drpc-unknown")
    assert LocalDRPC().service_id != drpc.service_id


def test_shutdown_fails_waiting_clients_and_refuses_new_requests() -> None:
    drpc = LocalDRPC(timeout_secs=5.0)
    thread, outcome = in_thread(lambda: drpc.execute("f", "a"))
    wait_until(lambda: drpc.broker.pending_count("f") == 1)
    drpc.shutdown()
    thread.join(2.0)

    error = outcome["error"]
    assert isinstance(error, DRPCExecutionError)
    assert error.reason is DRPCErrorReason.SHUTDOWN
    assert "was abandoned: the DRPC service shut down" in str(error)
    with pytest.raises(DRPCExecutionError, match="shut down") as caught:
        drpc.execute("f", "b")
    assert caught.value.reason is DRPCErrorReason.SHUTDOWN
    assert drpc.fetch_request("f") is None
    assert "shut down" in repr(drpc)


def test_deadlines_follow_the_injected_clock() -> None:
    clock = ManualClock(start_ms=0.0)
    broker = DRPCBroker(timeout_secs=10.0, clock=clock)
    thread, outcome = in_thread(lambda: broker.execute("f", "a"))
    wait_until(lambda: broker.pending_count("f") == 1)
    time.sleep(0.25)  # real time passes, clock time does not
    assert thread.is_alive()
    clock.advance_secs(10.0)
    thread.join(2.0)
    assert outcome["error"].reason is DRPCErrorReason.TIMEOUT


def test_invalid_arguments_are_rejected(drpc: LocalDRPC) -> None:
    with pytest.raises(TypeError, match="args must be a string"):
        drpc.execute("f", ["not", "text"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot be empty"):
        drpc.execute("", "a")
    with pytest.raises(ValueError, match="must be positive"):
        drpc.execute("f", "a", timeout_secs=0)
    with pytest.raises(ValueError, match="must be positive"):
        LocalDRPC(timeout_secs=-1)
    with pytest.raises(TypeError, match="result must be a string"):
        drpc.result("0", [[1]])  # type: ignore[arg-type]
    assert drpc.broker.outstanding_count() == 0


def test_results_are_routed_back_by_return_info(drpc: LocalDRPC) -> None:
    def answer_via_return_info() -> None:
        wait_until(lambda: drpc.broker.pending_count("route") == 2)
        first, second = drpc.fetch_request("route"), drpc.fetch_request("route")
        assert first is not None and second is not None
        assert invocations_for(first.return_info) is drpc
        return_result(first.return_info, "[[1]]")
        return_failure(second.return_info, "no")

    first = in_thread(lambda: drpc.execute("route", "1"))
    wait_until(lambda: drpc.broker.pending_count("route") == 1)
    second = in_thread(lambda: drpc.execute("route", "2"))
    answer_via_return_info()
    for thread, _ in (first, second):
        thread.join(2.0)
    assert first[1] == {"value": "[[1]]"}
    assert str(second[1]["error"]).endswith("failed: no")

    http_info = {"kind": "http", "host": "127.0.0.1", "port": 3772, "request_id": "ab"}
    client = invocations_for(http_info)
    assert isinstance(client, DRPCInvocationsClient) and client.port == 3772
    with pytest.raises(DRPCError, match="names no DRPC broker"):
        invocations_for({"kind": "carrier-pigeon"})
    with pytest.raises(DRPCError, match="no request_id"):
        return_result({"kind": "local", "service_id": drpc.service_id}, "[]")


def test_invocations_implementations_satisfy_the_protocol(drpc: LocalDRPC) -> None:
    assert isinstance(drpc, DRPCInvocations)
    assert isinstance(drpc.broker, DRPCInvocations)
    assert isinstance(DRPCInvocationsClient("127.0.0.1", 1), DRPCInvocations)


def test_request_round_trips_through_a_dict() -> None:
    request = DRPCRequest("00ff", "f", "a b", {"kind": "local", "service_id": "s"})
    assert DRPCRequest.from_dict(request.to_dict()) == request
    assert DRPCRequest.from_dict({"request_id": "1", "args": ""}, "g").function == "g"
    with pytest.raises(ValueError):
        DRPCRequest.from_dict({"request_id": 1, "function": "f", "args": ""})


def test_execution_errors_pickle_with_their_details() -> None:
    error = DRPCExecutionError(
        "boom", function="f", reason=DRPCErrorReason.TIMEOUT, request_id="1", server="h:1"
    )
    copied = pickle.loads(pickle.dumps(error))
    assert (str(copied), copied.function, copied.reason, copied.request_id, copied.server) == (
        "boom",
        "f",
        DRPCErrorReason.TIMEOUT,
        "1",
        "h:1",
    )


def test_invocations_clients_from_storm_configuration() -> None:
    """Topologies reach a server's invocations port (``drpc.invocations.port``, 3773 by
    default), never its client port ``drpc.port``, and send the invocations token."""
    conf = {"drpc.servers": ["a", "b"], "drpc.port": 4000, "drpc.invocations.port": 4001}
    clients = invocations_clients_from_conf(conf)
    assert [(c.host, c.port) for c in clients] == [("a", 4001), ("b", 4001)]
    (single,) = invocations_clients_from_conf({"drpc.servers": "c", "drpc.port": 4000})
    assert (single.host, single.port) == ("c", 3773)
    with pytest.raises(DRPCError, match="no DRPC server configured"):
        invocations_clients_from_conf({})
    with pytest.raises(DRPCError, match=r"'drpc\.invocations\.port' must be an integer port"):
        invocations_clients_from_conf({"drpc.servers": ["a"], "drpc.invocations.port": "x"})
    with pytest.raises(
        DRPCError, match=r"'drpc\.invocations\.authorization\.token'.*visible ASCII"
    ):
        invocations_clients_from_conf(
            {"drpc.servers": ["a"], "drpc.invocations.authorization.token": "has space"}
        )


def test_the_trident_drpc_stream_reaches_the_configured_invocations_port() -> None:
    """A DRPC stream given no LocalDRPC fetches from the invocations port of the first
    configured server (loopback when none is named), with the invocations token."""
    client = resolve_drpc(None, {"drpc.servers": "h", "drpc.port": 1, "drpc.invocations.port": 2})
    assert isinstance(client, DRPCInvocationsClient)
    assert (client.host, client.port) == ("h", 2)
    default = resolve_drpc(None, {})
    assert (default.host, default.port) == ("127.0.0.1", 3773)
    local = LocalDRPC()
    assert resolve_drpc(local, {"drpc.servers": ["h"]}) is local
    local.shutdown()
