"""Errors in the user code of core topologies, on LocalCluster and SparkCluster: failing
the tuple, reporting the error with its traceback, and running on.

A test that takes the ``engine`` fixture (see ``tests/conftest.py``) runs once per
engine with the same assertions; errors are read from
``get_topology_info(...).components[id].errors`` on both (on Spark, bolt errors come
from the Python workers with their task reports, spout errors from the source's
process). ``open`` or ``prepare`` raising stays local-only: the local engine runs them
at submit (which raises ``ComponentError``), Spark later in its own processes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
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
from squall.runtime.metrics import TopologyInfo
from squall.runtime.rolling import HISTORY_THREAD
from squall.testing import CapturingBolt, FixedTupleSpout, SharedRecord
from tests.conftest import Engine
from tests.helpers import wait_until
from tests.test_core_acking import RecordingSpout, all_ids, finish


def numbers(count: int) -> FixedTupleSpout:
    """A spout emitting ``[0]``..``[count-1]``, msg ids 0..count-1."""
    return FixedTupleSpout([[n] for n in range(count)], ["n"])


def done(spout: FixedTupleSpout, count: int) -> Callable[[], bool]:
    """A condition: ``count`` msg ids of ``spout`` were acked or failed."""
    return lambda: len(spout.acked) + len(spout.failed) == count


def reporting(info: TopologyInfo) -> set[str]:
    """The components that reported errors."""
    return {cid for cid, stats in info.components.items() if stats.errors_total}


def engine_threads() -> list[str]:
    """The threads of running topologies (not the cluster's own metrics history)."""
    return [
        t.name
        for t in threading.enumerate()
        if t.name.startswith("squall-") and t.name != HISTORY_THREAD
    ]


def explode_on_first_attempt(msg_id: str, attempt: int) -> None:
    if attempt == 0 and int(msg_id.split("-")[1]) % 3 == 0:
        raise ValueError(f"cannot handle {msg_id}")


class Exploding(Bolt):
    """Raises on the first attempt of each id whose index is a multiple of three;
    otherwise emits the id anchored and acks."""

    outputs = ["id"]

    def execute(self, tup: Any) -> None:
        explode_on_first_attempt(tup["id"], tup["attempt"])
        self.collector.emit([tup["id"]], anchors=tup)
        self.collector.ack(tup)


def test_an_exception_in_execute_fails_the_tuple_is_reported_and_the_replay_runs(
    engine: Engine,
) -> None:
    spout = RecordingSpout(10, replay=True)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("explode", Exploding(), 2).shuffle_grouping("src")
    builder.set_bolt("sink", sink).shuffle_grouping("explode")
    with engine.running(builder.create_topology()) as run:
        info = finish(run, lambda: len(spout.events("ack")) == 10, engine.timeout, errors=True)

    (task,) = info.components["src"].tasks
    ids = all_ids([task], 10)
    replayed = [f"{task}-{i}" for i in (0, 3, 6, 9)]
    assert spout.history() == {
        m: ["emit", "fail", "emit", "ack"] if m in replayed else ["emit", "ack"] for m in ids
    }
    # Every id reached the sink once: the tuples after each failure, and the replays.
    assert sorted(sink.values()) == [[m] for m in ids]

    explode = info.components["explode"]
    assert (explode.executed, explode.acked, explode.failed) == (14, 10, 4)
    assert explode.errors_total == 4
    assert sorted(e.error for e in explode.errors) == [
        f"ValueError: cannot handle {m}" for m in sorted(replayed)
    ]
    for error in explode.errors:
        assert error.component_id == "explode"
        assert error.task_id in explode.tasks
        assert error.traceback.startswith("Traceback (most recent call last)")
        assert "in execute" in error.traceback
        assert "in explode_on_first_attempt" in error.traceback
        assert 'raise ValueError(f"cannot handle {msg_id}")' in error.traceback
        assert error.traceback.rstrip().endswith(error.error)
    assert info.components["sink"].errors_total == 0
    assert info.components["src"].errors_total == 0


class Refuser(BasicBolt):
    """Emits its input, then raises by ``n % 4``: 1 ``FailedException``, 2 a user
    ``KeyError``, 3 ``ReportedFailedException``; 0 returns normally."""

    outputs = ["n"]

    def execute(self, tup: Any, collector: Any) -> None:
        n = tup["n"]
        collector.emit([n])
        if n % 4 == 1:
            raise FailedException(f"quietly refusing {n}")
        if n % 4 == 2:
            raise KeyError(f"user bug {n}")
        if n % 4 == 3:
            raise ReportedFailedException(f"loudly refusing {n}")


def test_basic_bolt_exceptions_fail_the_input_and_only_failed_exception_is_quiet(
    engine: Engine,
) -> None:
    spout = numbers(8)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("refuser", Refuser(), 2).shuffle_grouping("src")
    builder.set_bolt("sink", sink).shuffle_grouping("refuser")
    with engine.running(builder.create_topology()) as run:
        info = finish(run, done(spout, 8), engine.timeout, errors=True)

    assert sorted(spout.failed) == [1, 2, 3, 5, 6, 7]
    assert sorted(spout.acked) == [0, 4]
    # What was emitted before the exception is delivered (and acked by the sink), but
    # it belongs to the failed tree.
    assert sorted(sink.values()) == [[n] for n in range(8)]
    assert info.components["sink"].acked == 8
    refuser = info.components["refuser"]
    assert (refuser.executed, refuser.acked, refuser.failed) == (8, 2, 6)
    assert refuser.errors_total == 4
    assert sorted(e.error for e in refuser.errors) == [
        "KeyError: 'user bug 2'",
        "KeyError: 'user bug 6'",
        "ReportedFailedException: loudly refusing 3",
        "ReportedFailedException: loudly refusing 7",
    ]
    for error in refuser.errors:
        assert "in execute" in error.traceback
    assert reporting(info) == {"refuser"}


class AlwaysRaises(Bolt):
    def execute(self, tup: Any) -> None:
        raise RuntimeError(f"bad {tup['n']}")


@pytest.mark.parametrize(("per_interval", "kept"), [(None, 5), (2, 2)])
def test_errors_are_throttled_but_all_counted(
    engine: Engine, per_interval: int | None, kept: int
) -> None:
    spout = numbers(8)
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("raise", AlwaysRaises()).shuffle_grouping("src")
    conf = Config()
    if per_interval is not None:
        conf[Config.TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL] = per_interval
    with engine.running(builder.create_topology(), conf) as run:
        info = finish(run, done(spout, 8), engine.timeout, errors=True)

    assert sorted(spout.failed) == list(range(8))
    stats = info.components["raise"]
    assert (stats.executed, stats.failed, stats.errors_total) == (8, 8, 8)
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

    def calls_made(self) -> int:
        return len(self.record.get("calls"))


@pytest.mark.parametrize(
    ("engine", "count"),
    [
        ("local", 5),
        ("spark", 5),
        ("local", 0),
        ("spark", 0),
    ],
    indirect=["engine"],
    ids=["local-then-emits", "spark-then-emits", "local-emits-nothing", "spark-emits-nothing"],
)
def test_an_exception_in_next_tuple_is_reported_and_polling_continues(
    engine: Engine, count: int
) -> None:
    """``next_tuple`` raises on its first three calls, then emits ``count`` tuples; the
    spout is still polled after that (three more calls at least)."""
    spout = FlakySpout(raises=3, count=count)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("sink", sink).shuffle_grouping("src")
    with engine.running(builder.create_topology()) as run:
        info = finish(
            run,
            lambda: len(spout.record.get("acked")) == count and spout.calls_made() >= count + 6,
            engine.timeout,
            errors=True,
        )

    assert sorted(spout.record.get("acked")) == list(range(count))
    assert sorted(sink.values()) == [[n] for n in range(count)]
    src = info.components["src"]
    assert src.errors_total == 3
    assert [e.error for e in src.errors] == [
        f"RuntimeError: source unavailable (call {i})" for i in (1, 2, 3)
    ]
    for error in src.errors:
        assert error.component_id == "src"
        assert "in next_tuple" in error.traceback
    assert (src.emitted, src.acked, src.failed) == (count, count, 0)


class TouchySpout(FixedTupleSpout):
    """Records like ``FixedTupleSpout``, then raises in ``ack`` of msg id 1 and in every
    ``fail``."""

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


def test_an_exception_in_spout_ack_or_fail_is_reported(engine: Engine) -> None:
    spout = TouchySpout([[n] for n in range(5)], ["n"])
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("work", FailTwo()).shuffle_grouping("src")
    with engine.running(builder.create_topology()) as run:
        info = finish(run, done(spout, 5), engine.timeout, errors=True)

    assert sorted(spout.acked) == [0, 1, 3, 4]
    assert spout.failed == [2]
    src = info.components["src"]
    assert src.errors_total == 2
    assert sorted(e.error for e in src.errors) == [
        "KeyError: 'ack handler broke'",
        "LookupError: fail handler broke on 2",
    ]
    assert (src.acked, src.failed) == (4, 1)
    assert info.components["work"].errors_total == 0


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


def test_report_error_from_bolts_records_without_failing(engine: Engine) -> None:
    spout = numbers(5)
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("reporter", Reporter()).shuffle_grouping("src")
    builder.set_bolt("basic", BasicReporter()).shuffle_grouping("src")
    with engine.running(builder.create_topology()) as run:
        info = finish(run, done(spout, 5), engine.timeout, errors=True)

    assert sorted(spout.acked) == list(range(5))  # reporting does not fail anything
    reporter = info.components["reporter"]
    assert (reporter.errors_total, reporter.acked, reporter.failed) == (2, 5, 0)
    by_text = {e.error: e for e in reporter.errors}
    assert set(by_text) == {"plain message about 1", "TypeError: odd value 3"}
    assert by_text["plain message about 1"].traceback == ""
    assert "in check_value" in by_text["TypeError: odd value 3"].traceback
    basic = info.components["basic"]
    assert (basic.errors_total, basic.acked, basic.failed) == (1, 5, 0)
    assert [e.error for e in basic.errors] == ["RuntimeError: basic bolt noticed 4"]


class BadEmitSpout(Spout):
    """Its first ``next_tuple`` emits two values on a one-field stream; then it emits
    ``[0]``..``[count-1]`` with msg ids 0..count-1."""

    outputs = ["n"]

    def __init__(self, count: int) -> None:
        self.count = count
        self.record = SharedRecord()

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.next = -1

    def next_tuple(self) -> None:
        if self.next < 0:
            self.next = 0
            self.collector.emit([0, "extra"], msg_id="bad")
        elif self.next < self.count:
            self.collector.emit([self.next], msg_id=self.next)
            self.next += 1

    def ack(self, msg_id: Any) -> None:
        self.record.append("acked", msg_id)

    def fail(self, msg_id: Any) -> None:
        self.record.append("failed", msg_id)

    def outcomes(self) -> int:
        """How many ack and fail calls were made."""
        return len(self.record.get("acked")) + len(self.record.get("failed"))


class Misrouting(Bolt):
    """Emits ``[n]`` on the undeclared stream ``"nope"`` for ``n == 1`` (the emit
    raises); otherwise on its default stream, anchored, and acks."""

    outputs = ["n"]

    def execute(self, tup: Any) -> None:
        n = tup["n"]
        self.collector.emit([n], anchors=tup, stream="nope" if n == 1 else "default")
        self.collector.ack(tup)


def test_emitting_on_an_undeclared_stream_or_the_wrong_number_of_values_is_reported(
    engine: Engine,
) -> None:
    spout = BadEmitSpout(3)
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("relay", Misrouting()).shuffle_grouping("src")
    builder.set_bolt("sink", sink).shuffle_grouping("relay")
    with engine.running(builder.create_topology()) as run:
        info = finish(run, lambda: spout.outcomes() == 3, engine.timeout, errors=True)

    # The bad spout emit raised before sending anything: no tree, no ack or fail.
    assert sorted(spout.record.get("acked")) == [0, 2]
    assert spout.record.get("failed") == [1]
    assert sorted(sink.values()) == [[0], [2]]
    src, relay = info.components["src"], info.components["relay"]
    assert [(e.component_id, e.error) for e in src.errors] == [
        (
            "src",
            "ValueError: component 'src' emitted 2 value(s) on stream 'default', which "
            "declares 1 field(s) ['n']: [0, 'extra']",
        )
    ]
    assert "in next_tuple" in src.errors[0].traceback
    assert (src.emitted, src.acked, src.failed) == (3, 2, 1)
    assert [(e.component_id, e.error) for e in relay.errors] == [
        (
            "relay",
            "ValueError: component 'relay' emitted on stream 'nope', which it does not "
            "declare (declared streams: ['default'])",
        )
    ]
    assert "in execute" in relay.errors[0].traceback
    assert (relay.executed, relay.acked, relay.failed) == (3, 2, 1)
    assert reporting(info) == {"src", "relay"}


# --- open and prepare raising: local engine (they run at submit) --------------------------


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
    wait_until(done(spout, 3))
    assert cluster.wait_idle("bad", 5.0)
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
