"""Unit tests of ``Config``: Storm's key names, setters, component-level overrides."""

from __future__ import annotations

import pytest

from squall import Config
from squall.model.config import COMPONENT_KEYS, DEFAULTS, component_config, effective_config


@pytest.mark.parametrize(
    ("constant", "value"),
    [
        ("TOPOLOGY_WORKERS", "topology.workers"),
        ("TOPOLOGY_ACKER_EXECUTORS", "topology.acker.executors"),
        ("TOPOLOGY_MESSAGE_TIMEOUT_SECS", "topology.message.timeout.secs"),
        ("TOPOLOGY_MAX_SPOUT_PENDING", "topology.max.spout.pending"),
        ("TOPOLOGY_DEBUG", "topology.debug"),
        ("TOPOLOGY_TICK_TUPLE_FREQ_SECS", "topology.tick.tuple.freq.secs"),
        ("TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS", "topology.enable.message.timeouts"),
        ("TOPOLOGY_MAX_TASK_PARALLELISM", "topology.max.task.parallelism"),
        ("TOPOLOGY_TRANSACTIONAL_STATE_DIR", "topology.transactional.state.dir"),
    ],
)
def test_constants_are_storms_key_names(constant: str, value: str) -> None:
    assert getattr(Config, constant) == value
    assert getattr(Config(), constant) == value


def test_config_is_a_dict() -> None:
    conf = Config()
    assert isinstance(conf, dict)
    assert conf == {}
    conf["topology.workers"] = 3
    assert conf[Config.TOPOLOGY_WORKERS] == 3
    assert Config({"a": 1}) == {"a": 1}
    assert dict(Config(x=2)) == {"x": 2}


@pytest.mark.parametrize(
    ("setter", "argument", "key"),
    [
        ("set_num_workers", 4, "topology.workers"),
        ("set_num_ackers", 0, "topology.acker.executors"),
        ("set_message_timeout_secs", 12, "topology.message.timeout.secs"),
        ("set_max_spout_pending", 100, "topology.max.spout.pending"),
        ("set_debug", True, "topology.debug"),
        ("set_tick_tuple_freq_secs", 5, "topology.tick.tuple.freq.secs"),
        ("set_message_timeouts_enabled", False, "topology.enable.message.timeouts"),
        ("set_max_task_parallelism", 2, "topology.max.task.parallelism"),
    ],
)
def test_setters_return_self_and_set_the_key(setter: str, argument: object, key: str) -> None:
    conf = Config()
    returned = getattr(conf, setter)(argument)
    assert returned is conf
    assert conf == {key: argument}


def test_setters_chain() -> None:
    conf = Config().set_num_workers(2).set_num_ackers(1).set_debug(False)
    assert conf == {"topology.workers": 2, "topology.acker.executors": 1, "topology.debug": False}


def test_storm_defaults() -> None:
    assert DEFAULTS[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS] == 30
    assert DEFAULTS[Config.TOPOLOGY_MAX_SPOUT_PENDING] is None
    assert DEFAULTS[Config.TOPOLOGY_WORKERS] == 1
    merged = effective_config({Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 5})
    assert merged[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS] == 5
    assert merged[Config.TOPOLOGY_DEBUG] is False


def test_component_keys_include_storms_overridable_keys() -> None:
    for key in (
        Config.TOPOLOGY_DEBUG,
        Config.TOPOLOGY_MAX_SPOUT_PENDING,
        Config.TOPOLOGY_MAX_TASK_PARALLELISM,
        Config.TOPOLOGY_TRANSACTIONAL_ID,
        Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS,
    ):
        assert key in COMPONENT_KEYS
    assert Config.TOPOLOGY_WORKERS not in COMPONENT_KEYS
    assert Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS not in COMPONENT_KEYS


def test_component_keys_override_topology_values() -> None:
    topology = {Config.TOPOLOGY_MAX_SPOUT_PENDING: 10, Config.TOPOLOGY_DEBUG: False}
    merged = component_config(
        topology,
        {
            Config.TOPOLOGY_MAX_SPOUT_PENDING: 2,
            Config.TOPOLOGY_DEBUG: True,
            Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 3,
        },
    )
    assert merged == {
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 2,
        Config.TOPOLOGY_DEBUG: True,
        Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 3,
    }


def test_other_topology_keys_are_ignored() -> None:
    topology = {Config.TOPOLOGY_WORKERS: 2, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30}
    merged = component_config(
        topology,
        {
            Config.TOPOLOGY_WORKERS: 8,
            Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 1,
            Config.TOPOLOGY_ACKER_EXECUTORS: 0,
        },
    )
    assert merged == topology


def test_non_topology_keys_pass_through() -> None:
    merged = component_config(
        {"my.setting": "topology-level"},
        {"my.setting": "component-level", "other": 1, "topology.bolts.window.length.count": 5},
    )
    assert merged == {
        "my.setting": "component-level",
        "other": 1,
        "topology.bolts.window.length.count": 5,
    }


def test_component_config_does_not_modify_its_inputs() -> None:
    topology = {Config.TOPOLOGY_DEBUG: False}
    component = {Config.TOPOLOGY_DEBUG: True}
    merged = component_config(topology, component)
    assert merged[Config.TOPOLOGY_DEBUG] is True
    assert topology == {Config.TOPOLOGY_DEBUG: False}
    assert component_config(topology, None) == topology
    assert component_config(topology, None) is not topology
