"""The thread a core spout's calls run on, on Spark: one thread, calls in order,
failures handed back to the caller."""

from __future__ import annotations

import functools
import threading

import pytest

from squall.spark.sources.spoutthread import SpoutThread


def test_every_call_runs_on_the_same_thread_in_order() -> None:
    thread = SpoutThread("squall-spout-test")
    seen: list[tuple[int, int]] = []

    def note(n: int) -> None:
        seen.append((n, threading.get_ident()))

    try:
        futures = [thread.submit(functools.partial(note, n)) for n in range(5)]
        thread.call(functools.partial(note, 5))
        assert all(future.done() for future in futures)
    finally:
        thread.stop()

    assert [n for n, _ in seen] == list(range(6))
    (ident,) = {ident for _, ident in seen}
    assert ident != threading.get_ident()


def test_call_returns_the_result_and_raises_what_the_call_raised() -> None:
    thread = SpoutThread("squall-spout-test")

    def fails() -> None:
        raise ValueError("broker unreachable")

    try:
        assert thread.call(lambda: 42) == 42
        with pytest.raises(ValueError, match="broker unreachable"):
            thread.call(fails)
        failed = thread.submit(fails)
        with pytest.raises(ValueError, match="broker unreachable"):
            failed.result(timeout=30)
        assert thread.call(lambda: "still serving") == "still serving"
    finally:
        thread.stop()


def test_a_call_made_on_the_spout_thread_runs_at_once() -> None:
    thread = SpoutThread("squall-spout-test")
    try:
        assert thread.call(lambda: thread.call(lambda: "nested")) == "nested"
    finally:
        thread.stop()


def test_stop_does_not_wait_for_a_call_that_is_stuck() -> None:
    thread = SpoutThread("squall-spout-test")
    release = threading.Event()
    stuck = thread.submit(lambda: release.wait(30))

    thread.stop()  # returns while the call still runs

    assert not stuck.done()
    release.set()
    assert stuck.result(timeout=30) is True
