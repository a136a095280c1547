"""storm-starter's examples that register a ``LoggingMetricsConsumer``:
FastWordCountTopology and InOrderDeliveryTest (``examples/storm_starter/``), run to
completion on a manual clock; the built-in metrics the consumer logs add up to what
the topology did."""

from __future__ import annotations

import copy
import logging
import random
import time
from collections import Counter
from types import ModuleType
from typing import Any

import pytest

from squall import Config, LocalCluster, ManualClock
from tests.starter_loading import load_starter


def load(name: str) -> ModuleType:
    """The example ``name``, imported from its file."""
    return load_starter(name)


def logged_points(caplog: pytest.LogCaptureFixture) -> list[tuple[str, int, str, str]]:
    """``(component, task, metric, value)`` of each line LoggingMetricsConsumer logged."""
    points = []
    for record in caplog.records:
        if record.name != "squall.metrics":
            continue
        _, _, source, name, value = record.getMessage().split("\t")
        task, component = source.split(":")
        points.append((component.strip(), int(task), name.strip(), value))
    return points


def total(points: list[tuple[str, int, str, str]], component: str, name: str) -> int:
    return sum(int(v) for c, _, n, v in points if c == component and n == name)


def wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.005)


def test_fast_word_count_counts_every_word_and_logs_its_metrics(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load("fast_word_count_topology")
    # Storm's configuration: a LoggingMetricsConsumer, one worker.
    assert module.conf[Config.TOPOLOGY_METRICS_CONSUMER_REGISTER] == [
        {"class": module.LoggingMetricsConsumer, "argument": None, "parallelism.hint": 1}
    ]
    assert module.conf[Config.TOPOLOGY_WORKERS] == 1
    topology = module.build_topology(max_sentences=50, seed=7)
    assert {spec.component_id: spec.parallelism for spec in topology} == {
        "spout": 4,
        "split": 4,
        "count": 4,
    }
    sentences = []
    for index in range(4):
        rng = random.Random(7 + index)
        sentences += [module.CHOICES[rng.randrange(len(module.CHOICES))] for _ in range(50)]
    words = Counter(word for sentence in sentences for word in sentence.split())
    caplog.set_level(logging.INFO, logger="squall.metrics")
    counted: dict[str, int] = {}

    def listen(component: str, stream: str, task: int, values: Any, targets: Any) -> None:
        if component == "count":
            counted[values[0]] = max(counted.get(values[0], 0), values[1])

    clock = ManualClock()
    with LocalCluster(clock=clock) as cluster:
        cluster.submit_topology(
            "wc-test", copy.deepcopy(module.conf), topology, emit_listener=listen
        )
        assert cluster.wait_idle("wc-test")
        clock.advance_secs(60)  # the built-in metrics' bucket ends
        wait_for(lambda: total(logged_points(caplog), "count", "__execute-count") > 0)
        wait_for(lambda: len({(c, t) for c, t, _, _ in logged_points(caplog)}) == 12)
        line = module.print_metrics(cluster, "wc-test")
        info = cluster.get_topology_info("wc-test")
        cluster.kill_topology("wc-test")
    assert counted == dict(words)
    points = logged_points(caplog)
    assert total(points, "spout", "__ack-count") == 200 == info.components["spout"].acked
    assert total(points, "spout", "__fail-count") == 0
    assert total(points, "split", "__execute-count") == 200
    assert total(points, "count", "__execute-count") == sum(words.values())
    assert total(points, "count", "__ack-count") == sum(words.values())
    by_task = {(c, t): v for c, t, n, v in points if n == "__execute-count"}
    for component in ("split", "count"):
        stats = info.components[component].task_stats
        assert {t: int(v) for (c, t), v in by_task.items() if c == component} == {
            task: figures["executed"] for task, figures in stats.items()
        }
    assert line.startswith("uptime: ") and " acked: 200 " in line and line.endswith(" failed: 0")
    assert capsys.readouterr().out == line + "\n"


def test_in_order_delivery_keeps_each_spout_tasks_order(caplog: pytest.LogCaptureFixture) -> None:
    module = load("in_order_delivery_test")
    assert module.conf[Config.TOPOLOGY_METRICS_CONSUMER_REGISTER] == [
        {"class": module.LoggingMetricsConsumer, "argument": None, "parallelism.hint": 1}
    ]
    topology = module.build_topology(max_count=100)
    assert {spec.component_id: spec.parallelism for spec in topology} == {
        "spout": 8,
        "count": 8,
    }
    caplog.set_level(logging.INFO, logger="squall.metrics")
    clock = ManualClock()
    with LocalCluster(clock=clock) as cluster:
        cluster.submit_topology("in-order-test", copy.deepcopy(module.conf), topology)
        assert cluster.wait_idle("in-order-test")
        clock.advance_secs(60)
        wait_for(lambda: len({(c, t) for c, t, _, _ in logged_points(caplog)}) == 16)
        info = cluster.get_topology_info("in-order-test")
        cluster.kill_topology("in-order-test")
    spout, check = info.components["spout"], info.components["count"]
    assert (spout.acked, spout.failed) == (800, 0)
    assert (check.executed, check.acked, check.failed, check.errors_total) == (800, 800, 0, 0)
    points = logged_points(caplog)
    assert total(points, "count", "__execute-count") == 800
    assert total(points, "count", "__fail-count") == 0  # nothing arrived out of order
    assert total(points, "spout", "__ack-count") == 800
    assert {v for c, _, n, v in points if c == "spout" and n == "__emit-count"} == {
        "{'default': 100}"
    }
