"""Errors in user code on LocalCluster: failing, reporting, and surviving them."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from squall import (
    BasicBolt,
    Bolt,
    ComponentError,
    Config,
    FailedException,
    LocalCluster,
    ReportedFailedException,
    Spout,
    SquallError,
    TopologyBuilder,
)
from squall.testing import CapturingBolt, FixedTupleSpout, SharedRecord
from tests.helpers import wait_until


def numbers(count: int) -> FixedTupleSpout:
    return FixedTupleSpout([[n] for n in range(count)], ["n"])


def finish(cluster: LocalCluster, name: str, spout: FixedTupleSpout) -> None:
    total = len(spout.items)
    wait_until(lambda: len(spout.acked) + len(spout.failed) == total)
    assert cluster.wait_idle(name, 5.0)


def engine_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("squall-")]


def explode_on_multiples_of_three(n: int) -> int:
    if n % 3 == 0:
        raise ValueError(f"cannot handle {n}")
    return n


class Exploding(Bolt):
    outputs = ["n"]

    def execute(self, tup: Any) -> None:
        n = explode_on_multiples_of_three(tup["n"])
        self.collector.emit([n], anchors=tup)
        self.collector.ack(tup)


def test_exception_in_execute_fails_the_tuple_and_is_reported(cluster: LocalCluster) -> None:
    spout = numbers(10)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("explode", Exploding(), 2).shuffle_grouping("src")
    builder.set_bolt("sink", sink).shuffle_grouping("explode")
    cluster.submit_topology("errors", {}, builder.create_topology())
    finish(cluster, "errors", spout)

    assert sorted(spout.failed) == [0, 3, 6, 9]
    assert sorted(spout.acked) == [1, 2, 4, 5, 7, 8]
    # Tuples after each failure were still processed.
    assert sorted(v[0] for v in sink.values()) == [1, 2, 4, 5, 7, 8]

    info = cluster.get_topology_info("errors")
    explode = info.components["explode"]
    assert explode.errors_total == 4
    assert explode.failed == 4
    assert explode.acked == 6
    assert explode.executed == 10
    assert sorted(e.error for e in explode.errors) == [
        f"ValueError: cannot handle {n}" for n in (0, 3, 6, 9)
    ]
    tasks = cluster.get_running("errors").plan.component_tasks["explode"]
    for error in explode.errors:
        assert error.component_id == "explode"
        assert error.task_id in tasks
        assert error.traceback.startswith("Traceback (most recent call last)")
        assert "explode_on_multiples_of_three" in error.traceback
        assert "in execute" in error.traceback
        assert f"ValueError: {error.error.split(': ', 1)[1]}" in error.traceback
    assert info.components["sink"].errors_total == 0
    assert info.components["src"].errors_total == 0


@pytest.mark.parametrize(("per_interval", "kept"), [(None, 5), (2, 2)])
def test_errors_are_throttled_but_all_counted(
    cluster: LocalCluster, per_interval: int | None, kept: int
) -> None:
    class AlwaysRaises(Bolt):
        def execute(self, tup: Any) -> None:
            raise RuntimeError(f"bad {tup['n']}")

    spout = numbers(8)
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("raise", AlwaysRaises()).shuffle_grouping("src")
    conf = {}
    if per_interval is not None:
        conf[Config.TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL] = per_interval
    cluster.submit_topology("throttle", conf, builder.create_topology())
    finish(cluster, "throttle", spout)

    assert sorted(spout.failed) == list(range(8))
    stats = cluster.get_topology_info("throttle").components["raise"]
    assert stats.errors_total == 8
    assert [e.error for e in stats.errors] == [f"RuntimeError: bad {n}" for n in range(kept)]


class FlakySpout(Spout):
    """``next_tuple`` raises on its first ``raises`` calls, then emits ``count`` tuples."""

    outputs = ["n"]

    def __init__(self, raises: int, count: int) -> None:
        self.raises = raises
        self.count = count
        self.record = SharedRecord()

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.calls = 0
        self.emitted = 0

    def next_tuple(self) -> None:
        self.calls += 1
        self.record.append("calls", self.calls)
        if self.calls <= self.raises:
            raise RuntimeError(f"source unavailable (call {self.calls})")
        if self.emitted < self.count:
            self.collector.emit([self.emitted], msg_id=self.emitted)
            self.emitted += 1

    def ack(self, msg_id: Any) -> None:
        self.record.append("acked", msg_id)


def test_exception_in_next_tuple_is_reported_and_polling_continues(
    cluster: LocalCluster,
) -> None:
    spout = FlakySpout(raises=3, count=5)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("sink", sink).shuffle_grouping("src")
    cluster.submit_topology("flaky", {}, builder.create_topology())
    wait_until(lambda: len(spout.record.get("acked")) == 5)
    calls = len(spout.record.get("calls"))
    wait_until(lambda: len(spout.record.get("calls")) > calls + 10)  # still polled when idle

    assert sorted(spout.record.get("acked")) == list(range(5))
    assert sorted(v[0] for v in sink.values()) == list(range(5))
    src = cluster.get_topology_info("flaky").components["src"]
    assert src.errors_total == 3
    assert [e.error for e in src.errors] == [
        f"RuntimeError: source unavailable (call {i})" for i in (1, 2, 3)
    ]
    assert all("in next_tuple" in e.traceback for e in src.errors)


def test_exception_in_spout_ack_and_fail_is_reported(cluster: LocalCluster) -> None:
    class TouchySpout(FixedTupleSpout):
        def ack(self, msg_id: Any) -> None:
            super().ack(msg_id)
            if msg_id == 1:
                raise KeyError("ack handler broke")

        def fail(self, msg_id: Any) -> None:
            super().fail(msg_id)
            raise LookupError(f"fail handler broke on {msg_id}")

    class FailTwo(Bolt):
        def execute(self, tup: Any) -> None:
            if tup["n"] == 2:
                self.collector.fail(tup)
            else:
                self.collector.ack(tup)

    spout = TouchySpout([[n] for n in range(5)], ["n"])
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("work", FailTwo()).shuffle_grouping("src")
    cluster.submit_topology("touchy", {}, builder.create_topology())
    finish(cluster, "touchy", spout)

    assert sorted(spout.acked) == [0, 1, 3, 4]
    assert spout.failed == [2]
    src = cluster.get_topology_info("touchy").components["src"]
    assert src.errors_total == 2
    assert sorted(e.error for e in src.errors) == [
        "KeyError: 'ack handler broke'",
        "LookupError: fail handler broke on 2",
    ]
    assert src.acked == 4
    assert src.failed == 1


def test_report_error_from_bolts(cluster: LocalCluster) -> None:
    def check_value(n: int) -> None:
        raise TypeError(f"odd value {n}")

    class Reporter(Bolt):
        def execute(self, tup: Any) -> None:
            n = tup["n"]
            if n == 1:
                self.collector.report_error("plain message about 1")
            elif n == 3:
                try:
                    check_value(n)
                except TypeError as exc:
                    self.collector.report_error(exc)
            self.collector.ack(tup)

    class BasicReporter(BasicBolt):
        def execute(self, tup: Any, collector: Any) -> None:
            if tup["n"] == 4:
                collector.report_error(RuntimeError("basic bolt noticed 4"))

    spout = numbers(5)
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("reporter", Reporter()).shuffle_grouping("src")
    builder.set_bolt("basic", BasicReporter()).shuffle_grouping("src")
    cluster.submit_topology("report", {}, builder.create_topology())
    finish(cluster, "report", spout)

    assert sorted(spout.acked) == list(range(5))  # reporting does not fail anything
    info = cluster.get_topology_info("report")
    reporter = info.components["reporter"]
    assert reporter.errors_total == 2
    assert reporter.failed == 0
    by_text = {e.error: e for e in reporter.errors}
    assert set(by_text) == {"plain message about 1", "TypeError: odd value 3"}
    assert by_text["plain message about 1"].traceback == ""
    assert "check_value" in by_text["TypeError: odd value 3"].traceback
    basic = info.components["basic"]
    assert basic.errors_total == 1
    assert [e.error for e in basic.errors] == ["RuntimeError: basic bolt noticed 4"]
    assert basic.acked == 5


class BadPrepare(Bolt):
    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        if context.task_index == 1:
            raise RuntimeError("database unreachable")
        self.collector = collector

    def execute(self, tup: Any) -> None:
        self.collector.ack(tup)


class BadOpen(Spout):
    outputs = ["n"]

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        raise OSError("cannot open the source file")


@pytest.mark.parametrize("workers", [1, 3])
def test_prepare_raising_makes_submit_raise(cluster: LocalCluster, workers: int) -> None:
    builder = TopologyBuilder()
    builder.set_spout("src", numbers(3))
    builder.set_bolt("bad", BadPrepare(), 2).shuffle_grouping("src")
    topology = builder.create_topology()
    with pytest.raises(ComponentError) as caught:
        cluster.submit_topology("bad", {Config.TOPOLOGY_WORKERS: workers}, topology)

    # Task ids: __acker first, then "bad" (its second task is the one that raises).
    bad_task = workers + 2
    message = str(caught.value)
    assert "'bad'" in message
    assert f"task {bad_task}" in message
    assert "prepare" in message
    assert "RuntimeError: database unreachable" in message
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert isinstance(caught.value, SquallError)
    assert engine_threads() == []
    assert cluster.topology_names() == []
    with pytest.raises(SquallError):
        cluster.get_topology_info("bad")

    # The name is free again.
    spout = numbers(3)
    good = TopologyBuilder()
    good.set_spout("src", spout)
    good.set_bolt("sink", CapturingBolt()).shuffle_grouping("src")
    cluster.submit_topology("bad", {}, good.create_topology())
    finish(cluster, "bad", spout)
    assert sorted(spout.acked) == [0, 1, 2]


def test_open_raising_makes_submit_raise(cluster: LocalCluster) -> None:
    builder = TopologyBuilder()
    builder.set_spout("source", BadOpen())
    builder.set_bolt("sink", CapturingBolt()).shuffle_grouping("source")
    with pytest.raises(ComponentError) as caught:
        cluster.submit_topology("bad-open", {}, builder.create_topology())
    message = str(caught.value)
    assert "'source'" in message
    assert "task 3" in message  # __acker 1, sink 2, source 3
    assert "open" in message
    assert "OSError: cannot open the source file" in message
    assert isinstance(caught.value.__cause__, OSError)
    assert engine_threads() == []
    assert cluster.topology_names() == []


def test_reported_failed_exception_is_recorded_but_failed_exception_is_not(
    cluster: LocalCluster,
) -> None:
    class Refuser(BasicBolt):
        def execute(self, tup: Any, collector: Any) -> None:
            n = tup["n"]
            if n % 4 == 1:
                raise FailedException(f"quietly refusing {n}")
            if n % 4 == 3:
                raise ReportedFailedException(f"loudly refusing {n}")

    spout = numbers(8)
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("refuser", Refuser(), 2).shuffle_grouping("src")
    cluster.submit_topology("refuse", {}, builder.create_topology())
    finish(cluster, "refuse", spout)

    assert sorted(spout.failed) == [1, 3, 5, 7]
    assert sorted(spout.acked) == [0, 2, 4, 6]
    refuser = cluster.get_topology_info("refuse").components["refuser"]
    assert refuser.failed == 4
    assert refuser.acked == 4
    assert refuser.errors_total == 2
    assert sorted(e.error for e in refuser.errors) == [
        "ReportedFailedException: loudly refusing 3",
        "ReportedFailedException: loudly refusing 7",
    ]
