"""Stateful bolts on both engines, with the same assertions: exact counts emitted by a
stateful word count, and a state given back when the topology runs again on the same
durable provider (and, on Spark, the same checkpoint)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from squall import Config, TopologyBuilder
from squall.model.topology import StormTopology
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
