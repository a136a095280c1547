"""Stateful bolts on both engines, with the same assertions: exact counts emitted by a
stateful word count, and a state given back when the topology runs again on the same
durable provider (and, on Spark, the same checkpoint)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from squall import Config, Duration, Spout, StatefulWindowedBolt, TopologyBuilder
from squall.model.topology import StormTopology
from squall.state import KeyValueState
from squall.testing import CapturingBolt
from tests.conftest import Engine
from tests.test_state_local import SENTENCES, SentenceSpout, Split, WordCount


def counting(spout: SentenceSpout, capture: CapturingBolt) -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout("sentences", spout)
    builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", WordCount(), 2).fields_grouping("split", ["word"])
    builder.set_bolt("out", capture).shuffle_grouping("count")
    return builder.create_topology()


def every_count(sentences: list[str], before: Counter[str] | None = None) -> list[list[Any]]:
    """Each ``[word, n]`` a word count emits over ``sentences`` (counts going on from
    ``before``), sorted."""
    seen = Counter(before or {})
    emitted = []
    for sentence in sentences:
        for word in sentence.split():
            seen[word] += 1
            emitted.append([word, seen[word]])
    return sorted(emitted)


def sqlite_conf(directory: Path) -> dict[str, Any]:
    return {
        Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 50,
        Config.TOPOLOGY_STATE_PROVIDER: "sqlite",
        Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"directory": str(directory)},
    }


def test_a_stateful_word_count_emits_every_count_once(engine: Engine) -> None:
    sentences = SENTENCES * 5
    spout, capture = SentenceSpout(sentences), CapturingBolt()
    conf = {Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 50}
    with engine.running(counting(spout, capture), conf, name="stateful") as run:
        run.wait_until(lambda: len(spout.record.get("acked")) == len(sentences), engine.timeout)
        run.wait_idle()
        assert run.errors() == {}
    assert sorted(capture.values()) == every_count(sentences)
    assert spout.record.get("failed") == []


def test_a_durable_state_goes_on_where_it_stood(engine: Engine, tmp_path: Path) -> None:
    conf = sqlite_conf(tmp_path / "state")
    first, capture = SentenceSpout(SENTENCES), CapturingBolt()
    with engine.running(counting(first, capture), conf, name="durable", checkpoint="ck") as run:
        run.wait_until(lambda: len(first.record.get("acked")) == len(SENTENCES), engine.timeout)
        run.wait_idle()
    assert sorted(capture.values()) == every_count(SENTENCES)
    # New sentences (new message ids); on Spark a new query (its spouts start afresh),
    # whose bolts find their state in the provider.
    again, capture = SentenceSpout(SENTENCES[:2], first_id=100), CapturingBolt()
    with engine.running(counting(again, capture), conf, name="durable", checkpoint="ck2") as run:
        run.wait_until(lambda: len(again.record.get("acked")) == 2, engine.timeout)
        run.wait_idle()
        assert run.errors() == {}
    words = Counter(word for sentence in SENTENCES for word in sentence.split())
    assert sorted(capture.values()) == every_count(SENTENCES[:2], before=words)


class Readings(Spout):
    """Emits ``[ts, value]`` rows once each (msg id: the ts), then an untracked marker
    ``[10000, 0]`` that moves the watermark past every window before it (and is alone
    in the last window)."""

    outputs = ["ts", "value"]

    def __init__(self, rows: list[list[int]]) -> None:
        self.rows = rows

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.left = [list(row) for row in self.rows]
        self.marked = False

    def next_tuple(self) -> None:
        if self.left:
            row = self.left.pop(0)
            self.collector.emit(row, row[0])
        elif not self.marked:
            self.marked = True
            self.collector.emit([10_000, 0])


class WindowTotals(StatefulWindowedBolt):
    """Per tumbling window: ``[window end, sum of values, windows so far]``, the count of
    windows kept in the state."""

    outputs = ["end", "total", "windows"]

    def init_state(self, state: KeyValueState) -> None:
        self.state = state

    def execute(self, window: Any) -> None:
        windows = self.state.get("windows", 0) + 1
        self.state.put("windows", windows)
        total = sum(tup["value"] for tup in window.get())
        self.collector.emit([window.end_timestamp, total, windows])


def windowed_totals(spout: Spout, capture: CapturingBolt) -> StormTopology:
    bolt = (
        WindowTotals()
        .with_tumbling_window(Duration(1000))
        .with_timestamp_field("ts")
        .with_watermark_interval(Duration(20))
    )
    builder = TopologyBuilder()
    builder.set_spout("readings", spout)
    builder.set_bolt("totals", bolt).global_grouping("readings")
    builder.set_bolt("out", capture).shuffle_grouping("totals")
    return builder.create_topology()


def test_a_stateful_windowed_bolt_keeps_its_state_across_windows_and_runs(
    engine: Engine, tmp_path: Path
) -> None:
    conf = sqlite_conf(tmp_path / "state")
    rows = [[ts, ts // 100] for ts in (100, 400, 900, 1_200, 1_700, 2_500)]
    capture = CapturingBolt()
    topology = windowed_totals(Readings(rows), capture)
    with engine.running(topology, conf, name="windows", checkpoint="ck") as run:
        run.wait_until(lambda: len(capture.values()) == 4, engine.timeout)
        run.wait_idle()
        assert run.errors() == {}
    assert sorted(capture.values()) == [
        [1000, 14, 1],
        [2000, 29, 2],
        [3000, 25, 3],
        [10_000, 0, 4],
    ]
    later = [[ts, 1] for ts in (3_100, 3_200)]
    capture = CapturingBolt()
    with engine.running(
        windowed_totals(Readings(later), capture), conf, name="windows", checkpoint="ck2"
    ) as run:
        run.wait_until(lambda: len(capture.values()) == 2, engine.timeout)
        run.wait_idle()
    assert sorted(capture.values()) == [[4000, 2, 5], [10_000, 0, 6]]  # went on from 4
