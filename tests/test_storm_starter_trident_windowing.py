"""storm-starter's TridentWindowingInmemoryStoreTopology
(examples/storm_starter/trident_windowing.py) on every engine, with the window counts
computed here from Storm's rules: a sliding count window of ``n`` sliding by ``s``
fires at every ``s``-th word with the last ``n`` words (fewer at first)."""

from __future__ import annotations

import functools
from types import ModuleType

import pytest

from squall.testing import SharedRecord
from squall.trident.windowing import (
    InMemoryWindowsStoreFactory,
    SlidingCountWindow,
    TumblingCountWindow,
)
from tests.conftest import Engine, on_engines
from tests.starter_loading import load_starter


def load_example() -> ModuleType:
    """The example, imported from its file."""
    return load_starter("trident_windowing")


SENTENCES = [
    "the cow jumped over the moon",
    "the man went to the store and bought some candy",
    "four score and seven years ago",
    "how many apples can you eat",
    "to be or not to be the person",
]
WORDS = sum(len(sentence.split(" ")) for sentence in SENTENCES)


def test_the_example_emits_the_sentences_storm_starter_does() -> None:
    assert load_example().SENTENCES == SENTENCES
    assert WORDS == 36


def test_sliding_count_windows_of_the_example(engine: Engine) -> None:
    """SlidingCountWindow.of(4, 2) over the sentences once (spout stream of parallelism
    1): a window every 2 words, with 2 words, then 4."""
    example = load_example()
    record = SharedRecord()
    topology = example.build_topology(
        InMemoryWindowsStoreFactory(),
        SlidingCountWindow.of(4, 2),
        cycle=False,
        sink=functools.partial(record.append, "windows"),
        parallelism=1,
    )
    expected = [[min(seen, 4)] for seen in range(2, WORDS + 1, 2)]
    assert expected[:3] == [[2], [4], [4]] and len(expected) == 18
    with engine.running(topology) as run:
        run.drain()
        run.wait_until(lambda: len(record.get("windows")) >= len(expected), engine.timeout)
        assert record.get("windows") == expected
        assert not run.errors(), run.failure()


@pytest.mark.parametrize(
    "engine",
    on_engines(spark=[()]),
    indirect=True,
)
def test_the_example_as_storm_writes_it(engine: Engine) -> None:
    """The spout stream's parallelism hint of 16, as in Storm: the spout runs as one
    task; however the words spread over the window's tasks, a tumbling window of one
    word fires once per word."""
    example = load_example()
    record = SharedRecord()
    topology = example.build_topology(
        InMemoryWindowsStoreFactory(),
        TumblingCountWindow.of(1),
        cycle=False,
        sink=functools.partial(record.append, "windows"),
    )
    with engine.running(topology) as run:
        run.drain()
        run.wait_until(lambda: len(record.get("windows")) >= WORDS, engine.timeout)
        assert record.get("windows") == [[1]] * WORDS
        assert not run.errors(), run.failure()
