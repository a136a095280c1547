"""Unknown ``topology.*`` configuration keys: a ``ConfigWarning`` at submit naming the
closest known key; known keys and the application's own keys pass without a word, and
every key still reaches the components."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from squall import Bolt, Config, ConfigWarning, LocalCluster, Spout, TopologyBuilder
from squall.model.config import (
    COMPONENT_KEYS,
    DEFAULTS,
    SPARK_KEYS,
    STORM_KEYS,
    check_config_keys,
    known_keys,
    warn_unknown_keys,
)
from squall.testing import SharedRecord
from tests.helpers import wait_until


class IdleSpout(Spout):
    def next_tuple(self) -> None:
        return None

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class ConfRecordingBolt(Bolt):
    """Records the configuration its task's ``prepare`` receives."""

    def __init__(self) -> None:
        self.record = SharedRecord()

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.record.append("conf", dict(conf))

    def execute(self, tup: Any) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        pass


def recording_topology() -> tuple[Any, SharedRecord]:
    bolt = ConfRecordingBolt()
    builder = TopologyBuilder()
    builder.set_spout("spout", IdleSpout())
    builder.set_bolt("bolt", bolt).shuffle_grouping("spout")
    return builder.create_topology(), bolt.record


def submit(conf: dict[str, Any]) -> tuple[list[warnings.WarningMessage], dict[str, Any]]:
    """Submit a topology with ``conf``; the warnings issued, and the bolt's ``conf``."""
    topology, record = recording_topology()
    with LocalCluster() as cluster, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cluster.submit_topology("conf", conf, topology)
        wait_until(lambda: bool(record.get("conf")))
    return [w for w in caught if issubclass(w.category, ConfigWarning)], record.get("conf")[0]


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("topology.workrs", "topology.workers"),
        ("topology.max.spout.pendng", "topology.max.spout.pending"),
        ("topology.message.timeout", "topology.message.timeout.secs"),
        ("topology.spark.batch.retry", "topology.spark.batch.retries"),
    ],
)
def test_a_misspelled_key_names_the_closest_known_key(key: str, suggestion: str) -> None:
    assert check_config_keys({key: 2}) == [
        f"unknown configuration key {key!r} (did you mean {suggestion!r}?)"
    ]


def test_a_key_close_to_none_is_said_to_be_unused() -> None:
    assert check_config_keys({"topology.frobnicate": True}) == [
        "unknown configuration key 'topology.frobnicate' (not used by squall)"
    ]


def test_known_storm_spark_and_user_keys_are_not_reported() -> None:
    conf = {
        Config.TOPOLOGY_WORKERS: 2,
        Config.TOPOLOGY_TRIDENT_BATCH_RETRY_MAX_MILLIS: 100,
        "topology.spark.batch.interval.millis": 50,
        "topology.kryo.register": ["x"],  # Storm's, accepted and unused
        "topology.bolts.window.length.count": 3,  # Storm's per-bolt settings
        "myapp.db.url": "sqlite://",
        "topology": 1,
        ("topology.workrs",): 1,  # not a string key
    }
    assert check_config_keys(conf) == []
    assert known_keys() >= set(DEFAULTS) | COMPONENT_KEYS | SPARK_KEYS | STORM_KEYS


def test_every_unknown_key_is_reported_once_in_order() -> None:
    conf = {"topology.workrs": 2, "app.key": 1, "topology.debg": True, "topology.debug": True}
    assert check_config_keys(conf) == [
        "unknown configuration key 'topology.workrs' (did you mean 'topology.workers'?)",
        "unknown configuration key 'topology.debg' (did you mean 'topology.debug'?)",
    ]


def test_submit_warns_at_the_callers_line_and_the_key_still_reaches_the_component() -> None:
    topology, record = recording_topology()
    conf = {"topology.workrs": 2, "topology.max.spout.pendng": 10, "myapp.db.url": "x"}
    with LocalCluster() as cluster, pytest.warns(ConfigWarning) as caught:
        cluster.submit_topology("conf", conf, topology)  # the line warned about
        wait_until(lambda: bool(record.get("conf")))

    assert [str(w.message) for w in caught] == [
        "unknown configuration key 'topology.workrs' (did you mean 'topology.workers'?)",
        "unknown configuration key 'topology.max.spout.pendng' "
        "(did you mean 'topology.max.spout.pending'?)",
    ]
    assert {w.filename for w in caught} == {__file__}
    with open(__file__, encoding="utf-8") as source:
        lines = source.read().splitlines()
    assert {lines[w.lineno - 1].strip() for w in caught} == {
        'cluster.submit_topology("conf", conf, topology)  # the line warned about'
    }
    seen = record.get("conf")[0]
    assert seen["topology.workrs"] == 2
    assert seen["topology.max.spout.pendng"] == 10
    assert seen["myapp.db.url"] == "x"
    assert seen[Config.TOPOLOGY_WORKERS] == 1  # the misspelled key set nothing else


