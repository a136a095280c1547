"""The checkpoint spout's sequence of actions: the normal flow, and the recovery after a
failed action, which always ends with ``INITSTATE`` (a task started again waits for
it)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from squall import ManualClock
from squall.state.checkpoint_spout import CheckpointSpout


class Collector:
    """Records ``(txid, action)`` of every checkpoint tuple emitted."""

    def __init__(self) -> None:
        self.emitted: list[tuple[int, str]] = []
        self.msg_ids: list[Any] = []

    def emit(self, values: list[Any], msg_id: Any, stream: str) -> None:
        self.emitted.append((values[0], values[1]))
        self.msg_ids.append(msg_id)

    def report_error(self, error: Exception) -> None:
        raise AssertionError(f"unexpected error: {error}")


def opened_spout(name: str) -> tuple[CheckpointSpout, Collector, ManualClock]:
    clock = ManualClock()
    spout, collector = CheckpointSpout(interval_ms=100), Collector()
    context = SimpleNamespace(clock=clock, topology_name=name)
    spout.open({}, context, collector)  # type: ignore[arg-type]
    return spout, collector, clock


def step(spout: CheckpointSpout, collector: Collector, clock: ManualClock, outcome: str) -> None:
    """Let the spout emit its next action, then ack or fail it."""
    clock.advance(1000)
    spout.next_tuple()
    msg_id = collector.msg_ids[-1]
    if outcome == "ack":
        spout.ack(msg_id)
    else:
        spout.fail(msg_id)


def test_the_states_are_handed_out_then_each_transaction_is_prepared_and_committed() -> None:
    spout, collector, clock = opened_spout("flow")
    for _ in range(5):
        step(spout, collector, clock, "ack")
    assert collector.emitted == [
        (0, "INITSTATE"),
        (1, "PREPARE"),
        (1, "COMMIT"),
        (2, "PREPARE"),
        (2, "COMMIT"),
    ]
    assert not spout.recovering


def test_a_failed_prepare_is_rolled_back_and_the_states_handed_out_again() -> None:
    spout, collector, clock = opened_spout("failed-prepare")
    for outcome in ["ack", "ack", "ack", "fail", "ack", "ack", "ack", "ack"]:
        step(spout, collector, clock, outcome)
    assert collector.emitted == [
        (0, "INITSTATE"),
        (1, "PREPARE"),
        (1, "COMMIT"),
        (2, "PREPARE"),  # failed
        (2, "ROLLBACK"),
        (1, "INITSTATE"),
        (2, "PREPARE"),
        (2, "COMMIT"),
    ]


def test_a_failed_commit_is_sent_again_then_the_states_handed_out_again() -> None:
    spout, collector, clock = opened_spout("failed-commit")
    for outcome in ["ack", "ack", "fail", "ack", "ack", "ack"]:
        step(spout, collector, clock, outcome)
    assert collector.emitted == [
        (0, "INITSTATE"),
        (1, "PREPARE"),
        (1, "COMMIT"),  # failed
        (1, "COMMIT"),
        (1, "INITSTATE"),
        (2, "PREPARE"),
    ]


def test_a_failed_initstate_is_sent_again() -> None:
    spout, collector, clock = opened_spout("failed-initstate")
    for outcome in ["fail", "ack", "ack"]:
        step(spout, collector, clock, outcome)
    assert collector.emitted == [(0, "INITSTATE"), (0, "INITSTATE"), (1, "PREPARE")]
