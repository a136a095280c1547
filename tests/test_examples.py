"""The examples under examples/ run on LocalCluster and compute exactly what they say.

Each example is run with a finite input until the topology is idle; every emit is
recorded through ``emit_listener`` and checked against results computed independently.
The Python code blocks of README.md and docs/*.md run in tests/test_docs_blocks.py.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from squall import LocalCluster, StormTopology, TopologyInfo

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` as module ``example_<name>``."""
    module_name = f"example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Emit:
    """One emit seen by the emit listener."""

    task: int
    values: list[Any]
    targets: list[int]


@dataclass
class Run:
    """What a run to completion left behind."""

    info: TopologyInfo
    emits: dict[tuple[str, str], list[Emit]]
    components: dict[int, Any] = field(default_factory=dict)

    def values(self, component: str, stream: str = "default") -> list[list[Any]]:
        return [emit.values for emit in self.emits.get((component, stream), [])]

    def tasks(self, component: str) -> list[int]:
        return self.info.components[component].tasks


def run_until_idle(topology: StormTopology, conf: dict[str, Any] | None = None) -> Run:
    """Run ``topology`` until nothing is queued or pending, record every emit, kill it."""
    emits: dict[tuple[str, str], list[Emit]] = defaultdict(list)
    lock = threading.Lock()

    def listen(component: str, stream: str, task: int, values: Any, targets: list[int]) -> None:
        with lock:
            emits[(component, stream)].append(Emit(task, list(values), list(targets)))

    with LocalCluster() as cluster:
        cluster.submit_topology("example", conf or {}, topology, emit_listener=listen)
        assert cluster.wait_idle("example", timeout_secs=10.0)
        info = cluster.get_topology_info("example")
        running = cluster.get_running("example")
        components = {task: runner.component for task, runner in running.runners.items()}
        cluster.kill_topology("example")
    with lock:
        return Run(info, dict(emits), components)


@pytest.mark.parametrize("workers", [1, 2])
def test_word_count_counts_every_word_exactly(workers: int) -> None:
    word_count = load_example("word_count")
    sentences = word_count.sentence_sequence(400, seed=3)
    expected = Counter(word for sentence in sentences for word in sentence.split())

    run = run_until_idle(
        word_count.build_topology(max_sentences=400, seed=3), {"topology.workers": workers}
    )

    assert run.values("sentences") == [[sentence] for sentence in sentences]
    final: dict[str, int] = {}
    owners: dict[str, set[int]] = defaultdict(set)
    for emit in run.emits[("count", "default")]:
        word, count = emit.values
        final[word] = max(final.get(word, 0), count)
        owners[word].add(emit.task)
    assert final == dict(expected)
    assert len(run.emits[("count", "default")]) == sum(expected.values())
    assert all(len(tasks) == 1 for tasks in owners.values())  # fields grouping on "word"
    spout = run.info.components["sentences"]
    assert (spout.emitted, spout.acked, spout.failed) == (400, 400, 0)
    assert run.info.components["count"].executed == sum(expected.values())


def test_word_count_spout_replays_failed_sentences() -> None:
    word_count = load_example("word_count")
    spout = word_count.RandomSentenceSpout(max_sentences=3, seed=1)
    emitted: list[tuple[list[Any], Any]] = []

    class Collector:
        def emit(self, values: list[Any], msg_id: Any = None) -> list[int]:
            emitted.append((values, msg_id))
            return [1]

    class Context:
        task_index = 0

    spout.open({}, Context(), Collector())  # type: ignore[arg-type]
    for _ in range(3):
        spout.next_tuple()
    spout.next_tuple()  # exhausted: emits nothing
    assert [msg_id for _, msg_id in emitted] == [0, 1, 2]
    spout.fail(1)
    spout.ack(0)
    spout.next_tuple()
    assert emitted[-1] == (emitted[1][0], 1)
    assert sorted(spout.pending) == [1, 2]


def test_exclamation_appends_six_exclamation_marks() -> None:
    exclamation = load_example("exclamation")

    run = run_until_idle(exclamation.build_topology(max_words=60, seed=5))

    spout_tasks = run.tasks("word")
    by_task: dict[int, list[str]] = defaultdict(list)
    for emit in run.emits[("word", "default")]:
        by_task[emit.task].append(emit.values[0])
    assert by_task == {
        task: exclamation.word_sequence(60, 5 + index) for index, task in enumerate(spout_tasks)
    }
    words = [word for sequence in by_task.values() for word in sequence]
    assert sorted(run.values("exclaim1")) == sorted([[w + "!!!"] for w in words])
    assert sorted(run.values("exclaim2")) == sorted([[w + "!!!!!!"] for w in words])
    stats = run.info.components
    assert (stats["word"].acked, stats["word"].failed) == (120, 0)
    assert (stats["exclaim1"].acked, stats["exclaim2"].acked) == (120, 120)


def test_multi_stream_routes_by_parity_and_audits_by_value() -> None:
    multi_stream = load_example("multi_stream")

    run = run_until_idle(multi_stream.build_topology(count=90))

    numbers = range(90)
    assert sorted(run.values("router", "even")) == [[n] for n in numbers if n % 2 == 0]
    assert sorted(run.values("router", "odd")) == [[n] for n in numbers if n % 2 == 1]
    assert sorted(run.values("evens")) == [[n, n**2] for n in numbers if n % 2 == 0]
    assert sorted(run.values("odds")) == [[n, n**3] for n in numbers if n % 2 == 1]

    auditors = run.tasks("auditor")
    assert len(auditors) == 3
    for emit in run.emits[("router", "audit")]:
        number, parity = emit.values
        assert emit.targets == [auditors[number % 3]]
        assert parity == ("even" if number % 2 == 0 else "odd")
    audited = sorted(run.values("auditor"))
    assert audited == [[n, "even" if n % 2 == 0 else "odd", auditors[n % 3]] for n in numbers]
    assert all(emit.task == emit.values[2] for emit in run.emits[("auditor", "default")])
    spout = run.info.components["numbers"]
    assert (spout.acked, spout.failed) == (90, 0)


def test_reliable_spout_acks_every_message_once_after_one_failure() -> None:
    reliable_spout = load_example("reliable_spout")

    run = run_until_idle(reliable_spout.build_topology(count=150))

    (spout_task,) = run.tasks("messages")
    spout = run.components[spout_task]
    assert spout.acked == dict.fromkeys(range(150), 1)
    assert spout.failed == dict.fromkeys(range(150), 1)
    assert spout.pending == {}
    assert Counter(values[0] for values in run.values("messages")) == dict.fromkeys(range(150), 2)
    assert sorted(run.values("flaky")) == [[i, f"message-{i}"] for i in range(150)]
    stats = run.info.components
    assert (stats["messages"].acked, stats["messages"].failed) == (150, 150)
    assert (stats["flaky"].acked, stats["flaky"].failed) == (150, 150)
    assert stats["flaky"].errors_total == 0  # FailedException fails quietly
    assert stats["sink"].executed == 150


@pytest.mark.parametrize("name", ["word_count", "exclamation", "multi_stream", "reliable_spout"])
def test_examples_define_a_deep_copyable_topology(name: str) -> None:
    topology = load_example(name).build_topology()
    assert isinstance(topology, StormTopology)
    for spec in topology:
        copy.deepcopy(spec.component)
    assert load_example(name).__doc__