def test_submit_with_known_and_user_keys_warns_nothing() -> None:
    caught, seen = submit({Config.TOPOLOGY_WORKERS: 2, "myapp.db.url": "sqlite://"})

    assert caught == []
    assert seen["myapp.db.url"] == "sqlite://" and seen[Config.TOPOLOGY_WORKERS] == 2


def test_warn_unknown_keys_returns_what_it_warned_and_points_where_asked() -> None:
    def engine_submit(conf: dict[str, Any]) -> list[str]:
        return warn_unknown_keys(conf)

    with pytest.warns(ConfigWarning) as caught:
        messages = engine_submit({"topology.workrs": 2})  # pointed at

    assert messages == [str(w.message) for w in caught]
    assert [w.lineno for w in caught] == [_line_of('engine_submit({"topology.workrs": 2})')]


def test_the_warning_can_be_silenced_by_its_class() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", ConfigWarning)
        assert warn_unknown_keys({"topology.workrs": 2}) == [
            "unknown configuration key 'topology.workrs' (did you mean 'topology.workers'?)"
        ]


@pytest.mark.spark
def test_the_spark_engines_keys_are_known() -> None:
    from squall.spark.sources.spouttasks import BATCH_MAX_TUPLES_KEY
    from squall.spark.streaming.queries import BATCH_INTERVAL_KEY
    from squall.spark.streaming.retries import RETRIES_KEY

    assert {BATCH_INTERVAL_KEY, BATCH_MAX_TUPLES_KEY, RETRIES_KEY} == SPARK_KEYS


def _line_of(text: str) -> int:
    with open(__file__, encoding="utf-8") as source:
        lines = source.read().splitlines()
    (number,) = [i for i, line in enumerate(lines, 1) if text in line and "pointed at" in line]
    return number


class PassBolt(Bolt):
    def execute(self, tup: Any) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


@pytest.mark.spark
def test_spark_cluster_warns_at_submit_before_it_checks_the_topology(spark: Any) -> None:
    """SparkCluster warns like LocalCluster, before anything is started: here the
    topology (a cycle) is one the Spark engine refuses, so nothing runs at all."""
    from squall import InvalidTopologyError
    from squall.spark import SparkCluster

    builder = TopologyBuilder()
    builder.set_spout("spout", IdleSpout())
    builder.set_bolt("a", PassBolt()).shuffle_grouping("spout").shuffle_grouping("b")
    builder.set_bolt("b", PassBolt()).shuffle_grouping("a")
    cluster = SparkCluster(spark=spark)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(InvalidTopologyError, match="cycle"):
                cluster.submit_topology("cyclic", {"topology.workrs": 2}, builder.create_topology())
    finally:
        cluster.shutdown()
    assert [str(w.message) for w in caught if issubclass(w.category, ConfigWarning)] == [
        "unknown configuration key 'topology.workrs' (did you mean 'topology.workers'?)"
    ]
    assert {w.filename for w in caught if issubclass(w.category, ConfigWarning)} == {__file__}


def test_the_command_prints_each_unknown_key_once_as_a_warning_line(tmp_path: Any) -> None:
    """``squall info`` and ``squall run`` print one ``Warning:`` line per unknown key on
    stderr (not Python's warning format, and not a second time from the engine)."""
    from click.testing import CliRunner

    from squall.cli.main import main

    expected = [
        "Warning: unknown configuration key 'topology.workrs' (did you mean 'topology.workers'?)"
    ]
    env = {"COLUMNS": "200"}
    example = str(Path(__file__).resolve().parent.parent / "examples" / "exclamation.py")
    for args in (
        ["info", example],
        ["run", example, "--seconds", "0.2", "--no-live", "--drain", "5"],
    ):
        result = CliRunner().invoke(main, [*args, "--conf", "topology.workrs=2"], env=env)
        assert result.exit_code == 0, result.output
        assert result.stderr.splitlines() == expected
